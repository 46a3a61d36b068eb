"""Precision cases for the multi-worker lifecycle rules (TFP601-TFP606) and the execution /
gradient-mechanics rules (TFP701-TFP704).

Each case is a small module; ``hits(src, code)`` returns the lines where ``code`` fires (only
that rule enabled).  A line ending with ``# <-`` is where the rule must fire; snippets without
a marker must stay silent.
"""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tfpar_lint import versions
from tfpar_lint.engine import lint_source
from tfpar_lint.registry import rules_by_code
from tfpar_lint.semantic import Module

CODES = ("TFP601", "TFP602", "TFP603", "TFP604", "TFP606", "TFP701", "TFP702", "TFP703", "TFP704")


def hits(src: str, code: str, path: str = "t.py") -> list[int]:
    res = lint_source(textwrap.dedent(src), path, enabled=[code])
    assert res.error is None, res.error
    return sorted(f.line for f in res.findings if f.code == code)


def marked(src: str) -> list[int]:
    return [i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1) if ln.rstrip().endswith("# <-")]


def check(src: str, code: str) -> None:
    assert hits(src, code) == marked(src)


def test_metadata():
    rules = rules_by_code()
    for code in CODES:
        r = rules[code]
        assert r.NAME and r.NAME == r.NAME.lower() and " " not in r.NAME
        assert r.SUMMARY and r.FIX_HINT and r.SEVERITY in ("error", "warning") and r.MARKERS
    assert "TFP605" not in rules  # restore outside the scope: TFP104, retired (nothing fails on TF 2.21)
    assert {c for c in CODES if rules[c].SEVERITY == "error"} == {"TFP601", "TFP603", "TFP606", "TFP702", "TFP703"}


# =========================================================================== semantic facts


def _module(src: str, tf_version=None) -> Module:
    src = textwrap.dedent(src)
    return Module(cst.parse_module(src), src, tf_version=tf_version)


def test_env_writes_and_unsets():
    m = _module("""
    import os
    from os import environ as env
    os.environ["TF_CONFIG"] = "a"
    env.update({"TF_CONFIG": "b", "OTHER": "c"})
    os.environ.update(TF_CONFIG="d")
    os.environ.setdefault("TF_CONFIG", "e")
    os.putenv("TF_CONFIG", "f")
    os.environ["OTHER"] = "g"
    del os.environ["TF_CONFIG"]
    os.environ.pop("TF_CONFIG", None)
    environ = {}
    environ["TF_CONFIG"] = "not os.environ"
    """)
    assert [m.code(v) for _, v in m.env_writes("TF_CONFIG")] == ['"a"', '"b"', '"d"', '"e"', '"f"']
    assert len(m.env_unsets("TF_CONFIG")) == 2


def test_traces_follow_local_calls_and_record_conditions():
    m = _module("""
    import tensorflow as tf
    def helper():
        tf.constant(1)
    class Trainer:
        def __init__(self):
            self.s = tf.distribute.MultiWorkerMirroredStrategy()
    def main():
        helper()
        if flag:
            Trainer()
    def callback():
        tf.zeros(2)
    if __name__ == "__main__":
        main()
    """)
    traces = m.traces()
    names = [m.code(e.site.node) for e in traces[0]]
    assert names.index("tf.constant(1)") < names.index("tf.distribute.MultiWorkerMirroredStrategy()")
    ctor = next(e for e in traces[0] if m.code(e.site.node) == "tf.distribute.MultiWorkerMirroredStrategy()")
    assert len(ctor.conds) == 2 and [m.code(c.node) for c in ctor.via] == ["main()", "Trainer()"]
    # never called locally: a trace of its own
    assert any(m.code(e.site.node) == "tf.zeros(2)" for t in traces[1:] for e in t)


@pytest.mark.parametrize("imports,expr,flavor", [
    ("import keras", "keras.Sequential()", "keras"),
    ("import tensorflow as tf", "tf.keras.Sequential()", "keras"),
    ("from tensorflow import keras", "keras.Sequential()", "keras"),
    ("import tf_keras", "tf_keras.Sequential()", "tf_keras"),
    ("import tf_keras as keras", "keras.Sequential()", "tf_keras"),
    ("import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nimport tensorflow as tf", "tf.keras.Sequential()", "tf_keras"),
    ("import tensorflow as tf", "tf.train.Checkpoint()", ""),
    ("import keras\nclass M(keras.Model):\n    pass", "M()", "keras"),
    ("import tf_keras\nclass B(tf_keras.Model):\n    pass\nclass M(B):\n    pass", "M()", "tf_keras"),
])
def test_keras_flavor(imports, expr, flavor):
    """On TensorFlow 2.17 (the tf-version setting); with no version stated nothing is assumed (a Keras
    object whose Keras depends on the version is "unknown"), and tf_keras, TF_USE_LEGACY_KERAS=1 and
    non-Keras objects are what they are on any version."""
    m = _module(f"{imports}\nx = {expr}\n", tf_version="2.17")
    b = m.scope.bindings["x"][-1]
    assert versions.keras_flavor(m, m.binding_values(b)[0]) == flavor
    m = _module(f"{imports}\nx = {expr}\n")
    b = m.scope.bindings["x"][-1]
    assert versions.keras_flavor(m, m.binding_values(b)[0]) == ("unknown" if flavor == "keras" else flavor)


# =========================================================================== TFP601
@pytest.mark.parametrize("imports,ctor", [
    ("import tensorflow as tf", "tf.distribute.MultiWorkerMirroredStrategy()"),
    ("import tensorflow as tf", "tf.distribute.experimental.MultiWorkerMirroredStrategy()"),
    ("from tensorflow import distribute as d", "d.MultiWorkerMirroredStrategy()"),
    ("import tensorflow.distribute as tfd", "tfd.MultiWorkerMirroredStrategy()"),
    ("import tensorflow.compat.v2 as tf", "tf.distribute.MultiWorkerMirroredStrategy()"),
])
def test_tfp601_spellings(imports, ctor):
    check(f"""
    import tensorflow as tf
    {imports}
    x = tf.constant([1.0, 2.0])
    strategy = {ctor}  # <-
    """, "TFP601")


@pytest.mark.parametrize("before,fires", [
    ("tf.config.list_physical_devices('GPU')", False),
    ("tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)", False),
    ("tf.config.set_visible_devices([], 'GPU')", False),
    ("tf.random.set_seed(1)", False),
    ("tf.keras.utils.set_random_seed(1)", False),
    ("tf.keras.layers.Dense(3)", False),
    ("tf.keras.Sequential([tf.keras.layers.Dense(1)])", False),  # not built
    ("tf.keras.losses.MeanSquaredError()", False),
    ("tf.train.Checkpoint()", False),
    ("tf.distribute.cluster_resolver.TFConfigClusterResolver()", False),
    ("tf.distribute.get_strategy()", False),
    ("tf.config.list_logical_devices('CPU')", True),
    ("tf.Variable(1.0)", True),
    ("tf.zeros([2])", True),
    ("tf.random.normal([2])", True),
    ("tf.math.log(2.0)", True),
    ("tf.data.Dataset.range(4)", True),
    ("tf.keras.optimizers.Adam()", True),
    ("tf.keras.metrics.Mean()", True),
    ("tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])", True),
    ("tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])", True),
    ("tf.summary.create_file_writer('/tmp/tb')", True),
])
def test_tfp601_which_calls_initialise(before, fires):
    src = f"""
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    {before}
    strategy = tf.distribute.MultiWorkerMirroredStrategy(){'  # <-' if fires else ''}
    """
    check(src, "TFP601")


def test_tfp601_through_functions_and_conditions():
    check("""
    import tensorflow as tf
    def load():
        return tf.data.Dataset.range(8)
    def main():
        ds = load()
        strategy = tf.distribute.MultiWorkerMirroredStrategy()  # <-
    if __name__ == "__main__":
        main()
    """, "TFP601")
    # the op runs only in one branch: it may not have run
    check("""
    import tensorflow as tf
    if debug:
        print(tf.constant(1))
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    """, "TFP601")
    # the op is defined in a function that runs later
    check("""
    import tensorflow as tf
    def make_dataset():
        return tf.data.Dataset.range(8)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ds = make_dataset()
    """, "TFP601")
    # a function never called locally (main handed to absl's app.run) is judged on its own
    check("""
    import tensorflow as tf
    from absl import app
    def main(argv):
        v = tf.Variable(0)
        strategy = tf.distribute.MultiWorkerMirroredStrategy()  # <-
    app.run(main)
    """, "TFP601")


def test_tfp601_tf_config_removed_first_still_reported():
    # the order is the one that fails on a cluster; the message says this run is a single worker
    src = """
    import os
    import tensorflow as tf
    ds = tf.data.Dataset.range(3)
    os.environ.pop("TF_CONFIG", None)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # <-
    """
    check(src, "TFP601")
    msgs = [f.message for f in lint_source(textwrap.dedent(src), "t.py", enabled=["TFP601"]).findings]
    assert len(msgs) == 1 and "TF_CONFIG is removed first" in msgs[0]


@pytest.mark.parametrize("call,fires", [
    ("model.fit(ds, epochs=3, steps_per_epoch=70)", True),  # a Keras model by its use
    ("model.evaluate(ds, steps=5, validation_data=ds)", True),
    ("model.fit(x, y)", False),  # scikit-learn style: not told
    ("keras_model.fit(x, y)", True),  # a Keras model the module built
])
def test_tfp601_training_a_model_initialises(call, fires):
    check(f"""
    import tensorflow as tf
    from somewhere import model, ds, x, y
    keras_model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    {call}
    strategy = tf.distribute.MultiWorkerMirroredStrategy(){'  # <-' if fires else ''}
    """, "TFP601")


def test_tfp601_silences():
    # several strategies shown one after another (guide notebooks); a second
    # MultiWorkerMirroredStrategy after the first (the first one configured the collectives)
    check("""
    import os
    import tensorflow as tf
    mirrored = tf.distribute.MirroredStrategy()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ds = tf.data.Dataset.range(3)
    del os.environ["TF_CONFIG"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    """, "TFP601")
    # a local factory whose name looks like the API is not the API
    check("""
    import tensorflow as tf
    x = tf.constant(1)
    def MultiWorkerMirroredStrategy():
        return None
    s = MultiWorkerMirroredStrategy()
    """, "TFP601")


# =========================================================================== TFP602
def test_tfp602_spellings():
    check("""
    import json, os
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    os.environ["TF_CONFIG"] = json.dumps(cfg)  # <-
    """, "TFP602")
    check("""
    import json
    from os import environ
    import tensorflow as tf
    def setup(cfg):
        environ.update({"TF_CONFIG": json.dumps(cfg)})  # <-
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    setup({})
    """, "TFP602")
    check("""
    import os
    import tensorflow as tf
    def main():
        s = tf.distribute.experimental.MultiWorkerMirroredStrategy()
        os.environ.setdefault("TF_CONFIG", "{}")  # <-
    main()
    """, "TFP602")


def test_tfp602_silences():
    # set first (the fix)
    check("""
    import os
    import tensorflow as tf
    os.environ["TF_CONFIG"] = "{}"
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    """, "TFP602")
    # written for a worker process started afterwards
    check("""
    import os, subprocess, sys
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    os.environ["TF_CONFIG"] = "{}"
    subprocess.Popen([sys.executable, "worker.py"])
    """, "TFP602")
    # written once per worker launched from a notebook shell cell (the multi-worker tutorials)
    check("""
    import json, os
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    os.environ["TF_CONFIG"] = json.dumps(tf_config)
    tf_config["task"]["index"] = 1
    os.environ["TF_CONFIG"] = json.dumps(tf_config)
    """, "TFP602")
    # a new strategy is created after the write and reads it
    check("""
    import os
    import tensorflow as tf
    s = tf.distribute.MultiWorkerMirroredStrategy()
    os.environ["TF_CONFIG"] = "{}"
    s = tf.distribute.MultiWorkerMirroredStrategy()
    """, "TFP602")
    # other strategies and other variables
    check("""
    import os
    import tensorflow as tf
    s = tf.distribute.MirroredStrategy()
    os.environ["TF_CONFIG"] = "{}"
    m = tf.distribute.MultiWorkerMirroredStrategy
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    """, "TFP602")
    # exclusive branches
    check("""
    import os
    import tensorflow as tf
    if multi:
        s = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        os.environ["TF_CONFIG"] = "{}"
    """, "TFP602")


# =========================================================================== TFP603 / TFP604
SAVE_PRELUDE = """
import json
import os
import tensorflow as tf
import tf_keras as keras
strategy = {ctor}
task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
tf_config = json.loads(os.environ.get("TF_CONFIG", "{{}}"))
def _is_chief(task_type, task_id):
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0)
is_chief = _is_chief(task_type, task_id)
with strategy.scope():
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
    ckpt = tf.train.Checkpoint(model=model)
    manager = tf.train.CheckpointManager(ckpt, "/tmp/ckpt", max_to_keep=1)
"""


def _save(body: str, ctor: str = "tf.distribute.MultiWorkerMirroredStrategy()") -> str:
    return SAVE_PRELUDE.format(ctor=ctor) + textwrap.dedent(body)


@pytest.mark.parametrize("test", [
    "task_id == 0",
    "0 == task_id",
    "task_type == 'chief'",
    "task_type is None or task_type == 'chief' or (task_type == 'worker' and task_id == 0)",
    "strategy.cluster_resolver.task_id == 0",
    "is_chief",
    "_is_chief(task_type, task_id)",
    "strategy.extended.should_checkpoint",
    "tf_config['task']['index'] == 0",
    "int(tf_config.get('task', {}).get('index', 0)) == 0 and True",
    "tf.distribute.cluster_resolver.TFConfigClusterResolver().task_type in ('chief', 'master')",
    "task_id not in (1, 2, 3) and task_id in (None, 0)",
    "not task_id",
])
def test_tfp603_chief_tests(test):
    src = _save(f"""
    if {test}:
        model.save("/tmp/model")  # <-
    """)
    check(src, "TFP603")


@pytest.mark.parametrize("call", [
    "ckpt.save('/tmp/c/ckpt')",
    "ckpt.write('/tmp/c/ckpt')",
    "manager.save()",
    "model.save_weights('/tmp/w')",
    "tf.saved_model.save(model, '/tmp/sm')",
    "keras.models.save_model(model, '/tmp/m')",
])
def test_tfp603_save_calls(call):
    check(_save(f"""
    if task_id == 0:
        {call}  # <-
    """), "TFP603")


def test_tfp603_guards_by_else_early_exit_and_caller():
    check(_save("""
    if task_id != 0:
        pass
    else:
        model.save("/tmp/m")  # <-
    def export():
        if not is_chief:
            return
        model.save("/tmp/m")  # <-
    def export2():
        ckpt.write("/tmp/c")  # <-
    export()
    if is_chief:
        export2()
    """), "TFP603")


def test_tfp603_chief_test_by_value_not_by_name():
    # neutral names whose values come from the task index, through a helper's parameter and
    # return, a self attribute and a module constant: chief tests
    check(_save("""
    FIRST = 0
    def first_task(index):
        return index == FIRST
    flag = first_task(strategy.cluster_resolver.task_id)
    if flag:
        model.save("/tmp/m")  # <-
    class Job:
        def __init__(self):
            self.lead = strategy.extended.should_checkpoint
        def export(self):
            if self.lead:
                ckpt.write("/tmp/c")  # <-
    Job().export()
    def get_rank():
        cfg = json.loads(os.environ["TF_CONFIG"])
        return int(cfg["task"]["index"])
    if get_rank() == 0:
        manager.save()  # <-
    """), "TFP603")
    # names that say chief are no evidence: a random flag, an environment variable's name, an
    # unknown parameter, an index that is not the task's
    check(_save("""
    import random
    is_chief = random.random() > 0.5
    if is_chief:
        model.save("/tmp/m")
    if int(os.environ["TASK_INDEX"]) == 0:
        model.save("/tmp/m")
    def export(task_id):
        if task_id == 0:
            model.save("/tmp/m")
    handlers = {"export": export}
    for worker_index in range(2):
        if worker_index == 0:
            ckpt.write("/tmp/c")
    """), "TFP603")


def test_tfp603_early_exit_is_a_resolved_exit_call():
    check(_save("""
    import sys
    def a():
        if task_id != 0:
            sys.exit(0)
        model.save("/tmp/a")  # <-
    def b():
        if task_id != 0:
            logger.exit()  # some object's exit method: the code after it runs on every task
        model.save("/tmp/b")
    a()
    b()
    """), "TFP603")


def test_tfp603_tests_read_from_the_program_s_own_tf_config():
    # `not tf_config` holds only without TF_CONFIG (a single process); a TF_CONFIG dict the
    # program writes itself; `True if <test> else False`
    check(_save("""
    raw = os.environ.get("TF_CONFIG")
    if not raw or json.loads(raw)["task"]["index"] == 0:
        model.save("/tmp/a")  # <-
    cfg = {"cluster": {"worker": ["h1:1", "h2:1"]}, "task": {"type": "worker", "index": rank}}
    os.environ["TF_CONFIG"] = json.dumps(cfg)
    lead = True if cfg["task"]["index"] == 0 else False
    if lead:
        model.save("/tmp/b")  # <-
    follower = False if cfg["task"]["index"] == 0 else True
    if not follower:
        ckpt.write("/tmp/c")  # <-
    """), "TFP603")
    # a dict without the TF_CONFIG keys is no task source
    check(_save("""
    opts = {"task": {"index": rank}}
    if opts["task"]["index"] == 0:
        model.save("/tmp/a")
    """), "TFP603")


def test_tfp603_every_task_saves_through_the_other_branch():
    check(_save("""
    if _is_chief(task_type, task_id):
        model.save("/tmp/model")
    else:
        model.save("/tmp/workertemp_" + str(task_id))
    """), "TFP603")
    # the other branch saves another object: the chief's save still waits alone
    check(_save("""
    other = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
    if task_id == 0:
        model.save("/tmp/model")  # <-
    else:
        other.save("/tmp/other")
    """), "TFP603")


def test_tfp603_checkpoint_of_objects_made_in_the_scope_by_unknown_code():
    # `models.build()` cannot be followed, but it is made under the MWMS scope and tracked by
    # a checkpoint (which tracks only TensorFlow objects)
    check("""
    import tensorflow as tf
    import models
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        net = models.build()
    ckpt = tf.train.Checkpoint(model=net)
    if strategy.cluster_resolver.task_id == 0:
        ckpt.save("/tmp/ckpt")  # <-
    plain = models.build()
    ckpt2 = tf.train.Checkpoint(model=plain)
    if strategy.cluster_resolver.task_id == 0:
        ckpt2.save("/tmp/ckpt2")
    """, "TFP603")


def test_tfp603_strategy_chosen_on_branches():
    # one path builds the model under MultiWorkerMirroredStrategy: that path is judged
    check("""
    import os
    import tensorflow as tf
    def main():
        if os.environ.get("TF_CONFIG"):
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
        else:
            strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
        if strategy.cluster_resolver.task_id == 0:
            model.save("/tmp/m")  # <-
    main()
    """, "TFP603")


def test_tfp603_silences():
    # every worker saves (tutorial), chief-only logging / copying, non-chief cleanup
    check(_save("""
    path = write_filepath("/tmp/m", task_type, task_id)
    model.save(path)
    if not _is_chief(task_type, task_id):
        tf.io.gfile.rmtree(os.path.dirname(path))
    if task_id == 0:
        print("saved")
        tf.io.gfile.copy(path, "/tmp/release")
    """), "TFP603")
    # MirroredStrategy / parameter server: one process saves, that is right
    for ctor in ("tf.distribute.MirroredStrategy()",
                 "tf.distribute.experimental.ParameterServerStrategy(resolver)"):
        check(_save("""
        if task_id == 0:
            model.save("/tmp/m")
        """, ctor=ctor), "TFP603")
    # a model built outside the strategy, an unknown receiver
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    export_model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    if is_chief:
        export_model.save("/tmp/m")
        self.model.save("/tmp/m")
        trainer.model.save("/tmp/m")
    """, "TFP603")


def test_tfp604_constant_paths_on_shared_storage():
    check(_save("""
    BASE = "gs://bucket/run"
    model.save("gs://bucket/model")  # <-
    ckpt.write(os.path.join(BASE, "ckpt"))  # <-
    ckpt.save(f"{BASE}/ckpt")  # <-
    tf.saved_model.save(model, BASE + "/sm")  # <-
    model.save("/gcs/bucket/model")  # <-
    ckpt.write(os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "ckpt"))  # <-
    model.save(os.environ.get("AIP_MODEL_DIR", "/tmp/model"))  # <-
    """).replace('"/tmp/ckpt", max_to_keep', '"s3://bucket/ckpt", max_to_keep') + "manager.save()  # <-\n", "TFP604")


def test_tfp604_local_paths_only_when_the_workers_share_this_machine():
    local = _save("""
    BASE = "/tmp/run"
    model.save("/tmp/model")  # <-
    ckpt.write(os.path.join(BASE, "ckpt"))  # <-
    manager.save()  # <-
    """)
    # one process per machine (the cluster gives TF_CONFIG): each worker writes its own disk
    assert not hits(local, "TFP604")
    # the program puts every worker on this machine: they share its file system
    on_this_machine = local.replace("strategy = ", (
        'os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},\n'
        '                                      "task": {"type": "worker", "index": 0}})\nstrategy = '), 1)
    check(on_this_machine, "TFP604")
    elsewhere = on_this_machine.replace('"localhost:23456"', '"10.0.0.2:23456"')
    assert not hits(elsewhere, "TFP604")


def test_tfp604_a_name_is_no_task_test():
    # a flag named like a chief test whose value does not come from the task: every worker may
    # write the same path
    check(_save("""
    import random
    is_chief = random.random() > 0.5
    if is_chief:
        model.save("gs://bucket/model")  # <-
    """), "TFP604")


def test_tfp604_worker_zero_counted_as_the_chief():
    # the test passes any `chief` task and worker 0: with a chief task both write the real path;
    # reported at the operand that lets worker 0 in, in the helper the path comes from
    check(_save("""
    def is_lead(kind, index):
        return kind == "chief" or (kind == "worker" and index == 0)  # <-
    def write_dir(path, kind, index):
        if not is_lead(kind, index):
            path = os.path.join(path, "workertemp_" + str(index))
        return path
    ckpt.write(write_dir("/tmp/ckpt", task_type, task_id))
    """), "TFP604")
    check(_save("""
    lead = task_type in ("chief", "master") or task_id == 0  # <-
    if lead:
        model.save("/tmp/m")
    else:
        model.save("/tmp/tmp_" + str(task_id))
    """), "TFP604")


@pytest.mark.parametrize("test", [
    "task_type == 'chief'",  # the chief alone
    "task_type == 'chief' or (task_type == 'worker' and task_id == 0 and no_chief)",  # cannot be told
    "task_id == 0",  # reads the index only: the cluster's shape decides, not told here
])
def test_tfp604_chief_tests_that_are_not_two_writers(test):
    check(_save(f"""
    if {test}:
        model.save("/tmp/m")
    else:
        model.save("/tmp/tmp_" + str(task_id))
    """), "TFP604")


def test_tfp604_silences():
    check(_save("""
    model.save(write_filepath("/tmp/m", task_type, task_id))
    ckpt.write(f"/tmp/ckpt_{task_id}")
    ckpt.write(args.model_dir)
    ckpt.write(f"gs://bucket/ckpt_{task_id}")
    ckpt.write(os.path.join(os.environ["HOME"], "ckpt"))
    if task_id == 0:
        ckpt.write("gs://bucket/c")  # TFP603, not TFP604
    """).replace('"/tmp/ckpt", max_to_keep', 'write_dir, max_to_keep'), "TFP604")
    for ctor in ("tf.distribute.MirroredStrategy()", "make_strategy()"):
        check(_save("""
        model.save("gs://bucket/model")
        """, ctor=ctor), "TFP604")


# =========================================================================== TFP606
@pytest.mark.parametrize("header,fires", [
    ("import keras", True),
    ("import tensorflow as tf\nkeras = tf.keras", True),  # an alias through assignment
    ("from tensorflow import keras", True),
    ("import tf_keras as keras", False),
    ("import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nfrom tensorflow import keras", False),
])
def test_tfp606_keras_flavours(header, fires):
    src = f"""
import tensorflow as tf
{header}
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
model.fit(ds, epochs=1){'  # <-' if fires else ''}
"""
    check(src, "TFP606")


def test_tfp606_scopes_and_subclasses():
    check("""
    import tensorflow as tf
    import keras
    class Net(keras.Model):
        def call(self, x):
            return x
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    def build():
        m = Net()
        m.compile(optimizer="sgd", loss="mse")
        return m
    with strategy.scope():
        model = build()
        model.fit(ds)  # <-
    mirrored = tf.distribute.MirroredStrategy()
    with mirrored.scope():
        other = keras.Sequential([keras.layers.Dense(1)])
    other.fit(ds)
    unknown = helpers.build_model()
    with strategy.scope():
        unknown.fit(ds)
    """, "TFP606")


# =========================================================================== TFP701
STEP = """
import tensorflow as tf
strategy = tf.distribute.{ctor}
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD()
def step_fn(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss
"""


@pytest.mark.parametrize("ctor,fires", [
    ("MirroredStrategy()", True),
    ("MultiWorkerMirroredStrategy()", True),
    ("experimental.CentralStorageStrategy()", True),
    ("OneDeviceStrategy('/cpu:0')", False),
    ("TPUStrategy(resolver)", False),  # TensorFlow wraps an eager TPU run in a tf.function itself
])
def test_tfp701_strategies(ctor, fires):
    src = STEP.format(ctor=ctor) + f"""
for x in dist_ds:
    strategy.run(step_fn, args=(x,)){'  # <-' if fires else ''}
"""
    check(src, "TFP701")


def test_tfp701_loops_through_callers():
    check(STEP.format(ctor="MirroredStrategy()") + """
def train_step(x):
    return strategy.run(step_fn, args=(x,))  # <-
def train():
    for x in dist_ds:
        train_step(x)
train()
""", "TFP701")


def test_tfp701_silences():
    base = STEP.format(ctor="MirroredStrategy()")
    # tf.function: decorator, wrapping call, decorated replica fn
    check(base + """
@tf.function
def train_step(x):
    return strategy.run(step_fn, args=(x,))
def train_step2(x):
    return strategy.run(step_fn, args=(x,))
train_step2 = tf.function(train_step2)
for x in dist_ds:
    train_step(x)
    train_step2(x)
""", "TFP701")
    check(base.replace("def step_fn", "@tf.function\ndef step_fn") + """
for x in dist_ds:
    strategy.run(step_fn, args=(x,))
""", "TFP701")
    # one call, not a loop; inference / demo functions; unknown callables; unknown strategy
    check(base + """
strategy.run(step_fn, args=(x,))
for x in dist_ds:
    strategy.run(lambda b: b * 2, args=(x,))
    strategy.run(loaded.signatures["serving_default"], args=(x,))
def train(strategy):
    for x in dist_ds:
        strategy.run(step_fn, args=(x,))
""", "TFP701")
    # called from a tf.function-ed caller: traced
    check(base + """
def inner(x):
    return strategy.run(step_fn, args=(x,))
@tf.function
def outer(it):
    for _ in tf.range(3):
        inner(next(it))
for _ in range(3):
    outer(it)
""", "TFP701")


# =========================================================================== TFP702
@pytest.mark.parametrize("tape", [
    "tf.GradientTape()",
    "tf.GradientTape(persistent=False)",
    "tf.GradientTape(watch_accessed_variables=True)",
])
def test_tfp702_second_gradient(tape):
    check(f"""
    import tensorflow as tf
    def step(x, a, b):
        with {tape} as t:
            la = a(x)
            lb = b(x)
        ga = t.gradient(la, a.trainable_variables)
        gb = t.gradient(lb, b.trainable_variables)  # <-
        return ga, gb
    """, "TFP702")


def test_tfp702_loop_jacobian_and_same_statement():
    check("""
    import tensorflow as tf
    from tensorflow import GradientTape as Tape
    def f(x, losses, v):
        with Tape() as tape:
            y = x * x
        return [tape.gradient(l, v) for l in losses]  # <-
    def g(x, v):
        tape = tf.GradientTape()
        with tape:
            y = x * v
        return tape.jacobian(y, v), tape.gradient(y, v)  # <-
    """, "TFP702")


def test_tfp702_silences():
    check("""
    import tensorflow as tf
    def persistent(x, v):
        with tf.GradientTape(persistent=True) as t:
            y = x * v
        return t.gradient(y, v), t.gradient(y, x)
    def unknown_persistence(x, v, p):
        with tf.GradientTape(persistent=p) as t:
            y = x * v
        return t.gradient(y, v), t.gradient(y, x)
    def branches(x, v, first):
        with tf.GradientTape() as t:
            y = x * v
        if first:
            g = t.gradient(y, v)
        else:
            g = t.gradient(y, x)
        return g
    def early_return(x, v, first):
        with tf.GradientTape() as t:
            y = x * v
        if first:
            return t.gradient(y, v)
        return t.gradient(y, x)
    def new_tape_per_iteration(xs, v):
        for x in xs:
            with tf.GradientTape() as t:
                y = x * v
            g = t.gradient(y, v)
    def two_tapes(x, g, d):
        with tf.GradientTape() as gt, tf.GradientTape() as dt:
            a, b = g(x), d(x)
        return gt.gradient(a, g.trainable_variables), dt.gradient(b, d.trainable_variables)
    def param_tape(tape, y, v):
        return tape.gradient(y, v), tape.gradient(y, v)
    """, "TFP702")


# =========================================================================== TFP703
GAN = """
import tensorflow as tf
{imports}
gen = {K}.Sequential([{K}.layers.Dense(2)])
disc = {K}.Sequential([{K}.layers.Dense(1)])
opt = {opt}
def train(gg, dg):
    opt.apply_gradients(zip(dg, disc.trainable_variables))
    opt.apply_gradients(zip(gg, gen.trainable_variables)){mark}
"""


@pytest.mark.parametrize("imports,K,opt,fires", [
    ("import keras", "keras", "keras.optimizers.Adam()", True),
    ("", "tf.keras", "tf.keras.optimizers.Adam(1e-4)", True),
    ("from keras import optimizers", "keras", "optimizers.SGD()", True),
    ("import tf_keras", "tf_keras", "tf_keras.optimizers.Adam()", True),
    ("import tf_keras", "tf_keras", "tf_keras.optimizers.legacy.Adam()", False),
    ("import keras", "keras", "'adam'", False),
    ("import keras", "keras", "make_optimizer()", False),
])
def test_tfp703_gan_spellings(imports, K, opt, fires):
    if "from keras import" in imports:
        imports = "import keras\n" + imports
    src = GAN.format(imports=imports, K=K, opt=opt, mark="  # <-" if fires else "")
    check(src, "TFP703")


def test_tfp703_compile_apply_and_var_names():
    check("""
    import keras
    a = keras.Sequential([keras.layers.Dense(1)])
    b = keras.Sequential([keras.layers.Dense(1)])
    opt = keras.optimizers.Adam()
    a.compile(optimizer=opt, loss="mse")
    b.compile(optimizer=opt, loss="mse")  # <-
    opt2 = keras.optimizers.Adam()
    va = a.trainable_variables
    opt2.apply(ga, va)
    grads_and_vars = zip(gb, b.trainable_variables)
    opt2.apply_gradients(grads_and_vars)  # <-
    """, "TFP703")


def test_tfp703_silences():
    check("""
    import keras
    def make_model():
        return keras.Sequential([keras.layers.Dense(1)])
    enc = keras.Sequential([keras.layers.Dense(4)])
    head = keras.Sequential([keras.layers.Dense(1)])
    full = keras.Sequential([enc, head])
    g, d = make_model(), make_model()
    opt = keras.optimizers.Adam()
    # built for the union first: subsets are fine
    opt.build(g.trainable_variables + d.trainable_variables)
    opt.apply_gradients(zip(x, g.trainable_variables))
    opt.apply_gradients(zip(y, d.trainable_variables))
    # one list with both, then a part of it
    opt3 = keras.optimizers.Adam()
    opt3.apply_gradients(zip(x, full.trainable_variables))
    opt3.apply_gradients(zip(y, enc.trainable_variables))
    # same model again, unknown variable lists
    opt4 = keras.optimizers.Adam()
    opt4.apply_gradients(zip(x, g.trainable_variables))
    opt4.apply_gradients(zip(y, g.trainable_variables))
    opt4.apply_gradients(zip(y, some_vars))
    opt4.apply_gradients(zip(y, g.layers[0].trainable_variables))
    """, "TFP703")


def test_tfp703_factory_models_differ():
    check("""
    import keras
    def make_generator():
        return keras.Sequential([keras.layers.Dense(2)])
    def make_discriminator():
        return keras.Sequential([keras.layers.Dense(1)])
    generator = make_generator()
    discriminator = make_discriminator()
    optimizer = keras.optimizers.Adam(1e-4)
    optimizer.apply_gradients(zip(g, generator.trainable_variables))
    optimizer.apply_gradients(zip(d, discriminator.trainable_variables))  # <-
    """, "TFP703")


# =========================================================================== TFP704
TRAIN = """
import sys
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
@tf.function
def train_step(it):
    return strategy.run(step_fn, args=(next(it),))
"""


@pytest.mark.parametrize("handler,fires", [
    ("except:", True),
    ("except Exception:", True),
    ("except Exception as e:", True),
    ("except BaseException:", True),
    ("except RuntimeError:", True),
    ("except (ValueError, RuntimeError):", True),
    ("except tf.errors.UnavailableError:", False),
    ("except ValueError:", False),
    ("except KeyboardInterrupt:", False),
])
def test_tfp704_handlers(handler, fires):
    src = TRAIN + f"""
try:
    for _ in range(10):
        train_step(it)
{handler}{'  # <-' if fires else ''}
    print("stopped")
"""
    check(src, "TFP704")


def test_tfp704_fit_and_nested_functions():
    check(TRAIN + """
def train():
    for epoch in range(3):
        train_step(it)
def main():
    try:
        train()
    except Exception as e:  # <-
        print("training failed", e)
    try:
        model.fit(ds, epochs=2)
    except:  # <-
        pass
main()
""", "TFP704")


@pytest.mark.parametrize("body", [
    "    raise",
    "    raise SystemExit(1) from None",
    "    sys.exit(1)",
    "    continue",
    "    logging.exception('x')\n    raise RuntimeError('training failed')",
])
def test_tfp704_handler_leaves(body):
    src = TRAIN + f"""
for attempt in range(3):
    try:
        for _ in range(10):
            train_step(it)
        break
    except Exception:
{textwrap.indent(textwrap.dedent(body), '        ')}
"""
    check(src, "TFP704")


def test_tfp704_silences():
    # the exception is re-raised later; a single probe call; no distributed training in the try
    check(TRAIN + """
def main():
    error = None
    try:
        for _ in range(10):
            train_step(it)
    except Exception as e:
        error = e
    save()
    if error is not None:
        raise error
try:
    strategy.run(step_fn, args=(x,))
except RuntimeError as exc:
    print("not supported here:", exc)
try:
    data = load()
except Exception:
    data = None
plain = tf.keras.Sequential([tf.keras.layers.Dense(1)])
try:
    plain.fit(ds)
except Exception:
    pass
""", "TFP704")
