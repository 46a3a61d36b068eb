"""Precision cases for the issue-4 rules: TFP107-109, TFP204-208, TFP501-507.

Each case is a small module; ``hits(src, code)`` returns the lines where ``code``
fires (only that rule enabled, so other rules' findings do not interfere).
A line marked ``# <-`` in a snippet is where the rule must fire; snippets
without a marker must stay silent.
"""
from __future__ import annotations

import textwrap

import pytest

from tfpar_lint.engine import lint_source
from tfpar_lint.registry import rules_by_code

ISSUE4 = ("TFP107", "TFP108", "TFP109", "TFP204", "TFP205", "TFP206", "TFP207", "TFP208",
          "TFP501", "TFP502", "TFP503", "TFP504", "TFP505", "TFP506", "TFP507")


def hits(src: str, code: str) -> list[int]:
    res = lint_source(textwrap.dedent(src), "t.py", enabled=[code])
    assert res.error is None, res.error
    return sorted(f.line for f in res.findings if f.code == code)


def marked(src: str) -> list[int]:
    return [i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1) if ln.rstrip().endswith("# <-")]


def check(src: str, code: str) -> None:
    assert hits(src, code) == marked(src)


def test_metadata():
    rules = rules_by_code()
    for code in ISSUE4:
        r = rules[code]
        assert r.NAME and r.NAME == r.NAME.lower() and " " not in r.NAME
        assert r.SUMMARY and r.FIX_HINT and r.SEVERITY in ("error", "warning") and r.MARKERS
    assert rules["TFP108"].DEFAULT_ENABLED is False
    assert all(rules[c].DEFAULT_ENABLED for c in ISSUE4 if c != "TFP108")
    assert {rules[c].SEVERITY for c in ("TFP109", "TFP206", "TFP502", "TFP506")} == {"error"}


# =========================================================================== TFP107
P107_SCOPE = """
{imports}
strategy = {ctor}
with strategy.scope():
    with tf.device("/GPU:1"):{mark}
        v = tf.Variable(1.0)
"""


@pytest.mark.parametrize("imports,ctor,fires", [
    ("import tensorflow as tf", "tf.distribute.MirroredStrategy()", True),
    ("import tensorflow as tf\nfrom tensorflow import distribute as d", "d.MirroredStrategy()", True),
    ("import tensorflow as tf\nfrom tensorflow.distribute import MultiWorkerMirroredStrategy as MW", "MW()", True),
    ("import tensorflow as tf", "tf.distribute.OneDeviceStrategy('/gpu:0')", False),
    ("import tensorflow as tf", "make_strategy()", False),  # unknown factory
])
def test_tfp107_scope_spellings(imports, ctor, fires):
    src = P107_SCOPE.format(imports=imports, ctor=ctor, mark="  # <-" if fires else "")
    check(src, "TFP107")


def test_tfp107_replica_fn_and_silences():
    check("""
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        with tf.device("/cpu:0"):  # <-
            model = keras.Sequential([keras.layers.Dense(1)])
        with tf.device("/cpu:0"):
            ds = tf.data.Dataset.range(4)  # no variable created: nothing ignored
    def step(x):
        with tf.device("/GPU:0"):  # <-
            y = x * 2
        with tf.device("/cpu:0"):  # host work inside a replica is fine
            s = tf.strings.as_string(y)
        return y
    strategy.run(step, args=(1.0,))
    with tf.device("/GPU:0"):  # outside the strategy
        z = tf.ones(3)
    """, "TFP107")


def test_tfp107_state_pinned_outside_the_scope():
    # variables and models made under tf.device outside the scope of the program's mirroring
    # strategy: not mirrored (any device expression)
    src = """
    import tensorflow as tf
    import keras
    with tf.device("/gpu:0"):  # <-
        queue = tf.Variable(tf.zeros([8]), trainable=False)
    with tf.device("cpu"):
        control = tf.Variable(1.0)  # bound again before anything reads it
    control = 2
    with tf.device("cpu"):
        g = tf.random.Generator.from_seed(1)  # a generator pinned on purpose
    with tf.device(hosts[0]):  # <-
        model = keras.Sequential([keras.layers.Dense(1)])
    with tf.device("cpu"):
        table = tf.constant([1, 2])  # no state
    with tf.device("/cpu:0"):
        steps_done = tf.Variable(0)  # a per-host counter the replicas never touch (issue 28)
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        opt = keras.optimizers.SGD()
    def step(x):
        queue.assign_add(model(x))  # read and updated on every replica
    strategy.run(step, args=(x,))
    steps_done.assign_add(1)
    """
    check(src, "TFP107")
    # no mirroring strategy in the program: tf.device is plain placement
    check(src.replace("tf.distribute.MirroredStrategy()", "tf.distribute.OneDeviceStrategy('/gpu:0')")
          .replace("  # <-", ""), "TFP107")


def test_tfp107_strategy_parameter_is_silent():
    check("""
    import tensorflow as tf
    def build(strategy):
        with strategy.scope():
            with tf.device("/GPU:1"):
                return tf.Variable(1.0)
    def train(strategy, step):
        strategy.run(step)
    """, "TFP107")


# =========================================================================== TFP108
def test_tfp108_fires_without_device_check():
    check("""
    import tensorflow as tf
    with tf.device("/GPU:0"):
        a = tf.ones((2, 2))
    with tf.device("/device:GPU:1"):  # <-
        b = a @ a
    with tf.device("/GPU:2"):  # <-
        c = b @ b
    with tf.device("/CPU:0"):
        d = c + 1
    """, "TFP108")


@pytest.mark.parametrize("check_line", [
    "gpus = tf.config.list_physical_devices('GPU')",
    "gpus = tf.config.experimental.list_logical_devices('GPU')",
    "tf.config.set_soft_device_placement(False)",
    "from tensorflow.python.client import device_lib\nprint(device_lib.list_local_devices())",
])
def test_tfp108_device_check_anywhere_silences(check_line):
    check(f"""
import tensorflow as tf
{check_line}
with tf.device("/GPU:1"):
    b = tf.ones(2)
""", "TFP108")


def test_tfp108_off_by_default():
    src = 'import tensorflow as tf\nwith tf.device("/GPU:1"):\n    x = tf.ones(2)\n'
    assert lint_source(src, "t.py").findings == []
    assert hits(src, "TFP108") == [2]


# =========================================================================== TFP109
def test_tfp109_nested_and_helper_twice():
    check("""
    import tensorflow as tf
    from tensorflow import keras
    def make():
        s = tf.distribute.MirroredStrategy()
        return s
    with make().scope():
        model = keras.Sequential([keras.layers.Dense(1)])
    strategy = make()
    def step(x):
        return model(x)  # <-
    strategy.run(step, args=(1,))
    a = tf.distribute.MirroredStrategy()
    b = tf.distribute.MirroredStrategy()
    with a.scope():
        with b.scope():  # <-
            pass
        with a.scope():
            pass
    """, "TFP109")


def test_tfp109_model_compiled_under_other_scope():
    check("""
    import keras
    import tensorflow as tf
    s1 = tf.distribute.MirroredStrategy()
    s2 = tf.distribute.MirroredStrategy()
    with s1.scope():
        m = keras.Sequential([keras.layers.Dense(1)])
    with s2.scope():
        m.compile(loss="mse")  # <-
    with s1.scope():
        m.compile(loss="mse")
    """, "TFP109")


def test_tfp109_reassigned_strategy():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        v = tf.Variable(0.0)
    strategy = tf.distribute.MirroredStrategy()
    def step():
        v.assign_add(1.0)  # <-
    strategy.run(step)
    """, "TFP109")


@pytest.mark.parametrize("make", [
    # a cached helper returns the same object every time
    "_S = None\ndef make():\n    global _S\n    if _S is None:\n        _S = tf.distribute.MirroredStrategy()\n    return _S\n",
    "import functools\n@functools.lru_cache(None)\ndef make():\n    return tf.distribute.MirroredStrategy()\n",
    "def make():\n    return tf.distribute.get_strategy()\n",
    "class Holder:\n    def __init__(self):\n        self.s = tf.distribute.MirroredStrategy()\n"
    "    def make(self):\n        return self.s\nmake = Holder().make\n",
])
def test_tfp109_shared_strategy_is_silent(make):
    check(f"""
import tensorflow as tf
{make}
with make().scope():
    v = tf.Variable(0.0)
strategy = make()
def step():
    v.assign_add(1.0)
strategy.run(step)
""", "TFP109")


def test_tfp109_parameters_and_loops_are_silent():
    check("""
    import tensorflow as tf
    def train(strategy, other):
        with strategy.scope():
            with other.scope():
                pass
    for i in range(3):
        s = tf.distribute.MirroredStrategy()
        with s.scope():
            v = tf.Variable(0.0)
        s.run(lambda: v.assign_add(1.0))
    with tf.distribute.MirroredStrategy().scope():
        with tf.distribute.get_strategy().scope():
            pass
    """, "TFP109")


# =========================================================================== TFP204 / TFP205
MW_HEAD = """
import tensorflow as tf
strategy = tf.distribute.{strategy}()
options = tf.data.Options()
"""


@pytest.mark.parametrize("strategy,fires", [("MultiWorkerMirroredStrategy", True),
                                            ("experimental.MultiWorkerMirroredStrategy", True),
                                            ("MirroredStrategy", False)])
def test_tfp204_strategy_kinds(strategy, fires):
    src = MW_HEAD.format(strategy=strategy) + (
        "options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF\n"
        "ds = tf.data.Dataset.range(8).batch(2)\n"
        "ds = ds.with_options(options)" + ("  # <-" if fires else "") + "\n"
        "dist = strategy.experimental_distribute_dataset(ds)\n")
    check(src, "TFP204")


def test_tfp204_alias_and_silences():
    check("""
    import tensorflow as tf
    from tensorflow.data.experimental import AutoShardPolicy
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    off = tf.data.Options()
    off.experimental_distribute.auto_shard_policy = AutoShardPolicy.OFF
    a = tf.data.Dataset.range(8).with_options(off)  # <-
    strategy.experimental_distribute_dataset(a)
    b = tf.data.Dataset.range(8).shard(2, 0).with_options(off)  # sharded by hand: fine
    strategy.experimental_distribute_dataset(b)
    c = tf.data.Dataset.range(8).with_options(off)  # never distributed
    def f(opts):
        return strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).with_options(opts))
    data = tf.data.Options()
    data.experimental_distribute.auto_shard_policy = AutoShardPolicy.DATA
    strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).with_options(data))
    """, "TFP204")


def test_tfp204_keras_fit_under_mwms():
    check("""
    import tensorflow as tf
    import tf_keras as keras
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    ds = tf.data.Dataset.from_tensor_slices(([1.0], [1.0])).batch(1).with_options(options)  # <-
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile(loss="mse")
    model.fit(ds, epochs=1)
    """, "TFP204")


def test_tfp205_double_sharding():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    a = tf.data.Dataset.range(16).shard(2, resolver.task_id).batch(2)  # <-
    strategy.experimental_distribute_dataset(a)
    off = tf.data.Options()
    off.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    b = tf.data.Dataset.range(16).shard(2, 0).batch(2).with_options(off)
    strategy.experimental_distribute_dataset(b)
    c = tf.data.Dataset.range(16).shard(2, 0).batch(2)
    tf.distribute.MirroredStrategy().experimental_distribute_dataset(c)  # one worker: no auto-sharding
    def make(opts):
        return tf.data.Dataset.range(16).shard(2, 0).with_options(opts)
    strategy.experimental_distribute_dataset(make(off))
    """, "TFP205")


def test_tfp205_shard_in_helper():
    check("""
    import tensorflow as tf
    def make_dataset(index):
        ds = tf.data.Dataset.range(16)
        ds = ds.shard(2, index)  # <-
        return ds.batch(4)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    dist = strategy.experimental_distribute_dataset(make_dataset(0))
    """, "TFP205")


def test_tfp204_205_unresolved_strategy_is_silent():
    src = """
    import tensorflow as tf
    def run(strategy):
        off = tf.data.Options()
        off.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).with_options(off))
        strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).shard(2, 0))
    """
    check(src, "TFP204")
    check(src, "TFP205")


# =========================================================================== TFP206
def test_tfp206_sources():
    check("""
    import tensorflow as tf
    import numpy as np
    file_opts = tf.data.Options()
    file_opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    a = tf.data.Dataset.from_tensor_slices(np.ones(8)).batch(2).with_options(file_opts)  # <-
    b = tf.data.TFRecordDataset("train.tfrecord").with_options(file_opts)  # <-
    c = tf.data.Dataset.range(8).map(lambda x: x).with_options(file_opts)  # <-
    d = tf.data.TFRecordDataset(["a.tfrecord", "b.tfrecord"]).with_options(file_opts)
    e = tf.data.Dataset.list_files("data/*.tfrecord", shuffle=False).interleave(tf.data.TFRecordDataset)
    e = e.with_options(file_opts)
    data_opts = tf.data.Options()
    data_opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    f = tf.data.Dataset.range(8).with_options(data_opts)
    def g(files):
        return tf.data.TFRecordDataset(files).with_options(file_opts)
    """, "TFP206")


# =========================================================================== TFP207
def test_tfp207_list_files():
    src = textwrap.dedent("""
    import tensorflow as tf
    a = tf.data.Dataset.list_files("d/*.txt")  # <-
    a = a.shard(2, 0)
    b = tf.data.Dataset.list_files("d/*.txt", seed=1).shard(2, 0)
    c = tf.data.Dataset.list_files("d/*.txt", shuffle=False).shard(2, 0)
    d = tf.data.Dataset.list_files("d/*.txt", False).shard(2, 0)
    e = tf.data.Dataset.list_files("d/*.txt").interleave(tf.data.TextLineDataset)
    f = tf.data.Dataset.list_files("d/*.txt", shuffle=True).interleave(tf.data.TextLineDataset)  # <-
    f = f.shard(2, 1)
    def g(pattern, **kw):
        return tf.data.Dataset.list_files(pattern, **kw).shard(2, 0)
    """)
    check(src, "TFP207")


def test_tfp207_horovod_style_without_strategy():
    check("""
    import tensorflow as tf
    import horovod.tensorflow as hvd
    files = tf.data.Dataset.list_files("/data/train-*.tfrecord")  # <-
    ds = files.shard(hvd.size(), hvd.rank()).interleave(tf.data.TFRecordDataset)
    """, "TFP207")


# =========================================================================== TFP208
def test_tfp208_per_replica_batch():
    # per-replica by its value story: the module multiplies it by num_replicas_in_sync (BATCH),
    # it is a global batch divided by the replicas (SPLIT), or it comes from get_per_replica_batch_size
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    BATCH = 4
    GLOBAL = BATCH * strategy.num_replicas_in_sync
    SPLIT = 64 // strategy.num_replicas_in_sync
    b = tf.data.Dataset.range(64).batch(BATCH)  # <-
    strategy.experimental_distribute_dataset(b)
    s = tf.data.Dataset.range(64).batch(int(SPLIT))  # <-
    strategy.experimental_distribute_dataset(s)
    c = tf.data.Dataset.range(64).batch(GLOBAL)
    strategy.experimental_distribute_dataset(c)
    d = tf.data.Dataset.range(64).batch(BATCH)  # never distributed by the strategy
    def fn(ctx):
        return tf.data.Dataset.range(64).batch(ctx.get_per_replica_batch_size(GLOBAL))
    strategy.distribute_datasets_from_function(fn)
    e = tf.data.Dataset.range(64).batch(BATCH).rebatch(GLOBAL)
    strategy.experimental_distribute_dataset(e)
    """, "TFP208")


def test_tfp208_value_story_not_the_name():
    # a neutral name whose value the module multiplies by the replicas (through a parameter and
    # a self attribute) is per-replica; names that say per-replica are not evidence
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    class Trainer:
        def __init__(self, size):
            self.size = size
            self.global_size = size * strategy.num_replicas_in_sync
        def data(self):
            ds = tf.data.Dataset.range(64).batch(self.size)  # <-
            return strategy.experimental_distribute_dataset(ds)
    Trainer(8).data()
    per_replica_batch = 16 * strategy.num_replicas_in_sync  # really the global batch
    a = tf.data.Dataset.range(64).batch(per_replica_batch)
    strategy.experimental_distribute_dataset(a)
    BATCH_SIZE_PER_REPLICA = 8  # never related to the replicas
    f = tf.data.Dataset.range(64).batch(BATCH_SIZE_PER_REPLICA)
    strategy.experimental_distribute_dataset(f)
    """, "TFP208")


def test_tfp208_keras_fit_and_the_argument_that_passes_the_size():
    # `fit` splits each batch across the replicas too; the size is a parameter of a function that
    # is handed to a launcher (its arguments cannot be seen) and the module multiplies that same
    # parameter by the replicas: reported where the helper that batches receives it
    check("""
    import os
    import tensorflow as tf
    def train(batch_size=16):
        if os.environ.get("TF_CONFIG"):
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
        else:
            strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        global_batch_size = batch_size * strategy.num_replicas_in_sync
        def make(batch_size, n):
            return tf.data.Dataset.range(n).batch(batch_size)
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
            model.compile(loss="mse")
        train_ds = make(
            batch_size=batch_size,  # <-
            n=64)
        model.fit(train_ds, epochs=1)
        ok_ds = make(batch_size=global_batch_size, n=64)
        model.fit(ok_ds, epochs=1)
    launcher.submit(train)
    """, "TFP208")
    # one replica by construction: fit does not split
    check("""
    import tensorflow as tf
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    BATCH = 8
    GLOBAL = BATCH * strategy.num_replicas_in_sync
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
    model.fit(tf.data.Dataset.range(64).batch(BATCH), epochs=1)
    """, "TFP208")


def test_tfp208_unknown_strategy_or_plain_size_is_silent():
    check("""
    import tensorflow as tf
    def go(strategy, per_replica_batch_size):
        return strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(per_replica_batch_size))
    strategy = tf.distribute.MirroredStrategy()
    BATCH_SIZE = 32
    strategy.experimental_distribute_dataset(tf.data.Dataset.range(64).batch(BATCH_SIZE))
    """, "TFP208")


# =========================================================================== TFP501
STEP_501 = """
{imports}
strategy = {ctor}
BATCH = 8
PER_REPLICA_BATCH = 64
GLOBAL_BATCH = BATCH * strategy.num_replicas_in_sync
with strategy.scope():
    model = {keras}.Sequential([{keras}.layers.Dense(1)])
    optimizer = {keras}.optimizers.SGD()
def step(x, y):
    with tf.GradientTape() as tape:
        {loss_line}
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
@tf.function
def dist_step(x, y):
    return strategy.run(step, args=(x, y))
"""


@pytest.mark.parametrize("imports,keras", [
    ("import tensorflow as tf", "tf.keras"),
    ("import tensorflow as tf\nfrom tensorflow import keras", "keras"),
    ("import tensorflow as tf\nimport keras", "keras"),
    ("import tensorflow as tf\nimport tf_keras as keras", "keras"),
])
@pytest.mark.parametrize("loss_line,fires", [
    ("loss = tf.reduce_mean(tf.square(model(x) - y))", True),
    ("loss = tf.math.reduce_mean(tf.square(model(x) - y), axis=None)", True),
    ("loss = tf.reduce_sum(tf.square(model(x) - y)) / tf.cast(tf.shape(x)[0], tf.float32)", True),
    ("loss = tf.reduce_sum(tf.square(model(x) - y)) / len(x)", True),
    ("loss = tf.reduce_sum(tf.square(model(x) - y)) / BATCH", True),  # GLOBAL_BATCH = BATCH * replicas
    ("loss = tf.reduce_sum(tf.square(model(x) - y)) / GLOBAL_BATCH", False),
    ("loss = tf.reduce_sum(tf.square(model(x) - y)) / PER_REPLICA_BATCH", False),  # the name is no evidence
    ("loss = tf.nn.compute_average_loss(tf.reduce_mean(tf.square(model(x) - y), axis=1))", False),
    ("loss = tf.reduce_mean(tf.square(model(x) - y)) / strategy.num_replicas_in_sync", False),
    ("loss = tf.reduce_mean(tf.square(model(x) - y)) * (1.0 / strategy.num_replicas_in_sync)", False),
])
def test_tfp501_spellings(imports, keras, loss_line, fires):
    src = STEP_501.format(imports=imports, ctor="tf.distribute.MirroredStrategy()", keras=keras,
                          loss_line=loss_line)
    lines = hits(src, "TFP501")
    loss_lineno = next(i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1) if "loss =" in ln)
    assert lines == ([loss_lineno] if fires else [])


@pytest.mark.parametrize("ctor", ["tf.distribute.OneDeviceStrategy('/gpu:0')",
                                  "tf.distribute.MirroredStrategy(devices=['/gpu:0'])"])
def test_tfp501_single_replica_strategy_is_silent(ctor):
    src = STEP_501.format(imports="import tensorflow as tf", ctor=ctor, keras="tf.keras",
                          loss_line="loss = tf.reduce_mean(tf.square(model(x) - y))")
    assert hits(src, "TFP501") == []


def test_tfp501_unresolved_strategy_used_as_one_may_run_several_replicas():
    # `get_my_strategy()` cannot be followed; `strategy.run(step, args=...)` and
    # `num_replicas_in_sync` say it is a strategy, of a class not known to have one replica
    src = STEP_501.format(imports="import tensorflow as tf", ctor="get_my_strategy()", keras="tf.keras",
                          loss_line="loss = tf.reduce_mean(tf.square(model(x) - y))")
    loss_lineno = next(i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1) if "loss =" in ln)
    assert hits(src, "TFP501") == [loss_lineno]


def test_tfp501_through_helper_and_augassign():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    def compute_loss(y, p):
        return tf.reduce_mean(tf.square(y - p))  # <-
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = 0.0
            loss += compute_loss(y, model(x))
            acc = tf.reduce_mean(tf.cast(tf.equal(y, model(x)), tf.float32))  # metric only
        model.optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return acc
    strategy.run(step, args=(1, 2))
    """, "TFP501")


def test_tfp501_strategy_parameter_is_silent():
    check("""
    import tensorflow as tf
    def train(strategy, model, ds):
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(x))
            return tape.gradient(loss, model.trainable_variables)
        for x in ds:
            strategy.run(step, args=(x,))
    """, "TFP501")


# =========================================================================== TFP502 / TFP503
LOSS_SRC = """
{head}
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = {k}.Sequential([{k}.layers.Dense(1)])
    loss_fn = {k}.losses.{loss}
    opt = {k}.optimizers.SGD()
def step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x)){div}
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
strategy.run(step, args=(1, 2))
"""


@pytest.mark.parametrize("head,k,legacy", [
    ("import tensorflow as tf\nimport tf_keras", "tf_keras", True),
    ("import tensorflow as tf\nimport tf_keras as tfk", "tfk", True),
    ("import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nimport tensorflow as tf", "tf.keras", True),
    ("import os\nos.environ.setdefault('TF_USE_LEGACY_KERAS', '1')\nimport tensorflow as tf\n"
     "from tensorflow import keras", "keras", True),
    ("import tensorflow as tf", "tf.keras", False),
    ("import tensorflow as tf\nfrom tensorflow import keras", "keras", False),
    ("import tensorflow as tf\nimport keras", "keras", False),
])
@pytest.mark.parametrize("loss,default", [
    ("MeanSquaredError()", True),
    ("SparseCategoricalCrossentropy(from_logits=True)", True),
    ("MeanSquaredError(reduction='sum_over_batch_size')", True),
    ("MeanSquaredError(reduction='none')", False),
    ("MeanSquaredError(reduction='sum')", False),
    ("MeanSquaredError(reduction=None)", False),
])
def test_tfp502_503_keras_flavours(head, k, legacy, loss, default):
    src502 = LOSS_SRC.format(head=head, k=k, loss=loss, div="")
    loss_line = next(i for i, ln in enumerate(src502.splitlines(), 1) if "loss = loss_fn" in ln)
    assert hits(src502, "TFP502") == ([loss_line] if legacy and default else [])
    assert hits(src502, "TFP503") == []
    src503 = LOSS_SRC.format(head=head, k=k, loss=loss, div=" / strategy.num_replicas_in_sync")
    assert hits(src503, "TFP503") == ([loss_line] if not legacy and default else [])


def test_tfp502_reduction_enum_and_compile():
    check("""
    import tensorflow as tf
    import tf_keras
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
        ok = tf_keras.losses.MeanSquaredError(reduction=tf_keras.losses.Reduction.NONE)
        bad = tf_keras.losses.MeanSquaredError(reduction=tf_keras.losses.Reduction.AUTO)
        model.compile(loss=tf_keras.losses.MeanSquaredError())
        value = bad([1.0], [2.0])  # <-
    def step(x, y):
        a = ok(y, model(x))
        return bad(y, model(x))  # <-
    strategy.run(step, args=(1, 2))
    plain = bad([1.0], [2.0])  # outside every strategy: allowed
    """, "TFP502")


def test_tfp503_augassign_and_multiply():
    check("""
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1)])
        loss_fn = keras.losses.MeanSquaredError()
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
            loss /= strategy.num_replicas_in_sync  # <-
        g1 = tape.gradient(loss, model.trainable_variables)
        with tf.GradientTape() as tape2:
            loss2 = loss_fn(y, model(x)) * (1.0 / tf.distribute.get_replica_context().num_replicas_in_sync)  # <-
        model.optimizer.apply_gradients(zip(g1, model.trainable_variables))
        model.optimizer.apply_gradients(zip(tape2.gradient(loss2, model.trainable_variables), model.trainable_variables))
    strategy.run(step, args=(1, 2))
    """, "TFP503")


# =========================================================================== TFP504
@pytest.mark.parametrize("reg,fires", [
    ("loss += sum(model.losses)", True),
    ("loss = loss + tf.add_n(model.losses)", True),
    ("loss += tf.reduce_sum(model.losses)", True),
    ("loss += tf.nn.scale_regularization_loss(model.losses)", False),
    ("loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))", False),
    ("loss += tf.add_n(model.losses) / strategy.num_replicas_in_sync", False),
])
def test_tfp504_variants(reg, fires):
    src = textwrap.dedent(f"""
    import tensorflow as tf
    from tensorflow import keras
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, kernel_regularizer="l2")])
        optimizer = keras.optimizers.SGD()
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(tf.square(model(x) - y))
            {reg}
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    strategy.run(step, args=(1, 2))
    """)
    line = next(i for i, ln in enumerate(src.splitlines(), 1) if "model.losses" in ln)
    assert hits(src, "TFP504") == ([line] if fires else [])


def test_tfp504_unknown_model_and_logging_are_silent():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    def make_step(model):
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(model(x)) + sum(model.losses)
            return tape.gradient(loss, model.trainable_variables)
        return step
    with strategy.scope():
        net = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    def step2(x):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(net(x))
        reg = tf.add_n(net.losses)  # reported, not trained on
        return tape.gradient(loss, net.trainable_variables), reg
    strategy.run(step2, args=(1,))
    """, "TFP504")


def test_tfp504_losses_of_the_model_whose_variables_are_trained():
    # `self.model` cannot be followed (made by another module), but the gradient is taken of its
    # variables: its `.losses` are the model's regularization
    check("""
    import tensorflow as tf
    import nets
    class Trainer:
        def __init__(self, model):
            self.model = model
            self.opt = tf.keras.optimizers.SGD()
        def step(self, x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(self.model(x) - y))
                loss += sum(self.model.losses)  # <-
                loss = loss * (1.0 / 64)
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        def other(self, x, y):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(self.model(x)) + sum(self.aux.losses)
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        trainer = Trainer(nets.build())
    strategy.run(trainer.step, args=(1, 2))
    strategy.run(trainer.other, args=(1, 2))
    """, "TFP504")


def test_tfp504_weight_decay_added_to_the_gradients():
    check("""
    import tensorflow as tf
    def make(model, optimizer, strategy, wd):
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            grads = [g + wd * v for g, v in zip(grads, model.trainable_variables)]  # <-
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        def scaled(x):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            decay = wd / strategy.num_replicas_in_sync
            grads = [g + decay * v for g, v in zip(grads, model.trainable_variables)]
            grads = [g + 1e-3 for g in grads]  # not a weight decay
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        strategy.run(step, args=(1,))
        strategy.run(scaled, args=(1,))
    """, "TFP504")


def test_tfp501_gradients_through_helpers_and_tf1_gradients():
    # TF 1 graph code: tf.gradients in a helper returning a tuple, the loss from another helper,
    # the gradients rescaled on the way, run with experimental_run
    check("""
    import tensorflow.compat.v1 as tf
    strategy = tf.distribute.experimental.TPUStrategy(resolver)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
        optimizer = tf.train.GradientDescentOptimizer(0.01)
    def loss(model, x, y):
        logits = model(x)
        return logits, tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)  # <-
    def grad(model, x, y):
        logits, value = loss(model, x, y)
        return logits, value, tf.gradients(value, model.trainable_variables)
    def train_step(inputs):
        x, y = inputs
        logits, value, grads = grad(model, x, y)
        grads, _ = tf.clip_by_global_norm(grads, 5.0)
        return optimizer.apply_gradients(zip(grads, model.trainable_variables))
    def eval_step(inputs):
        x, y = inputs
        return loss(model, x, y)
    out = strategy.experimental_run(train_step, iterator)
    out2 = strategy.experimental_run(eval_step, iterator)
    """, "TFP501")


# =========================================================================== TFP505
def test_tfp505_variants():
    check("""
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MirroredStrategy()
    GB = 64
    with strategy.scope():
        loss_fn = keras.losses.MeanSquaredError()
    def scaled(x):
        per_example = tf.reduce_sum(x, axis=1)
        return tf.nn.compute_average_loss(per_example, global_batch_size=GB)
    def mean(x):
        return tf.reduce_mean(x)
    def keras3(x):
        return loss_fn(x, x)
    @tf.function
    def steps(x):
        a = strategy.run(scaled, args=(x,))
        r1 = strategy.reduce(tf.distribute.ReduceOp.MEAN, a, axis=None)  # <-
        r2 = strategy.reduce("MEAN", a, axis=None)  # <-
        r3 = strategy.reduce(tf.distribute.ReduceOp.SUM, a, axis=None)
        b = strategy.run(mean, args=(x,))
        r4 = strategy.reduce(tf.distribute.ReduceOp.MEAN, b, axis=None)
        c = strategy.run(keras3, args=(x,))
        r5 = strategy.reduce(tf.distribute.ReduceOp.MEAN, c, axis=None)  # <-
        r6 = strategy.reduce(tf.distribute.ReduceOp.MEAN, a, axis=0)
        return r1, r2, r3, r4, r5, r6
    """, "TFP505")


def test_tfp505_strategy_parameter_known_by_its_use():
    """A strategy parameter is one by its use (run(fn, args=...), a ReduceOp reduction): reported,
    as no one-replica strategy is made here (kinds from use, issue 17)."""
    check("""
    import tensorflow as tf
    def steps(strategy, x):
        a = strategy.run(lambda v: tf.nn.compute_average_loss(v), args=(x,))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, a, axis=None)  # <-
    """, "TFP505")


# =========================================================================== TFP506
def test_tfp506_uses():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    def step(x):
        return x * 2
    @tf.function
    def dist_step(x):
        return strategy.run(step, args=(x,))
    r = dist_step(1.0)
    print(r.numpy())  # <-
    loss = float(r)  # <-
    print("loss", r)  # prints the PerReplica wrapper: allowed
    msg = f"loss={r:.3f}"  # <-
    raw = f"loss={r}"
    flag = bool(r)  # <-
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, r, axis=None)
    print(total.numpy(), float(total), f"{total}")
    print([t.numpy() for t in strategy.experimental_local_results(r)])
    single = one.run(step, args=(1.0,))
    print(single.numpy())
    """, "TFP506")


def test_tfp506_unknown_and_shadowed_are_silent():
    check("""
    import tensorflow as tf
    def report(strategy, step):
        r = strategy.run(step)
        print(r.numpy())
    strategy = tf.distribute.MirroredStrategy()
    def print(*a):
        pass
    r = strategy.run(lambda: 1.0)
    print(r)
    """, "TFP506")


# =========================================================================== TFP507
def test_tfp507_variants():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        a = tf.Variable(0.0)
        b = tf.Variable(0.0, aggregation=tf.VariableAggregation.SUM)
        c = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=tf.VariableAggregation.SUM)
        d = tf.Variable(0.0)
    e = tf.Variable(0.0)  # outside the scope: TFP105's business
    def step(x):
        a.assign_add(x)  # <-
        b.assign_add(x)
        c.assign_add(x)
        d.assign_add(1.0)  # the same constant everywhere: copies stay equal
        e.assign(x)
        return x
    strategy.run(step, args=(1.0,))
    """, "TFP507")


def test_tfp507_one_device_and_parameter_are_silent():
    check("""
    import tensorflow as tf
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    with one.scope():
        a = tf.Variable(0.0)
    one.run(lambda x: a.assign_add(x), args=(1.0,))
    def train(strategy):
        with strategy.scope():
            v = tf.Variable(0.0)
        strategy.run(lambda x: v.assign_add(x), args=(1.0,))
    """, "TFP507")


def test_tfp501_503_504_gradients_aggregated_by_hand_are_silent():
    """Gradients returned from the replica function (reduced by the caller, e.g. with MEAN), or
    applied with aggregation turned off: the caller chooses the scaling."""
    src = """
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, kernel_regularizer="l2")])
        opt = keras.optimizers.SGD()
        loss_fn = keras.losses.MeanSquaredError()
    def returns_grads(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y)) + sum(model.losses)
        return loss, tape.gradient(loss, model.trainable_variables)
    def no_aggregation(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x)) / strategy.num_replicas_in_sync
        grads = tape.gradient(loss, model.trainable_variables)
        grads = tf.distribute.get_replica_context().all_reduce("mean", grads)
        opt.apply_gradients(zip(grads, model.trainable_variables), skip_gradients_aggregation=True)
    strategy.run(returns_grads, args=(1, 2))
    strategy.run(no_aggregation, args=(1, 2))
    """
    for code in ("TFP501", "TFP503", "TFP504"):
        check(src, code)
    # the same functions, applying their gradients with the default aggregation, are flagged
    applied = src.replace("skip_gradients_aggregation=True", "skip_gradients_aggregation=False")
    assert hits(applied, "TFP503") != []


def test_tfp501_rescaled_through_names():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    scale = 1.0 / strategy.num_replicas_in_sync
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.SGD()
    def step(x):
        replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        with tf.GradientTape() as tape:
            a = tf.reduce_mean(model(x)) * scale
            b = tf.reduce_mean(model(x))
            b *= 1.0 / replicas
            c = tf.reduce_mean(model(x)) / tf.cast(replicas, tf.float32)
            d = tf.reduce_mean(model(x))  # <-
            loss = a + b + c + d
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    strategy.run(step, args=(1.0,))
    """, "TFP501")


def test_get_strategy_is_not_known_to_be_replicated():
    src = """
    import tensorflow as tf
    strategy = tf.distribute.get_strategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.SGD()
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    r = strategy.run(step, args=(1.0,))
    print(r.numpy())
    """
    check(src, "TFP501")
    check(src, "TFP506")


def test_tfp507_only_replica_dependent_values():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        step_count = tf.Variable(0)
        total = tf.Variable(0.0)
        last_id = tf.Variable(0)
        noise = tf.Variable(0.0)
    LIMIT = 10

    class Trainer:
        def __init__(self):
            with strategy.scope():
                self.count = tf.Variable(0)

        def step(self, batch):
            self.count.assign(self.count + 1)  # same on every replica
            return batch

    def step(batch):
        step_count.assign(step_count + 1)  # same on every replica
        step_count.assign(tf.minimum(step_count + 1, LIMIT))
        size = tf.reduce_sum(batch)
        total.assign_add(size)  # <-
        ctx = tf.distribute.get_replica_context()
        last_id.assign(ctx.replica_id_in_sync_group)  # <-
        noise.assign(tf.random.normal(()))  # <-
        return batch

    strategy.run(step, args=(tf.ones(2),))
    t = Trainer()
    strategy.run(t.step, args=(tf.ones(2),))
    """, "TFP507")


def test_tfp501_gradients_not_applied_are_silent():
    check("""
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1)])
        opt = keras.optimizers.SGD()
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(tf.square(model(x) - y)[:, 0])
        head, body = tape.gradient(loss, [model.trainable_variables[:1], model.trainable_variables[1:]])
        opt.apply_gradients(zip(head, model.trainable_variables[:1]))
        opt.apply_gradients(zip(body, model.trainable_variables[1:]))
        with tf.GradientTape() as probe:
            aux = tf.reduce_mean(tf.square(model(x)))  # only inspected, never applied
        grad_norm = tf.linalg.global_norm(probe.gradient(aux, model.trainable_variables))
        with tf.GradientTape() as t3:
            bad = tf.reduce_mean(tf.square(model(x) - y))  # <-
        clipped = [tf.clip_by_norm(g, 1.0) for g in t3.gradient(bad, model.trainable_variables)]
        opt.apply_gradients(zip(clipped, model.trainable_variables))
        return loss, grad_norm
    strategy.run(step, args=(1, 2))
    """, "TFP501")


def test_tfp506_through_tuple_returned_by_step():
    check("""
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    def single_step(x):
        return x * 2
    @tf.function
    def run_single_step(iterator):
        features, labels = next(iterator)
        outputs = strategy.run(single_step, (features,))
        return outputs, labels
    def evaluate(iterator):
        outputs, labels = run_single_step(iterator)
        return outputs.numpy(), labels.numpy()  # <-
    first, second = strategy.run(single_step, (1.0,)), 2.0
    print(float(first))  # <-
    """, "TFP506")
