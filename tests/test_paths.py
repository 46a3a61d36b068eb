"""Paths that cannot run together (issue 28 item 3): the conditions on one value along a path must
agree.  ``semantic/paths.py`` answers it for every rule; each shape here is an invented snippet,
with its mistaken twin that must still be reported."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tfpar_lint.engine import lint_source
from tfpar_lint.semantic import Module


def module(src: str) -> Module:
    src = textwrap.dedent(src)
    return Module(cst.parse_module(src), src)


def site(m: Module, text: str):
    for cs in m.calls:
        if m.tree.code_for_node(cs.node).startswith(text):
            return cs
    raise AssertionError(text)


def codes(src: str, select=None) -> list[tuple[int, str]]:
    res = lint_source(textwrap.dedent(src), "snippet.py", enabled=select)
    return sorted((f.line, f.code) for f in res.findings)


# ------------------------------------------------------------------ the question itself
@pytest.mark.parametrize("first, second, together", [
    ("if s is None:", "if s:", False),
    ("if s is not None:", "if not s:", True),  # s may be a false value that is not None (0, "")
    ("if s is not None:", "if s is None:", False),
    ("if mode == 'tpu':", "if mode == 'gpu':", False),
    ("if mode == 'tpu':", "if mode != 'gpu':", True),
    ("if n > 1:", "if n <= 1:", False),
    ("if n > 1:", "if n == 2:", True),
    ("if n in (1, 2):", "if n == 3:", False),
    ("if a and s is None:", "if s:", False),
    ("if a or s is None:", "if s:", True),  # a disjunction tells nothing about s alone
    ("if not s:", "if s:", False),
])
def test_tests_on_one_value_must_agree(first, second, together):
    m = module(f"""
        def f(s, mode, n, a):
            {first}
                g(1)
            {second}
                g(2)
    """)
    assert m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs) is together


def test_a_value_rebound_between_the_tests_is_another_value():
    m = module("""
        def f(s):
            if s is None:
                g(1)
            s = make()
            if s:
                g(2)
    """)
    assert m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs)


def test_a_test_in_a_loop_that_rebinds_its_name_is_not_one_value():
    m = module("""
        def f(items):
            s = None
            for x in items:
                if s is None:
                    g(1)
                if s:
                    g(2)
                s = x
    """)
    assert m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs)


def test_the_assignments_that_reach_a_test_on_the_path():
    m = module("""
        import tensorflow as tf
        def f(use_dist):
            strategy = None
            if use_dist:
                strategy = tf.distribute.MirroredStrategy()
            else:
                g(1)
            if strategy:
                g(2)
    """)
    # through the else of `if use_dist:` only `strategy = None` reaches `if strategy:`
    assert not m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs)


def test_the_arm_of_a_conditional_expression_the_path_takes():
    m = module("""
        import tensorflow as tf
        def f(use_dist):
            strategy = tf.distribute.MirroredStrategy() if use_dist else None
            if not use_dist:
                g(1)
            if strategy:
                g(2)
    """)
    assert not m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs)


def test_an_attribute_only_the_constructor_sets_is_one_value_in_every_method():
    src = """
        import tensorflow as tf
        class T:
            def __init__(self, use_dist):
                self.strategy = tf.distribute.MirroredStrategy() if use_dist else None
                if self.strategy is None:
                    g(1)
            def train(self):
                if self.strategy:
                    g(2)
    """
    m = module(src)
    assert not m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs)
    # another method may set it: the two tests may read different values
    m = module(src + "\n            def reset(self):\n                self.strategy = None\n")
    assert m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs)


def test_a_module_level_attribute_stored_elsewhere_is_not_one_value():
    m = module("""
        args = parse()
        def f():
            if args.gpus > 1:
                g(1)
        def h():
            if args.gpus <= 1:
                g(2)
    """)
    assert not m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs)
    m = module("""
        args = parse()
        def f():
            if args.gpus > 1:
                g(1)
        def h():
            args.gpus = 4
            if args.gpus <= 1:
                g(2)
    """)
    assert m.together(site(m, "g(1)").ifs, site(m, "g(2)").ifs)


# ------------------------------------------------------------------ the rules that ask it
RUN_GOOD = """
    import tensorflow as tf

    def main(use_dist):
        strategy = tf.distribute.MirroredStrategy() if use_dist else None
        ds = tf.data.Dataset.range(8).batch(4)
        if strategy:
            ds = strategy.experimental_distribute_dataset(ds)

        def step(x):
            return x * 2

        for x in ds:
            if strategy:
                strategy.run(step, args=(x,))
            else:
                step(x)
"""


def test_tfp201_the_plain_dataset_reaches_the_run_only_where_there_is_no_strategy():
    """The plain dataset survives only where the first `if strategy:` is false; the run is in the
    body of the second: that path cannot be taken."""
    assert codes(RUN_GOOD, ["TFP201"]) == []
    # distributed under another name: the plain dataset does reach the run
    bad = RUN_GOOD.replace("ds = strategy.experimental_distribute_dataset(ds)",
                           "dist = strategy.experimental_distribute_dataset(ds)")
    assert codes(bad, ["TFP201"]) == [(15, "TFP201")]


def test_tfp201_equalities_with_literals_on_one_value():
    src = """
        import tensorflow as tf

        def main(mode):
            strategy = tf.distribute.MirroredStrategy()
            ds = tf.data.Dataset.range(8).batch(4)
            if mode == "dist":
                ds = strategy.experimental_distribute_dataset(ds)

            def step(x):
                return x * 2

            for x in ds:
                if mode == "dist":
                    strategy.run(step, args=(x,))
    """
    assert codes(src, ["TFP201"]) == []
    bad = src.replace('if mode == "dist":\n' + " " * 20 + "strategy.run", 'if mode != "eval":\n' + " " * 20 + "strategy.run")
    assert bad != src and codes(bad, ["TFP201"]) == [(15, "TFP201")]


MODEL_ONE_FUNCTION = """
    import tensorflow as tf

    def build():
        return tf.keras.Sequential([tf.keras.layers.Dense(1)])

    def main(use_dist):
        strategy = None
        if use_dist:
            strategy = tf.distribute.MirroredStrategy()
            with strategy.scope():
                model = build()
        else:
            model = build()
        if strategy:
            with strategy.scope():
                model.compile("adam", "mse")
        else:
            model.compile("adam", "mse")
        model.fit([[1.0]], [[1.0]])
"""


def test_tfp101_an_unscoped_model_exists_only_where_the_strategy_is_none():
    assert codes(MODEL_ONE_FUNCTION, ["TFP101"]) == []
    # made on a path of its own (`if fresh:`), which can meet `if strategy:`
    bad = MODEL_ONE_FUNCTION.replace("        else:\n            model = build()", "        if fresh:\n            model = build()")
    bad = bad.replace("def main(use_dist):", "def main(use_dist, fresh):")
    assert bad != MODEL_ONE_FUNCTION
    assert codes(bad, ["TFP101"]) == [(14, "TFP101")]


def test_tfp101_none_test_and_truth_test_on_one_name():
    src = """
        import tensorflow as tf

        def build():
            return tf.keras.Sequential([tf.keras.layers.Dense(1)])

        def main(use_dist):
            strategy = None
            if use_dist:
                strategy = tf.distribute.MirroredStrategy()
            if strategy is None:
                model = build()
            else:
                with strategy.scope():
                    model = build()
            if strategy:
                with strategy.scope():
                    model.compile("adam", "mse")
    """
    assert codes(src, ["TFP101"]) == []


CLASS_SRC = """
    import tensorflow as tf

    def build():
        return tf.keras.Sequential([tf.keras.layers.Dense(1)])

    class Runner:
        def __init__(self, use_dist):
            self.strategy = tf.distribute.MirroredStrategy() if use_dist else None
            if use_dist:
                with self.strategy.scope():
                    self.model = build()
            else:
                self.model = build()

        def train(self):
            if self.strategy:
                with self.strategy.scope():
                    self.model.compile("adam", "mse")
            else:
                self.model.compile("adam", "mse")
"""


def test_tfp101_conditions_in_two_methods_of_one_class():
    """``__init__`` sets ``self.strategy = ... if use_dist else None`` and makes the plain model in
    the else of ``if use_dist:``; ``train()`` compiles under the scope only ``if self.strategy:``."""
    assert codes(CLASS_SRC, ["TFP101"]) == []
    # the plain model is made where the strategy exists: reported
    bad = CLASS_SRC.replace("            if use_dist:\n                with self.strategy.scope():\n"
                            "                    self.model = build()\n            else:\n"
                            "                self.model = build()\n",
                            "            if self.strategy is not None:\n                self.model = build()\n")
    assert codes(bad, ["TFP101"]) == [(11, "TFP101")]


LOADER = """
    import tensorflow as tf

    def load(batch_size, strategy=None):
        ds = tf.data.Dataset.range(64).batch(batch_size)
        if strategy:
            return strategy.experimental_distribute_dataset(ds)
        else:
            return ds

    def step(x):
        return x * 2

    def main():
        strategy = tf.distribute.MirroredStrategy()
        train = load(8, strategy=strategy)
        iterator = iter(train)
        strategy.run(step, args=(next(iterator),))
"""


def test_tfp201_a_loader_returns_the_plain_dataset_only_when_given_no_strategy():
    """The plain dataset is returned on the ``else`` of ``if strategy:``, and every caller passes a
    strategy object: that branch is not taken (the parameter's values come from its callers)."""
    assert codes(LOADER, ["TFP201"]) == []
    # a caller that passes none: the plain dataset reaches the run
    bad = LOADER.replace("train = load(8, strategy=strategy)", "train = load(8)")
    assert bad != LOADER and codes(bad, ["TFP201"]) == [(18, "TFP201")]


def test_a_parameter_is_what_its_callers_pass():
    m = module("""
        import tensorflow as tf
        def load(strategy=None):
            if strategy:
                g(1)
            else:
                g(2)
        load(tf.distribute.MirroredStrategy())
    """)
    assert not m.together(site(m, "g(2)").ifs)
    assert m.together(site(m, "g(1)").ifs)


def test_tfp201_each_call_of_the_loader_is_judged_with_its_own_arguments():
    """Another caller that passes no strategy does not make the `else` reachable for this one."""
    src = LOADER + textwrap.indent(textwrap.dedent("""

        def evaluate():
            strategy = tf.distribute.MirroredStrategy()
            iterator = iter(load(8))
            strategy.run(step, args=(next(iterator),))
    """), "    ")
    assert codes(src, ["TFP201"]) == [(24, "TFP201")]
