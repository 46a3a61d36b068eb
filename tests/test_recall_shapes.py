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
