"""Cases for the rules of issue 27, item 5 (classes of mistakes no earlier rule covered): TFP513
(gradients computed outside ``strategy.run`` applied by every replica), TFP514 (a loss made only of
gathered values), TFP609 (a training-state callback on some workers only), TFP610 (every worker
saves to one path with no chief / temporary split).

Each case is a small module; a line ending with ``# <-`` is where the rule must fire; the other
lines must stay silent, so every case checks both recall and precision.  The semantic queries the
rules ask are tested on their own too.
"""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tfpar_lint.engine import lint_source
from tfpar_lint.semantic import Module


def hits(src: str, code: str, enabled=None) -> list[int]:
    res = lint_source(textwrap.dedent(src), "t.py", enabled=enabled or [code])
    assert res.error is None, res.error
    return sorted(f.line for f in res.findings if f.code == code)


def marked(src: str) -> list[int]:
    return [i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1) if ln.rstrip().endswith("# <-")]


def check(src: str, code: str, enabled=None) -> None:
    assert hits(src, code, enabled) == marked(src)


def module(src: str) -> Module:
    src = textwrap.dedent(src)
    return Module(cst.parse_module(src), src)


def line_of(m: Module, node: cst.CSTNode) -> int:
    return m.source[:m.source.index(m.tree.code_for_node(node))].count("\n") + 1


def test_marker_helper_can_fail():
    src = """
    import tensorflow as tf
    x = 1  # <-
    """
    assert hits(src, "TFP513") != marked(src)


# =========================================================================== TFP513

MIRRORED = """
    import tensorflow as tf
    import keras

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        optimizer = keras.optimizers.SGD(0.1)
"""


def test_513_gradients_handed_in_through_args_and_closures():
    check(MIRRORED + """
    def apply_step(grads):
        grads = [tf.clip_by_norm(g, 1.0) for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # <-

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((model(x) - y) ** 2) / 16
        grads = tape.gradient(loss, model.trainable_variables)
        strategy.run(apply_step, args=(grads,))

        def inner():
            optimizer.apply_gradients(zip(grads, model.trainable_variables))  # <-
        strategy.run(inner)
        strategy.run(optimizer.apply_gradients, args=(list(zip(grads, model.trainable_variables)),))  # <-
    """, "TFP513")


def test_513_gradients_of_the_replica_itself_are_fine():
    check(MIRRORED + """
    def compute(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((model(x) - y) ** 2) / 16
        return tape.gradient(loss, model.trainable_variables)

    def apply_step(grads):
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    def replica(x, y):
        apply_step(compute(x, y))

    @tf.function
    def step(x, y):
        strategy.run(replica, args=(x, y))
        per_replica = strategy.run(compute, args=(x, y))
        strategy.run(apply_step, args=(per_replica,))

    # the same function called directly on one device, with gradients computed there
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(tf.ones((2, 4))))
    apply_step(tape.gradient(loss, model.trainable_variables))
    """, "TFP513")


def test_513_one_replica_or_no_aggregation_is_left_alone():
    check("""
    import tensorflow as tf
    import tf_keras

    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
        optimizer = tf_keras.optimizers.SGD(0.1)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        strategy.run(lambda: optimizer.apply_gradients(zip(grads, model.trainable_variables)))
        mirrored.run(lambda: optimizer.apply_gradients(zip(grads, model.trainable_variables),
                                                       experimental_aggregate_gradients=False))
    """, "TFP513")


def test_513_query_names_the_gradient_computation():
    from tfpar_lint.semantic.replicagrads import outside_gradients

    m = module(MIRRORED + """
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(tf.ones((2, 4))))
    grads = tape.gradient(loss, model.trainable_variables)

    def apply_step():
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    strategy.run(apply_step)
    """)
    got = list(outside_gradients(m))
    assert [(line_of(m, g.apply.node), line_of(m, g.gradient.node), m.code(g.grads)) for g in got] == \
        [(15, 12, "grads")]


# =========================================================================== TFP514

GATHER = MIRRORED + """
    data = tf.data.Dataset.from_tensor_slices((tf.ones((8, 4)), tf.ones((8, 1))))
    ds = strategy.experimental_distribute_dataset(data.batch(8))
"""


def test_514_loss_of_gathered_values():
    check(GATHER + """
    def gather(distribution, x, y):
        return distribution.gather(x, axis=0), distribution.gather(y, axis=0)

    def replica(x, y):
        ctx = tf.distribute.get_replica_context()
        gx = ctx.all_gather(x, axis=0)
        gy = ctx.all_gather(y, axis=0)
        mx, my = ctx.merge_call(gather, args=(x, y))
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(gx) - gy) ** 2)  # <-
            loss2 = tf.reduce_sum((model(mx) - my) ** 2) / 16  # <-
        grads = tape.gradient(loss + loss2, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    @tf.function
    def step(x, y):
        strategy.run(replica, args=(x, y))
    """, "TFP514")


def test_514_scaled_or_local_losses_are_fine():
    check(GATHER + """
    def replica(x, y):
        ctx = tf.distribute.get_replica_context()
        gx = ctx.all_gather(x, axis=0)
        gy = ctx.all_gather(y, axis=0)
        with tf.GradientTape() as tape:
            scaled = tf.reduce_mean((model(gx) - gy) ** 2) / strategy.num_replicas_in_sync
            mine = model(x)
            everyone = ctx.all_gather(mine, axis=0)
            contrastive = tf.reduce_sum(tf.matmul(mine, everyone, transpose_b=True)) / 16
        grads = tape.gradient(scaled + contrastive, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return tf.reduce_mean(gy)  # a gathered value for logging only

    def returns_grads(x, y):
        gx = tf.distribute.get_replica_context().all_gather(x, axis=0)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(gx))
        return tape.gradient(loss, model.trainable_variables)

    @tf.function
    def step(x, y):
        strategy.run(replica, args=(x, y))
        strategy.run(returns_grads, args=(x, y))
    """, "TFP514")


def test_514_takes_over_from_501_on_a_gathered_mean():
    src = GATHER + """
    def replica(x, y):
        gx = tf.distribute.get_replica_context().all_gather(x, axis=0)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(gx))  # <-
            local = tf.reduce_mean(model(x))
        optimizer.apply_gradients(zip(tape.gradient(loss + local, model.trainable_variables),
                                      model.trainable_variables))

    @tf.function
    def step(x, y):
        strategy.run(replica, args=(x, y))
    """
    both = ["TFP501", "TFP514"]
    assert hits(src, "TFP514", both) == marked(src)
    assert hits(src, "TFP501", both) == [marked(src)[0] + 1]  # the local mean stays TFP501's


def test_514_gathered_only_query():
    from tfpar_lint.semantic.replicagrads import gathered_only

    m = module(GATHER + """
    def replica(x, y):
        ctx = tf.distribute.get_replica_context()
        a = ctx.all_gather(x, axis=0)
        b = a * 2.0
        c = b + x
        return b, c

    strategy.run(replica, args=(1, 2))
    """)
    fn = next(f for f in m.functions if f.name == "replica")
    (ret, order), = fn.returns
    b, c = (e.value for e in ret.elements)
    assert gathered_only(m, b, fn.scope, order) is not None
    assert gathered_only(m, c, fn.scope, order) is None  # reads the replica's own shard `x`


# =========================================================================== TFP609

MWMS_FIT = """
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task_id = strategy.cluster_resolver.task_id
    is_chief = task_id == 0
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer="sgd", loss="mse")
    ds = tf.data.Dataset.from_tensor_slices((np.ones((8, 4)), np.ones((8, 1)))).batch(4)
"""


def test_609_training_callbacks_on_one_side():
    check(MWMS_FIT + """
    class Decay(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            keras.backend.set_value(self.model.optimizer.lr, 0.001)

    class Stop(Decay):
        pass

    plateau = keras.callbacks.ReduceLROnPlateau()
    callbacks = [keras.callbacks.TensorBoard("logs")]
    if is_chief:
        callbacks.append(keras.callbacks.LearningRateScheduler(lambda e, lr: lr))  # <-
        callbacks.append(plateau)  # <-
        callbacks += [Decay()]  # <-
    if not is_chief:
        callbacks.append(keras.callbacks.EarlyStopping())  # <-
    extra = [Stop()] if task_id == 0 else []  # <-
    model.fit(ds, epochs=2, callbacks=callbacks + extra)
    """, "TFP609")


def test_609_logging_callbacks_and_every_worker_callbacks_are_fine():
    check(MWMS_FIT + """
    class Printer(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            print(epoch, logs)

    callbacks = [keras.callbacks.LearningRateScheduler(lambda e, lr: lr), keras.callbacks.EarlyStopping()]
    if is_chief:
        callbacks += [keras.callbacks.TensorBoard("logs"), keras.callbacks.CSVLogger("log.csv"), Printer()]
        callbacks.append(keras.callbacks.ModelCheckpoint("ckpt"))
    model.fit(ds, epochs=2, callbacks=callbacks)
    """, "TFP609")


def test_609_needs_a_multi_worker_fit_every_worker_runs():
    check("""
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    mirrored = tf.distribute.MirroredStrategy()
    is_chief = strategy.cluster_resolver.task_id == 0
    with mirrored.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer="sgd", loss="mse")
    with strategy.scope():
        other = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        other.compile(optimizer="sgd", loss="mse")
    callbacks = []
    if is_chief:
        callbacks.append(keras.callbacks.LearningRateScheduler(lambda e, lr: lr))
    model.fit(x=None, epochs=1, callbacks=callbacks)
    if is_chief:
        other.fit(x=None, epochs=1, callbacks=callbacks)
    """, "TFP609")


def test_609_a_scheduler_no_multi_worker_fit_gets_is_left_alone():
    check(MWMS_FIT + """
    board = [keras.callbacks.TensorBoard("logs")]
    if is_chief:
        probe = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        probe.compile(optimizer="sgd", loss="mse")
        probe.fit(ds, epochs=1, callbacks=[keras.callbacks.LearningRateScheduler(lambda e, lr: lr)])
    model.fit(ds, epochs=2, callbacks=board)
    """, "TFP609")


# =========================================================================== TFP610

MWMS_SAVE = """
    import argparse
    import os
    import tensorflow as tf
    import tf_keras as keras
    from absl import flags

    FLAGS = flags.FLAGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_dir", default="out")
    args = parser.parse_args()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        checkpoint = tf.train.Checkpoint(model=model)
"""


def test_610_one_path_for_every_worker():
    check(MWMS_SAVE + """
    model.save("model.h5")  # <-
    model.save(os.path.join(args.model_dir, "final"))  # <-
    checkpoint.save(FLAGS.ckpt_dir + "/ckpt")  # <-
    tf.saved_model.save(model, f"{args.model_dir}/export")  # <-
    """, "TFP610")


def test_610_leaves_tfp604_its_shared_storage_and_split_paths_alone():
    src = MWMS_SAVE + """
    model.save("gs://bucket/model")
    task_id = strategy.cluster_resolver.task_id
    model.save(f"out/{task_id}")
    if task_id == 0:
        model.save("model.h5")
    else:
        model.save("/tmp/workertemp/model.h5")

    def somewhere():
        return os.environ["RUN_DIR"]

    model.save(somewhere())
    model.save(os.environ["RUN_DIR"])
    """
    check(src, "TFP610")
    assert hits(src, "TFP604") == [17]  # the bucket


def test_610_local_cluster_is_tfp604s_and_separate_machines_are_fine():
    local = """
    import json, os
    import tensorflow as tf
    import tf_keras as keras

    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["localhost:2222", "localhost:2223"]},
                                          "task": {"type": "worker", "index": 0}})
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
    model.save("/tmp/model")
    """
    assert hits(local, "TFP610") == [] and hits(local, "TFP604") == [11]
    apart = local.replace('"localhost:2222", "localhost:2223"', '"host-a.internal:2222", "host-b.internal:2222"')
    assert hits(apart, "TFP610") == [] and hits(apart, "TFP604") == []
    one_host = local.replace('"localhost:2222", "localhost:2223"', '"host-a.internal:2222", "host-a.internal:2223"')
    assert hits(one_host, "TFP610") == [11]


def test_610_command_line_query():
    from tfpar_lint.semantic.savepaths import command_line_value

    m = module("""
    import argparse
    from absl import flags

    def get_args():
        p = argparse.ArgumentParser()
        return p.parse_args()

    def main(opts):
        return opts.model_dir, cfg.model_dir, FLAGS.model_dir

    FLAGS = flags.FLAGS
    main(get_args())
    """)
    fn = next(f for f in m.functions if f.name == "main")
    (ret, order), = fn.returns
    assert [command_line_value(m, e.value, fn.scope, order) for e in ret.elements] == [True, False, True]


@pytest.mark.parametrize("code", ["TFP513", "TFP514", "TFP609", "TFP610"])
def test_new_rules_are_registered_with_a_page_and_fixtures(code):
    from pathlib import Path

    from tfpar_lint.registry import rules_by_code

    root = Path(__file__).resolve().parents[1]
    r = rules_by_code()[code]
    assert r.PROBE in ("loss", "lifecycle") and r.MARKERS and r.SUMMARY and r.FIX_HINT
    assert (root / "rules" / f"{code}.md").is_file()
    assert sorted(p.name for p in (root / "fixtures" / code).glob("bad*.py"))
