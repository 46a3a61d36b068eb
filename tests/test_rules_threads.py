"""The thread family on asynchronous-RL code (issue 18): TF1 graph-mode sessions whose update ops
are built once and run from N threads, Keras 2 training functions, TF2 eager optimizer steps; how
threads start (lambdas in loops, bound methods, Thread subclasses, executors, other modules) and
what they share; late-bound loop variables (TFP303); locks made per thread (TFP304); and the traps
that must stay silent, each next to the mistake it resembles (so that each test can fail)."""
from __future__ import annotations

import textwrap
from pathlib import Path

from tfpar_lint import engine
from tfpar_lint.engine import lint_source
from tfpar_lint.registry import all_rules

ALL = [r.CODE for r in all_rules()]


def found(src: str) -> list[tuple[int, str]]:
    res = lint_source(textwrap.dedent(src), "t.py", enabled=ALL)
    assert res.error is None, res.error
    return sorted((f.line, f.code) for f in res.findings)


def messages(src: str) -> dict[tuple[int, str], str]:
    res = lint_source(textwrap.dedent(src), "t.py", enabled=ALL)
    return {(f.line, f.code): f.message for f in res.findings}


# A TF1 A3C program in the shape of the labelled repositories: a global network built once, one
# ACNet per worker whose constructor builds the push (apply_gradients on the global variables) and
# the pull (assign of the worker's own variables), workers started from a loop.  {push} and {start}
# are filled by each test; {extra} adds the trap under test.
TF1_A3C = '''
import threading
import tensorflow as tf

N_WORKERS = 4
GLOBAL_EP = 0
{extra_globals}

class ACNet(object):
    def __init__(self, scope, globalAC=None):
        with tf.variable_scope(scope):
            self.s = tf.placeholder(tf.float32, [None, 4], "S")
            self.params = self._build(scope)
        if globalAC is not None:
            self.grads = tf.gradients(tf.reduce_sum(self.s), self.params)
            self.pull_op = [l.assign(g) for l, g in zip(self.params, globalAC.params)]
            self.push_op = OPT.apply_gradients(zip(self.grads, globalAC.params))

    def _build(self, scope):
        tf.layers.dense(self.s, 2)
        return tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope=scope)

    def push(self, feed):
        {push}

    def pull(self):
        SESS.run(self.pull_op)


class Worker(object):
    def __init__(self, name, globalAC):
        self.name = name
        self.AC = ACNet(name, globalAC)

    def work(self):
        global GLOBAL_EP
        while not COORD.should_stop() and GLOBAL_EP < 100:
            self.AC.push({{self.AC.s: None}})
            self.AC.pull()
            GLOBAL_EP += 1


SESS = tf.Session()
with tf.device("/cpu:0"):
    OPT = tf.train.RMSPropOptimizer(0.001)
    GLOBAL_AC = ACNet("global")
    workers = [Worker("w%i" % i, GLOBAL_AC) for i in range(N_WORKERS)]
COORD = tf.train.Coordinator()
SESS.run(tf.global_variables_initializer())
threads = []
for worker in workers:
    {start}
    threads.append(t)
COORD.join(threads)
'''
UNLOCKED_PUSH = "SESS.run(self.push_op, feed)"
LOCKED_PUSH = "with PUSH_LOCK:\n            SESS.run(self.push_op, feed)"
BOUND_START = "t = threading.Thread(target=worker.work)\n    t.start()"
DEFAULT_START = "t = threading.Thread(target=lambda worker=worker: worker.work())\n    t.start()"


def a3c(push=UNLOCKED_PUSH, start=BOUND_START, extra_globals="") -> str:
    return TF1_A3C.format(push=push, start=start, extra_globals=extra_globals)


def _line(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1) if text in ln)


# --------------------------------------------------------------------------- TF1 graph mode
def test_tf1_push_op_built_per_worker_and_run_from_threads():
    src = a3c()
    got = found(src)
    assert got == [(_line(src, "SESS.run(self.push_op, feed)"), "TFP302")], got
    msg = messages(src)[got[0]]
    assert "globalAC.params" in msg and "# noqa: TFP302" in msg and "Hogwild" in msg, msg


def test_tf1_push_under_one_shared_lock_is_silent():
    src = a3c(push=LOCKED_PUSH, extra_globals="PUSH_LOCK = threading.Lock()")
    assert found(src) == []


def test_tf1_minimize_op_unpacked_from_a_tuple_and_run_by_optimizer_threads():
    """The op is returned by a helper as part of a tuple kept in ``self.graph`` and unpacked where it
    runs; the model's owner is a module global; Thread subclasses built in a comprehension."""
    src = """
import threading
import tensorflow as tf

class Brain:
    def __init__(self):
        self.session = tf.Session()
        self.graph = self._build_graph()

    def _build_graph(self):
        s_t = tf.placeholder(tf.float32, shape=(None, 4))
        loss = tf.reduce_mean(tf.layers.dense(s_t, 1))
        minimize = tf.train.RMSPropOptimizer(0.01).minimize(loss)
        return s_t, minimize

    def optimize(self, batch):
        s_t, minimize = self.graph
        self.session.run(minimize, feed_dict={s_t: batch})

class Optimizer(threading.Thread):
    def run(self):
        while True:
            brain.optimize(None)

brain = Brain()
opts = [Optimizer() for i in range(2)]
for o in opts:
    o.start()
"""
    assert found(src) == [(18, "TFP302")]


def test_tf1_trainer_threads_added_one_at_a_time_by_a_method_called_in_a_loop():
    """GA3C-style: one model whose `minimize` op (no var_list: every trainable variable) is run by
    trainer threads, each made by `add_trainer()`, which the server calls in a loop."""
    src = """
import threading
import tensorflow as tf

class NetworkVP:
    def __init__(self):
        self.sess = tf.Session()
        self.x = tf.placeholder(tf.float32, [None, 4])
        self.cost = tf.reduce_sum(tf.layers.dense(self.x, 1))
        self.train_op = tf.train.RMSPropOptimizer(0.001).minimize(self.cost)

    def train(self, x):
        self.sess.run(self.train_op, feed_dict={self.x: x})

class ThreadTrainer(threading.Thread):
    def __init__(self, server):
        super().__init__()
        self.server = server

    def run(self):
        while True:
            self.server.model.train(None)

class Server:
    def __init__(self):
        self.model = NetworkVP()
        self.trainers = []

    def add_trainer(self):
        self.trainers.append(ThreadTrainer(self))
        self.trainers[-1].start()

    def main(self):
        {loop}

Server().main()
"""
    assert found(src.replace("{loop}", "while len(self.trainers) < 4:\n            self.add_trainer()")) == \
        [(13, "TFP302")]
    # one trainer: nothing runs the op at the same time
    assert found(src.replace("{loop}", "self.add_trainer()")) == []


def test_tf1_session_of_each_thread_is_its_own():
    """A session (and graph) the thread makes for itself shares nothing with the other threads."""
    src = """
import threading
import tensorflow as tf

def work():
    with tf.Graph().as_default():
        x = tf.Variable(0.0)
        step = tf.train.GradientDescentOptimizer(0.1).minimize(x * x)
        sess = tf.Session()
        sess.run(step)

threads = [threading.Thread(target=work) for _ in range(4)]
"""
    assert found(src) == []


def test_pushing_a_threads_own_weights_over_the_global_ones():
    """A3C that pushes weights instead of gradients: `g.assign(l)` (graph op, and eager) copies a
    worker's own values over the shared ones; the pull `l.assign(g)` writes the worker's own."""
    src = """
import threading
import tensorflow as tf

def network(scope):
    with tf.variable_scope(scope):
        return [tf.get_variable("w", [4, 2])]

class Worker:
    def __init__(self, name, global_params):
        self.params = network(name)
        self.push = [g.assign(l) for g, l in zip(global_params, self.params)]
        self.pull = [l.assign(g) for l, g in zip(self.params, global_params)]

    def work(self, sess):
        sess.run(self.pull)
        sess.run(self.push)

global_params = network("global")
workers = [Worker("w%d" % i, global_params) for i in range(4)]
sess = tf.Session()
threads = [threading.Thread(target=w.work, args=(sess,)) for w in workers]

class EagerWorker(threading.Thread):
    def __init__(self, shared):
        super().__init__()
        self.shared = shared
        self.own = tf.Variable(0.0)

    def run(self):
        self.own.assign(self.shared)
        self.shared.assign(self.own)

eager = [EagerWorker(tf.Variable(0.0)) for _ in range(4)]
"""
    assert found(src) == [(17, "TFP302")]
    # the eager workers each get a variable of their own (made in the loop): nothing is shared;
    # one variable handed to all of them is
    shared = src.replace("eager = [EagerWorker(tf.Variable(0.0)) for _ in range(4)]",
                         "shared = tf.Variable(0.0)\neager = [EagerWorker(shared) for _ in range(4)]")
    assert found(shared) == [(17, "TFP302"), (32, "TFP302")]


# --------------------------------------------------------------------------- Keras 2 updates
KERAS2 = """
import threading
import keras.backend as K
from keras.models import Model
from keras.layers import Dense, Input
from keras.optimizers import RMSprop

class Actor:
    def __init__(self):
        inp = Input((4,))
        self.model = Model(inp, Dense(2)(inp))
        self.opt = RMSprop(lr=0.001)
        self.action_pl = K.placeholder(shape=(None, 2))

    def optimizer(self):
        loss = K.sum(self.action_pl * self.model.output)
        updates = self.opt.get_updates(params=self.model.trainable_weights, loss=loss)
        return K.function([self.model.input, self.action_pl], [], updates=updates)

class Agent(threading.Thread):
    def __init__(self, actor, train_fn):
        threading.Thread.__init__(self)
        self.actor = actor
        self.train_fn = train_fn

    def run(self):
        for _ in range(10):
            {call}

actor = {actor}
train_fn = actor.optimizer()
agents = [Agent(actor, train_fn) for _ in range(4)]
for a in agents:
    a.start()
"""


def test_keras2_training_function_with_get_updates_called_from_thread_subclasses():
    src = KERAS2.format(call="self.train_fn([None, None])", actor="Actor()")
    assert found(src) == [(28, "TFP302")]
    assert "Keras training function" in messages(src)[(28, "TFP302")]


def test_keras2_training_function_of_each_thread_is_silent():
    """Each agent builds its own actor and training function: nothing is shared."""
    src = KERAS2.format(call="self.train_fn([None, None])", actor="Actor()").replace(
        "        self.train_fn = train_fn", "        self.train_fn = Actor().optimizer()")
    assert found(src) == []


def test_train_on_batch_and_fit_on_a_shared_model_from_a_pool():
    src = """
from concurrent.futures import ThreadPoolExecutor
import tf_keras

model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")

def learn(batch):
    model.train_on_batch(batch, batch)

def learn_own(batch):
    own = tf_keras.Sequential([tf_keras.layers.Dense(1)])
    own.compile(optimizer="sgd", loss="mse")
    own.fit(batch, batch)

with ThreadPoolExecutor(4) as pool:
    pool.map(learn, range(8))
    pool.map(learn_own, range(8))
"""
    assert found(src) == [(9, "TFP302")]


# --------------------------------------------------------------------------- TF2 eager
EAGER = """
import threading
import tensorflow as tf
import tf_keras

class Worker(threading.Thread):
    def __init__(self, global_model, opt):
        super().__init__()
        self.global_model = global_model
        self.opt = opt
        self.local_model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
        self.local_opt = tf_keras.optimizers.SGD(0.1)

    def run(self):
        grads = []
        self.local_opt.apply_gradients(zip(grads, self.local_model.trainable_weights))
        {push}
        self.local_model.set_weights(self.global_model.get_weights())

class MasterAgent:
    def __init__(self):
        self.opt = tf.compat.v1.train.AdamOptimizer(0.001, use_locking=True)
        self.global_model = tf_keras.Sequential([tf_keras.layers.Dense(1)])

    def train(self):
        workers = [Worker(self.global_model, self.opt) for _ in range(4)]
        for w in workers:
            w.start()

def main():
    MasterAgent().train()

main()
"""


def test_eager_tf1_optimizer_steps_the_global_model_from_worker_threads():
    """Objects handed to every worker's constructor are shared; the worker's own model is not."""
    src = EAGER.format(push="self.opt.apply_gradients(zip(grads, self.global_model.trainable_weights))")
    assert found(src) == [(17, "TFP302")]


def test_lock_held_by_a_caller_covers_the_step_and_one_unlocked_path_does_not():
    src = """
import threading
import tf_keras

LOCK = threading.Lock()

class Learner:
    def __init__(self):
        self.model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
        self.opt = tf_keras.optimizers.SGD(0.1)

    def train(self, grads):
        self.opt.apply_gradients(zip(grads, self.model.trainable_weights))

class Worker(threading.Thread):
    def __init__(self, shared):
        super().__init__()
        self.shared = shared
        self.own = Learner()

    def run(self):
        self.own.train([])
        with LOCK:
            self.shared.train([])
        {other}

shared = Learner()
workers = [Worker(shared) for _ in range(4)]
"""
    assert found(src.format(other="pass")) == []
    # a second path to the same step without the lock: the step races again
    assert found(src.format(other="self.shared.train([])")) == [(13, "TFP302")]


# --------------------------------------------------------------------------- how threads start
def test_thread_target_in_another_module_of_the_project(tmp_path: Path):
    """The target module has no threading import; the threads are started by a module that
    imports it, handing `self` (the agent) in `args=`; the update is a Keras 2 training function
    made by a method of a third module's class."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "worker.py").write_text(textwrap.dedent("""
        episode = 0

        def training_thread(agent, n):
            global episode
            while episode < n:
                agent.train_models([], [])
                episode += 1
        """))
    (tmp_path / "pkg" / "actor.py").write_text(textwrap.dedent("""
        import keras.backend as K
        from keras.optimizers import RMSprop

        class Actor:
            def __init__(self, model):
                self.model = model
                self.rms = RMSprop(lr=0.001)

            def optimizer(self, loss):
                updates = self.rms.get_updates(self.model.trainable_weights, [], loss)
                return K.function([self.model.input], [], updates=updates)
        """))
    (tmp_path / "pkg" / "agent.py").write_text(textwrap.dedent("""
        import threading
        from keras.models import Sequential
        from keras.layers import Dense
        from .actor import Actor
        from .worker import training_thread

        class A3C:
            def __init__(self):
                self.actor = Actor(Sequential([Dense(2)]))
                self.a_opt = self.actor.optimizer(None)

            def train_models(self, states, actions):
                self.a_opt([states, actions])

            def train(self, n):
                threads = [threading.Thread(target=training_thread, args=(self, n)) for i in range(4)]
                for t in threads:
                    t.start()

        def main():
            A3C().train(100)
        """))
    files = sorted(str(p) for p in (tmp_path / "pkg").glob("*.py"))
    results = engine.lint_paths(files, enabled=ALL, jobs=1)
    got = sorted((Path(r.path).name, f.line, f.code) for r in results for f in r.findings)
    assert got == [("agent.py", 14, "TFP302"), ("worker.py", 7, "TFP302")], got


# --------------------------------------------------------------------------- TFP303
def test_late_bound_loop_variable_started_in_the_loop():
    src = a3c(start="job = lambda: worker.work()\n    t = threading.Thread(target=job)\n    t.start()")
    got = found(src)
    assert (_line(src, "job = lambda: worker.work()"), "TFP303") in got, got


def test_late_bound_shapes_nested_def_comprehension_and_submit():
    src = """
import threading
from concurrent.futures import ThreadPoolExecutor

def work(x):
    return x

def start(items):
    for item in items:
        def job():
            work(item)
        threading.Thread(target=job).start()

threads = [threading.Thread(target=lambda: work(i)) for i in range(4)]
with ThreadPoolExecutor(2) as pool:
    for i in range(4):
        n = i * 2
        pool.submit(lambda: work(n))
"""
    assert found(src) == [(10, "TFP303"), (14, "TFP303"), (18, "TFP303")]


def test_values_bound_when_the_thread_is_made_are_silent():
    src = """
import functools
import threading
from concurrent.futures import ThreadPoolExecutor

def work(x):
    return x

for i in range(4):
    threading.Thread(target=lambda i=i: work(i)).start()
    threading.Thread(target=work, args=(i,)).start()
    threading.Thread(target=functools.partial(work, i)).start()
    t = threading.Thread(target=lambda: work(i))
    t.start()
    t.join()
with ThreadPoolExecutor(2) as pool:
    for i in range(4):
        pool.submit(lambda: work(i)).result()
"""
    assert found(src) == []


# --------------------------------------------------------------------------- TFP304
def test_lock_made_in_each_workers_constructor_excludes_nothing():
    src = EAGER.format(push="with self.lock:\n            self.opt.apply_gradients(zip(grads, "
                            "self.global_model.trainable_weights))").replace(
        "        super().__init__()\n", "        super().__init__()\n        self.lock = threading.Lock()\n")
    got = found(src)
    assert got == [(18, "TFP304")], got
    assert "(in `__init__`)" in messages(src)[got[0]]


def test_lock_made_by_the_thread_and_locks_made_in_the_loop_exclude_nothing():
    src = """
import threading
import tf_keras

model = tf_keras.Sequential([tf_keras.layers.Dense(1)])

def learn(lock):
    own = threading.Lock()
    with own:
        model.train_on_batch(None, None)
    with lock:
        model.fit(None, None)

threads = [threading.Thread(target=learn, args=(threading.Lock(),)) for _ in range(4)]
"""
    assert found(src) == [(9, "TFP304"), (11, "TFP304")]


def test_shared_locks_are_silent():
    """A class attribute, one lock handed to every worker, a module global: each excludes."""
    src = """
import threading
import tf_keras

model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
LOCK = threading.Lock()

class Worker(threading.Thread):
    class_lock = threading.Lock()

    def __init__(self, lock):
        super().__init__()
        self.lock = lock

    def run(self):
        with self.class_lock:
            model.train_on_batch(None, None)
        with self.lock:
            model.fit(None, None)
        with LOCK:
            model.train_on_batch(None, None)

shared = threading.Lock()
workers = [Worker(shared) for _ in range(4)]
"""
    assert found(src) == []


def test_per_thread_lock_around_the_threads_own_work_is_silent():
    src = """
import threading
import tf_keras

class Worker(threading.Thread):
    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()
        self.model = tf_keras.Sequential([tf_keras.layers.Dense(1)])

    def run(self):
        with self.lock:
            self.model.train_on_batch(None, None)

workers = [Worker() for _ in range(4)]
"""
    assert found(src) == []


# --------------------------------------------------------------------------- the traps
def test_trap_global_episode_counter_is_a_python_int_race():
    """`GLOBAL_EP += 1` in every worker (a race on a Python int, not on a variable) is silent in a
    program whose push is locked; the same program unlocked is flagged at the push only."""
    locked = a3c(push=LOCKED_PUSH, extra_globals="PUSH_LOCK = threading.Lock()")
    assert "GLOBAL_EP += 1" in locked
    assert found(locked) == []
    assert [c for _l, c in found(a3c())] == ["TFP302"]


def test_trap_device_scope_around_graph_construction():
    """`with tf.device("/cpu:0"):` around building the global network, the optimizer and the
    workers is placement for graph construction, not a tf.distribute mistake, and not a lock."""
    src = a3c(push=LOCKED_PUSH, extra_globals="PUSH_LOCK = threading.Lock()")
    assert 'with tf.device("/cpu:0"):' in src
    assert found(src) == []
    # a device scope is not a lock either: around the push it does not silence the race
    device_push = a3c(push='with tf.device("/cpu:0"):\n            SESS.run(self.push_op, feed)')
    assert [c for _l, c in found(device_push)] == ["TFP302"]


def test_trap_coordinator_alone():
    """`tf.train.Coordinator` (`should_stop`, `join`) serialises nothing but is no mistake: the
    program with a locked push and a coordinator is silent, and the coordinator is no lock."""
    src = a3c(push=LOCKED_PUSH, extra_globals="PUSH_LOCK = threading.Lock()")
    assert "COORD.join(threads)" in src and "COORD.should_stop()" in src
    assert found(src) == []
    coord_push = a3c(push="with COORD.stop_on_exception():\n            SESS.run(self.push_op, feed)")
    assert [c for _l, c in found(coord_push)] == ["TFP302"]


def test_trap_per_thread_local_networks():
    """Each worker's own network (built in its constructor) and the pull ops that write it are the
    worker's: only the push to the global network is flagged; when every worker trains only its
    own network, nothing is."""
    src = a3c()
    assert [c for _l, c in found(src)] == ["TFP302"]  # the pull (l.assign(g) of own params) is not
    own = a3c().replace("self.push_op = OPT.apply_gradients(zip(self.grads, globalAC.params))",
                        "self.push_op = OPT.apply_gradients(zip(self.grads, self.params))")
    assert found(own) == []
