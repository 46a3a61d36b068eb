"""Honest verdicts under ``tfpar-lint --verify`` (issue 21), on real TensorFlow (2 logical CPU devices),
through the in-process CLI: lint, run, verdicts, JSON, exit code.

* a script that crashes, hangs or cannot be imported is COULD_NOT_RUN and exits 2 (never 0);
* correct scripts whose data are constant (``tf.ones``) or whose replica function only draws random
  numbers get no finding and exit 0: the probes track which replica got which object, never infer
  sameness from equal values;
* mistakes the probes see by identity: an undistributed constant batch, a dataset function that
  ignores its context while drawing random data, a global batch defined after the dataset is
  distributed, TF_CONFIG written after the strategy, and the four symptoms of issue 21, each with
  a correct twin.

The scripts are ours (shapes seen in real code, no third-party text).
"""
from __future__ import annotations

import importlib.util
import json
import os

import pytest

from tfpar_lint.finding import CONFIRMED, COULD_NOT_RUN, RUNTIME

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (pip install 'tfpar-lint[verify]')"),
]

HEAD = "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
STEP = '''
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD(0.1)


def step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(tf.reduce_sum(tf.square(model(x) - y), axis=1), global_batch_size=16)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss


@tf.function
def train(x, y):
    return strategy.run(step, args=(x, y))

'''
CONST = "ds = tf.data.Dataset.from_tensor_slices((tf.ones((64, 3)), tf.ones((64, 1)))).batch(16)\n"

NOT_RUN = {
    "crash_dataset_fn.py": HEAD + '''

def make(ctx):
    raise ValueError("no data here")


for batch in strategy.distribute_datasets_from_function(make):
    strategy.run(tf.reduce_sum, args=(batch,))
''',
    "unimportable.py": HEAD + "import a_module_nobody_has\n",
    "hang.py": HEAD + "import time\n\nwhile True:\n    time.sleep(1)\n",
}

GOOD = {
    # constant data, correctly distributed: the replicas get equal values, each its own part
    "const_distributed.py": HEAD + STEP + CONST + '''
for x, y in strategy.experimental_distribute_dataset(ds):
    train(x, y)
''',
    "const_eager.py": HEAD + '''ds = tf.data.Dataset.from_tensor_slices(tf.zeros((32, 4))).batch(8)
for batch in strategy.experimental_distribute_dataset(ds):
    print(strategy.reduce("SUM", strategy.run(tf.reduce_sum, args=(batch,)), axis=None))
''',
    # a replica function that only draws random numbers, eagerly from a loop: no training step
    "random_only.py": HEAD + '''

def noise():
    return tf.random.normal((4,))


for _ in range(4):
    print(strategy.experimental_local_results(strategy.run(noise)))
''',
    "dataset_fn_random_sharded.py": HEAD + '''import numpy as np


def dataset_fn(ctx):
    ds = tf.data.Dataset.from_tensor_slices(np.random.rand(64, 3).astype("float32"))
    return ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(ctx.get_per_replica_batch_size(16))


for batch in strategy.distribute_datasets_from_function(dataset_fn):
    print(strategy.run(tf.reduce_sum, args=(batch,)))
''',
    "tf_config_first.py": '''import json
import os

import tensorflow as tf

os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
                                      "task": {"type": "worker", "index": 0}})
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    v = tf.Variable(1.0)
print(strategy.num_replicas_in_sync)
''',
    "reduce_then_mean.py": HEAD + '''ds = tf.data.Dataset.from_tensor_slices(tf.random.normal((32, 4))).batch(8)
for batch in strategy.experimental_distribute_dataset(ds):
    per_replica = strategy.run(tf.reduce_sum, args=(batch,))
    print(float(strategy.reduce("MEAN", per_replica, axis=None)))
''',
    "tf_random_in_step.py": HEAD + '''

def step():
    return tf.random.normal((4,)) * 2.0


@tf.function
def train():
    return strategy.run(step)


for _ in range(3):
    print(strategy.experimental_local_results(train()))
''',
    "metric_per_example.py": HEAD + STEP.replace("    opt = tf.keras.optimizers.SGD(0.1)\n",
                                                 "    opt = tf.keras.optimizers.SGD(0.1)\n    mean = tf.keras.metrics.Mean()\n")
    .replace("        loss = tf.nn.compute_average_loss(tf.reduce_sum(tf.square(model(x) - y), axis=1), "
             "global_batch_size=16)\n",
             "        per_example = tf.reduce_sum(tf.square(model(x) - y), axis=1)\n"
             "        loss = tf.nn.compute_average_loss(per_example, global_batch_size=16)\n")
    .replace("    return loss\n", "    mean.update_state(per_example)\n    return loss\n")
    + CONST + "for x, y in strategy.experimental_distribute_dataset(ds):\n    train(x, y)\n",
    "next_distributed.py": HEAD + '''ds = tf.data.Dataset.from_tensor_slices(tf.random.normal((64, 4))).batch(8).repeat()
it = iter(strategy.experimental_distribute_dataset(ds))


@tf.function
def train():
    return strategy.run(tf.reduce_sum, args=(next(it),))


for _ in range(3):
    print(strategy.experimental_local_results(train()))
''',
}

# script -> (the code a CONFIRMED or RUNTIME finding must have, its line)
BAD = {
    # reported at the host call that passes the plain batch (line 23; strategy.run's line 19 is related)
    "const_undistributed.py": (HEAD + STEP + CONST + "for x, y in ds:\n    train(x, y)\n", "TFP201", 23),
    "dataset_fn_random_ignores_context.py": (HEAD + '''import numpy as np


def dataset_fn(ctx):
    return tf.data.Dataset.from_tensor_slices(np.random.rand(64, 3).astype("float32")).batch(16)


for batch in strategy.distribute_datasets_from_function(dataset_fn):
    print(strategy.run(tf.reduce_sum, args=(batch,)))
''', "TFP203", 11),
    "global_batch_after.py": (HEAD + '''PER_REPLICA = 8
ds = tf.data.Dataset.from_tensor_slices(tf.random.normal((64, 3))).batch(PER_REPLICA)
dist = strategy.experimental_distribute_dataset(ds)
GLOBAL_BATCH = PER_REPLICA * strategy.num_replicas_in_sync


@tf.function
def train(x):
    return strategy.run(lambda b: tf.nn.compute_average_loss(tf.reduce_sum(b, axis=1), global_batch_size=GLOBAL_BATCH),
                        args=(x,))


for x in dist:
    train(x)
''', "TFP208", 5),
    "tf_config_after.py": (GOOD["tf_config_first.py"].replace(
        'os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},\n'
        '                                      "task": {"type": "worker", "index": 0}})\n'
        'strategy = tf.distribute.MultiWorkerMirroredStrategy()\n',
        'strategy = tf.distribute.MultiWorkerMirroredStrategy()\n'
        'os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},\n'
        '                                      "task": {"type": "worker", "index": 0}})\n'), "TFP602", 7),
    "reduce_mean_per_replica.py": (GOOD["reduce_then_mean.py"].replace(
        # a TF op on a PerReplica in cross-replica context: TFP508 (per-replica-value-to-host) since issue 19
        'float(strategy.reduce("MEAN", per_replica, axis=None))', "float(tf.reduce_mean(per_replica))"), "TFP508", 7),
    "np_random_in_step.py": (GOOD["tf_random_in_step.py"].replace(
        "    return tf.random.normal((4,)) * 2.0\n",
        '    return tf.constant(np.random.normal(size=(4,)).astype("float32")) * 2.0\n').replace(
        "import tensorflow as tf\n", "import numpy as np\nimport tensorflow as tf\n", 1), "TFP403", 8),
    "metric_fed_average_loss.py": (GOOD["metric_per_example.py"].replace(
        "mean.update_state(per_example)", "mean.update_state(loss)"), "TFP505", 16),
    "next_in_closure.py": (HEAD + '''ds = tf.data.Dataset.from_tensor_slices(tf.random.normal((64, 4))).batch(8).repeat()
it = iter(ds)


def step():
    return tf.reduce_sum(next(it))


@tf.function
def train():
    return strategy.run(step)


for _ in range(3):
    print(strategy.experimental_local_results(train()))
''', "TFP201", 14),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("verdicts")
    for name, text in {**NOT_RUN, **GOOD, **{k: v[0] for k, v in BAD.items()}}.items():
        (d / name).write_text(text)
    return d


def _verify(cli, folder, names, *extra):
    r = cli("--verify", "--devices", "cpu:2", "--timeout", "240", "--format", "json", "--no-cache", "--no-config",
            *extra, *[str(folder / n) for n in names])
    by: dict[str, list] = {}
    for d in json.loads(r.out):
        by.setdefault(os.path.basename(d["path"]), []).append(d)
    return r, by


def _seen(records):
    return [d for d in records if (d.get("verification") or {}).get("status") in (CONFIRMED, RUNTIME)]


@pytest.mark.parametrize("name, reason", [("crash_dataset_fn.py", "crash before any training step: ValueError"),
                                          ("unimportable.py", "import error: ModuleNotFoundError"),
                                          ("hang.py", "timeout: hung at hang.py:")])
def test_a_script_that_did_not_run_through_is_could_not_run(cli, folder, name, reason):
    timeout = ("--timeout", "20") if name == "hang.py" else ("--timeout", "240")
    r = cli("--verify", "--devices", "cpu:2", "--format", "json", "--no-cache", "--no-config", *timeout,
            str(folder / name))
    assert r.rc == 2, r.out + r.err
    records = json.loads(r.out)
    assert not _seen(records), records
    (nr,) = [d for d in records if d["code"] == "E904"]
    assert nr["verification"]["status"] == COULD_NOT_RUN and nr["verification"]["evidence"].startswith(reason), nr
    if name != "hang.py":
        assert nr["verification"]["stderr"], nr  # the last lines of its stderr
    # the flagged dataset function never ran through: its finding is not NOT_REPRODUCED
    assert all(d["verification"]["status"] != "NOT_REPRODUCED" for d in records), records
    assert cli("--verify", "--devices", "cpu:2", "--exit-zero", "--no-cache", "--no-config", *timeout,
               str(folder / name)).rc == 0


def test_correct_scripts_with_constant_data_or_random_only_replica_fns_give_nothing(cli, folder):
    r, by = _verify(cli, folder, list(GOOD))
    seen = {n: _seen(by.get(n, [])) for n in GOOD}
    assert not any(seen.values()), json.dumps(seen, indent=1) + r.err
    assert r.rc == 0, r.out + r.err


def test_mistakes_seen_by_identity(cli, folder):
    r, by = _verify(cli, folder, list(BAD))
    assert r.rc == 1, r.out + r.err
    for name, (_text, code, line) in BAD.items():
        hits = [d for d in _seen(by.get(name, [])) if d["code"] == code]
        assert hits, f"{name}: {json.dumps(by.get(name), indent=1)}\n{r.err}"
        assert any(abs(d["line"] - line) <= 1 for d in hits), (name, hits)
        assert all(d["verification"]["evidence"] for d in hits)


def test_a_finding_seen_alone_exits_1(cli, folder):
    """Each mistake on its own, whether or not the linter reports it (--select TFP101: only RUNTIME)."""
    for name in ("const_undistributed.py", "np_random_in_step.py", "next_in_closure.py"):
        r = cli("--verify", "--devices", "cpu:2", "--timeout", "240", "--no-cache", "--no-config", "--select",
                "TFP101", str(folder / name))
        assert r.rc == 1, r.out + r.err
