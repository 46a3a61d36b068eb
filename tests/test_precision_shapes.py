"""Shapes of correct code that whole real code bases showed read as mistakes (issue 28's precision
measurement, benchmarks/precision.md): each one an invented snippet that must stay silent, next to
its twin that is the mistake and must still be reported."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tfpar_lint.engine import lint_source
from tfpar_lint.semantic import Module
from tfpar_lint.semantic.kinds import builds_at_construction


def codes(src: str, select=None) -> list[tuple[int, str]]:
    src = textwrap.dedent(src)
    res = lint_source(src, "snippet.py", enabled=select)
    return sorted((f.line, f.code) for f in res.findings)


def module(src: str) -> Module:
    src = textwrap.dedent(src)
    return Module(cst.parse_module(src), src)


# ---------------------------------------------------------------- 1. built lazily under the scope

LAZY_MODULE = """
    import tensorflow as tf

    class Net(tf.Module):
        def __init__(self):
            super().__init__()
            self.hidden = tf.keras.layers.Dense(8)
            self.head = tf.keras.layers.Dense(1)

        def __call__(self, x):
            return self.head(self.hidden(x))

    strategy = tf.distribute.MirroredStrategy()
    net = Net()
    {build_outside}
    with strategy.scope():
        @tf.function
        def create_variables(x):
            return net(x)
        create_variables(tf.zeros([1, 4]))
        opt = tf.keras.optimizers.SGD()

    @tf.function
    def train(batch):
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(net(x))
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables))
            for w in net.trainable_variables:
                w.assign(tf.clip_by_value(w, -1.0, 1.0))
            return loss
        return strategy.run(step, args=(batch,))
"""


def test_a_module_with_unbuilt_layers_first_called_under_the_scope_is_not_outside_it():
    assert codes(LAZY_MODULE.format(build_outside="")) == []


def test_the_same_module_called_once_outside_the_scope_first_is_still_reported():
    src = LAZY_MODULE.format(build_outside="net(tf.zeros([1, 4]))  # built here, outside")
    assert (14, "TFP101") in codes(src)
    assert not any(c == "TFP105" for _, c in codes(src))  # a tf.Module is not a tf.Variable


@pytest.mark.parametrize("ctor, reported", [
    ("tf.keras.Sequential([tf.keras.layers.Dense(8), tf.keras.layers.Dense(1)])", False),
    ("tf.keras.Sequential([tf.keras.layers.Dense(8, input_shape=(4,)), tf.keras.layers.Dense(1)])", True),
    ("tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])", True),
    ("tf.keras.applications.MobileNetV2(weights=None)", True),
    ("Sub()", False),
    ("Eager()", True),
    ("Weighted()", True),
])
def test_a_model_first_called_under_the_scope(ctor, reported):
    """Made outside the scope, first called inside it: correct when making it created no variable
    (an unbuilt Sequential, a subclassed model), a mistake when it did (an input shape, a
    pretrained model, a constructor that builds or makes a variable)."""
    src = f"""
        import tensorflow as tf

        class Sub(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.d = tf.keras.layers.Dense(3)

            def call(self, x):
                return self.d(x)

        class Eager(Sub):
            def __init__(self):
                super().__init__()
                self.build((None, 4))

        class Weighted(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.scale = tf.Variable(1.0)

            def call(self, x):
                return x * self.scale

        strategy = tf.distribute.MirroredStrategy()
        model = {ctor}
        with strategy.scope():
            model(tf.zeros([1, 4]))
            model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y, epochs=1)
    """
    assert ((26, "TFP101") in codes(src)) is reported


def test_an_unbuilt_model_first_built_by_fit_under_the_scope_is_still_reported():
    """Keras' own fit builds it (fixtures/TFP101/bad_unbuilt.py: Keras 3 still fails)."""
    src = """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        model = tf.keras.Sequential([tf.keras.layers.Dense(8), tf.keras.layers.Dense(1)])
        with strategy.scope():
            model.compile(optimizer="sgd", loss="mse")
            model.fit(x, y, epochs=1)
    """
    assert codes(src) == [(4, "TFP101")]


AGENT = """
    import tensorflow as tf

    def learner(create_agent_fn, create_optimizer_fn, data):
        strategy = tf.distribute.MirroredStrategy()
        agent = create_agent_fn(4)
        state = agent.initial_state(1)
        with strategy.scope():
            {build}
            optimizer = create_optimizer_fn()

        @tf.function
        def minimize(batch):
            def compute_gradients(x):
                with tf.GradientTape() as tape:
                    loss = agent(x)
                grads = tape.gradient(loss, agent.trainable_variables)
                optimizer.apply_gradients(zip(grads, agent.trainable_variables))
                return loss
            return strategy.run(compute_gradients, (batch,))
        minimize(data)
"""


def test_an_object_an_unknown_factory_made_built_by_its_own_method_under_the_scope():
    """What the factory makes cannot be told; the code builds it under the scope (a ``tf.function``
    that calls a method of its own, in a helper called there): nothing shows a variable made
    outside."""
    build = """def init_vars(a):
                @tf.function
                def create_variables():
                    return a.get_action(tf.zeros([1, 4]), state)
                create_variables()
            init_vars(agent)"""
    assert codes(AGENT.format(build=build)) == []


def test_an_object_an_unknown_factory_made_never_built_under_the_scope_is_still_reported():
    assert codes(AGENT.format(build="pass")) == [(6, "TFP101")]


def test_what_making_an_object_creates():
    m = module("""
        import tensorflow as tf
        import keras

        class Lazy(keras.Model):
            def __init__(self):
                super().__init__()
                self.d = keras.layers.Dense(3)

        class Built(Lazy):
            def __init__(self):
                super().__init__()
                self.d(tf.zeros([1, 2]))

        def build_lazy():
            return keras.Sequential([keras.layers.Dense(2)])

        def build_and_call():
            net = Lazy()
            net(tf.zeros([1, 2]))
            return net

        a = keras.Sequential([keras.layers.Dense(2)])
        b = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
        c = keras.Model(inp, out)
        d = Lazy()
        e = Built()
        f = build_lazy()
        g = build_and_call()
        h = keras.layers.Dense(3)
        i = tf.Variable(1.0)
        j = unknown_factory()
        use(a, b, c, d, e, f, g, h, i, j)
    """)
    cs = next(c for c in m.calls if m.code(c.node).startswith("use("))
    got = []
    for a in cs.node.args:
        vals = m.infer_at(a.value, cs)
        got.append(builds_at_construction(m, vals[0]) if vals else "none")
    assert got == [False, True, True, False, True, False, True, False, True, None]


# ---------------------------------------------------------------- 3. objects that never meet the strategy

def test_a_strategy_made_in_try_or_in_its_handler_is_either_after_the_statement():
    """``try: TPUStrategy except ValueError: MirroredStrategy``: after the statement the name holds
    either; the scope entered below is that strategy's, so it is used, and a model made outside it
    that a builder called under the scope uses is not beside an unused strategy."""
    src = """
        import tensorflow as tf
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
            strategy = tf.distribute.TPUStrategy(resolver)
        except ValueError:
            strategy = tf.distribute.MirroredStrategy()

        aug = tf.keras.Sequential([tf.keras.layers.RandomFlip("horizontal")])

        def build():
            inputs = tf.keras.Input((32, 32, 3))
            return tf.keras.Model(inputs, tf.keras.layers.Dense(10)(aug(inputs)))

        with strategy.scope():
            model = build()
            model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y)
    """
    assert codes(src) == []
    m = module(src)
    cs = next(c for c in m.calls if m.code(c.node) == "strategy.scope()")
    assert {v.qname.rsplit(".", 1)[-1] for v in m.infer_at(cs.node.func.value, cs)} == {
        "TPUStrategy", "MirroredStrategy"}


def test_a_handler_that_raises_leaves_the_try_bodys_binding_alone():
    m = module("""
        import tensorflow as tf
        strategy = None
        try:
            strategy = tf.distribute.MirroredStrategy()
        except ValueError:
            raise
        use(strategy)
    """)
    cs = next(c for c in m.calls if m.code(c.node).startswith("use("))
    assert [v.qname for v in m.infer_at(cs.node.args[0].value, cs)] == ["tensorflow.distribute.MirroredStrategy"]


@pytest.mark.parametrize("order, use, reported", [
    ("strategy_first", "print(type(model.weights[0]))", True),
    ("model_first", "print(type(model.weights[0]))", True),    # made after, but the model is still held
    ("model_gone", "print(type(model.weights[0]))", False),    # the name held another model by then
    ("strategy_first", "print(model.predict(x))", False),      # inference on one device after training
    ("strategy_first", "model.evaluate(x, y)", False),
])
def test_a_model_beside_a_strategy_that_is_never_used(order, use, reported):
    make_strategy = "strategy = tf.distribute.MirroredStrategy()"
    make_model = 'model = tf.keras.models.load_model("saved")'
    lines = {"strategy_first": [make_strategy, make_model, use],
             "model_first": [make_model, use, make_strategy],
             "model_gone": [make_model, use, "with other.scope():", "    " + make_model, make_strategy]}[order]
    src = "import tensorflow as tf\nother = tf.distribute.MirroredStrategy()\n" + "\n".join(lines) + "\n"
    first = src.splitlines().index(make_model) + 1  # the model made outside any scope
    got = [(line, c) for line, c in codes(src) if line == first]
    assert bool(got) is reported, got


# ---------------------------------------------------------------- 5. a use that never trains

OPT_FOR_EVALUATE = """
    import tensorflow as tf

    def get_model():
        return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])

    def evaluate(model, data):
        optimizer = tf.keras.optimizers.Adam()
        model.compile(optimizer=optimizer, loss="mse")
        {after}

    def main(data):
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = get_model()
        evaluate(model, data)
"""


@pytest.mark.parametrize("after, reported", [
    ("return model.evaluate(data)", False),
    ("print(model.predict(data)); model.summary()", False),
    ("model.evaluate(data); model.fit(data, epochs=1)", True),
    ("return model", True),                       # the caller may train it
    ("train_more(model)", True),                  # handed on
])
def test_an_optimizer_compiled_only_so_that_evaluate_runs(after, reported):
    got = codes(OPT_FOR_EVALUATE.format(after=after), select={"TFP102"})
    assert (got == [(8, "TFP102")]) is reported, got


# ---------------------------------------------------------------- 2. one replica per process

ONE_GPU = """
    import os
    import tensorflow as tf

    def train(rank, world):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
            opt = tf.keras.optimizers.SGD()

        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        ds = tf.data.Dataset.from_tensor_slices(tf.zeros([64, 4])).shard(world, rank).batch(8)
        for x in ds:
            strategy.run(step, args=(x,))

    if __name__ == "__main__":
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD"])
        {write}
        train(rank, world)
"""


@pytest.mark.parametrize("write, reported", [
    ('os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)', False),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = f"{rank}"', False),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = "0"', False),
    ('tf.config.set_visible_devices(tf.config.list_physical_devices("GPU")[rank], "GPU")', False),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"', True),                 # two devices: two replicas
    ('os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(rank))', True),  # may be set already
    ('pass', True),
    ('if rank == 0: os.environ["CUDA_VISIBLE_DEVICES"] = "0"', True),     # not on every path
])
def test_a_process_that_sees_one_gpu_feeds_its_only_replica(write, reported):
    got = codes(ONE_GPU.format(write=write), select={"TFP201"})
    assert bool(got) is reported, got


def test_one_gpu_made_visible_after_the_strategy_does_not_count():
    src = """
        import os
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        ds = tf.data.Dataset.range(8).batch(2)
        for x in ds:
            strategy.run(lambda v: v * 2, args=(x,))
    """
    assert [c for _, c in codes(src, select={"TFP201"})] == ["TFP201"]


# ---------------------------------------------------------------- 6. strategy kind through a record

SETTINGS = """
    import collections
    import sys
    import tensorflow as tf

    {decl}

    def init(tpu_found):
        if tpu_found:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
            return Settings({first}, [("/cpu", None)])
        strategy = {second}
        return Settings(strategy, hosts=[("/cpu", None)])

    settings = init(len(sys.argv) > 1)  # either branch can run (a literal would pick one: semantic/paths.py)
    counters = []
    for host, _ in settings.hosts:
        with tf.device(host):
            counters.append(tf.Variable(0, dtype=tf.int64))

    @tf.function
    def step(x):
        counters[0].assign_add(1)
        return x

    settings.strategy.run(step, args=(tf.zeros([2]),))
"""

NAMEDTUPLE = 'Settings = collections.namedtuple("Settings", "strategy hosts")'
TYPED = """from typing import NamedTuple
    class Settings(NamedTuple):
        strategy: object
        hosts: list"""
DATACLASS = """import dataclasses
    @dataclasses.dataclass
    class Settings:
        strategy: object
        hosts: list"""


@pytest.mark.parametrize("decl", [NAMEDTUPLE, TYPED, DATACLASS])
@pytest.mark.parametrize("first, second, reported", [
    ("tf.distribute.TPUStrategy(resolver)", 'tf.distribute.OneDeviceStrategy("/gpu:0")', False),
    ("tf.distribute.TPUStrategy(resolver)", "tf.distribute.MirroredStrategy()", True),
])
def test_a_strategy_kept_in_a_record_keeps_its_class(decl, first, second, reported):
    """``settings.strategy`` is what ``Settings(...)`` was given: a TPU or one-device strategy
    (which place their variables their own way) is not a strategy of unknown class."""
    got = codes(SETTINGS.format(decl=decl, first=first, second=second), select={"TFP107"})
    assert bool(got) is reported, got


@pytest.mark.parametrize("decl", [NAMEDTUPLE, TYPED])
def test_a_record_by_position_and_unpacked(decl):
    m = module(SETTINGS.format(decl=decl, first="tf.distribute.TPUStrategy(resolver)",
                               second='tf.distribute.OneDeviceStrategy("/gpu:0")') + """
    a = settings[0]
    b, hosts = settings
    use(a, b)
    """)
    cs = next(c for c in m.calls if m.code(c.node).startswith("use("))
    for a in cs.node.args:
        assert sorted(v.qname for v in m.infer_at(a.value, cs)) == [
            "tensorflow.distribute.OneDeviceStrategy", "tensorflow.distribute.TPUStrategy"]


# ---------------------------------------------------------------- 7a. copies zipped as feature columns

@pytest.mark.parametrize("zipped, reported", [
    ("tf.data.Dataset.zip(feats + (labels,))", False),
    ("tf.data.Dataset.zip((labels,) + feats)", False),
    ("tf.data.Dataset.zip(tuple(feats) * 1)", False),
    ("[iter(d) for d in feats]", True),   # not zipped into one dataset: one copy per device
])
def test_copies_of_a_dataset_zipped_together_are_feature_columns(zipped, reported):
    src = f"""
        import tensorflow as tf
        x = tf.zeros([8, 3])
        labels = tf.data.Dataset.from_tensor_slices(tf.zeros([8]))
        feats = tuple(tf.data.Dataset.from_tensor_slices(x) for _ in range(3))
        ds = {zipped}
    """
    got = codes(src, select={"TFP202"})
    assert bool(got) is reported, got


# ---------------------------------------------------------------- the ambient strategy where the object is made
AMBIENT = """
    import tensorflow as tf


    class Runnable:
        def __init__(self):
            self.strategy = {strategy}
            self.loss = tf.keras.metrics.Mean("loss")

        def step(self, x):
            self.loss.update_state(x)
            return x

        def train(self, x):
            return self.strategy.run(self.step, args=(x,))
"""


@pytest.mark.parametrize("strategy, reported", [
    # get_strategy() where the metric is made: under whatever scope the caller opened (or no strategy)
    ("tf.distribute.get_strategy()", False),
    # a strategy made here: the metric is outside its scope
    ("tf.distribute.MirroredStrategy()", True),
])
def test_the_ambient_strategy_read_where_the_object_is_made(strategy, reported):
    got = [c for _, c in codes(AMBIENT.format(strategy=strategy), select={"TFP103"})]
    assert got == (["TFP103"] if reported else []), got


@pytest.mark.parametrize("strategy, ambient", [("tf.distribute.get_strategy()", True),
                                               ("tf.distribute.MirroredStrategy()", False)])
def test_the_strategies_that_run_the_step_are_the_ambient_one_read_where_the_metric_is_made(strategy, ambient):
    """The part of the question the rules ask (scope_use._ambient_where_made): where the caller's scope
    cannot be seen (a helper of another package opens it), the strategy of ``self.strategy.run`` is the
    one ``get_strategy()`` returned in the ``__init__`` that made the metric, so the metric was made
    under its scope, or under none (the default strategy: nothing replicated)."""
    from tfpar_lint import tfapi as api
    from tfpar_lint.semantic.scope_use import _ambient_where_made, values_of_kind

    m = module(AMBIENT.format(strategy=strategy))
    (metric,) = [v for v in values_of_kind(m, api.METRIC)]
    (strategies,) = list(m.replica_functions().values())
    assert _ambient_where_made(metric, strategies) is ambient


# ---------------------------------------------------------------- a helper of another module run by the replicas
HELPER = """import tensorflow as tf


def loss_of(images):
    n = tf.shape(images)[0]
    return tf.reduce_sum(images) / tf.cast(n, tf.float32)
"""
TRAINER = """import tensorflow as tf

from losses import loss_of


class Trainer:
    def step(self, inputs):
        return loss_of(inputs[0])

    def train(self, dist_ds, strategy):
        @tf.function
        def dist_step(inputs):
            return strategy.run(self.step, args=(inputs,))

        for images in dist_ds:
            dist_step((images,))
            {host}


strategy = tf.distribute.MirroredStrategy()
ds = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(tf.ones([8, 4])).batch(4))
Trainer().train(ds, strategy)
"""


@pytest.mark.parametrize("host, reported", [
    ("pass", False),  # called only from the step strategy.run runs: replica context
    ("loss_of(images)", True),  # also called on the host with the distributed batch
])
def test_a_helper_of_another_module_called_only_by_the_replica_step(tmp_path, host, reported):
    from tfpar_lint.engine import _PROJECTS, lint_file

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "losses.py").write_text(HELPER)
    (tmp_path / "train.py").write_text(TRAINER.format(host=host))
    _PROJECTS.clear()
    try:
        got = [f.code for f in lint_file(str(tmp_path / "losses.py")).findings if f.code == "TFP508"]
    finally:
        _PROJECTS.clear()
    assert bool(got) is reported, got
