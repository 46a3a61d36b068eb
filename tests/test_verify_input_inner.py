"""A plain tf.data dataset iterated inside the replica function (issue 10: a runtime finding where the
linter is silent).  Every replica makes its own iterator over the same dataset and reads the same
batches; the input probe compares what each replica read and reports TFP201 at the ``strategy.run``
call.  A replica function that shards the dataset by its replica id reads different data: nothing."""
from __future__ import annotations

import importlib.util
import json

import pytest

from tfpar_lint.finding import CONFIRMED, RUNTIME

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
]

HEAD = """\
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
x = np.arange(64, dtype="float32").reshape(16, 4)
ds = tf.data.Dataset.from_tensor_slices(x).batch(8)
with strategy.scope():
    w = tf.Variable(tf.ones((4, 1)))
"""

SCRIPTS = {
    # (text, line of the iter()/for inside the replica function [of the value function for
    # values_fn_same.py], line of strategy.run or None)
    "for_loop_inside.py": (HEAD + """

def replica_step():
    total = 0.0
    for batch in ds.take(2):
        total += tf.reduce_sum(tf.matmul(batch, w))
    return total


for epoch in range(2):
    out = strategy.run(replica_step)
    print(strategy.experimental_local_results(out))
""", 13, 19),
    "next_iter_inside.py": (HEAD + """

def replica_step():
    batch = next(iter(ds))
    return tf.reduce_sum(tf.matmul(batch, w))


for epoch in range(2):
    out = strategy.run(replica_step)
    print(strategy.experimental_local_results(out))
""", 12, 17),
    "sharded_inside.py": (HEAD + """

def replica_step():
    ctx = tf.distribute.get_replica_context()
    rid = tf.cast(ctx.replica_id_in_sync_group, tf.int64)
    mine = ds.unbatch().shard(ctx.num_replicas_in_sync, rid).batch(4)
    total = 0.0
    for batch in mine.take(2):
        total += tf.reduce_sum(tf.matmul(batch, w))
    return total


for epoch in range(2):
    out = strategy.run(replica_step)
    print(strategy.experimental_local_results(out))
""", 16, None),
    # A value function that hands every replica the same batch, fed to strategy.run inside a tf.function.
    "values_fn_same.py": (HEAD + """

@tf.function
def step(per_replica):
    return strategy.run(lambda b: tf.reduce_sum(tf.matmul(b, w)), args=(per_replica,))


for batch in ds:
    per_replica = strategy.experimental_distribute_values_from_function(lambda ctx: batch)
    print(strategy.experimental_local_results(step(per_replica)))
""", 17, 13),
}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inner")
    out = {}
    for name, (text, _inner, _run) in SCRIPTS.items():
        p = folder / name
        p.write_text(text)
        out[name] = str(p)
    return out


def _verify(cli, path):
    r = cli("--verify", "--devices", "cpu:2", "--timeout", "180", "--format", "json", "--no-cache", "--no-config",
            path)
    return r, json.loads(r.out)


@pytest.mark.parametrize("name", ["for_loop_inside.py", "next_iter_inside.py"])
def test_dataset_iterated_inside_the_replica_function_is_found(scripts, cli, name):
    _text, inner, run_line = SCRIPTS[name]
    r, findings = _verify(cli, scripts[name])
    assert r.rc == 1, r.out + r.err
    hits = [d for d in findings if d["code"] == "TFP201"
            and (d.get("verification") or {}).get("status") in (CONFIRMED, RUNTIME)]
    assert hits, findings
    d = hits[0]
    ev = d["verification"]["evidence"]
    assert f"iter() at line {inner}, inside the replica function" in ev, ev
    assert "identical on every replica" in ev and "(8, 4) float32" in ev, ev
    if d["verification"]["status"] == RUNTIME:  # the linter is silent: reported at the strategy.run call
        assert d["line"] == run_line, d


def test_dataset_sharded_by_replica_inside_the_replica_function_is_not(scripts, cli):
    r, findings = _verify(cli, scripts["sharded_inside.py"])
    assert r.rc == 0, r.out + r.err
    assert not [d for d in findings if (d.get("verification") or {}).get("status") in (CONFIRMED, RUNTIME)], findings
    r = cli("--verify", "-v", "--devices", "cpu:2", "--timeout", "180", "--no-cache", "--no-config",
            scripts["sharded_inside.py"])
    assert r.rc == 0, r.out + r.err
    assert (f"read different data from the dataset they iterated inside the replica function (iter() at line "
            f"{SCRIPTS['sharded_inside.py'][1]})") in r.out, r.out


def test_same_value_for_every_replica_is_one_finding(scripts, cli):
    """The value function's mistake is reported once, where the values are made (TFP202), not a second
    time at the strategy.run call that receives them."""
    _text, values_line, run_line = SCRIPTS["values_fn_same.py"]
    r, findings = _verify(cli, scripts["values_fn_same.py"])
    assert r.rc == 1, r.out + r.err
    hits = [(d["code"], d["line"]) for d in findings
            if (d.get("verification") or {}).get("status") in (CONFIRMED, RUNTIME)]
    assert hits == [("TFP202", values_line)], findings
