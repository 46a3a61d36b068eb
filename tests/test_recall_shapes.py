"""The shapes real code gives its values that hid mistakes from the rules: each one (an invented
snippet) found through the mechanism that follows the value, in one file and, where the shape
crosses files, in a project."""
from __future__ import annotations

import textwrap
from pathlib import Path

from tfpar_lint.engine import lint_paths, lint_source


def codes(src: str, select=None) -> list[tuple[int, str]]:
    src = textwrap.dedent(src)
    res = lint_source(src, "snippet.py", enabled=select)
    return sorted((f.line, f.code) for f in res.findings)


def project_codes(tmp_path: Path, files: dict[str, str], lint: str) -> list[tuple[int, str]]:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    res = lint_paths([str(tmp_path / lint)])
    return sorted((f.line, f.code) for r in res for f in r.findings)


def test_training_functions_kept_in_a_list_and_called_from_threads():
    """``self.steps = [K.function(..., updates=...)]`` handed to thread objects, then
    ``self.steps[0]([x])`` in each thread: the shared networks' weights are updated unlocked."""
    src = """
        import threading
        from keras import backend as K
        from keras.layers import Dense, Input
        from keras.models import Model
        from keras.optimizers import Adam

        class Global:
            def __init__(self):
                inp = Input((4,))
                self.net = Model(inp, Dense(2)(inp))
                self.steps = [self.make_step()]

            def make_step(self):
                loss = K.mean(self.net.output)
                updates = Adam().get_updates(self.net.trainable_weights, [], loss)
                return K.function([self.net.input], [], updates=updates)

        class Worker(threading.Thread):
            def __init__(self, steps):
                threading.Thread.__init__(self)
                self.steps = steps

            def run(self):
                self.steps[0]([[0.0] * 4])

        g = Global()
        workers = [Worker(g.steps) for _ in range(4)]
        for w in workers:
            w.start()
    """
    assert (25, "TFP302") in codes(src)


def test_a_star_import_hides_no_value():
    """``from loaders import *``: the data made by a name the module never binds reaches the replicas
    as it would with the name imported explicitly."""
    star = """
        from loaders import *
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        def step(x):
            return model(x)
        it = iter(make_data())
        strategy.run(step, args=(next(it),))
    """
    explicit = star.replace("from loaders import *", "from loaders import make_data")
    assert codes(explicit) == [(10, "TFP201")]
    assert codes(star) == codes(explicit)


def test_a_plain_dataset_through_a_progress_bar_on_one_path():
    """``tqdm(ds)`` iterates ``ds``: the wrapper hides neither the plain dataset made on one path nor
    the distributed one of the other.  The batch reaches ``strategy.run`` inside a tf.function
    wrapper: the finding is at the host call that passes it, the run is the related place."""
    src = """
        import tensorflow as tf
        from tqdm import tqdm
        from data import Loader
        strategy = tf.distribute.MirroredStrategy()
        loader = Loader(cfg)
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            ds = strategy.experimental_distribute_dataset(loader("train", 64))
        def step(x):
            return model(x)
        @tf.function
        def dist_step(x):
            return strategy.run(step, args=(x,))
        for epoch in range(10):
            if epoch == 5:
                ds = loader("train", 64)
            for x in tqdm(ds):
                dist_step(x)
    """
    res = lint_source(textwrap.dedent(src), "snippet.py")
    assert [(f.line, f.code) for f in res.findings] == [(19, "TFP201")]
    f = res.findings[0]
    assert f.data["related_line"] == 14 and "(line 14)" in f.message and "epoch == 5" in f.message


def test_sarif_names_the_related_place():
    from tfpar_lint.output import sarif
    from tfpar_lint.output.base import Report

    src = textwrap.dedent("""
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        opt = tf.keras.optimizers.SGD()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        def step(x):
            opt.apply_gradients([])
        strategy.run(step, args=(1,))
    """)
    res = lint_source(src, "snippet.py")
    [f] = [f for f in res.findings if f.code == "TFP102"]
    doc = sarif.build(Report(findings=res.findings, root="."))
    [r] = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "TFP102"]
    assert r["locations"][0]["physicalLocation"]["region"]["startLine"] == f.line
    assert r["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 8


def test_an_optimizer_wrapper_called_with_gradient_pairs_outside_the_scope():
    """``optimizer = Optimizer(cfg)`` of a project module, called as ``optimizer(zip(grads,
    model.trainable_variables))`` in the replica function: an optimizer by its use, made outside
    the scope."""
    src = """
        import tensorflow as tf
        from utils.opt_utils import Optimizer
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        optimizer = Optimizer(cfg)
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer(zip(grads, model.trainable_variables))
        strategy.run(step, args=(1,))
    """
    assert (7, "TFP102") in codes(src)


def test_host_data_of_an_overridden_train_on_batch_handed_to_the_replicas():
    """``train_on_batch(x, y)`` of a Keras model subclass gets the caller's arrays whole: handed on to
    ``strategy.run`` (through a helper that prepares them), every replica gets the whole batch."""
    src = """
        import tensorflow as tf
        class Net(tf.keras.Model):
            def __init__(self, strategy):
                super().__init__()
                self.strategy = strategy
                self.dense = tf.keras.layers.Dense(1)
            def call(self, x):
                return self.dense(x)
            @staticmethod
            def prepare(x, y):
                return x, y
            def train_on_batch(self, x, y=None, sample_weight=None):
                x, y = self.prepare(x, y)
                return self.step_all(x, y)
            def step_all(self, x, y):
                return self.strategy.experimental_run_v2(self.step, args=(x, y))
            def step(self, x, y):
                return self.call(x)
    """
    assert codes(src, select={"TFP201"}) == [(17, "TFP201")]


def test_data_prepared_by_a_helper_before_the_model_is_input():
    """The replica function hands its input to a helper and feeds what comes back to the model: it is
    input (not a learning rate every replica should get)."""
    src = """
        import tensorflow as tf
        from builders import get_builder
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        train = get_builder("train").load(batch_size=32)
        def step(inputs):
            features, labels = prepare(inputs)
            return model(features)
        it = iter(train)
        strategy.run(step, args=(next(it),))
    """
    assert codes(src) == [(12, "TFP201")]


def test_objects_handed_to_an_imported_class_whose_replica_step_uses_them(tmp_path):
    """A model and an optimizer made outside any scope, handed to a trainer class of another module
    that enters the strategy's scope itself and applies them in its replica step."""
    files = {
        "trainer.py": """
            import tensorflow as tf
            class Trainer:
                def __init__(self, model, optimizer, strategy):
                    self.model = model
                    self.optimizer = optimizer
                    self.strategy = strategy
                def step(self, x):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_sum(self.model(x))
                    grads = tape.gradient(loss, self.model.trainable_variables)
                    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
                def train(self, ds):
                    with self.strategy.scope():
                        for x in self.strategy.experimental_distribute_dataset(ds):
                            self.strategy.run(self.step, args=(x,))
        """,
        "main.py": """
            import tensorflow as tf
            from trainer import Trainer
            strategy = tf.distribute.MirroredStrategy()
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            optimizer = tf.keras.optimizers.Adam()
            Trainer(model, optimizer, strategy).train(tf.data.Dataset.range(8).batch(4))
        """,
    }
    files["requirements.txt"] = "tensorflow==2.17.0\n"  # the optimizer's rule holds from 2.11 on
    got = project_codes(tmp_path, files, "main.py")
    assert (5, "TFP101") in got and (6, "TFP102") in got


def test_library_losses_and_grad_pass_through_are_per_replica_means():
    """A Keras loss function called directly (``keras.metrics.mse``, through a local alias), ``K.mean``,
    and a division done by ``tf.grad_pass_through`` (forward only) leave the loss undivided by the
    global batch."""
    src = """
        import tensorflow as tf
        from tensorflow import keras
        from tensorflow.keras import backend as K
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.layers.Dense(1)])
            opt = keras.optimizers.SGD()
        def step_a(x, y):
            loss_fn = keras.metrics.mse
            with tf.GradientTape() as tape:
                loss = loss_fn(keras.backend.flatten(y), keras.backend.flatten(model(x)))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        def step_b(x, y):
            with tf.GradientTape() as tape:
                loss = K.mean(K.square(model(x) - y))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        def step_c(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x) - y)
                loss = tf.grad_pass_through(lambda t: t / strategy.num_replicas_in_sync)(loss)
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        for step in (step_a, step_b, step_c):
            strategy.run(step, args=(x, y))
    """
    assert codes(src, select={"TFP501"}) == [(12, "TFP501"), (16, "TFP501"), (21, "TFP501")]


def test_gradients_an_earlier_run_returned_clipped_in_the_applying_run():
    """One ``strategy.run`` returns each replica's gradients, a second one clips and applies them:
    each replica still clips its own share."""
    src = """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            opt = tf.keras.optimizers.SGD()
        def grads_of(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            return tape.gradient(loss, model.trainable_variables)
        def apply(grads):
            grads, _ = tf.clip_by_global_norm(grads, 1.0)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        @tf.function
        def train(x):
            grads = strategy.run(grads_of, args=(x,))
            strategy.run(apply, args=(grads,))
    """
    assert codes(src, select={"TFP509"}) == [(12, "TFP509")]


def test_average_loss_divided_by_the_replica_batch_on_the_multi_replica_path():
    """The batch is multiplied by the replicas for the dataset, the trainer gets the per-replica size
    through its constructor; one device on another path does not hide the multi-replica one."""
    src = """
        import tensorflow as tf
        class Train:
            def __init__(self, batch_size, strategy):
                self.batch_size = batch_size
                self.strategy = strategy
            def step(self, x):
                per_example = tf.reduce_sum(x, axis=-1)
                return tf.nn.compute_average_loss(per_example, global_batch_size=self.batch_size)
            def loop(self, ds):
                for x in ds:
                    self.strategy.run(self.step, args=(x,))
        def main(batch_size, gpus):
            if gpus > 1:
                strategy = tf.distribute.MirroredStrategy()
            else:
                strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
            ds = tf.data.Dataset.range(64).batch(batch_size * strategy.num_replicas_in_sync)
            Train(batch_size=batch_size, strategy=strategy).loop(strategy.experimental_distribute_dataset(ds))
    """
    assert codes(src, select={"TFP510"}) == [(9, "TFP510")]


def test_chief_tests_through_a_resolver_none_check_and_a_defaulted_tf_config():
    """``(cr is None) or (cr.task_type == "chief" ...)`` and ``json.loads(os.environ.get("TF_CONFIG") or
    "{}")`` are chief tests; an annotated parameter (``model: Model``) holds what its callers pass."""
    src = """
        import json, os
        import tensorflow as tf
        from tensorflow.keras import Model
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            model.compile(loss="mse")
        def is_chief(strategy):
            cr = strategy.cluster_resolver
            return (cr is None) or (cr.task_type == "chief" and cr.task_id == 0)
        def save(model: Model, strategy):
            if is_chief(strategy):
                model.save("/out/model")
        save(model, strategy)
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        if tf_config.get("task", {}).get("index", 0) == 0:
            model.save("/out/again")
    """
    assert codes(src, select={"TFP603"}) == [(14, "TFP603"), (18, "TFP603")]


def test_objects_a_trainer_builds_before_it_enters_its_strategys_scope():
    """A class that takes a strategy and enters its scope in a method of its own is built before that
    scope is entered: the metrics its constructor makes, updated in its replica step, are made
    outside it."""
    src = """
        import tensorflow as tf
        class Trainer:
            def __init__(self, model, strategy):
                self.model = model
                self.strategy = strategy
                self.loss_metric = tf.keras.metrics.Mean("loss")
            def step(self, x):
                self.loss_metric(tf.reduce_sum(self.model(x)))
            def train(self, ds):
                with self.strategy.scope():
                    for x in self.strategy.experimental_distribute_dataset(ds):
                        self.strategy.run(self.step, args=(x,))
    """
    assert codes(src, select={"TFP103"}) == [(7, "TFP103")]


def test_a_model_wrapped_under_a_strategy_the_callee_makes(tmp_path):
    """A model built by the caller is handed to a function of another module that makes its own
    strategy and wraps the model into a new one under that strategy's scope: reported on both
    sides (where it is wrapped, and where it is made)."""
    files = {
        "pkg/__init__.py": "",
        "pkg/wrap.py": """
            import tensorflow as tf
            class Wrapper(tf.keras.Model):
                def __init__(self, inner):
                    super().__init__()
                    self.inner = inner
                def call(self, x):
                    return self.inner(x)
            def evaluate(model, data):
                strategy = tf.distribute.MirroredStrategy()
                with strategy.scope():
                    wrapped = Wrapper(model)
                    wrapped.compile(loss="mse")
                return wrapped.evaluate(data)
        """,
        "pkg/run.py": """
            import tensorflow as tf
            from .wrap import evaluate
            def main(data):
                model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
                return evaluate(model, data)
        """,
    }
    assert (12, "TFP101") in project_codes(tmp_path, files, "pkg/wrap.py")
    assert project_codes(tmp_path, files, "pkg/run.py") == [(5, "TFP101")]


def test_a_plain_dataset_stored_on_the_branch_without_a_strategy_never_reaches_its_run():
    """``if self.strategy is not None:`` distributes, ``else:`` keeps the plain dataset; the step
    that runs on the replicas is called only under the same test (an attribute only the
    constructor sets): the plain path never reaches it."""
    src = """
        import tensorflow as tf
        class Process:
            def __init__(self, gpus):
                self.strategy = None
                if gpus > 1:
                    self.strategy = tf.distribute.MirroredStrategy()
                with tf.distribute.get_strategy().scope():
                    self.model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            def init(self, train_dataset):
                if self.strategy is not None:
                    self.train_dataset = self.strategy.experimental_distribute_dataset(train_dataset)
                else:
                    self.train_dataset = train_dataset
                self.train_iter = iter(self.train_dataset)
            def step(self, x):
                return self.model(x)
            @tf.function
            def dist_step(self, x):
                return self.strategy.run(self.step, args=(x,))
            def loop(self):
                x = next(self.train_iter)
                if self.strategy is not None:
                    self.dist_step(x)
                else:
                    self.step(x)
        Process(2).init(tf.data.Dataset.range(8).batch(4))
    """
    assert codes(src, select={"TFP201"}) == []
    # the same program with the run on the plain path is reported at its host call
    bad = src.replace("if self.strategy is not None:\n                    self.dist_step(x)",
                      "if self.strategy is None:\n                    self.dist_step(x)")
    assert bad != src
    assert codes(bad, select={"TFP201"}) == [(24, "TFP201")]


def test_calling_an_instance_runs_its_call_method():
    """``stepper(zip(g, v))`` runs ``Stepper.__call__`` (which steps a shared optimizer from threads);
    ``Trainer()(cfg)`` returns what ``Trainer.__call__`` returns."""
    src = """
        import threading
        import tensorflow as tf
        class Stepper:
            def __init__(self, opt):
                self.opt = opt
            def __call__(self, pairs):
                self.opt.apply_gradients(pairs)
        net = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        stepper = Stepper(tf.keras.optimizers.SGD())
        def work():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(net(tf.ones((1, 4))))
            grads = tape.gradient(loss, net.trainable_variables)
            stepper(zip(grads, net.trainable_variables))
        for _ in range(4):
            threading.Thread(target=work).start()
    """
    assert any(line == 8 and code.startswith("TFP30") for line, code in codes(src))
    m = __import__("tfpar_lint.semantic", fromlist=["Module"]).Module
    import libcst as cst
    s2 = textwrap.dedent("""
        import tensorflow as tf
        class Trainer:
            def __call__(self, cfg):
                return tf.distribute.MirroredStrategy()
        strategy = Trainer()(cfg)
        use(strategy)
    """)
    mod = m(cst.parse_module(s2), s2)
    cs = next(c for c in mod.calls if mod.tree.code_for_node(c.node).startswith("use("))
    assert [v.kind for v in mod.infer_at(cs.node.args[0].value, cs)] == ["strategy"]


def test_objects_made_on_two_branches_both_outside_the_scope():
    """``net = big() if wide else small()`` (and the same with if/else): a model on every branch, made
    outside the scope, used in the replica step: each branch's construction is reported."""
    src = """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        if wide:
            net = tf.keras.Sequential([tf.keras.layers.Dense(8)])
        else:
            net = tf.keras.Sequential([tf.keras.layers.Dense(2)])
        opt = tf.keras.optimizers.Adam() if fast else tf.keras.optimizers.SGD()
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(net(x))
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables))
        strategy.run(step, args=(1,))
    """
    got = codes(src, select={"TFP101", "TFP102"})
    assert (5, "TFP101") in got and (7, "TFP101") in got
    assert [c for line, c in got if line == 8] == ["TFP102", "TFP102"]


def test_objects_through_keyword_arguments_collected_in_kwargs():
    """``def train(**kwargs): model = kwargs["model"]`` with ``train(model=...)``: the caller's model."""
    src = """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        def train(**kwargs):
            model = kwargs["model"]
            opt = kwargs.get("opt")
            def step(x):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
            strategy.run(step, args=(1,))
        train(model=tf.keras.Sequential([tf.keras.layers.Dense(1)]), opt=tf.keras.optimizers.SGD())
    """
    got = codes(src, select={"TFP101", "TFP102"})
    assert (13, "TFP101") in got and (13, "TFP102") in got


def test_thread_targets_through_a_default_bound_lambda_and_getters():
    """``fn = lambda w=w: w.run()`` handed to ``Thread(target=fn)`` runs each worker's ``run``;
    ``owner.net.get_vars()`` is the variables its method returns."""
    src = """
        import threading
        import tensorflow as tf
        net = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.SGD()
        class Worker:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt
            def run(self):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(self.net(tf.ones((1, 4))))
                grads = tape.gradient(loss, self.net.trainable_variables)
                self.opt.apply_gradients(zip(grads, self.net.trainable_variables))
        workers = [Worker(net, opt) for _ in range(4)]
        for w in workers:
            fn = lambda w=w: w.run()
            threading.Thread(target=fn).start()
    """
    assert any(line == 13 and code.startswith("TFP30") for line, code in codes(src))
    getter = """
        import threading
        import tensorflow as tf
        class Net:
            def __init__(self):
                self.model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            def get_vars(self):
                return self.model.trainable_variables
        class Owner:
            def __init__(self):
                self.net = Net()
                self.opt = tf.keras.optimizers.SGD()
        owner = Owner()
        def work():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(owner.net.model(tf.ones((1, 4))))
            grads = tape.gradient(loss, owner.net.get_vars())
            owner.opt.apply_gradients(zip(grads, owner.net.get_vars()))
        for _ in range(4):
            threading.Thread(target=work).start()
    """
    assert any(line == 18 and code.startswith("TFP30") for line, code in codes(getter))


def test_attributes_set_through_an_alias_of_self():
    """``this = self; this.model = ...`` sets the object's ``model`` like ``self.model = ...``: made
    outside the scope here; under ``with self.strategy.scope():`` in the correct twin."""
    src = """
        import tensorflow as tf
        class T:
            def __init__(self):
                self.strategy = tf.distribute.MirroredStrategy()
                this = self
                this.model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            def step(self, x):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(self.model(x))
                return tape.gradient(loss, self.model.trainable_variables)
            def go(self, x):
                return self.strategy.run(self.step, args=(x,))
    """
    assert codes(src, select={"TFP101"}) == [(7, "TFP101")]
    good = src.replace("                this.model = tf.keras", "                with self.strategy.scope():\\n"
                                                          "                    this.model = tf.keras")
    assert good != src and codes(good, select={"TFP101"}) == []


def test_a_per_replica_value_keeps_its_kind_through_arithmetic():
    """``scaled = out / 255.0`` of a ``strategy.run`` result is still per-replica: ``.numpy()`` of it
    fails like of the result itself (and the division already does)."""
    src = """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        def step(x):
            return x * 2
        @tf.function
        def run(x):
            return strategy.run(step, args=(x,))
        ds = strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4))
        for b in ds:
            out = run(b)
            scaled = out / 255.0
            print(scaled.numpy())
    """
    assert codes(src, select={"TFP506"}) == [(12, "TFP506"), (13, "TFP506")]


def test_library_returns_config_batch_sizes_and_the_old_auto_shard_spelling():
    """``tfds.load(name)`` is a dict of datasets and ``with_info=True`` a pair; a batch size read from a
    config dict is the same value at each read (TFP209); ``auto_shard = False`` turns sharding off
    (TFP204)."""
    import libcst as cst
    from tfpar_lint.semantic import Module

    s = textwrap.dedent("""
        import tensorflow_datasets as tfds
        a = tfds.load("mnist")
        (train, test), info = tfds.load("mnist", split=["train", "test"], with_info=True)
        use(a["train"], train, test, info)
    """)
    m = Module(cst.parse_module(s), s)
    cs = next(c for c in m.calls if m.tree.code_for_node(c.node).startswith("use("))
    assert [[v.kind for v in m.infer_at(a.value, cs)] for a in cs.node.args] == [
        ["dataset"], ["dataset"], ["dataset"], ["unknown"]]
    conf = """
        import tensorflow as tf
        conf = load_config()
        strategy = tf.distribute.MirroredStrategy()
        ds = tf.data.Dataset.range(64).batch(conf["batch_size"])
        dist = strategy.experimental_distribute_dataset(ds)
        def step(x):
            noise = tf.random.normal((conf["batch_size"], 4))
            return x + noise
        for x in dist:
            strategy.run(step, args=(x,))
    """
    assert codes(conf, select={"TFP209"}) == [(8, "TFP209")]
    old = """
        import tensorflow as tf
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        options = tf.data.Options()
        options.experimental_distribute.auto_shard = False
        ds = tf.data.Dataset.range(64).batch(8).with_options(options)
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            model.compile(loss="mse")
        model.fit(ds)
    """
    assert codes(old, select={"TFP204"}) == [(6, "TFP204")]


def test_attributes_keras_sets_on_a_model():
    """In a Keras model subclass, ``self.optimizer`` is what ``compile(optimizer=...)`` was given and
    ``self.distribute_strategy`` the strategy it was made under: the optimizer made outside the scope
    is applied in the replica step that strategy runs."""
    src = """
        import tensorflow as tf
        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.dense = tf.keras.layers.Dense(1)
            def call(self, x):
                return self.dense(x)
            def step(self, x):
                with tf.GradientTape() as tape:
                    loss = self.loss(x, self(x))
                grads = tape.gradient(loss, self.trainable_variables)
                self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            def train(self, x):
                return self.distribute_strategy.run(self.step, args=(x,))
        opt = tf.keras.optimizers.Adam()
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            net = Net()
        net.compile(optimizer=opt, loss="mse")
    """
    assert codes(src, select={"TFP102"}) == [(16, "TFP102")]


def test_pairs_unzipped_and_jobs_appended_to_an_attribute_in_threads():
    """Workers appended to ``self.jobs``, each applying gradients to the variables of
    ``zip(*owner.grads_and_vars)`` (what ``compute_gradients`` gave the shared optimizer), run by
    threads that share one session: the shared variables are updated unlocked."""
    src = """
        import threading
        import tensorflow as tf
        tf.compat.v1.disable_eager_execution()
        class Global:
            def __init__(self):
                self.net = tf.keras.Sequential([tf.keras.layers.Dense(1)])
                self.optimizer = tf.compat.v1.train.AdamOptimizer()
                self.loss = tf.reduce_sum(self.net(tf.ones((1, 4))))
                self.grads_and_vars = self.optimizer.compute_gradients(self.loss, self.net.trainable_variables)
        class Job:
            def __init__(self, owner, sess):
                self.owner = owner
                self.sess = sess
                local = tf.reduce_sum(tf.ones((1,)))
                grads = [tf.ones_like(v) for v in owner.net.trainable_variables]
                _, gvars = zip(*owner.grads_and_vars)
                self.train_op = owner.optimizer.apply_gradients(list(zip(grads, gvars)))
            def work(self):
                self.sess.run(self.train_op)
        class Runner:
            def __init__(self, sess):
                self.glob = Global()
                self.jobs = []
                for _ in range(4):
                    self.jobs.append(Job(self.glob, sess))
            def start(self):
                for job in self.jobs:
                    threading.Thread(target=job.work).start()
        with tf.compat.v1.Session() as sess:
                    Runner(sess).start()
    """
    assert (20, "TFP302") in codes(src)


def test_a_loss_helper_and_a_thread_subclass_of_other_modules(tmp_path):
    """TFP501 follows a loss helper another module defines (reported at its call); a
    ``threading.Thread`` subclass defined in one module and started in another is analysed where
    its update is."""
    files = {
        "losses.py": """
            import tensorflow as tf
            def my_loss(y, p):
                return tf.reduce_mean(tf.square(y - p))
        """,
        "train.py": """
            import tensorflow as tf
            from losses import my_loss
            strategy = tf.distribute.MirroredStrategy()
            with strategy.scope():
                model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
                opt = tf.keras.optimizers.SGD()
            @tf.function
            def step(x, y):
                with tf.GradientTape() as tape:
                    loss = my_loss(y, model(x))
                opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            for x, y in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4)):
                strategy.run(step, args=(x, y))
        """,
        "workers.py": """
            import threading
            import tensorflow as tf
            class Worker(threading.Thread):
                def __init__(self, net, opt):
                    super().__init__()
                    self.net, self.opt = net, opt
                def run(self):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_sum(self.net(tf.ones((1, 4))))
                    grads = tape.gradient(loss, self.net.trainable_variables)
                    self.opt.apply_gradients(zip(grads, self.net.trainable_variables))
        """,
        "main.py": """
            import tensorflow as tf
            from workers import Worker
            net = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            opt = tf.keras.optimizers.SGD()
            for _ in range(4):
                Worker(net, opt).start()
        """,
    }
    assert project_codes(tmp_path, files, "train.py") == [(11, "TFP501")]
    assert project_codes(tmp_path, files, "workers.py") == [(12, "TFP302")]


def test_a_checkpoint_callback_subclassed_in_another_module(tmp_path):
    """A ``ModelCheckpoint`` subclass defined in another package of the project, built only on the
    chief for a multi-worker fit: its save is a collective the other workers never join."""
    files = {
        "utils/__init__.py": "",
        "utils/callbacks.py": """
            import tensorflow as tf
            class BestCheckpoint(tf.keras.callbacks.ModelCheckpoint):
                def __init__(self, path):
                    super().__init__(path, save_best_only=True)
        """,
        "train.py": """
            import json, os
            import tensorflow as tf
            from utils.callbacks import BestCheckpoint
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
            with strategy.scope():
                model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
                model.compile(loss="mse")
            callbacks = []
            if strategy.cluster_resolver.task_id == 0:
                callbacks.append(BestCheckpoint("/ckpt"))
            model.fit(tf.data.Dataset.range(8).batch(4), callbacks=callbacks)
        """,
        "requirements.txt": "tensorflow==2.15.0\n",
    }
    assert (11, "TFP603") in project_codes(tmp_path, files, "train.py")
