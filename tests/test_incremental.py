"""The language server's incremental parse (tfpar_lint.deep.Incremental): a text edited again and
again gives the tree and the findings a full parse gives."""
from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest

from tfpar_lint import deep, engine
from tfpar_lint.registry import all_rules

ROOT = Path(__file__).resolve().parents[1]
ALL = frozenset(r.CODE for r in all_rules())

# pieces an edit inserts: statements, comments at every indentation, blank lines, unbalanced
# brackets and quotes, decorators, clauses without their statement, continuation lines
PIECES = ["x", "\n", "    ", "# c\n", "    # c\n", "        # deep\n", "def g():\n    pass\n", "\n\n", "(", ")",
          "'''", '"""\n', "y = 1\n", "@dec\n", "else:\n", "  ", "\t", "if a:\n    b\n", "\\\n", "#", ":",
          "class K:\n  def m(self):\n    return 1\n", "z = 1; w = 2\n", "\r\n"]


def edits(text: str, rng: random.Random, n: int) -> list[str]:
    """``n`` texts, each a random edit of the one before (insert a piece at a line or inside one,
    or delete lines)."""
    out = []
    for _ in range(n):
        lines = text.splitlines(keepends=True)
        i = rng.randrange(len(lines) + 1)
        op = rng.random()
        if op < 0.4 or not lines:
            lines[i:i] = [rng.choice(PIECES)]
        elif op < 0.75:
            j = rng.randrange(len(lines))
            c = rng.randrange(len(lines[j]) + 1)
            lines[j] = lines[j][:c] + rng.choice(PIECES) + lines[j][c:]
        else:
            del lines[i:i + rng.randrange(1, 4)]
        text = "".join(lines)
        out.append(text)
    return out


def full_parse(text: str):
    try:
        return cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None


FILES = sorted(str(p) for p in (ROOT / "fixtures").rglob("*.py"))


@pytest.mark.parametrize("seed", range(4))
def test_trees_equal_a_full_parse(seed):
    """Random edits of fixture files: each tree is the full parse's (same nodes, same module
    indentation, line ending and last newline), and most edits were parsed only in part."""
    assert len(FILES) >= 30, "fixtures/ is missing"
    rng = random.Random(seed)
    inc = deep.Incremental()
    compared = 0
    for path in rng.sample(FILES, 25):
        text = Path(path).read_text(encoding="utf-8")
        if full_parse(text) is None:
            continue
        inc.parse(path, text)
        for _ in range(12):
            new = edits(text, rng, 1)[0]
            full = full_parse(new)
            if full is None:  # a syntax error: the incremental parse raises as the full one does
                with pytest.raises((cst.ParserSyntaxError, deep.PythonRejects)):
                    inc.parse(path, new)
                inc.forget(path)
                inc.parse(path, text)
                continue
            got, opaque = inc.parse(path, new)
            assert opaque == 0
            assert got.deep_equals(full), (path, new)
            assert got.code == full.code
            for attr in ("default_indent", "default_newline", "has_trailing_newline", "encoding"):
                assert getattr(got, attr) == getattr(full, attr), (attr, path)
            compared += 1
            text = new
    assert compared >= 150
    assert inc.partial >= compared // 2, (inc.partial, inc.full)


def _findings(results) -> list:
    return [[f.to_dict() for f in r.findings] + ([vars(r.error)] if r.error else []) for r in results]


def _lint_sequence(texts: list[str], path: str, incremental: bool) -> list:
    saved = deep.INCREMENTAL
    deep.INCREMENTAL = deep.Incremental() if incremental else None
    try:
        out = [engine.lint_source(t, path, enabled=ALL) for t in texts]
        return out, deep.INCREMENTAL
    finally:
        deep.INCREMENTAL = saved


BAD = """\
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
GLOBAL_BATCH = 64
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
with strategy.scope():
    optimizer = tf.keras.optimizers.SGD(0.01)


def step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def run(x, y):
    return strategy.run(step, args=(x, y))
"""


def test_findings_equal_a_full_lint_while_editing(tmp_path):
    """A session of edits that make findings come and go (the model moved into the scope and
    back, the loss made a mean and back, a statement broken and mended): every text's findings
    are the same whether it was parsed in part or whole."""
    path = str(tmp_path / "train.py")
    texts = [BAD]
    moved = BAD.replace("model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nwith strategy.scope():\n",
                        "with strategy.scope():\n    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n")
    assert moved != BAD
    summed = BAD.replace("tf.reduce_mean(tf.square(model(x) - y))",
                         "tf.nn.compute_average_loss(tf.square(model(x) - y), global_batch_size=GLOBAL_BATCH)")
    texts += [moved, BAD, summed, summed.replace("    return loss\n", "    return loss +\n"), summed,
              summed + "\n\n# the end\n", summed.replace("def step(x, y):", "# a helper\ndef step(x, y):"), BAD]
    rng = random.Random(3)
    texts += edits(BAD, rng, 25)
    (tmp_path / "train.py").write_text(BAD)
    full, _ = _lint_sequence(texts, path, incremental=False)
    part, inc = _lint_sequence(texts, path, incremental=True)
    assert _findings(part) == _findings(full)
    assert any(r.findings for r in full) and any(not r.findings for r in full)  # findings came and went
    assert inc.partial >= 10


def test_findings_equal_across_the_fixture_project():
    """The cross-file fixture project: every module edited in turn (a comment, then a statement
    appended), linted in one warm project each way: the same findings."""
    folder = ROOT / "fixtures" / "project" / "bad"
    paths = sorted(str(p) for p in folder.glob("*.py"))
    assert paths
    texts = {p: Path(p).read_text(encoding="utf-8") for p in paths}
    runs = {}
    for incremental in (False, True):
        saved = deep.INCREMENTAL
        deep.INCREMENTAL = deep.Incremental() if incremental else None
        engine._PROJECTS.clear()
        from tfpar_lint.semantic import project as project_mod

        try:
            out = []
            for p in paths:
                for new in (texts[p] + "# edited\n", texts[p] + "# edited\nEXTRA = 1\n", texts[p]):
                    project_mod.OVERLAY[p] = new
                    for proj in list(engine._PROJECTS.values()):
                        proj.invalidate(p)
                    out.append([engine.lint_source(project_mod.OVERLAY.get(q, texts[q]), q, enabled=ALL)
                                for q in paths])
            runs[incremental] = [_findings(r) for r in out]
        finally:
            project_mod.OVERLAY.clear()
            engine._PROJECTS.clear()
            deep.INCREMENTAL = saved
    assert runs[True] == runs[False]
    assert any(any(r) for r in runs[False][0])
