"""flake8 integration: the TFP plugin through real flake8 processes."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("flake8")

FLAKE8 = [sys.executable, "-m", "flake8"]

# One snippet per off-by-default rule, each triggering its rule (test_default_off_rules_off_unless_selected).
DEFAULT_OFF_SNIPPETS = {
    # TFP403: a legacy global RNG op inside a function run by strategy.run.
    "TFP403": """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()


def replica_fn(x):
    return x + tf.random.uniform([1])


def step(x):
    return strategy.run(replica_fn, args=(x,))
""",
    # TFP108: a hard-coded second GPU, and nothing checks which devices exist.
    "TFP108": """\
import tensorflow as tf
x = tf.ones((2, 2))
with tf.device("/GPU:1"):
    y = tf.matmul(x, x)
""",
    # TFP113: a Keras 3 Adam made in the scope, first built inside a traced strategy.run step
    # (`keras.ops` says Keras 3).
    "TFP113": """\
import keras
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam()


def step(x):
    with tf.GradientTape() as tape:
        loss = keras.ops.sum(model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


@tf.function
def train(x):
    strategy.run(step, args=(x,))
""",
}

# the strategy's only use, `run(step)` with no arguments, does not tell that it is one: only the
# configured factory does (a scope taken or `run(fn, args=...)` would: semantic/uses.py)
FACTORY_SRC = """\
import tensorflow as tf
from mypkg.dist import make_strategy

strategy = make_strategy()
counter = tf.Variable(0.0)
def step():
    counter.assign_add(1.0)
strategy.run(step)
"""


@pytest.fixture
def flake8(proc):
    def run(cwd: Path, *args: str):
        return proc([*FLAKE8, "--isolated", *args], cwd)
    return run


def test_plugin_is_registered(project, proc):
    r = proc([*FLAKE8, "--version"], project.root)
    assert r.rc == 0 and "tfpar-lint" in r.out


def test_line_and_column_as_flake8_prints_them(project, snippets, flake8, proc):
    project.write("a.py", snippets.tfp101)
    r = flake8(project.root, "--select", "TFP", "a.py")
    assert r.rc == 1, r.err
    assert r.out.splitlines() == [r.out.splitlines()[0]]
    assert r.out.startswith("./a.py:3:9: TFP101 ") or r.out.startswith("a.py:3:9: TFP101 "), r.out
    # the standalone CLI prints the same position and message
    ours = proc([sys.executable, "-m", "tfpar_lint", "a.py"], project.root)
    assert ours.out.strip().split(":", 1)[1] == r.out.strip().split(":", 1)[1]


def test_plugin_runs_by_default_with_other_checks(project, snippets, flake8):
    project.write("a.py", snippets.tfp101 + "import os\n")
    r = flake8(project.root, "a.py")
    codes = [ln.split()[1] for ln in r.out.splitlines()]
    assert "TFP101" in codes and "F401" in codes


@pytest.mark.parametrize("comment, reported", [
    ("  # noqa", False),
    ("  # noqa: TFP101", False),
    ("  # noqa:TFP1", False),
    ("  # noqa: E501", True),
    ("  # noqa: TFP2", True),
])
def test_noqa_honoured(project, snippets, comment, reported, flake8):
    lines = snippets.tfp101.splitlines()
    lines[2] += comment
    project.write("a.py", "\n".join(lines) + "\n")
    r = flake8(project.root, "--select", "TFP", "a.py")
    assert ("TFP101" in r.out) is reported, r.out
    assert r.rc == (1 if reported else 0)


def test_every_default_off_rule_has_a_snippet():
    from tfpar_lint import registry

    # the noqa rules (TFP9xx) judge `# noqa` comments, which flake8 handles itself: command only
    off = {r.CODE for r in registry.all_rules() if not r.DEFAULT_ENABLED and not getattr(r, "TEXT_ONLY", False)}
    assert set(DEFAULT_OFF_SNIPPETS) == off


@pytest.mark.parametrize("code", sorted(DEFAULT_OFF_SNIPPETS))
def test_default_off_rules_off_unless_selected(project, code, flake8, proc):
    from tfpar_lint import registry

    rule = registry.rules_by_code().get(code)
    assert rule is not None and not rule.DEFAULT_ENABLED, f"{code} is no longer an off-by-default rule"
    project.write("r.py", DEFAULT_OFF_SNIPPETS[code])
    ours = proc([sys.executable, "-m", "tfpar_lint", "--select", code, "r.py"], project.root)
    assert ours.rc == 1 and f" {code} " in ours.out, f"the snippet must trigger {code}: {ours.out}{ours.err}"
    assert code not in flake8(project.root, "r.py").out                       # default: off
    assert code in flake8(project.root, "--extend-select", code, "r.py").out  # opt-in
    assert code in flake8(project.root, "--select", code, "r.py").out
    # a prefix turns no opt-in rule on, in either front end (issue 23)
    assert code not in flake8(project.root, "--select", "TFP", "r.py").out
    assert code not in flake8(project.root, "--select", code[:4], "r.py").out
    assert code not in proc([sys.executable, "-m", "tfpar_lint", "--select", "TFP", "r.py"], project.root).out
    project.write("setup.cfg", f"[flake8]\nextend-select = {code}\n")
    assert code in proc([*FLAKE8, "r.py"], project.root).out  # from the config too
    (project.root / "setup.cfg").unlink()


def test_bad_tfp_option_is_a_clear_error(project, snippets, flake8):
    project.write("a.py", snippets.tfp101)
    r = flake8(project.root, "--select", "TFP", "--tfp-tf-version", "banana", "a.py")
    assert r.rc == 2 and "Traceback" not in r.err, r.err
    assert "--tfp-tf-version" in r.err and "'banana'" in r.err
    ok = flake8(project.root, "--select", "TFP", "--tfp-tf-version", "2.15", "a.py")
    assert ok.rc == 1 and "TFP101" in ok.out


def test_every_default_off_rule_is_default_ignored():
    from flake8.main.options import register_default_options
    from flake8.options.manager import OptionManager

    from tfpar_lint import registry
    from tfpar_lint.flake8_plugin import Plugin

    mgr = OptionManager(version="x", plugin_versions="", parents=[], formatter_names=[])
    register_default_options(mgr)
    Plugin.add_options(mgr)
    off = {r.CODE for r in registry.all_rules() if not r.DEFAULT_ENABLED}
    assert set(mgr.extended_default_ignore) == off


def test_options_from_command_line_and_config(project, flake8, proc):
    project.write("train.py", FACTORY_SRC)
    assert "TFP105" not in flake8(project.root, "--select", "TFP", "train.py").out
    r = flake8(project.root, "--select", "TFP", "--tfp-strategy-factories", "mypkg.dist.make_strategy",
               "train.py")
    assert "train.py:5:11: TFP105" in r.out
    project.write("setup.cfg", "[flake8]\nselect = TFP\ntfp-strategy-factories =\n"
                               "    other.thing,\n    mypkg.dist.make_strategy\n")
    r = proc([*FLAKE8, "train.py"], project.root)  # not --isolated: reads setup.cfg
    assert "train.py:5:11: TFP105" in r.out, r.out + r.err


def test_syntax_error_left_to_flake8(project, snippets, flake8):
    project.write("broken.py", snippets.syntax_error)
    r = flake8(project.root, "--select", "TFP,E999", "broken.py")
    assert "E999" in r.out and "TFP" not in r.out and "Traceback" not in r.err


# -- the plugin object directly ---------------------------------------------------------

def test_plugin_yields_zero_based_columns(snippets):
    from tfpar_lint.flake8_plugin import Plugin

    Plugin.parse_options(type("O", (), {"tfp_strategy_factories": [], "tfp_dataset_distributors": [],
                                        "tfp_markers": []})())
    out = list(Plugin(None, snippets.tfp101.splitlines(keepends=True), "a.py").run())
    assert len(out) == 1
    line, col, text, kind = out[0]
    assert (line, col) == (3, 8) and text.startswith("TFP101 ") and kind is Plugin


def test_plugin_reports_regardless_of_noqa(snippets):
    """flake8 applies noqa itself; the plugin must not drop the finding first."""
    from tfpar_lint.flake8_plugin import Plugin

    lines = snippets.tfp101.splitlines(keepends=True)
    lines[2] = lines[2].rstrip("\n") + "  # noqa: TFP101\n"
    assert len(list(Plugin(None, lines, "a.py").run())) == 1


def _count_parses(monkeypatch) -> list[int]:
    """Wrap libcst.parse_module (what the engine parses with) so every parse is counted."""
    import libcst

    real = libcst.parse_module
    calls = [0]

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(libcst, "parse_module", counting)
    return calls


def test_prefiltered_file_is_never_parsed(monkeypatch, snippets):
    from tfpar_lint.flake8_plugin import Plugin

    Plugin.parse_options(type("O", (), {"tfp_strategy_factories": [], "tfp_dataset_distributors": [],
                                        "tfp_markers": []})())
    parses = _count_parses(monkeypatch)
    plain = ["import os\n", "print(os.getcwd())\n"] * 500
    assert list(Plugin(None, plain, "plain.py").run()) == []
    # TensorFlow without any strategy: no rule's markers are all present
    no_strategy = ["import tensorflow as tf\n", "x = tf.constant(1.0)\n", "print(x + 1)\n"]
    assert list(Plugin(None, no_strategy, "tf_only.py").run()) == []
    assert parses[0] == 0, "the pre-filter let a file through that no rule can match"
    # the counter does count: a file that mentions a strategy is parsed (and reported)
    out = list(Plugin(None, snippets.tfp101.splitlines(keepends=True), "a.py").run())
    assert parses[0] >= 1 and [t.split()[0] for _, _, t, _ in out] == ["TFP101"]
