"""The generated API table (src/tfpar_lint/data/api_table.json.gz) against the installed packages.

The table is built from wheels read as text (scripts/gen_api_table.py); here the installed
TensorFlow, Keras 3 and tf_keras are imported (only here: linting never imports them) and every
public name of the namespaces the rules depend on must be in the table, for the installed release,
with the kind its class hierarchy gives at run time.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import types
import warnings

import pytest

from tfpar_lint import tfapi as api

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _minor(v: str) -> str:
    return ".".join(v.split(".")[:2])


def _public(mod, prefix: str, depth: int = 0, seen=None) -> dict[str, object]:
    """Public names under a live module, recursively through its public submodules."""
    seen = set() if seen is None else seen
    out: dict[str, object] = {}
    if id(mod) in seen or depth > 6:
        return out
    seen.add(id(mod))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in sorted(dir(mod)):
            if n.startswith("_"):
                continue
            try:
                v = getattr(mod, n)
            except Exception:  # noqa: BLE001 - lazy loaders that fail on access are not API
                continue
            full = f"{prefix}.{n}"
            if isinstance(v, types.ModuleType):
                name = getattr(v, "__name__", "") if not type(v).__name__.endswith("LazyLoader") else ""
                if name.split(".")[0] in ("tensorflow", "keras", "tf_keras") and ".src." not in name \
                        and ".python." not in name:
                    out.update(_public(v, full, depth + 1, seen))
                continue
            out[full] = v
    return out


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def keras3():
    return pytest.importorskip("keras")


@pytest.fixture(scope="module")
def tf_keras():
    return pytest.importorskip("tf_keras")


def _expected_kind(obj, tf, keras_mods) -> "str | None":
    """The kind a live class has, by issubclass against the real base classes."""
    if not inspect.isclass(obj):
        return None
    checks = []
    for k in keras_mods:
        checks += [(api.MODEL, k.Model), (api.OPTIMIZER, k.optimizers.Optimizer), (api.METRIC, k.metrics.Metric),
                   (api.LOSS, k.losses.Loss), (api.LAYER, k.layers.Layer)]
        legacy = getattr(k.optimizers, "legacy", None)  # Keras 2's OptimizerV2 family
        if legacy is not None and inspect.isclass(getattr(legacy, "Optimizer", None)):
            checks.append((api.OPTIMIZER, legacy.Optimizer))
    checks += [(api.OPTIMIZER, tf.compat.v1.train.Optimizer), (api.STRATEGY, tf.distribute.Strategy),
               (api.STRATEGY, tf.compat.v1.distribute.Strategy), (api.DATASET, tf.data.Dataset),
               (api.DATASET, tf.compat.v1.data.Dataset), (api.CHECKPOINT_MANAGER, tf.train.CheckpointManager),
               (api.CHECKPOINT, tf.train.Checkpoint), (api.CHECKPOINT, tf.compat.v1.train.Checkpoint),
               (api.GENERATOR, tf.random.Generator), (api.VARIABLE, tf.Variable), (api.TAPE, tf.GradientTape),
               (api.LOCK, tf.CriticalSection)]
    for kind, base in checks:
        try:
            if issubclass(obj, base):
                return kind
        except TypeError:
            continue
    return None


def _check_namespace(live: dict, pkg: str, installed: str, tf, keras_mods, kinded_only=False):
    missing, wrong_version, wrong_kind = [], [], []
    checked = 0
    for name, obj in live.items():
        want = _expected_kind(obj, tf, keras_mods)
        if kinded_only and want is None:
            continue
        checked += 1
        vers = api.versions(name)
        if not vers:
            missing.append(name)
            continue
        if _minor(installed) not in {_minor(v) for v in vers.get(pkg, [])}:
            wrong_version.append((name, vers.get(pkg)))
        if inspect.isclass(obj):
            got = api.class_kind(api.canonical(name))
            if got != want and not (want is None and got == api.DIST_DATASET):
                wrong_kind.append((name, got, want))
    assert checked > 0
    assert not missing, f"{len(missing)} public names of the installed {pkg} {installed} are not in the table: " \
                        f"{missing[:20]}"
    assert not wrong_version, f"the table does not list {pkg} {installed} for: {wrong_version[:20]}"
    assert not wrong_kind, f"(name, table kind, kind at run time): {wrong_kind[:20]}"
    return checked


def _require_release(pkg: str, installed: str):
    known = {_minor(v) for v in api.table().packages.get(pkg, [])}
    if _minor(installed) not in known:
        pytest.skip(f"the table has no {pkg} {_minor(installed)} release (it has {sorted(known)}): "
                    f"regenerate it with scripts/gen_api_table.py (docs/api-table.md)")


@pytest.mark.parametrize("namespace", ["distribute", "data", "train", "random"])
def test_tensorflow_namespace_resolves_with_its_kind(tf, keras3, namespace):
    _require_release("tensorflow", tf.__version__)
    live = _public(getattr(tf, namespace), f"tensorflow.{namespace}")
    _check_namespace(live, "tensorflow", tf.__version__, tf, [keras3])


def test_tf_keras_optimizers_resolve_as_optimizers(tf, keras3):
    """tf.keras is Keras 3 on the installed TF (>= 2.16): its optimizers are in the table for
    this TF release, as optimizers."""
    _require_release("tensorflow", tf.__version__)
    live = _public(tf.keras.optimizers, "tensorflow.keras.optimizers")
    n = _check_namespace(live, "tensorflow", tf.__version__, tf, [keras3])
    assert n >= 10
    assert api.kind_of_constructor(api.canonical("tensorflow.keras.optimizers.Adam")) == api.OPTIMIZER


@pytest.mark.parametrize("namespace", ["optimizers", "layers", "metrics", "losses", "models", "applications"])
def test_keras3_namespace_resolves_with_its_kind(tf, keras3, namespace):
    _require_release("keras", keras3.__version__)
    live = _public(getattr(keras3, namespace), f"keras.{namespace}")
    _check_namespace(live, "keras", keras3.__version__, tf, [keras3])


@pytest.mark.parametrize("namespace", ["optimizers", "layers", "metrics", "losses", "models"])
def test_tf_keras_package_resolves_with_its_kind(tf, tf_keras, namespace):
    _require_release("tf_keras", tf_keras.__version__)
    live = _public(getattr(tf_keras, namespace), f"tf_keras.{namespace}")
    _check_namespace(live, "tf_keras", tf_keras.__version__, tf, [tf_keras])


def test_compat_v1_optimizers_and_strategies(tf, keras3):
    _require_release("tensorflow", tf.__version__)
    live = {**_public(tf.compat.v1.train, "tensorflow.compat.v1.train"),
            **_public(tf.compat.v1.distribute, "tensorflow.compat.v1.distribute")}
    n = _check_namespace(live, "tensorflow", tf.__version__, tf, [keras3], kinded_only=True)
    assert n >= 10


def test_every_kinded_table_class_has_that_kind_at_run_time(tf, keras3):
    """The reverse direction: the table's kinded public classes under tf.distribute / tf.data /
    keras.optimizers / keras.layers that exist in the installed release are those kinds live."""
    _require_release("tensorflow", tf.__version__)
    names = api.table().names
    idx = api.table().packages["tensorflow"].index(
        next(v for v in api.table().packages["tensorflow"] if _minor(v) == _minor(tf.__version__)))
    checked = 0
    wrong = []
    for pub, (_target, kind, what, mask) in names.items():
        if what != "c" or not kind or not (mask >> idx & 1):
            continue
        if not pub.startswith(("tensorflow.distribute.", "tensorflow.data.", "tensorflow.train.")):
            continue
        obj = tf
        try:
            for part in pub.split(".")[1:]:
                obj = getattr(obj, part)
        except AttributeError:
            wrong.append((pub, "absent at run time"))
            continue
        checked += 1
        want = _expected_kind(obj, tf, [keras3])
        if want != kind and not (kind == api.DIST_DATASET and want is None):
            wrong.append((pub, kind, want))
    assert checked >= 15
    assert not wrong, wrong[:20]


# --------------------------------------------------------------------- names issue 17 lists
@pytest.mark.parametrize("qname,kind", [
    ("tensorflow.optimizers.Adam", api.OPTIMIZER),
    ("tensorflow.optimizers.SGD", api.OPTIMIZER),
    ("tensorflow.python.keras.optimizer_v2.adam.Adam", api.OPTIMIZER),
    ("tensorflow.python.keras.optimizer_v2.gradient_descent.SGD", api.OPTIMIZER),
    ("tensorflow.keras.optimizers.get", api.OPTIMIZER),
    ("keras.optimizers.get", api.OPTIMIZER),
    ("tensorflow_datasets.load", api.DATASET),
    ("keras_cv.models.YOLOV8Detector", api.MODEL),
    ("keras_cv.models.RetinaNet", api.MODEL),
    ("keras_hub.models.GemmaCausalLM", api.MODEL),
    ("keras_hub.models.BertTextClassifier", api.MODEL),
    ("keras_hub.models.GemmaCausalLM.from_preset", api.MODEL),
    ("keras_nlp.models.GemmaCausalLM", api.MODEL),
    ("keras_nlp.models.BertClassifier.from_preset", api.MODEL),
    ("tensorflow.compat.v1.train.AdamOptimizer", api.OPTIMIZER),
    ("tensorflow.compat.v1.train.GradientDescentOptimizer", api.OPTIMIZER),
    ("tensorflow.compat.v1.train.MomentumOptimizer", api.OPTIMIZER),
    ("tensorflow.keras.experimental.WideDeepModel", api.MODEL),
    ("tensorflow.keras.experimental.LinearModel", api.MODEL),
    ("tensorflow.keras.experimental.SequenceFeatures", api.LAYER),
    ("tensorflow.distribute.MirroredStrategy", api.STRATEGY),
    ("tensorflow.compat.v1.distribute.MirroredStrategy", api.STRATEGY),
    ("tensorflow.data.Dataset.from_tensor_slices", api.DATASET),
    ("tensorflow.data.TFRecordDataset", api.DATASET),
    ("tensorflow.random.Generator.from_seed", api.GENERATOR),
    ("keras.applications.ResNet50", api.MODEL),
    ("keras.models.load_model", api.MODEL),
    ("keras.Sequential", api.MODEL),
])
def test_names_issue_17_lists_resolve(qname, kind):
    assert api.kind_of_constructor(api.canonical(qname)) == kind


@pytest.mark.parametrize("qname", ["keras.layers.Input", "keras.losses.Reduction", "tensorflow.constant",
                                   "keras.optimizers.schedules.ExponentialDecay", "tensorflow.distribute.ReduceOp"])
def test_names_that_create_no_tracked_object(qname):
    assert api.kind_of_constructor(api.canonical(qname)) is None


def test_strategy_experimental_run_hands_fn_to_replicas():
    assert "experimental_run" in api.RUN_METHODS
    assert "batch" in api.DATASET_METHODS and "shard" in api.DATASET_METHODS
    assert "from_tensor_slices" in api.DATASET_METHODS  # a static method that returns a dataset


def test_strategy_families_cover_every_spelling():
    mwms = api.MULTI_WORKER_STRATEGIES
    assert "tensorflow.distribute.MultiWorkerMirroredStrategy" in mwms
    # the private class that the public names resolve to
    assert "tensorflow.python.distribute.collective_all_reduce_strategy.CollectiveAllReduceStrategy" in mwms
    assert "tensorflow.distribute.MirroredStrategy" not in mwms
    assert "tensorflow.distribute.OneDeviceStrategy" in api.STRATEGY_CLASSES
    assert "tensorflow.distribute.experimental.ParameterServerStrategy" in api.PARAMETER_SERVER_STRATEGIES


# --------------------------------------------------------------------- version queries
def test_versions_of_names_that_came_and_went():
    v = api.versions("tensorflow.distribute.experimental.MultiWorkerMirroredStrategy")
    assert "2.4.4" in v["tensorflow"] or any(x.startswith("2.4.") for x in v["tensorflow"])
    # tf.keras.optimizers.legacy appeared with the new optimizers of Keras 2.11
    legacy = api.tf_versions("tensorflow.keras.optimizers.legacy.Adam")
    assert legacy and not any(_minor(x) in ("2.4", "2.5", "2.6", "2.7", "2.8") for x in legacy)
    assert any(_minor(x) == "2.11" for x in legacy)
    # experimental_run_v2 was renamed run in TF 2.2; tf.compat.v1 keeps make_one_shot_iterator
    assert api.versions("tensorflow.compat.v1.data.make_one_shot_iterator")["tensorflow"]
    # keras.ops is Keras 3 only: TF versions from 2.16 on
    tv = api.tf_versions("keras.ops.convert_to_tensor")
    assert tv and all(tuple(int(p) for p in x.split(".")[:2]) >= (2, 16) for x in tv)
    assert api.versions("tensorflow.no_such_name") == {}


def test_tf_keras_in_tf_2_4_is_tensorflows_own():
    v = api.versions("tensorflow.keras.layers.experimental.preprocessing.RandomFlip")
    assert any(_minor(x) == "2.4" for x in v["tensorflow"])


# --------------------------------------------------------------------- cost
def test_importing_the_analysis_does_not_read_the_table():
    """The table is read on the first question, never on import (files without TensorFlow pay
    nothing)."""
    code = ("import tfpar_lint.engine, tfpar_lint.registry, tfpar_lint.semantic, tfpar_lint.rules\n"
            "from tfpar_lint import registry, tfapi\n"
            "registry.all_rules() if hasattr(registry, 'all_rules') else None\n"
            "print(tfapi._TABLE is None)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(api.__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "True", out.stderr


def test_table_file_is_small_and_well_formed():
    size = os.path.getsize(api.TABLE_PATH)
    assert size < 4 * 1024 * 1024
    t = api.table()
    assert set(t.packages) >= {"tensorflow", "keras", "tf_keras", "keras_cv", "keras_hub", "tensorflow_datasets"}
    assert _minor(t.packages["tensorflow"][0]) == "2.4"
    for info in t.header["tf"].values():
        assert info["keras"] in ("tf", "3") or info["keras"].startswith("2.")
    json.dumps(t.header)  # plain JSON


def test_damaged_table_is_a_clear_error(tmp_path):
    bad = tmp_path / "api_table.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(RuntimeError, match="missing or damaged"):
        api._Table(str(bad))
    with pytest.raises(RuntimeError, match="regenerate it with scripts/gen_api_table.py"):
        api._Table(str(tmp_path / "absent.json.gz"))
