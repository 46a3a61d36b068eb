"""Recall cases for TFP3xx/TFP4xx taken from the bug zoo's shapes (fixtures/zoo/3xx_threads,
fixtures/zoo/4xx_randomness): each test holds a bad snippet (must be reported) and, where the
fix is a near miss, the correct snippet (must stay silent)."""
from __future__ import annotations

import textwrap

from tfpar_lint.engine import lint_source
from tfpar_lint.registry import all_rules, default_codes

ALL = [r.CODE for r in all_rules()]


def found(src: str, enabled=None) -> list[tuple[int, str]]:
    res = lint_source(textwrap.dedent(src), "t.py", enabled=enabled or sorted(default_codes()))
    assert res.error is None, res.error
    return sorted((f.line, f.code) for f in res.findings)


RNG_HEAD = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
"""


# --------------------------------------------------------------------------- TFP402
def test_constant_seed_of_dropout_without_the_word_random():
    """tf.nn.dropout / stateless_dropout files need not contain "random" (pre-filter)."""
    src = RNG_HEAD + """
def replica_fn(h):
    return tf.nn.dropout(h, rate=0.5, seed=3)

strategy.run(replica_fn, args=(tf.ones([4]),))
"""
    assert found(src) == [(6, "TFP402")]


def test_stateless_categorical_seed_is_its_third_argument():
    """stateless_categorical(logits, num_samples, seed): the sample count is not the seed."""
    src = RNG_HEAD + """
def act(logits):
    rid = tf.distribute.get_replica_context().replica_id_in_sync_group
    seed = tf.random.experimental.stateless_fold_in(tf.constant([3, 0], tf.int64), tf.cast(rid, tf.int64))
    return tf.random.stateless_categorical(logits, 16, seed=seed)

strategy.run(act, args=(tf.zeros([1, 6]),))
"""
    assert found(src) == []
    assert found(src.replace("16, seed=seed", "16, [1, 2]")) == [(8, "TFP402")]


def test_constant_seed_followed_through_names_items_attributes_and_run_args():
    """A seed held in a module constant, an unpacked pair, a config dict, ``self.seed`` or an
    ``args=`` element of ``strategy.run`` is as constant as a literal."""
    src = RNG_HEAD + """
SEED = 42
seed_a, seed_b = 11, 22
CONFIG = {"noise_seed": 7, "lr": 0.01}

def f1(x):
    return tf.random.normal([2], seed=SEED)

def f2(x):
    return tf.random.stateless_normal([2], seed=[seed_a, seed_b])

def f3(x):
    return tf.random.uniform([2], seed=CONFIG["noise_seed"])

def f4(x, seed):
    return tf.random.normal([2], seed=seed)

class Aug:
    def __init__(self, strategy):
        self.strategy = strategy
        self.seed = 1234

    def replica(self, x):
        return tf.random.uniform([2], seed=self.seed)

    def __call__(self, x):
        return self.strategy.run(self.replica, args=(x,))

for f in (f1, f2, f3):
    strategy.run(f, args=(1.0,))
strategy.run(f1, args=(1.0,))
strategy.run(f2, args=(1.0,))
strategy.run(f3, args=(1.0,))
strategy.run(f4, args=(1.0, 7))
Aug(strategy)(1.0)
"""
    assert found(src) == [(10, "TFP402"), (13, "TFP402"), (16, "TFP402"), (19, "TFP402"), (27, "TFP402")]


def test_seed_that_varies_is_not_constant():
    src = RNG_HEAD + """
import os
SEED = int(os.environ.get("SEED", "0"))

def f4(x, seed):
    return tf.random.normal([2], seed=seed)

def f5(x):
    return tf.random.normal([2], seed=SEED)

for step in range(3):
    strategy.run(f4, args=(1.0, step))
strategy.run(f5, args=(1.0,))
"""
    assert found(src) == []


def test_keras_random_ops_seed_generators_and_seeded_initializers_in_replica_fn():
    """Keras 3 random ops with an int seed, a SeedGenerator(42) made per replica, and a seeded
    initializer called per replica all give every replica the same numbers (TF 2.21, Keras 3.15)."""
    src = RNG_HEAD + """
import keras
import tf_keras

init = tf.keras.initializers.GlorotUniform(seed=0)

def replica_fn(x):
    a = keras.random.normal((4,), seed=1)
    b = keras.random.dropout(x, 0.5, seed=7)
    sg = keras.random.SeedGenerator(42)
    c = tf_keras.initializers.RandomNormal(stddev=0.01, seed=1)(shape=(4,))
    d = init((4, 4))
    return a, b, sg, c, d

strategy.run(replica_fn, args=(tf.ones([4]),))
"""
    assert found(src) == [(11, "TFP402"), (12, "TFP402"), (13, "TFP402"), (14, "TFP402"), (15, "TFP402")]


def test_keras_draws_without_constant_seed_stay_silent():
    src = RNG_HEAD + """
import keras

with strategy.scope():
    rng = tf.random.Generator.from_seed(0)
    model = keras.Sequential([keras.layers.Dense(2, kernel_initializer=keras.initializers.GlorotUniform(seed=0))])

def replica_fn(x, step):
    init = keras.initializers.GlorotUniform(seed=step)
    return model(x), init((2, 2)), rng.normal([2])

strategy.run(replica_fn, args=(tf.ones([1, 4]), tf.constant(0)))
"""
    assert found(src) == []


# --------------------------------------------------------------------------- TFP301
def test_thread_rmw_through_dict_item_lazy_global_helper_and_keras3_assign_add():
    src = """
import threading
import keras
import tensorflow as tf

stats = {"correct": tf.Variable(0.0)}
total = None
step = keras.Variable(0.0)
counter = tf.Variable(0)

def setup():
    global total
    total = tf.Variable(0.0)

def increment(n):
    for _ in range(n):
        counter.assign(counter + 1)

def worker():
    stats["correct"].assign(stats["correct"] + 3.0)
    total.assign(total + 1.0)
    step.assign_add(1.0)

setup()
threads = [threading.Thread(target=worker) for _ in range(4)]
threads += [threading.Thread(target=lambda: increment(10)) for _ in range(4)]
"""
    assert found(src) == [(17, "TFP301"), (20, "TFP301"), (21, "TFP301"), (22, "TFP301")]


def test_tf_variable_assign_add_and_thread_local_helpers_stay_silent():
    src = """
import threading
import tensorflow as tf

counter = tf.Variable(0)

def bump(v):
    v.assign(v + 1)

def worker():
    counter.assign_add(1)
    mine = tf.Variable(0)
    bump(mine)

threads = [threading.Thread(target=worker) for _ in range(4)]
"""
    assert found(src) == []


def test_threading_timer_function_is_a_thread_target():
    src = """
import threading
import tensorflow as tf

flushed = tf.Variable(0.0)

def flush(pending):
    flushed.assign(flushed + pending)

def flush_ok(pending):
    flushed.assign_add(pending)

timers = [threading.Timer(0.01, flush, args=(2.0,)) for _ in range(4)]
timers += [threading.Timer(0.01, function=flush_ok, args=(2.0,)) for _ in range(4)]
"""
    assert found(src) == [(8, "TFP301")]


def test_variable_reaching_a_thread_function_through_its_arguments():
    """Thread(target=f, args=(v,)), functools.partial(f, v) given to a pool or a Thread, and
    executor.submit(f, v): the parameter holds the shared variable."""
    src = """
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
import tensorflow as tf

best = tf.Variable(-1.0)
hist = tf.Variable(tf.zeros([4]))
seen = tf.Variable(0)

def search(var, score):
    var.assign(tf.maximum(var, score))

def count(h, batch):
    h.assign(h.numpy() + 1.0)

def bump(v, step):
    v.assign(v + step)

threads = [threading.Thread(target=search, args=(best, 0.5)) for _ in range(4)]
with ThreadPoolExecutor(4) as pool:
    list(pool.map(functools.partial(count, hist), range(8)))
    futures = [pool.submit(bump, seen, 1) for _ in range(4)]
"""
    assert found(src) == [(12, "TFP301"), (15, "TFP301"), (18, "TFP301")]


def test_thread_function_arguments_that_are_not_shared_variables_stay_silent():
    src = """
import threading
import tensorflow as tf

def search(var, score):
    var.assign(tf.maximum(var, score))

def run_one():
    mine = tf.Variable(-1.0)
    search(mine, 0.5)

threads = [threading.Thread(target=run_one) for _ in range(4)]
"""
    assert found(src) == []
    # handed to something that may call it with anything: its parameter stays unknown
    shared = src.replace("threads = [", "best = tf.Variable(0.0)\nJOBS = {'search': search}\n"
                         "threads = [threading.Thread(target=search, args=(best, 0.5)) for _ in range(2)] + [")
    assert found(shared) == []
    assert found(shared.replace("JOBS = {'search': search}\n", "")) == [(6, "TFP301")]


def test_model_variables_and_zip_loops_in_thread_workers():
    """A3C / Hogwild workers: ``for gv, g in zip(global_model.trainable_variables, grads)`` and
    ``for w, g in zip(params, grads)`` write shared variables; Keras 3 model variables'
    ``assign_sub`` is not atomic, a tf.Variable's is."""
    src = """
import threading
import tensorflow as tf

params = [tf.Variable(tf.zeros([3])), tf.Variable(tf.zeros([]))]

def build():
    return tf.keras.Sequential([tf.keras.layers.Dense(2)])

class Worker(threading.Thread):
    def __init__(self, global_net):
        super().__init__()
        self.global_net = global_net

    def run(self):
        grads = [tf.ones([4, 2]), tf.ones([2])]
        for gv, g in zip(self.global_net.trainable_variables, grads):
            gv.assign(gv - 0.1 * g)
        for gv, g in zip(self.global_net.trainable_variables, grads):
            gv.assign_sub(0.1 * g)
        for w, g in zip(params, grads):
            w.assign(w - 0.1 * g)
        for w, g in zip(params, grads):
            w.assign_sub(0.1 * g)
        local = build()
        for lv in local.trainable_variables:
            lv.assign(lv * 0.5)

net = build()
workers = [Worker(net) for _ in range(4)]
"""
    assert found(src) == [(18, "TFP301"), (20, "TFP301"), (22, "TFP301")]


def test_set_weights_round_trip_and_shared_keras3_optimizer_in_threads():
    src = """
import threading
import keras
import tf_keras
import tensorflow as tf

shared = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
opt = keras.optimizers.Adam(1e-3)
opt2 = tf_keras.optimizers.Adam(1e-3)
lock = threading.Lock()

def push():
    w = shared.get_weights()
    w = [x + 0.01 for x in w]
    shared.set_weights(w)

def step(grads):
    opt.apply_gradients(zip(grads, shared.trainable_variables))
    opt2.apply_gradients(zip(grads, shared.trainable_variables))
    with lock:
        opt.apply_gradients(zip(grads, shared.trainable_variables))
    local = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    local.set_weights(shared.get_weights())

threads = [threading.Thread(target=push) for _ in range(4)]
threads += [threading.Thread(target=step, args=([],)) for _ in range(4)]
"""
    # TFP301: the Keras 3 optimizer's step counter; the tf_keras optimizer's counter is atomic, but
    # its unlocked step on the shared variables from several threads is TFP302's (Hogwild)
    assert found(src) == [(15, "TFP301"), (18, "TFP301"), (19, "TFP302")]


def test_bound_method_of_an_instance_and_layers_of_a_model_in_threads():
    src = """
from multiprocessing.dummy import Pool
import threading
import tensorflow as tf
import tf_keras

class ReplayStats:
    def __init__(self):
        self.seen = tf.Variable(0)

    def ingest(self, n):
        self.seen.assign(self.seen + 1)

stats = ReplayStats()
pool = Pool(4)
results = [pool.apply_async(stats.ingest, (200,)) for _ in range(6)]

model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(2,))])
layer = model.layers[0]

def tune():
    layer.kernel.assign(layer.kernel - 0.1)
    layer.kernel.assign_sub(0.1)

threads = [threading.Thread(target=tune) for _ in range(4)]
"""
    assert found(src) == [(12, "TFP301"), (22, "TFP301")]


def test_class_attribute_variable_and_seed_reached_through_self():
    src = """
import threading
import tensorflow as tf

class Counter(threading.Thread):
    mine = tf.Variable(0.0)

    def run(self):
        self.mine.assign(self.mine + 1.0)

class Fresh(threading.Thread):
    def run(self):
        self.mine = tf.Variable(0.0)
        self.mine.assign(self.mine + 1.0)

threads = [Counter() for _ in range(4)] + [Fresh() for _ in range(4)]
"""
    assert found(src) == [(9, "TFP301")]
    src = RNG_HEAD + """
class Aug:
    seed = 1234

    def __init__(self, strategy):
        self.strategy = strategy

    def replica(self, x):
        return tf.random.uniform([2], seed=self.seed)

    def __call__(self, x):
        return self.strategy.run(self.replica, args=(x,))

Aug(strategy)(1.0)
"""
    assert found(src) == [(12, "TFP402")]


def test_tf1_session_runs_of_read_modify_write_ops_from_threads():
    src = """
import threading
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
counter = tf.Variable(0)
bump = counter.assign(counter + 1)
bump_ok = counter.assign_add(1)
score = tf.Variable(0.0)
new_value = tf.placeholder(tf.float32, [])
set_score = score.assign(new_value)
lock = threading.Lock()

def worker(sess):
    sess.run(bump)
    sess.run(bump_ok)
    current = sess.run(score)
    sess.run(set_score, feed_dict={new_value: current + 1.0})
    sess.run(set_score, feed_dict={new_value: 5.0})
    with lock:
        sess.run(bump)

with tf.Session() as sess:
    threads = [threading.Thread(target=worker, args=(sess,)) for _ in range(4)]
"""
    assert found(src) == [(15, "TFP301"), (18, "TFP301")]


def test_shared_keras3_metric_updated_from_threads():
    src = """
import threading
from concurrent.futures import ThreadPoolExecutor
import tensorflow as tf
import tf_keras

val_loss = tf.keras.metrics.Mean()
legacy = tf_keras.metrics.Mean()
lock = threading.Lock()

def evaluate(shard):
    val_loss.update_state(1.0)
    legacy.update_state(1.0)
    with lock:
        val_loss.update_state(2.0)
    mine = tf.keras.metrics.Mean()
    mine.update_state(3.0)

with ThreadPoolExecutor(4) as pool:
    list(pool.map(evaluate, range(4)))
"""
    assert found(src) == [(12, "TFP301")]


def test_tf_module_variables_in_thread_actors():
    src = """
import threading
import tensorflow as tf

class Policy(tf.Module):
    def __init__(self):
        super().__init__()
        self.b = tf.Variable(tf.zeros([1]))

class Actor(threading.Thread):
    def __init__(self, policy):
        super().__init__()
        self.policy = policy

    def run(self):
        for v in self.policy.trainable_variables:
            v.assign(v - 0.01)
        mine = Policy()
        for v in mine.trainable_variables:
            v.assign(v - 0.01)

actors = [Actor(Policy()) for _ in range(2)]
shared = Policy()
actors += [Actor(shared) for _ in range(2)]
"""
    assert found(src) == [(17, "TFP301")]


def test_safe_fix_only_for_tf_variables_not_keras3_or_other_writes():
    """``v.assign(v + 1)`` -> ``v.assign_add(1)`` is atomic on a tf.Variable only: Keras 3's
    assign_add is a read and a write, so Keras 3 variables (and set_weights findings) get no fix."""
    from tfpar_lint import engine

    src = textwrap.dedent("""
    import threading
    import keras
    import tensorflow as tf

    counter = tf.Variable(0)
    step = keras.Variable(0.0)

    def worker():
        counter.assign(counter + 1)
        step.assign(step + 1.0)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    """)
    res = engine.lint_source(src, "t.py", enabled=["TFP301"])
    assert sorted(f.line for f in res.findings) == [10, 11]
    assert [f.line for f in res.findings if f.fix] == [10]
    out = engine.fix_source(src, "t.py", enabled=["TFP301"])
    assert "counter.assign_add(1)" in out.source and "step.assign(step + 1.0)" in out.source


def test_seed_the_same_on_every_replica_without_being_a_literal():
    """``seed=args.seed`` (a module-level argparse namespace) and ``seed=tf.stack([step_id, 0])``
    with a step id passed to every replica alike: no replica id, so identical draws."""
    src = RNG_HEAD + """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=3)
args = parser.parse_args()

def f1(x):
    return x + tf.random.normal([2], seed=args.seed)

def f2(x, step_id):
    return x + tf.random.stateless_normal([2], seed=tf.stack([step_id, 0]))

@tf.function
def step(x, step_id):
    strategy.run(f1, args=(x,))
    return strategy.run(f2, args=(x, step_id))

step(tf.zeros([2]), tf.constant(5, tf.int64))
"""
    assert found(src) == [(11, "TFP402"), (14, "TFP402")]


def test_seeds_that_differ_per_replica_stay_silent():
    src = RNG_HEAD + """
with strategy.scope():
    rng = tf.random.Generator.from_seed(0)
dist = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(2)))

def f1(x, step_id):
    rid = tf.distribute.get_replica_context().replica_id_in_sync_group
    seed = tf.random.experimental.stateless_fold_in(tf.stack([step_id, 0]), tf.cast(rid, tf.int64))
    return tf.random.stateless_normal([2], seed=seed)

def f2(batch):
    return tf.random.stateless_normal([2], seed=tf.stack([batch[0], 0]))

def f3(x):
    return tf.random.stateless_normal([2], seed=rng.make_seeds(1)[:, 0])

for step_id in range(3):
    strategy.run(f1, args=(1.0, tf.constant(step_id, tf.int64)))
    strategy.run(f2, args=(next(dist),))
    strategy.run(f3, args=(1.0,))
"""
    assert found(src) == []
