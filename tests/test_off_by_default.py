"""Off-by-default rules, checked in both directions with every rule on.

The fixture and corpus tests check that each ``# expect:`` line is reported and nothing else; these
snippets hold the shapes an off-by-default rule must leave alone because another rule owns them, where no
fixture has that shape (a rule that starts firing there fails here, not only "expected lines found").
"""
from __future__ import annotations

import textwrap

import pytest

from tfpar_lint.engine import lint_source
from tfpar_lint.registry import all_rules

ALL = [r.CODE for r in all_rules()]
OFF = sorted(r.CODE for r in all_rules() if not r.DEFAULT_ENABLED)


def findings(src: str) -> list[tuple[int, str]]:
    res = lint_source(textwrap.dedent(src), "t.py", enabled=ALL)
    assert res.error is None, res.error
    return sorted((f.line, f.code) for f in res.findings)


def test_the_off_by_default_rules():
    """The snippets below cover each off-by-default rule; a new one needs its own here."""
    assert OFF == ["TFP108", "TFP113", "TFP403", "TFP900"]


# TFP108 (hard-coded /GPU:N, N >= 1, unchecked): inside a strategy's scope or a replica function the
# pin is TFP107's mistake, and TFP108 stays silent.
GPU1_IN_SCOPE = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    with tf.device("/GPU:1"):
        table = tf.Variable(tf.ones((4, 2)))
"""

GPU1_IN_REPLICA_FN = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
def step(x):
    with tf.device("/GPU:1"):
        return tf.matmul(x, x)
@tf.function
def run(x):
    return strategy.run(step, args=(x,))
"""

GPU1_OUTSIDE = """\
import tensorflow as tf
x = tf.ones((2, 2))
with tf.device("/GPU:1"):
    y = tf.matmul(x, x)
"""

GPU1_CHECKED = """\
import tensorflow as tf
assert len(tf.config.list_logical_devices("GPU")) >= 2
x = tf.ones((2, 2))
with tf.device("/GPU:1"):
    y = tf.matmul(x, x)
"""


@pytest.mark.parametrize("src, expected", [
    (GPU1_IN_SCOPE, [(4, "TFP107")]),
    (GPU1_IN_REPLICA_FN, [(4, "TFP107")]),
    (GPU1_OUTSIDE, [(3, "TFP108")]),
    (GPU1_CHECKED, []),
], ids=["in-scope", "in-replica-fn", "outside", "checked"])
def test_tfp108_both_ways(src, expected):
    assert findings(src) == expected


# TFP403 (legacy global RNG op in a replica function): outside the replica function, or with an op seed,
# it is not reported.
RNG_IN_REPLICA_FN = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
def replica_fn(x):
    return x + tf.random.uniform([1])
def step(x):
    return strategy.run(replica_fn, args=(x,))
"""

RNG_OUTSIDE = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
noise = tf.random.uniform([1])
def replica_fn(x):
    return x + noise
def step(x):
    return strategy.run(replica_fn, args=(x,))
"""


@pytest.mark.parametrize("src, expected", [
    (RNG_IN_REPLICA_FN, [(4, "TFP403")]),
    (RNG_OUTSIDE, []),
], ids=["in-replica-fn", "outside"])
def test_tfp403_both_ways(src, expected):
    assert findings(src) == expected


# TFP900 (unused-noqa): a `# noqa` code that silences a real finding is used; one that silences nothing,
# or names a rule that is not enabled, is reported (also with every rule on, as here).
@pytest.mark.parametrize("src, expected", [
    ("""\
     import tensorflow as tf
     strategy = tf.distribute.MirroredStrategy()
     model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # noqa: TFP101
     with strategy.scope():
         model.compile(optimizer="sgd", loss="mse")
     """, []),
    ("""\
     import tensorflow as tf
     strategy = tf.distribute.MirroredStrategy()
     with strategy.scope():
         model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # noqa: TFP101, E501
     """, [(4, "TFP900")]),
    ("x = 1  # noqa\n", []),  # a bare noqa may serve other tools: never judged
])
def test_tfp900_both_ways(src, expected):
    assert findings(src) == expected


# TFP113 (a Keras 3 optimizer first built in a traced strategy.run step): an optimizer built in the scope,
# or compiled into a model, is left alone; one created outside the scope is TFP102's, not TFP113's.
BUILT_OR_COMPILED = """\
import keras
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    built = keras.optimizers.Adam()
    built.build(model.trainable_variables)
outside = keras.optimizers.Adam()


def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    built.apply_gradients(zip(grads, model.trainable_variables))
    outside.apply_gradients(zip(grads, model.trainable_variables))


@tf.function
def train(x):
    strategy.run(step, args=(x,))
"""


def test_tfp113_leaves_built_optimizers_and_tfp102_cases():
    got = findings(BUILT_OR_COMPILED)
    assert not [f for f in got if f[1] == "TFP113"], got
    assert (8, "TFP102") in got, got
