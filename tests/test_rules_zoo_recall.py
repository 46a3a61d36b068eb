"""Cases for the recall work on the bug zoo's families 5xx-7xx (fixtures/zoo/5xx_loss,
6xx_lifecycle, 7xx_execution): each shape a zoo program showed the rules missing, with the
correct twin that must stay silent.

``hits(src, code)`` lints the snippet with only ``code`` enabled (the pre-filter included) and
returns the lines it fires on; a line ending with ``# <-`` is where it must fire.
"""
from __future__ import annotations

import textwrap

from tfpar_lint.engine import lint_source


def hits(src: str, code: str, path: str = "t.py") -> list[int]:
    res = lint_source(textwrap.dedent(src), path, enabled=[code])
    assert res.error is None, res.error
    return sorted(f.line for f in res.findings if f.code == code)


def marked(src: str) -> list[int]:
    return [i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1) if ln.rstrip().endswith("# <-")]


def check(src: str, code: str) -> None:
    assert hits(src, code) == marked(src)


# ------------------------------------------------------------------ TFP501


CALL_FOR_EACH_REPLICA = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD()

def tower_fn(x, y):
    with tf.GradientTape() as tape:
        loss = {loss}
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

@tf.function
def step(x, y):
    strategy.extended.call_for_each_replica(tower_fn, args=(x, y))
"""


def test_tfp501_call_for_each_replica_without_strategy_run():
    bad = CALL_FOR_EACH_REPLICA.format(loss="tf.reduce_mean(tf.square(model(x) - y))  # <-")
    check(bad, "TFP501")
    good = CALL_FOR_EACH_REPLICA.format(loss="tf.reduce_sum(tf.square(model(x) - y)) * (1.0 / 16)")
    check(good, "TFP501")


# ------------------------------------------------------------------ TFP603 / TFP604

SAVED_MODEL = """
import os, tempfile
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    module = tf.Module()
    module.w = tf.Variable(tf.ones((3, 1)))
EXPORT = os.path.join(os.environ.get("AIP_MODEL_DIR", tempfile.gettempdir()), "export")
{save}
"""


def test_tfp604_saved_model_save_of_a_tf_module():
    check(SAVED_MODEL.format(save="tf.saved_model.save(module, EXPORT)  # <-"), "TFP604")
    good = SAVED_MODEL.format(save=(
        "task_id = strategy.cluster_resolver.task_id\n"
        "target = EXPORT if task_id == 0 else tempfile.mkdtemp()\n"
        "tf.saved_model.save(module, target)"))
    check(good, "TFP604")


EARLY_RETURN = """
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    v = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.SUM)
    ckpt = tf.train.Checkpoint(v=v)

def save(path):
    task_id = strategy.cluster_resolver.task_id
    if {test}:
        return
    ckpt.write(path){mark}
"""


def test_tfp603_membership_chief_tests():
    check(EARLY_RETURN.format(test="task_id not in (None, 0)", mark="  # <-"), "TFP603")
    check(EARLY_RETURN.format(test="task_id in (1, 2, 3)", mark="  # <-"), "TFP603")
    # only the chief returns early: every other task saves (not chief-only)
    check(EARLY_RETURN.format(test="task_id in (None, 0)", mark=""), "TFP603")
    # mixed options say nothing certain about the chief
    check(EARLY_RETURN.format(test="task_id in (0, 1)", mark=""), "TFP603")


# ------------------------------------------------------------------ instances of local classes

TRAINER = """
import tensorflow as tf

class Trainer:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()
        with self.strategy.scope():
            self.model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            self.opt = tf.keras.optimizers.SGD()

    def _replica_step(self, x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(self.model(x))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    {decorator}
    def distributed_step(self, x):
        return self.strategy.run(self._replica_step, args=(x,)){mark}

    def fit(self, dataset):
        for x in self.strategy.experimental_distribute_dataset(dataset):
            self.distributed_step(x)

{driver}
"""


def test_tfp701_method_of_an_instance_called_from_module_level():
    drivers = ("Trainer().fit(tf.data.Dataset.range(8).batch(4))",
               "trainer = Trainer()\ntrainer.fit(tf.data.Dataset.range(8).batch(4))")
    for driver in drivers:
        check(TRAINER.format(decorator="", mark="  # <-", driver=driver), "TFP701")
        check(TRAINER.format(decorator="@tf.function", mark="", driver=driver), "TFP701")


MWMS_TRAINER = """
import numpy as np
import tensorflow as tf

class Job:
    def __init__(self):
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(){mark}

    def train(self):
        return tf.data.Dataset.from_tensor_slices(np.ones((4, 1))).batch(2)

{driver}
"""


def test_tfp601_calls_of_one_statement_run_in_evaluation_order():
    # Job() (which builds the strategy) runs before .train() (which builds a dataset)
    check(MWMS_TRAINER.format(mark="", driver="print(Job().train())"), "TFP601")
    # here an op runs before the constructor
    check(MWMS_TRAINER.format(mark="  # <-", driver="x = tf.constant(1.0)\nprint(Job().train())"), "TFP601")


# ------------------------------------------------------------------ TFP701: other ways to run eagerly

EAGER_SWITCH = """
import tensorflow as tf
{switch}
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD()

@tf.function
def train_step(x):
    def fn(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return strategy.run(fn, args=(x,))

for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4)):
    train_step(x)
"""


def test_tfp701_run_functions_eagerly_left_on():
    check(EAGER_SWITCH.format(switch="tf.config.run_functions_eagerly(True)  # <-"), "TFP701")
    check(EAGER_SWITCH.format(switch=""), "TFP701")
    # switched off again (or not a literal): not judged
    check(EAGER_SWITCH.format(switch="tf.config.run_functions_eagerly(True)\ntf.config.run_functions_eagerly(False)"),
          "TFP701")
    check(EAGER_SWITCH.format(switch="import sys\ntf.config.run_functions_eagerly('--debug' in sys.argv)"), "TFP701")


PARTIAL_RUN = """
import functools
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD()

def step_fn(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

run_step = {wrap}
for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4)):
    run_step(args=(x,))
"""


def test_tfp701_partial_of_strategy_run_called_in_a_loop():
    check(PARTIAL_RUN.format(wrap="functools.partial(strategy.run, step_fn)  # <-"), "TFP701")
    check(PARTIAL_RUN.format(wrap="tf.function(functools.partial(strategy.run, step_fn))"), "TFP701")


# ------------------------------------------------------------------ TFP704: continue

LOOP_WITH_HANDLER = """
import logging
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD()

def fn(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

@tf.function
def step(x):
    return strategy.run(fn, args=(x,))

{loop}
"""

SKIP = """
for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4)):
    try:
        step(x)
    except Exception as exc:  # <-
        logging.warning("step failed: %s", exc)
        continue
"""

RETRY = """
it = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4)))
while True:
    try:
        for _ in range(2):
            step(next(it))
        break
    except Exception as exc:
        logging.warning("retrying: %s", exc)
        continue
"""


def test_tfp704_continue_skips_in_a_data_loop_but_retries_in_a_retry_loop():
    check(LOOP_WITH_HANDLER.format(loop=SKIP), "TFP704")
    check(LOOP_WITH_HANDLER.format(loop=RETRY), "TFP704")


# ------------------------------------------------------------------ results of local steps

METHOD_STEP = """
import tensorflow as tf

class Trainer:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()

    def _replica(self, x):
        return tf.nn.compute_average_loss(tf.reduce_sum(x, 1), global_batch_size=8)

    @tf.function
    def step(self, x):
        return self.strategy.run(self._replica, args=(x,))

    def epoch(self, dist_ds):
        for x in dist_ds:
            per_replica = self.step(x)
            {use}

trainer = Trainer()
"""


def test_tfp506_result_of_a_method_that_returns_strategy_run():
    check(METHOD_STEP.format(use="print(per_replica.numpy())  # <-"), "TFP506")
    check(METHOD_STEP.format(use='print(self.strategy.reduce("SUM", per_replica, axis=None).numpy())'), "TFP506")


def test_tfp505_mean_of_what_a_step_method_or_function_returns():
    check(METHOD_STEP.format(use='print(self.strategy.reduce("MEAN", per_replica, axis=None))  # <-'), "TFP505")
    check(METHOD_STEP.format(use='print(self.strategy.reduce("SUM", per_replica, axis=None))'), "TFP505")
    fn_step = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()

def replica_fn(x):
    return tf.reduce_sum(tf.square(x)) * (1.0 / 16)

@tf.function
def train_step(x):
    return strategy.run(replica_fn, args=(x,))

for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(32).batch(16)):
    loss = strategy.reduce(tf.distribute.ReduceOp.{op}, train_step(x), axis=None){mark}
"""
    check(fn_step.format(op="MEAN", mark="  # <-"), "TFP505")  # a sum over the distributed dataset's batch (16)
    fn_step = fn_step.replace("tf.reduce_sum(tf.square(x)) * (1.0 / 16)",
                              "tf.nn.compute_average_loss(tf.square(x), global_batch_size=16)")
    check(fn_step.format(op="MEAN", mark="  # <-"), "TFP505")
    check(fn_step.format(op="SUM", mark=""), "TFP505")


# ------------------------------------------------------------------ TFP501: tf.compat.v1.losses

V1_LOSS = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD()

def fn(x, y):
    with tf.GradientTape() as tape:
        loss = {loss}
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

@tf.function
def step(x, y):
    strategy.run(fn, args=(x, y))
"""


def test_tfp501_compat_v1_losses_average_by_default():
    check(V1_LOSS.format(loss="tf.compat.v1.losses.mean_squared_error(y, model(x))  # <-"), "TFP501")
    check(V1_LOSS.format(loss="tf.compat.v1.losses.log_loss(y, model(x), reduction=tf.compat.v1.losses.Reduction.MEAN)"
                              "  # <-"), "TFP501")
    none = "tf.compat.v1.losses.Reduction.NONE"
    check(V1_LOSS.format(loss=f"tf.nn.compute_average_loss(tf.compat.v1.losses.mean_squared_error(y, model(x), "
                              f"reduction={none}), global_batch_size=8)"), "TFP501")
    # TF 2's tf.losses is Keras': per-example losses, not a batch mean
    check(V1_LOSS.format(loss="tf.nn.compute_average_loss(tf.losses.mean_squared_error(y, model(x)), "
                              "global_batch_size=8)"), "TFP501")


# ------------------------------------------------------------------ TFP506: arithmetic

ARITH = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()

@tf.function
def eval_step(x):
    def fn(x):
        return tf.reduce_sum(x), tf.cast(tf.size(x), tf.float32)
    return strategy.run(fn, args=(x,))

total, count = 0.0, 0.0
for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4)):
{body}
"""


def test_tfp506_arithmetic_on_unpacked_per_replica_results():
    check(ARITH.format(body="    s, n = eval_step(x)\n    total += s  # <-\n    count = count + n  # <-"), "TFP506")
    good = ("    s, n = eval_step(x)\n"
            "    total += strategy.reduce('SUM', s, axis=None)\n"
            "    count = count + strategy.reduce('SUM', n, axis=None)")
    check(ARITH.format(body=good), "TFP506")


# ------------------------------------------------------------------ TFP504: weight decay by hand

DECAY = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD()

def l2_penalty(variables):
    return 1e-4 * tf.add_n([tf.nn.l2_loss(v) for v in variables])

def fn(x):
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(tf.reduce_sum(model(x), 1), global_batch_size=8)
        loss += {penalty}
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

@tf.function
def step(x):
    strategy.run(fn, args=(x,))
"""


def test_tfp504_l2_loss_of_the_model_variables():
    check(DECAY.format(penalty="l2_penalty(model.trainable_variables)  # <-"), "TFP504")
    check(DECAY.format(penalty="1e-4 * tf.add_n([tf.nn.l2_loss(w) for w in model.trainable_variables])  # <-"),
          "TFP504")
    check(DECAY.format(penalty="tf.nn.scale_regularization_loss(l2_penalty(model.trainable_variables))"), "TFP504")
    check(DECAY.format(penalty="l2_penalty(model.trainable_variables) / strategy.num_replicas_in_sync"), "TFP504")


# ------------------------------------------------------------------ loss_terms: tuple unpacking

TUPLE_HELPER = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(3)])
    opt = tf.keras.optimizers.SGD()

def compute_loss(labels, logits):
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
    return {loss}, acc

def fn(x, y):
    with tf.GradientTape() as tape:
        loss, acc = compute_loss(y, model(x))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss, acc

@tf.function
def step(x, y):
    return strategy.run(fn, args=(x, y))
"""


def test_tfp501_loss_unpacked_from_a_helper_tuple():
    bad = TUPLE_HELPER.format(loss="tf.reduce_mean(ce)")
    check(bad.replace("return tf.reduce_mean(ce), acc", "return tf.reduce_mean(ce), acc  # <-"), "TFP501")
    # the accuracy (a mean too) is the other item: it does not reach the gradient
    check(TUPLE_HELPER.format(loss="tf.nn.compute_average_loss(ce, global_batch_size=8)"), "TFP501")


# ------------------------------------------------------------------ num_replicas_in_sync kept on self

SELF_SCALE = """
import keras
import tensorflow as tf

class Trainer:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()
        self.scale = 1.0 / self.strategy.num_replicas_in_sync
        with self.strategy.scope():
            self.model = keras.Sequential([keras.layers.Dense(1)])
            self.opt = keras.optimizers.SGD()
            self.loss_fn = keras.losses.MeanSquaredError()

    def replica_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = {loss}
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))

    @tf.function
    def step(self, x, y):
        self.strategy.run(self.replica_step, args=(x, y))
"""


def test_replica_scale_kept_on_self():
    check(SELF_SCALE.format(loss="self.loss_fn(y, self.model(x)) * self.scale  # <-"), "TFP503")
    check(SELF_SCALE.format(loss="self.loss_fn(y, self.model(x))"), "TFP503")
    # a mean times 1/num_replicas_in_sync is a correct global average (equal shards): TFP501 stays silent
    check(SELF_SCALE.format(loss="tf.reduce_mean(tf.square(self.model(x) - y)) * self.scale"), "TFP501")
    check(SELF_SCALE.format(loss="tf.reduce_mean(tf.square(self.model(x) - y))  # <-"), "TFP501")


# ------------------------------------------------------------------ TFP602: where the late write is

TF_CONFIG_HELPERS = """
import json, os, sys
import tensorflow as tf

def setup_cluster(index):
    os.environ["TF_CONFIG"] = json.dumps({{"cluster": {{"worker": ["a:1", "b:2"]}}, "task": {{"index": index}}}}){m1}

def make_strategy():
    return tf.distribute.MultiWorkerMirroredStrategy()

{order}
"""


def test_tfp602_reported_at_the_late_helper_call():
    late = "strategy = make_strategy()\nsetup_cluster(int(sys.argv[1]))  # <-"
    check(TF_CONFIG_HELPERS.format(m1="", order=late), "TFP602")
    check(TF_CONFIG_HELPERS.format(m1="", order="setup_cluster(int(sys.argv[1]))\nstrategy = make_strategy()"),
          "TFP602")
    # the strategy built in the module code itself: the write inside the helper is what is late
    direct = "strategy = tf.distribute.MultiWorkerMirroredStrategy()\nsetup_cluster(int(sys.argv[1]))"
    check(TF_CONFIG_HELPERS.format(m1="  # <-", order=direct), "TFP602")


# ------------------------------------------------------------------ TFP603: ModelCheckpoint on the chief only

CALLBACK = """
import os, json, tempfile
import tensorflow as tf
import tf_keras as keras
strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ.get("TF_CONFIG", "{{}}")).get("task", {{"type": "worker", "index": 0}})
is_chief = task["type"] == "chief" or (task["type"] == "worker" and task["index"] == 0)
with strategy.scope():
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
{callbacks}
model.fit(tf.data.Dataset.range(8).map(lambda i: (tf.ones(3), 1.0)).batch(4), epochs=1, callbacks=callbacks)
"""


def test_tfp603_checkpoint_callback_only_on_the_chief():
    chief_only = ("callbacks = []\nif is_chief:\n"
                  "    callbacks.append(keras.callbacks.ModelCheckpoint(tempfile.mkdtemp()))  # <-")
    check(CALLBACK.format(callbacks=chief_only), "TFP603")
    every = ("path = tempfile.gettempdir() if is_chief else tempfile.mkdtemp()\n"
             "callbacks = [keras.callbacks.ModelCheckpoint(path)]")
    check(CALLBACK.format(callbacks=every), "TFP603")


# ------------------------------------------------------------------ loss terms kept in a dict

DICT_LOSSES = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    opt = tf.keras.optimizers.SGD()

def fn(x, y):
    with tf.GradientTape() as tape:
        out = model(x)
        losses = {{}}
        losses["pixel"] = {pixel}
        losses["feature"] = tf.nn.compute_average_loss(tf.square(out[:, 1] - y[:, 1]), global_batch_size=8)
        total = tf.add_n(list(losses.values()))
    opt.apply_gradients(zip(tape.gradient(total, model.trainable_variables), model.trainable_variables))

@tf.function
def step(x, y):
    strategy.run(fn, args=(x, y))
"""


def test_tfp501_loss_terms_stored_in_a_dict():
    check(DICT_LOSSES.format(pixel="tf.reduce_mean(tf.abs(out[:, 0] - y[:, 0]))  # <-"), "TFP501")
    check(DICT_LOSSES.format(pixel="tf.nn.compute_average_loss(tf.abs(out[:, 0] - y[:, 0]), global_batch_size=8)"),
          "TFP501")


# ------------------------------------------------------------------ containers kept on self

ACCUMULATOR = """
import tensorflow as tf

class GradientAccumulator:
    def __init__(self, variables):
        self.buffers = [tf.Variable(tf.zeros_like(v), trainable=False{extra}) for v in variables]

    def add(self, grads):
        for buf, g in zip(self.buffers, grads):
            buf.assign_add(g){mark}

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    accumulator = GradientAccumulator(model.trainable_variables)

@tf.function
def step(x):
    def fn(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        accumulator.add(tape.gradient(loss, model.trainable_variables))
    strategy.run(fn, args=(x,))
"""


def test_tfp507_variables_in_a_list_kept_on_self():
    check(ACCUMULATOR.format(extra="", mark="  # <-"), "TFP507")
    sync = (", synchronization=tf.VariableSynchronization.ON_READ,"
            " aggregation=tf.VariableAggregation.SUM")
    check(ACCUMULATOR.format(extra=sync, mark=""), "TFP507")


# ------------------------------------------------------------------ TFP505: other scalings, Mean metrics

GLOBAL_SUM = """
import tensorflow as tf
GLOBAL_BATCH = 16
strategy = tf.distribute.MirroredStrategy()
it = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(64).map(lambda i: tf.ones(3)).batch({batch})))

def fn(x):
    per_example = tf.reduce_sum(tf.square(x), axis=1)
    return tf.reduce_sum(per_example) * (1.0 / GLOBAL_BATCH)

@tf.function
def step():
    return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(fn, args=(next(it),)), axis=None){mark}
"""


def test_tfp505_sum_divided_by_the_distributed_datasets_batch():
    check(GLOBAL_SUM.format(batch="GLOBAL_BATCH", mark="  # <-"), "TFP505")
    check(GLOBAL_SUM.format(batch="16", mark="  # <-"), "TFP505")
    # divided by something else than the batch the dataset was distributed with: not judged
    check(GLOBAL_SUM.format(batch="8", mark=""), "TFP505")


MEAN_METRIC = """
import keras
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    train_loss = keras.metrics.Mean()

def fn(x):
    per_example = tf.reduce_sum(tf.square(x), axis=1)
    loss = tf.nn.compute_average_loss(per_example, global_batch_size=16)
    train_loss.update_state({value}){mark}
    return loss

@tf.function
def step(x):
    return strategy.run(fn, args=(x,))
"""


def test_tfp505_mean_metric_of_the_scaled_loss():
    check(MEAN_METRIC.format(value="loss", mark="  # <-"), "TFP505")
    check(MEAN_METRIC.format(value="loss * strategy.num_replicas_in_sync", mark=""), "TFP505")
    check(MEAN_METRIC.format(value="per_example", mark=""), "TFP505")
