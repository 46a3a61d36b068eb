"""Cases for the rules of issue 19 (distribution mistakes no earlier rule covered).

Each case is a small module; ``hits(src, code)`` returns the lines where ``code`` fires (only that
rule enabled).  A line ending with ``# <-`` is where the rule must fire; the other lines must stay
silent, so every case checks both recall and precision.
"""
from __future__ import annotations

import textwrap

import pytest

from tfpar_lint.engine import AnalysisOptions, lint_source
from tfpar_lint.registry import rules_by_code


def hits(src: str, code: str, path: str = "t.py", **kw) -> list[int]:
    res = lint_source(textwrap.dedent(src), path, enabled=[code], **kw)
    assert res.error is None, res.error
    return sorted(f.line for f in res.findings if f.code == code)


def marked(src: str) -> list[int]:
    return [i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1)
            if ln.rstrip().endswith("# <-") or "# <-  (" in ln]


def check(src: str, code: str, **kw) -> None:
    assert hits(src, code, **kw) == marked(src)


def test_marker_helper_can_fail():
    src = """
    import tensorflow as tf
    x = 1  # <-
    """
    assert hits(src, "TFP508") != marked(src)


# =========================================================================== TFP508

DIST = """
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    ds = tf.data.Dataset.from_tensor_slices({"x": tf.ones((8, 2)), "ids": tf.range(8)}).batch(8)
    dist = strategy.experimental_distribute_dataset(ds)
"""


def test_508_distributed_batch_items_to_host():
    check(DIST + """
    def step(b):
        return b["x"] * 2.0, b["ids"].numpy()

    for batch in dist:
        out = strategy.run(step, args=(batch,))
        ids = batch["ids"].numpy()  # <-
        total = np.sum(out)  # <-
        m = tf.reduce_mean(out)  # <-
        tf.numpy_function(lambda a, b: a, [batch["ids"], out], tf.int32)  # <-
        print(batch["ids"], out)
        local = [t.numpy() for t in strategy.experimental_local_results(out)]
        first = out.values[0].numpy()
    """, "TFP508")


def test_508_leaves_strategy_run_numpy_to_tfp506():
    src = DIST + """
    for batch in dist:
        out = strategy.run(lambda b: b["x"], args=(batch,))
        print(out.numpy())
    """
    assert hits(src, "TFP508") == []
    assert hits(src, "TFP506") != []


def test_508_one_replica_strategies_are_left_alone():
    check("""
    import tensorflow as tf
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored_one = tf.distribute.MirroredStrategy(devices=["/gpu:0"])
    ds = tf.data.Dataset.range(8).batch(4)
    for b in one.experimental_distribute_dataset(ds):
        print(b.numpy())
    for b in mirrored_one.experimental_distribute_dataset(ds):
        print(b.numpy())
    """, "TFP508")


def test_508_hedged_container_by_use():
    check("""
    import tensorflow as tf

    class Trainer(BaseTrainer):
        def report(self, batch):
            outputs = self.predict(batch)
            mels = batch["mels"]
            try:
                outputs = outputs.values[0].numpy()
                mels = mels.values[0].numpy()
            except Exception:
                outputs = outputs.numpy()
                mels = mels.numpy()
            ids = batch["ids"].numpy()  # <-
            return outputs, mels, ids

        def other(self, batch):
            return batch["ids"].numpy()
    """, "TFP508")


def test_508_values_without_a_fallback_is_not_a_hedge():
    check("""
    import tensorflow as tf

    def show(batch, sparse):
        vals = sparse.values[0].numpy()
        return batch["ids"].numpy(), vals
    """, "TFP508")


def test_508_get_strategy_in_a_callback():
    check("""
    import tensorflow as tf

    class Eval(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            strategy = tf.distribute.get_strategy()
            dataset = strategy.experimental_distribute_dataset(self.ds)
            for images, labels in dataset:
                det = strategy.run(self.detect, (images,))
                tf.numpy_function(self.evaluator.update, [labels["gt"], det], [])  # <-
    """, "TFP508")


def test_508_metric_update_with_per_replica():
    check(DIST + """
    with strategy.scope():
        metric = tf.keras.metrics.Mean()
    for batch in dist:
        loss = strategy.run(lambda b: tf.reduce_mean(b["x"]), args=(batch,))
        metric.update_state(loss)  # <-
        metric.update_state(strategy.reduce("MEAN", loss, axis=None))
    """, "TFP508")


# =========================================================================== TFP110

def test_110_named_or_default_optimizer_outside_the_scope():
    check("""
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        a = keras.Sequential([keras.layers.Dense(1)])
        b = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        c = keras.Sequential([keras.layers.Dense(1)])
        d = keras.Sequential([keras.layers.Dense(1)])
        e = keras.Sequential([keras.layers.Dense(1)])
        opt = keras.optimizers.Adam()
        e.compile(optimizer="adam", loss="mse")
    OPT = "rmsprop"
    a.compile(optimizer="adam", loss="mse")  # <-
    b.compile(loss="mse")  # <-
    c.compile(OPT, loss="mse")  # <-
    d.compile(optimizer="sgd", loss="mse")
    d.compile(optimizer=opt, loss="mse")
    """, "TFP110")


def test_110_depends_on_the_keras_version():
    src = """
    import tensorflow as tf
    import tf_keras

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        a = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        b = tf_keras.Sequential([tf_keras.layers.Dense(1)])
    a.compile(optimizer="adam", loss="mse")  # <-
    b.compile(optimizer="adam", loss="mse")
    """
    check(src, "TFP110")
    assert hits(src, "TFP110", options=AnalysisOptions(tf_version="2.15")) == []


def test_110_compile_in_a_helper_called_under_the_scope_is_fine():
    check("""
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()

    def finish(model):
        model.compile(optimizer="adam", loss="mse")

    def build():
        with strategy.scope():
            m = keras.Sequential([keras.layers.Dense(1)])
            finish(m)
        return m

    def build_bad():
        with strategy.scope():
            m = keras.Sequential([keras.layers.Dense(1)])
        m.compile(optimizer="adam", loss="mse")  # <-
        return m

    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    with one.scope():
        single = keras.Sequential([keras.layers.Dense(1)])
    single.compile(optimizer="adam", loss="mse")
    """, "TFP110")


# =========================================================================== TFP111

def test_111_step_in_the_scope_and_in_the_driver():
    check("""
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    pairs = list(zip(grads, variables))

    def step(x):
        optimizer.apply_gradients(pairs)

    def main():
        with strategy.scope():
            model = keras.Sequential([keras.layers.Dense(1)])
            opt = keras.optimizers.SGD()
            opt.apply_gradients(pairs)  # <-
            strategy.run(lambda: opt.apply_gradients(pairs))
        opt.apply_gradients(pairs)  # <-  (the driver, outside the scope: one device steps)

    with strategy.scope():
        optimizer = keras.optimizers.Adam()
        optimizer.apply_gradients(pairs)  # <-
    strategy.run(step, args=(1,))
    optimizer.apply_gradients([])  # steps nothing
    """, "TFP111")


def test_111_metric_only_for_keras_2():
    src = """
    import tensorflow as tf
    import tf_keras
    import keras

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        a = tf_keras.metrics.Mean()
        b = keras.metrics.Mean()
        c = tf.keras.metrics.Mean()
        a.update_state(1.0)  # <-
        b.update_state(1.0)
        c.update_state(1.0)
    """
    check(src, "TFP111")
    # on TF 2.15 the `keras` package is Keras 2.15 (Keras 3 comes with TF 2.16): all three are Keras 2 metrics
    assert hits(src, "TFP111", options=AnalysisOptions(tf_version="2.15")) == [11, 12, 13]


def test_111_leaves_tfp106_its_case_and_one_device_strategies_alone():
    check("""
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        opt = keras.optimizers.Adam()
    with one.scope():
        single = keras.optimizers.Adam()
        single.apply_gradients([])

    def train():
        opt.apply_gradients([])

    train()
    """, "TFP111")


# =========================================================================== TFP607

def test_607_two_chiefs_and_no_chief():
    check("""
    import json, os
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
    cluster = strategy.cluster_resolver.cluster_spec().as_dict()

    def is_chief(task_type, task_id):
        return task_type == "chief" or (task_type == "worker" and task_id == 0)  # <-

    def fixed(task_type, task_id):
        return task_type == "chief" or (task_type == "worker" and task_id == 0 and "chief" not in cluster)

    def first(task_id):
        return task_id == 0

    if task_type == "chief":  # <-
        print("export")
    if task_type in ("chief", "master"):  # <-
        print("export")
    if strategy.extended.should_checkpoint:
        print("export")
    print(is_chief(task_type, task_id), fixed(task_type, task_id), first(task_id))
    """, "TFP607")


def test_607_isinstance_narrowing_and_tf_config():
    check("""
    import json, os
    import tensorflow as tf

    def output_dir(path, strategy):
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            t, i = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
            if t is not None and t != "chief":  # <-
                return os.path.join(path, str(i))
        return path

    def other_dir(path, strategy):
        t = strategy.cluster_resolver.task_type
        if t != "chief":
            return os.path.join(path, "tmp")
        return path

    task = json.loads(os.environ["TF_CONFIG"])["task"]
    if task["type"] == "chief" or task["index"] == 0:  # <-
        print("writer")
    """, "TFP607")


def test_607_parameter_server_and_own_clusters_with_a_chief():
    check("""
    import json, os
    import tensorflow as tf

    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:1"]},
                                          "task": {"type": "chief", "index": 0}})
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if strategy.cluster_resolver.task_type == "chief":
        print("export")
    """, "TFP607")
    check("""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    if resolver.task_type == "chief":
        print("coordinator")
    """, "TFP607")


# =========================================================================== TFP608

MWMS = """
    import json, os
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id

    @tf.function
    def train_step():
        return strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
"""


def test_608_chief_only_exit_from_a_collective_loop():
    check(MWMS + """
    for epoch in range(10):
        loss = train_step()
        if task_id == 0:
            print(loss)
            if epoch > 3:
                break  # <-
        if epoch > 5:
            break
    for epoch in range(10):
        print(epoch)
        if task_id == 0:
            break
    """, "TFP608")


def test_608_chief_only_collective_calls():
    check(MWMS + """
    if task_type is None or task_id == 0:
        train_step()  # <-
        print("chief")
    else:
        strategy.reduce("SUM", 1.0, axis=None)  # <-
    train_step()
    """, "TFP608")


def test_608_tf_config_built_by_the_module():
    check("""
    import json, os, sys
    import tensorflow as tf

    config = {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": int(sys.argv[1])}}
    os.environ["TF_CONFIG"] = json.dumps(config)
    chief = True if config["task"]["index"] == 0 else False
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    @tf.function
    def step():
        return strategy.run(lambda: tf.constant(1.0))

    for i in range(10):
        step()
        if chief:
            if i > 2:
                break  # <-
    """, "TFP608")


def test_608_mirrored_strategy_is_left_alone():
    check("""
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    task_id = strategy.cluster_resolver.task_id
    for i in range(3):
        strategy.run(lambda: 1)
        if task_id == 0:
            break
    """, "TFP608")


# =========================================================================== TFP509-TFP512

LOOP = """
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    BATCH = 16
    GLOBAL = BATCH * strategy.num_replicas_in_sync
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.SGD()
"""


def test_509_clip_before_the_sum():
    check(LOOP + """
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(model(x)[:, 0], global_batch_size=GLOBAL)
        grads = tape.gradient(loss, model.trainable_variables)
        clipped, _ = tf.clip_by_global_norm(grads, 1.0)  # <-
        opt.apply_gradients(zip(clipped, model.trainable_variables))

    def step_fixed(x):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(model(x)[:, 0], global_batch_size=GLOBAL)
        grads = tape.gradient(loss, model.trainable_variables)
        grads = tf.distribute.get_replica_context().all_reduce("SUM", grads)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    def step_returns(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        return tf.clip_by_global_norm(grads, 1.0)[0]

    def step_no_aggregation(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        opt.apply_gradients(zip(grads, model.trainable_variables), experimental_aggregate_gradients=False)

    for f in (step, step_fixed, step_returns, step_no_aggregation):
        strategy.run(f, args=(tf.ones((8, 4)),))
    """, "TFP509")


def test_510_per_replica_batch_given_as_global():
    check(LOOP + """
    def step(x, ctx_batch):
        per_example = model(x)[:, 0]
        a = tf.nn.compute_average_loss(per_example, global_batch_size=BATCH)  # <-
        b = tf.nn.compute_average_loss(per_example, global_batch_size=tf.shape(x)[0])  # <-
        c = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL)
        d = tf.nn.compute_average_loss(per_example)
        e = tf.nn.compute_average_loss(per_example, global_batch_size=ctx_batch)
        return a + b + c + d + e

    strategy.run(step, args=(tf.ones((8, 4)), 64))
    """, "TFP510")


def test_511_mean_divided_again():
    check(LOOP + """
    def step(x):
        with tf.GradientTape() as tape:
            a = tf.reduce_mean(model(x)) / GLOBAL  # <-
            b = tf.nn.compute_average_loss(model(x)[:, 0], global_batch_size=GLOBAL)
            b /= strategy.num_replicas_in_sync  # <-
            c = tf.reduce_mean(model(x)) / strategy.num_replicas_in_sync
            d = tf.reduce_sum(model(x)) / GLOBAL
            e = tf.reduce_mean(model(x)) / 2.0
            loss = a + b + c + d + e
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    strategy.run(step, args=(tf.ones((8, 4)),))
    """, "TFP511")


def test_512_sum_of_means():
    check(LOOP + """
    def eval_step(x):
        return tf.reduce_mean(model(x))

    def eval_pair(x):
        return tf.reduce_mean(model(x)), tf.nn.compute_average_loss(model(x)[:, 0], global_batch_size=GLOBAL)

    def eval_scaled(x):
        return tf.reduce_mean(model(x)) / strategy.num_replicas_in_sync

    per = strategy.run(eval_step, args=(tf.ones((8, 4)),))
    strategy.reduce("SUM", per, axis=None)  # <-
    strategy.reduce(tf.distribute.ReduceOp.MEAN, per, axis=None)
    mean, scaled = strategy.run(eval_pair, args=(tf.ones((8, 4)),))
    strategy.reduce(tf.distribute.ReduceOp.SUM, mean, axis=None)  # <-
    strategy.reduce(tf.distribute.ReduceOp.SUM, scaled, axis=None)
    strategy.reduce("SUM", strategy.run(eval_scaled, args=(tf.ones((8, 4)),)), axis=None)
    """, "TFP512")


# =========================================================================== TFP209

def test_209_global_batch_shapes_in_the_replica_function():
    check("""
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    PER_REPLICA = 16
    GLOBAL = PER_REPLICA * strategy.num_replicas_in_sync
    FLAG = 32

    def step(x):
        a = tf.reshape(x, [GLOBAL, -1])  # <-
        b = tf.zeros((GLOBAL, 4))  # <-
        c = tf.split(x, GLOBAL)  # <-
        d = tf.zeros([PER_REPLICA, 4])
        e = tf.zeros([tf.shape(x)[0], 4])
        f = tf.zeros([FLAG, 4])
        return a, b, c, d, e, f

    strategy.run(step, args=(tf.ones((16, 4)),))
    outside = tf.zeros([GLOBAL, 4])
    """, "TFP209")


def test_209_batch_of_the_distributed_dataset():
    check("""
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    BATCH = 64
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.range(256).batch(BATCH))

    def step(x):
        return tf.one_hot(tf.range(BATCH), 10)  # <-

    for b in dist:
        strategy.run(step, args=(b,))
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    one.run(lambda: tf.zeros([BATCH]))
    """, "TFP209")


# =========================================================================== TFP705

def test_705_numpy_in_a_traced_replica_function():
    check("""
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()

    def helper(t):
        return t.numpy()  # <-

    def step(x):
        a = x.numpy()  # <-
        return helper(x)

    def eager_step(x):
        return x.numpy()

    @tf.function
    def train(x):
        return strategy.run(step, args=(x,))

    @tf.function
    def replica_traced(x):
        return x.numpy()  # <-

    train(tf.ones(2))
    strategy.run(eager_step, args=(tf.ones(2),))
    strategy.run(replica_traced, args=(tf.ones(2),))
    """, "TFP705")


# =========================================================================== TFP112, TFP113

def test_112_moving_averages_outside_the_scope():
    check("""
    import tensorflow as tf
    import tf_keras
    import keras

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
        k3 = keras.Sequential([keras.layers.Dense(1)])
        w = tf.Variable(1.0)
        inside = tf.train.ExponentialMovingAverage(0.9)
        inside.apply([w])
    ema = tf.train.ExponentialMovingAverage(0.9)
    ema.apply(model.trainable_variables)  # <-
    ema.apply([w])  # <-
    ema.apply(k3.trainable_variables)
    plain = tf.Variable(0.0)
    ema.apply([plain])

    def step():
        ema.apply([w])

    strategy.run(step)
    """, "TFP112")


def test_113_optimizer_first_built_in_a_traced_step():
    src = """
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1)])
        lazy = keras.optimizers.Adam()  # <-
        plain_sgd = keras.optimizers.SGD(0.1)
        eager_only = keras.optimizers.RMSprop()

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        lazy.apply_gradients(zip(grads, model.trainable_variables))
        plain_sgd.apply_gradients(zip(grads, model.trainable_variables))

    def eager_step(x):
        eager_only.apply_gradients([])

    @tf.function
    def train(x):
        strategy.run(step, args=(x,))

    train(tf.ones((2, 4)))
    strategy.run(eager_step, args=(1,))
    """
    check(src, "TFP113")
    legacy = src.replace("    import keras\n", "    import tf_keras as keras\n", 1)
    assert "tf_keras" in legacy and hits(legacy, "TFP113") == []


# =========================================================================== TFP210

def test_210_scheduled_functions_reading_coordinator_data():
    check("""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        w = tf.Variable(0.0)
    labels = np.load("labels.npy")
    train_labels = labels[:100]
    table = tf.constant([1.0, 2.0])
    plain_iter = iter(tf.data.Dataset.range(10))
    per_worker = iter(coordinator.create_per_worker_dataset(lambda: tf.data.Dataset.range(10)))
    unknown = load_from_somewhere()

    def replica_fn():
        return tf.reduce_sum(train_labels)  # <-

    @tf.function
    def step():
        return strategy.run(replica_fn)

    @tf.function
    def step_it(it):
        return next(it) + w + unknown

    @tf.function
    def step_table():
        return table * 2.0  # <-

    coordinator.schedule(step)
    coordinator.schedule(step_it, args=(per_worker,))
    coordinator.schedule(step_it, args=(plain_iter,))  # <-
    coordinator.schedule(step_table)
    """, "TFP210")
