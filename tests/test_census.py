"""The census of lost values (``tfpar-lint --explain-silence``): each question a rule needs answered
that got no kind is listed with the reason the analysis lost the value."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from tfpar_lint.semantic import Module
from tfpar_lint.semantic import census

SRC = str(Path(__file__).resolve().parents[1] / "src")


def lost(src: str) -> list[tuple[str, str, str]]:
    m = Module(cst.parse_module(src), src)
    return [(q.role, q.reason, m.code(q.node)) for q in census.questions(m)]


def test_a_known_strategy_function_and_distributed_input_lose_nothing():
    src = ("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
           "ds = s.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4))\n"
           "def step(x):\n    return x\n"
           "for x in ds:\n    s.run(step, args=(x,))\n")
    assert lost(src) == []


@pytest.mark.parametrize("src,want", [
    # a name bound nowhere (a star import): the data handed to the replicas
    ("from loaders import *\nimport tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
     "m = tf.keras.Sequential()\ndef step(x):\n    return m(x)\ns.run(step, args=(batch,))\n",
     ("replica input", "unbound name", "batch")),
    # an item of something the analysis cannot take apart
    ("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
     "m = tf.keras.Sequential()\ndef step(x):\n    return m(x)\nfor x in zip(a, b):\n    s.run(step, args=(x,))\n",
     ("replica input", "container", "x")),
    # a decorator's wrapper hands the decorated function to the replicas (the function is known:
    # whatever wraps it) with the wrapper's *args (not followed)
    ("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
     "def on_replicas(fn):\n    def wrapper(*a):\n        return s.run(fn, args=a)\n    return wrapper\n"
     "m = tf.keras.Sequential()\n@on_replicas\ndef step(x):\n    return m(x)\n",
     ("replica input", "**kwargs", "a")),
    # an attribute of an object of unknown class, used in a replica function
    ("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
     "class T(Base):\n    def step(self, x):\n        return self.net(x)\n"
     "    def go(self, x):\n        return s.run(self.step, args=(x,))\n",
     ("object in replica function", "attribute of unknown class", "self.net")),
])
def test_each_loss_is_listed_with_its_reason(src, want):
    assert want in lost(src)


def test_the_cli_lists_the_losses_and_counts_them(tmp_path):
    (tmp_path / "train.py").write_text(
        "from loaders import *\nimport tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
        "m = tf.keras.Sequential()\ndef step(x):\n    return m(x)\ns.run(step, args=(batch,))\n")
    r = subprocess.run([sys.executable, "-m", "tfpar_lint", "--explain-silence", "--no-cache", "train.py"],
                       cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "train.py:7:19: replica input: unbound name: `batch`" in r.stdout
    assert "1 question(s) got no kind" in r.stdout and "unbound name" in r.stdout.splitlines()[-1]


def test_answered_questions_are_listed_only_when_asked_for():
    src = ("from loaders import *\nimport tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
           "m = tf.keras.Sequential()\ndef step(x):\n    return m(x)\ns.run(step, args=(batch,))\n")
    mod = Module(cst.parse_module(src), src)
    got = {(q.role, q.reason, mod.code(q.node)) for q in census.questions(mod, answered=True)}
    assert got == {("strategy", census.ANSWERED, "s"), ("replica function", census.ANSWERED, "step"),
                   ("replica input", "unbound name", "batch"), ("object in replica function", census.ANSWERED, "m")}
    assert all(q.reason != census.ANSWERED for q in census.questions(mod))


def test_a_library_function_run_on_the_replicas_is_known():
    src = ("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
           "s.extended.call_for_each_replica(tf.compat.v1.metrics.mean, args=(x,))\n"
           "s.run(tf.identity, args=(1.0,))\n")
    assert [r for r in lost(src) if r[0] == "replica function"] == []
