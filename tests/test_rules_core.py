"""Import spellings, resolution and precision cases for the TFP1xx-TFP4xx rules."""
from __future__ import annotations

import textwrap

import pytest

from tfpar_lint.engine import AnalysisOptions, lint_source
from tfpar_lint.registry import all_rules

ALL = [r.CODE for r in all_rules()]


def codes(src: str, options: AnalysisOptions = AnalysisOptions()) -> list[tuple[int, str]]:
    res = lint_source(textwrap.dedent(src), "t.py", enabled=ALL, options=options)
    assert res.error is None, res.error
    return [(f.line, f.code) for f in res.findings]


# --------------------------------------------------------------------------- spellings
SCOPE_TAIL = """
with strategy.scope():
    model.compile(optimizer="sgd", loss="mse")
"""

SPELLINGS = {
    "import tensorflow as tf": (
        "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"),
    "from tensorflow import keras": (
        "import tensorflow as tf\nfrom tensorflow import keras\nstrategy = tf.distribute.MirroredStrategy()\n"
        "model = keras.Sequential([keras.layers.Dense(1)])\n"),
    "import keras (Keras 3)": (
        "import keras\nimport tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
        "model = keras.Sequential([keras.layers.Dense(1)])\n"),
    "import tf_keras": (
        "import tf_keras\nimport tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
        "model = tf_keras.Sequential([tf_keras.layers.Dense(1)])\n"),
    "from tensorflow import distribute as d": (
        "from tensorflow import distribute as d\nfrom tensorflow import keras\nstrategy = d.MirroredStrategy()\n"
        "model = keras.models.Sequential()\n"),
    "from tensorflow.distribute import MirroredStrategy as MS": (
        "from tensorflow.distribute import MirroredStrategy as MS\nimport keras\nstrategy = MS()\n"
        "model = keras.Model(inputs=None, outputs=None)\n"),
    "import tensorflow.compat.v2 as tf": (
        "import tensorflow.compat.v2 as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
        "model = tf.keras.Sequential()\n"),
    "import tensorflow (no alias)": (
        "import tensorflow\nstrategy = tensorflow.distribute.MirroredStrategy()\n"
        "model = tensorflow.keras.Sequential()\n"),
    "from keras.models import Sequential as Seq": (
        "from keras.models import Sequential as Seq\nimport tensorflow as tf\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\nmodel = Seq()\n"),
    "get_strategy()": (
        "import tensorflow as tf\nimport keras\nstrategy = tf.distribute.get_strategy()\nmodel = keras.Sequential()\n"),
}


@pytest.mark.parametrize("name", list(SPELLINGS))
def test_import_spellings_resolve(name):
    src = SPELLINGS[name] + SCOPE_TAIL
    model_line = src.splitlines().index(next(l for l in src.splitlines() if l.startswith("model ="))) + 1
    assert codes(src) == [(model_line, "TFP101")]


def test_functional_and_subclassed_models_and_builders():
    src = """
    import tensorflow as tf
    from tensorflow import keras

    class Net(keras.Model):
        def call(self, x):
            return x

    class Deeper(Net):
        pass

    def build():
        inputs = keras.Input(shape=(3,))
        outputs = keras.layers.Dense(1)(inputs)
        return keras.Model(inputs, outputs)

    def make_strategy():
        return tf.distribute.MirroredStrategy()

    strategy = make_strategy()
    a = Net()
    b = Deeper()
    c = build()
    with strategy.scope():
        a.compile(loss="mse")
        b.compile(loss="mse")
        c.fit([1], [1])
    """
    assert codes(src) == [(21, "TFP101"), (22, "TFP101"), (23, "TFP101")]


def test_annotated_strategy_parameter_resolves():
    src = """
    import tensorflow as tf
    import keras

    def train(strategy: tf.distribute.Strategy):
        model = keras.Sequential()
        with strategy.scope():
            model.compile(loss="mse")
    """
    assert codes(src) == [(6, "TFP101")]


def test_parameter_resolved_from_every_call_site():
    src = """
    import tensorflow as tf
    import keras

    def train(strategy, model):
        with strategy.scope():
            model.compile(loss="mse")

    s = tf.distribute.MirroredStrategy()
    m = keras.Sequential()
    train(s, m)
    """
    assert codes(src) == [(10, "TFP101")]


def test_configured_strategy_factory():
    src = """
    from mylib.dist import make
    import keras
    strategy = make()
    model = keras.Sequential()
    with strategy.scope():
        model.compile(loss="mse")
    """
    # the scope entered tells that `make()` returns a strategy (kinds from use), configured or not
    assert codes(src) == [(5, "TFP101")]
    assert codes(src, AnalysisOptions(strategy_factories=("mylib.dist.make",))) == [(5, "TFP101")]
    # a use that does not tell (`run(step)` with no arguments): only the configured factory does
    quiet = """
    from mylib.dist import make
    import tensorflow as tf
    strategy = make()
    v = tf.Variable(0.0)
    def step():
        v.assign_add(1.0)
    strategy.run(step)
    """
    assert codes(quiet) == []
    assert codes(quiet, AnalysisOptions(strategy_factories=("mylib.dist.make",))) == [(5, "TFP105")]


def test_strategy_parameter_known_by_its_use():
    """A strategy that arrives as a parameter is one by its use (its scope entered in the same
    function that builds the model outside it): the "by design" silence on parameters is gone."""
    src = """
    import keras
    def train(strategy):
        model = keras.Sequential()
        with strategy.scope():
            model.compile(loss="mse")
    """
    assert codes(src) == [(4, "TFP101")]
    # an attribute of what an unknown (unbound) helper returns: a strategy by its use too
    src = """
    import keras
    strategy = load_config().strategy
    model = keras.Sequential()
    with strategy.scope():
        model.compile(loss="mse")
    """
    assert codes(src) == [(4, "TFP101")]


# --------------------------------------------------------------------------- precision
SILENT = {
    "strategy parameter used with no telling use": """
        import keras
        def train(strategy, model):
            model.fit(x, y)
            helper(strategy)
        """,
    "model imported from another module": """
        import tensorflow as tf
        from mymodels import model
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model.compile(loss="mse")
        """,
    "name that merely looks like a strategy": """
        import keras
        strategy = load_config().strategy
        model = keras.Sequential()
        with strategy.session():
            model.compile(loss="mse")
        """,
    "builder called inside the scope": """
        import tensorflow as tf
        import keras
        def build():
            m = keras.Sequential([keras.layers.Dense(1)])
            m.compile(optimizer=keras.optimizers.Adam(), loss="mse", metrics=[keras.metrics.AUC()])
            return m
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = build()
        model.fit([1], [1])
        """,
    "function called only from inside a scope": """
        import tensorflow as tf
        import keras
        def setup():
            model = keras.Sequential()
            opt = keras.optimizers.SGD()
            model.compile(optimizer=opt, loss="mse")
            return model
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            setup()
        """,
    "evaluation model outside any scope, never used with the strategy": """
        import tensorflow as tf
        import keras
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = keras.Sequential()
            model.compile(loss="mse")
        eval_model = keras.Sequential()
        eval_model.compile(loss="mse")
        eval_model.evaluate([1], [1])
        """,
    "fit outside the scope of a model built inside": """
        import tensorflow as tf
        import keras
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = keras.Sequential()
            model.compile(loss="mse")
        model.fit([1], [1])
        """,
    "distributed dataset fed to run": """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        ds = tf.data.Dataset.range(8).batch(4)
        dist = strategy.experimental_distribute_dataset(ds)
        def step(x):
            return x
        @tf.function
        def train_step(x):
            return strategy.run(step, args=(x,))
        for x in dist:
            train_step(x)
        it = iter(dist)
        strategy.run(step, args=(next(it),))
        """,
    "assign_add and locked read-modify-write in threads": """
        import threading
        import tensorflow as tf
        v = tf.Variable(0)
        lock = threading.Lock()
        def a():
            v.assign_add(1)
        def b():
            with lock:
                v.assign(v + 1)
        def c(guard):
            with guard:
                v.assign(v + 1)
        threading.Thread(target=a).start()
        threading.Thread(target=b).start()
        threading.Thread(target=c, args=(lock,)).start()
        """,
    "read-modify-write outside any thread": """
        import tensorflow as tf
        v = tf.Variable(0)
        def bump():
            v.assign(v + 1)
        bump()
        """,
    "seed at start-up, per-replica stateless seeds": """
        import tensorflow as tf
        tf.random.set_seed(1)
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            gen = tf.random.Generator.from_seed(1)
        def step(x):
            ctx = tf.distribute.get_replica_context()
            seed = [7, ctx.replica_id_in_sync_group]
            a = tf.random.stateless_normal([2], seed=seed)
            return gen.normal([2]) + a
        strategy.run(step, args=(1,))
        """,
    "dataset fn that shards and batches per replica": """
        import tensorflow as tf
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        def dataset_fn(input_context):
            bs = input_context.get_per_replica_batch_size(64)
            ds = tf.data.Dataset.range(100)
            ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
            return ds.batch(bs).prefetch(2)
        dist = strategy.distribute_datasets_from_function(dataset_fn)
        vals = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(ctx.replica_id_in_sync_group))
        """,
    "apply_gradients in the replica function and under scope": """
        import tensorflow as tf
        import keras
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.layers.Dense(1)])
            opt = keras.optimizers.SGD()
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        @tf.function
        def train(x):
            strategy.run(step, args=(x,))
        with strategy.scope():
            opt.apply_gradients([])
        """,
}


@pytest.mark.parametrize("name", list(SILENT))
def test_silent_on_correct_or_unresolvable_code(name):
    assert codes(SILENT[name]) == []


def test_run_fed_from_plain_dataset_through_a_step_parameter():
    src = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    ds = tf.data.Dataset.range(8).batch(4)
    def step(x):
        return x
    @tf.function
    def train_step(batch):
        return strategy.run(step, args=(batch,))
    for x in ds:
        train_step(x)
    """
    assert codes(src) == [(11, "TFP201")]  # the host call that passes the batch (the run is related)


def test_thread_pool_and_indirect_read_modify_write():
    src = """
    from concurrent.futures import ThreadPoolExecutor
    import tensorflow as tf
    v = tf.Variable(0.0)
    def work(i):
        x = v.numpy()
        v.assign(x + i)
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(work, range(10)))
    """
    assert codes(src) == [(7, "TFP301")]


def test_off_by_default_rule_only_when_selected():
    src = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    def step(x):
        return x + tf.random.uniform([2])
    strategy.run(step, args=(1,))
    """
    assert codes(src) == [(5, "TFP403")]
    res = lint_source(textwrap.dedent(src), "t.py")  # default selection
    assert res.findings == []


# --------------------------------------------------------------------------- review fixes
def test_positional_seeds_are_seeds():
    src = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    def step(img):
        a = tf.random.uniform([2], 0, 1, tf.float32, 7)
        b = tf.image.stateless_random_flip_left_right(img, (1, 2))
        c = tf.random.normal([2], 0.0, 1.0, tf.float32, None)
        return a, b, c
    strategy.run(step, args=(1,))
    """
    assert codes(src) == [(5, "TFP402"), (6, "TFP402"), (7, "TFP403")]


def test_dataset_repeat_as_tf_data_input_is_intended():
    src = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    ds = tf.data.Dataset.range(3)
    both = tf.data.Dataset.sample_from_datasets([ds] * 2)
    mixed = tf.data.Dataset.choose_from_datasets([ds for _ in range(2)], tf.data.Dataset.range(2))
    """
    assert codes(src) == []


def test_thread_rmw_needs_several_threads_and_a_real_read():
    src = """
    import threading
    import tensorflow as tf
    v = tf.Variable(0)
    class Cfg:
        v = 1
    cfg = Cfg()
    def once():
        v.assign(v + 1)
    def attr_only():
        v.assign(cfg.v + 1)
    threading.Thread(target=once).start()
    for _ in range(4):
        threading.Thread(target=attr_only).start()
    """
    assert codes(src) == []


def test_single_worker_dataset_fn_with_per_replica_batch_by_hand():
    # the TPU guide's pattern: context ignored, batch = global // num_replicas_in_sync
    src = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    per_replica = 64 // strategy.num_replicas_in_sync
    def get_dataset(bs):
        return tf.data.Dataset.range(100).batch(bs)
    dist = strategy.distribute_datasets_from_function(lambda _: get_dataset(per_replica))
    """
    assert codes(src) == []
    mw = src.replace("MirroredStrategy", "MultiWorkerMirroredStrategy")
    assert codes(mw) == [(7, "TFP203")]


def test_single_worker_dataset_fn_hands_a_per_replica_size_to_unknown_code():
    # `replay.as_dataset(n // replicas)`: the builder is not visible, the size it gets is per replica
    src = """
    import tensorflow as tf
    import buffers
    strategy = tf.distribute.MirroredStrategy()
    replay = buffers.Replay()
    replicas = strategy.num_replicas_in_sync
    dist = strategy.distribute_datasets_from_function(lambda _: replay.as_dataset(64 // replicas))
    """
    assert codes(src) == []
    assert codes(src.replace("64 // replicas", "64")) == [(7, "TFP203")]


def test_single_worker_dataset_fn_per_replica_batch_is_told_by_the_batch_value():
    # a division by num_replicas_in_sync elsewhere in the module does not make the dataset
    # function's batch per-replica; the batch's own value does (for the call followed)
    src = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    scale = 1.0 / strategy.num_replicas_in_sync
    def get_dataset(bs):
        return tf.data.Dataset.range(100).batch(bs)
    plain = get_dataset(64 // strategy.num_replicas_in_sync)
    dist = strategy.distribute_datasets_from_function(lambda _: get_dataset(64))
    """
    assert codes(src) == [(8, "TFP203")]
    fixed = src.replace("get_dataset(64))", "get_dataset(64 // strategy.num_replicas_in_sync))")
    assert codes(fixed) == []


def test_corpus_false_positives_stay_fixed():
    # parameter-server training does not shard by design (PS tutorial)
    ps = """
    import tensorflow as tf
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    def dataset_fn(_):
        return tf.data.Dataset.range(200).shuffle(200).batch(32).repeat()
    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)
    """
    assert codes(ps) == []
    # a constant broadcast to every replica is not replicated data (Distributed input tutorial)
    const = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    def value_fn(ctx):
        return tf.constant(1.0)
    vals = strategy.experimental_distribute_values_from_function(value_fn)
    """
    assert codes(const) == []
    # the context handed to a function of another module may be used for sharding there
    imported = """
    import tensorflow as tf
    import mnist
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ds = strategy.distribute_datasets_from_function(lambda input_context: mnist.dataset_fn(64, input_context))
    """
    assert codes(imported) == []


def test_model_used_only_for_inference_in_replicas_is_fine():
    src = """
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MirroredStrategy()
    teacher = keras.Sequential([keras.layers.Dense(1)])
    with strategy.scope():
        student = keras.Sequential([keras.layers.Dense(1)])
        opt = keras.optimizers.SGD()
    def step(x):
        target = teacher(x)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((student(x) - target) ** 2)
        grads = tape.gradient(loss, student.trainable_variables)
        opt.apply_gradients(zip(grads, student.trainable_variables))
    @tf.function
    def train(x):
        strategy.run(step, args=(x,))
    """
    assert codes(src) == []
    # the student itself built outside the scope and trained in the replicas is still found
    trained_outside = src.replace(
        "    with strategy.scope():\n        student = keras.Sequential([keras.layers.Dense(1)])\n        opt",
        "    student = keras.Sequential([keras.layers.Dense(1)])\n    with strategy.scope():\n        opt")
    assert codes(trained_outside) == [(6, "TFP101")]


def test_one_replica_strategy_cannot_duplicate_data():
    src = """
    import tensorflow as tf
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    ds = tf.data.Dataset.range(8).batch(4)
    @tf.function
    def step(x):
        return strategy.run(lambda b: b, args=(x,))
    for x in ds:
        step(x)
    """
    assert codes(src) == []
