"""The relevance stage (issue 30): between the pre-filter and libcst, the rules whose needs the code
cannot meet are dropped, and a file left with none is not parsed by libcst.  The findings must be
the same with and without it: over the fixtures and the test data, finding by finding; the facts
each rule's needs name exist; and the cheaper parts that came with it (the syntax check through
``symtable``, libcst without its per-node validation, the importer scan skipped for files nothing
scanned can import) give the answers they replace."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from tfpar_lint import deep, engine, relevance
from tfpar_lint.engine import AnalysisOptions
from tfpar_lint.registry import all_rules, rules_by_code

ROOT = Path(__file__).resolve().parents[1]


def _files() -> list[Path]:
    out = sorted((ROOT / "fixtures").rglob("*.py"))
    for d in sorted(ROOT.glob("tests/data_*")):
        out += sorted(d.rglob("*.py"))
    return out


def _lint_all(files: list[Path]) -> dict[str, list[str]]:
    out = {}
    for f in files:
        r = engine.lint_file(str(f), options=AnalysisOptions())
        out[str(f)] = sorted(json.dumps(x.to_dict(), sort_keys=True, default=str) for x in r.findings) \
            + ([f"error {r.error.message}"] if r.error else [])
    return out


def test_findings_identical_with_and_without_the_stage(monkeypatch):
    """Every finding (and error) of every fixture and test-data file, with the stage and without it."""
    files = _files()
    assert len(files) > 500
    monkeypatch.setenv(relevance.ENV, "1")
    engine._PROJECTS.clear()
    with_stage = _lint_all(files)
    monkeypatch.setenv(relevance.ENV, "0")
    engine._PROJECTS.clear()
    without = _lint_all(files)
    engine._PROJECTS.clear()
    differ = [f for f in files if with_stage[str(f)] != without[str(f)]]
    assert not differ, f"the relevance stage changed the findings of {[str(f) for f in differ[:5]]}"
    assert sum(len(v) for v in with_stage.values()) > 300  # the sets hold findings to lose


def test_the_stage_drops_rules_and_files_there(monkeypatch):
    """The comparison above has teeth: the stage does drop candidate rules, and whole files, in these
    sets (each would lose its findings if a need were wrong)."""
    monkeypatch.setenv(relevance.ENV, "1")
    opts = AnalysisOptions()
    rules = engine._rules_for(None)
    dropped_rules = dropped_files = 0
    for f in _files():
        src, err = engine.read_source(str(f))
        if src is None:
            continue
        cands = engine.candidate_rules(src, rules, opts)
        if not cands:
            continue
        kept = relevance.relevant_rules(src, cands, opts)
        dropped_rules += len(cands) - len(kept)
        dropped_files += not kept
    assert dropped_rules > 100
    assert dropped_files >= 3


def test_every_need_names_a_fact():
    for rule in all_rules():
        needs = relevance.needs_of(rule)  # raises on an unknown fact
        for group in needs:
            assert group, rule.CODE


def test_derived_needs():
    """A rule with the strategy group and no NEEDS needs a strategy; the objects-outside-scope rules
    need their kind; a rule with neither is always relevant."""
    by = rules_by_code()
    assert relevance.needs_of(by["TFP203"])[0] == ("strategy",)
    assert ("model",) in relevance.needs_of(by["TFP101"])
    assert ("optimizer",) in relevance.needs_of(by["TFP102"])
    assert relevance.needs_of(by["TFP206"]) == ()


def _kept(src: str, *codes: str) -> set[str]:
    by = rules_by_code()
    src = textwrap.dedent(src)
    return {r.CODE for r in relevance.relevant_rules(src, [by[c] for c in codes], AnalysisOptions())}


def test_strategy_by_name_alone_is_no_strategy():
    # `strategy` as a parameter name and a string: no API makes a strategy, nothing uses one so
    assert _kept("""
        import keras
        def ctc_decode(x, strategy="greedy"):
            if strategy == "greedy":
                return keras.losses.mean(x)
    """, "TFP502", "TFP505") == set()


def test_strategy_facts():
    made = """
        import tensorflow as tf
        s = tf.distribute.MirroredStrategy()
        loss = tf.keras.losses.MeanSquaredError()
        with s.scope():
            y = loss(1, 2)
    """
    assert _kept(made, "TFP502") == {"TFP502"}
    by_use = """
        import tensorflow as tf
        def f(s, loss_fn):
            with s.scope():
                loss = tf.keras.losses.MeanSquaredError()
    """
    assert _kept(by_use, "TFP502") == {"TFP502"}  # X.scope(): X is a strategy by its use
    # the method named in a string, or defined here, is no use of a strategy
    assert _kept("""
        import tensorflow as tf
        loss = tf.keras.losses.MeanSquaredError()
        MSG = "call strategy.experimental_distribute_dataset(ds) and strategy.scope()"
        class Strategy:
            def experimental_distribute_dataset(self, ds):
                return ds
    """, "TFP502") == set()


def test_replica_run_needs_a_run():
    src = """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        def step(x):
            return tf.reduce_mean(x)
        {}
    """
    assert _kept(src.format("strategy.run(step, args=(1,))"), "TFP501") == {"TFP501"}
    assert _kept(src.format("raise ValueError('TPUStrategy.run() cannot run this')"), "TFP501") == set()


def test_ast_shapes():
    tape = """
        import tensorflow as tf
        def f(x):
            with tf.GradientTape() as tape:
                y = x * x
            {}
    """
    assert _kept(tape.format("return tape.gradient(y, x)"), "TFP702") == set()
    assert _kept(tape.format("return tape.gradient(y, x), tape.gradient(y, x)"), "TFP702") == {"TFP702"}
    assert _kept(tape.format("return [tape.gradient(y, v) for v in x]"), "TFP702") == {"TFP702"}
    data = """
        import tensorflow as tf
        ds = tf.data.Dataset.range(4)
        {}
    """
    assert _kept(data.format("copies = [0] * 4"), "TFP202") == set()
    assert _kept(data.format("copies = [ds] * 4"), "TFP202") == {"TFP202"}
    assert _kept(data.format("copies = [ds for _ in range(4)]"), "TFP202") == {"TFP202"}
    assert _kept(data.format("copies = [d for d in [ds]]"), "TFP202") == set()


def test_linked_files_keep_every_rule(tmp_path):
    """A file that imports a project module may get any value from it: every candidate stays."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "dist.py").write_text("import tensorflow as tf\n"
                                      "def make():\n    return tf.distribute.MirroredStrategy()\n")
    main = tmp_path / "train.py"
    src = "import keras\nimport dist\ndef f(x, strategy='greedy'):\n    return keras.losses.mean(x)\n"
    main.write_text(src)
    by = rules_by_code()
    opts = AnalysisOptions()
    project = engine.project_for(str(main), opts)
    rules = [by["TFP502"]]
    assert relevance.relevant_rules(src, rules, opts, str(main), project) == rules
    assert relevance.relevant_rules(src, rules, opts) == []


def test_the_switch(monkeypatch):
    by = rules_by_code()
    src = "import keras\ndef f(x, strategy='greedy'):\n    return keras.losses.mean(x)\n"
    assert relevance.relevant_rules(src, [by["TFP502"]], AnalysisOptions()) == []
    monkeypatch.setenv(relevance.ENV, "0")
    assert relevance.relevant_rules(src, [by["TFP502"]], AnalysisOptions()) == [by["TFP502"]]


def test_a_dropped_file_is_still_syntax_checked(tmp_path):
    """The pre-filter passes it, the stage drops it, Python's verdict still comes (E999), whatever
    the file mentions."""
    p = tmp_path / "bad.py"
    src = "def f(x, strategy='greedy', batch=1):\n    return mean(x) +\n"
    p.write_text(src)
    assert engine.candidate_rules(src, engine._rules_for(None), AnalysisOptions())  # TFP505's markers
    r = engine.lint_file(str(p))
    assert r.error is not None and r.error.message.startswith("syntax error") and r.error.line == 2


@pytest.mark.parametrize("src", [
    "x = 1\n",
    "x = = 1\n",
    "nonlocal x\n",  # symtable refuses it, Python's parser does not
    "def f():\n    nonlocal y\n",
    "x = (" + "a + " * 3000 + "a)\n",
    "z = a" + ".b" * 20000 + "\n",
    "x = 1\0\n",
    "if True:\n\tx = 1\n        y = 2\n",
])
def test_check_syntax_gives_python_tree_verdict(src):
    def verdict(fn):
        try:
            fn(src)
            return None
        except deep.PythonRejects as e:
            return (e.message, e.line, e.col)
    assert verdict(deep.check_syntax) == verdict(deep.python_tree)


def test_cst_parse_is_libcst_parse_and_validation_comes_back():
    src = (ROOT / "src" / "tfpar_lint" / "engine.py").read_text()
    a, b = cst.parse_module(src), deep.cst_parse(src)
    assert a.deep_equals(b) and b.code == src
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")  # nodes built after the parse are validated again


def test_importable():
    """A file no scanned file can import gets no scan for importers (an installed package's file
    under the project: a folder the scan leaves out, whose name no import can spell)."""
    from tfpar_lint.semantic.project import Project

    p = Project(["/proj", "/proj/src"], lambda *a: None, root="/proj")
    assert p.importable("/proj/pkg/mod.py")
    assert p.importable("/proj/build/mod.py")  # left out of the scan, but `import build.mod` names it
    assert p.importable("/proj/my-scripts/mod.py")  # scanned (a script there may import its neighbour)
    assert not p.importable("/proj/.venv/lib/python3.11/site-packages/keras/layers.py")
    assert not p.importable("/elsewhere/mod.py")
    assert p.importer_texts("/proj/.venv/lib/x.py") == []


def test_tf_bound_nowhere_is_tensorflow():
    """A snippet without its import: ``tf`` bound nowhere is TensorFlow (semantic.bindings.FREE_ALIASES),
    so its ``tf.device`` counts; ``tf`` imported from elsewhere does not."""
    snippet = """
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            with tf.device('cpu'):
                var = tf.Variable(1.)
    """
    assert _kept(snippet, "TFP107") == {"TFP107"}
    other = "from mylib import tensorflow as tf\n" + textwrap.dedent(snippet)
    assert _kept(other, "TFP107") == set()
