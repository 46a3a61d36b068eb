"""Automatic fixes: every fix on its fixtures, the fix loop, and the --fix family of flags.

For every bad fixture whose finding has a fix: the fixed text parses, lints clean
for that rule, keeps every comment, and a second fix pass changes nothing.  The
done-when of issue 11 runs the command on a copy of ``fixtures/``.  A few runnable
fixtures are verified on real TensorFlow after the fix (the mistake is no longer
confirmed).
"""
from __future__ import annotations

import collections
import glob
import io
import json
import os
import re
import shutil
import tokenize
from pathlib import Path

import pytest

from tfpar_lint import engine
from tfpar_lint.fix import SAFE, UNSAFE, apply_fixes
from tfpar_lint.registry import all_rules, rules_by_code

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
ALL = [r.CODE for r in all_rules()]
BAD = sorted(glob.glob(str(FIXTURES / "TFP*" / "bad*.py")))


def _rel(p: str) -> str:
    return os.path.relpath(p, ROOT)


def _comments(src: str) -> collections.Counter:
    """The comments' text, without the `# noqa` directives (the TFP9xx fixes edit those by design)."""
    from tfpar_lint.noqa import NOQA_INLINE_WITH_NAMES

    out: collections.Counter = collections.Counter()
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type == tokenize.COMMENT:
            rest = NOQA_INLINE_WITH_NAMES.sub("", t.string)
            out.update(p.strip() for p in rest.split("#") if p.strip())
    return out


def _fixable_cases():
    cases = []
    for path in BAD:
        src = Path(path).read_text()
        for f in engine.lint_source(src, path, enabled=ALL).findings:
            if f.fix:
                cases.append(pytest.param(path, f.code, f.fix["applicability"], id=f"{_rel(path)}-{f.code}"))
    return sorted(set(cases), key=lambda c: c.id)


FIXABLE = _fixable_cases()


def test_fixes_exist_for_the_issue_examples():
    """The issue's six examples each have a fix on a fixture (and nothing is called fixable that is not)."""
    codes = {c.values[1] for c in FIXABLE}
    assert {"TFP301", "TFP101", "TFP102", "TFP103", "TFP201", "TFP401", "TFP501", "TFP502"} <= codes
    for code in codes:
        assert rules_by_code()[code].FIXABLE in (SAFE, UNSAFE), code


@pytest.mark.parametrize("path, code, applicability", FIXABLE)
def test_fix_on_fixture(path, code, applicability):
    src = Path(path).read_text()
    before = [f for f in engine.lint_source(src, path, enabled=ALL).findings if f.code == code]
    assert before and all(f.fix["applicability"] == rules_by_code()[code].FIXABLE for f in before if f.fix)
    out = engine.fix_source(src, path, enabled=ALL, unsafe=applicability == UNSAFE)
    assert out.reverted is None
    assert out.source != src and any(f.code == code for f in out.fixed)
    # the fixed text lints clean for this rule (and parses)
    after = engine.lint_source(out.source, path, enabled=ALL)
    assert after.error is None
    assert [f for f in after.findings if f.code == code and f.fix] == []
    assert len([f for f in after.findings if f.code == code]) < len(before)
    # comments (the '# expect:' markers too) survive, moved at most
    assert _comments(out.source) == _comments(src)
    # the lines no edit touched are byte for byte the same
    edits = sorted(e for f in out.fixed for e in [len(f.fix["edits"])])
    assert edits and len(set(src.splitlines()) - set(out.source.splitlines())) <= 2 * sum(edits)
    # a second pass finds nothing more to fix
    again = engine.fix_source(out.source, path, enabled=ALL, unsafe=True)
    assert again.source == out.source and again.fixed == []


def test_safe_fix_not_applied_without_flag_for_unsafe():
    path = str(FIXTURES / "TFP201" / "bad.py")
    src = Path(path).read_text()
    assert engine.fix_source(src, path, enabled=ALL, unsafe=False).source == src
    assert engine.fix_source(src, path, enabled=ALL, unsafe=True).source != src


def test_overlapping_fixes_wait_for_the_next_pass():
    src = "abcdef\n"
    fix = lambda s, e, t: {"applicability": SAFE, "message": "m", "edits": [  # noqa: E731
        {"content": t, "location": {"row": 1, "column": s}, "end_location": {"row": 1, "column": e}}]}
    new, applied = apply_fixes(src, [fix(1, 4, "X"), fix(3, 5, "Y"), fix(5, 6, "Z")])
    assert (new, applied) == ("XdZf\n", [0, 2])


def test_fix_that_breaks_the_parse_is_undone(monkeypatch):
    from tfpar_lint.rules import tfp301_thread_unlocked_read_modify_write as mod
    from tfpar_lint.fix import Fix

    def broken(self, report):
        return Fix("break it").replace(report.node, "counter.assign_add(")

    monkeypatch.setattr(mod.ThreadUnlockedReadModifyWrite, "fix", broken)
    path = str(FIXTURES / "TFP301" / "bad.py")
    src = Path(path).read_text()
    out = engine.fix_source(src, path, enabled=ALL)
    assert out.source == src and out.fixed == [] and "unparsable" in out.reverted
    assert any(f.code == "TFP301" for f in out.result.findings)


def test_move_into_scope_keeps_comments_and_blank_lines():
    src = ("import tensorflow as tf\n"
           "strategy = tf.distribute.MirroredStrategy()\n"
           "# the optimizer\n"
           "opt = tf.keras.optimizers.Adam()  # keep me\n"
           "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
           "\n"
           "with strategy.scope():\n"
           "        # compiled here\n"
           "        model.compile(optimizer=opt, loss='mse')\n")
    out = engine.fix_source(src, "m.py", enabled=ALL)
    assert out.source == ("import tensorflow as tf\n"
                          "strategy = tf.distribute.MirroredStrategy()\n"
                          "# the optimizer\n"
                          "\n"
                          "with strategy.scope():\n"
                          "        # compiled here\n"
                          "        opt = tf.keras.optimizers.Adam()  # keep me\n"
                          "        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
                          "        model.compile(optimizer=opt, loss='mse')\n")
    assert sorted(f.code for f in out.fixed) == ["TFP101", "TFP102"]  # two passes: model, then opt
    assert engine.lint_source(out.source, "m.py", enabled=ALL).findings == []


@pytest.mark.parametrize("before, after", [
    ("v.assign(v + d)", "v.assign_add(d)"),
    ("v.assign(d + v)", "v.assign_add(d)"),
    ("v.assign(v.read_value() + 2.0, read_value=False)", "v.assign_add(2.0, read_value=False)"),
    ("v.assign(v - d)", "v.assign_sub(d)"),
    ("v.assign(v * d)", None),
    ("v.assign(v + v * d)", None),
])
def test_assign_add_fix(before, after):
    src = ("import threading\nimport tensorflow as tf\nv = tf.Variable(1.0)\nd = 0.5\n\n"
           f"def work():\n    {before}\n\n"
           "ts = [threading.Thread(target=work) for _ in range(2)]\n")
    res = engine.lint_source(src, "t.py", enabled=["TFP301"])
    assert [f.code for f in res.findings] == ["TFP301"]
    out = engine.fix_source(src, "t.py", enabled=["TFP301"])
    if after is None:
        assert res.findings[0].fix is None and out.source == src
    else:
        assert out.source == src.replace(before, after)


# -- the done-when of issue 11 -------------------------------------------------------------

def test_fix_on_a_copy_of_fixtures(tmp_path, cli, monkeypatch):
    """`tfpar-lint check --fix` fixes every safe-fixable finding, keeps formatting and comments,
    and a second run reports exactly the findings that had no safe fix."""
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy)
    monkeypatch.chdir(tmp_path)
    first = cli("check", "--no-cache", "--output-format", "json", "fixtures")
    before = json.loads(first.out)
    safe = collections.Counter((d["path"], d["code"]) for d in before if d["fix"] and d["fix"]["applicability"] == SAFE)
    rest = collections.Counter((d["path"], d["code"]) for d in before) - safe
    assert sum(safe.values()) >= 10
    originals = {p: Path(p).read_text() for p in glob.glob("fixtures/**/*.py", recursive=True)}
    fixed = cli("check", "--no-cache", "--fix", "fixtures")
    m = re.search(r"Found (\d+) errors \((\d+) fixed, (\d+) remaining\)\.", fixed.out)
    assert m and (int(m.group(2)), int(m.group(3))) == (sum(safe.values()), sum(rest.values())), fixed.out
    second = cli("check", "--no-cache", "--output-format", "json", "fixtures")
    after = json.loads(second.out)
    assert collections.Counter((d["path"], d["code"]) for d in after) == rest
    assert not any(d["fix"] and d["fix"]["applicability"] == SAFE for d in after)
    changed = [p for p, text in originals.items() if Path(p).read_text() != text]
    assert {p for p, _ in safe} == set(changed)
    for p in changed:
        assert _comments(Path(p).read_text()) == _comments(originals[p]), p
    third = cli("check", "--no-cache", "--fix", "fixtures")
    assert not re.search(r"\d+ fixed", third.out) and all(Path(p).read_text() != originals[p] for p in changed)


# -- JSON and SARIF carry the fix -------------------------------------------------------------

def test_json_carries_the_fix(project, cli):
    project.write("t.py", Path(FIXTURES / "TFP301" / "bad.py").read_text())
    d = [x for x in json.loads(cli("--output-format", "json", "t.py").out) if x["code"] == "TFP301"][0]
    assert d["fix"]["applicability"] == "safe" and d["fix"]["message"]
    (edit,) = d["fix"]["edits"]
    assert edit["content"] == "counter.assign_add(1.0)"
    assert edit["location"] == {"row": d["line"], "column": d["col"]}
    assert edit["end_location"] == {"row": d["end_line"], "column": d["end_col"]}


def test_sarif_carries_the_fix_and_validates(project, cli):
    jsonschema = pytest.importorskip("jsonschema")
    from conftest import SARIF_SCHEMA

    # the shared data folder sits beside the main checkout (a worktree is one level deeper)
    schema = next((p for p in (SARIF_SCHEMA, ROOT.parents[1] / "shared" / "data" / SARIF_SCHEMA.name)
                   if p.is_file()), None)
    if schema is None:
        pytest.skip("SARIF schema not found")
    validator = jsonschema.Draft4Validator(json.loads(schema.read_text()))
    project.write("a.py", Path(FIXTURES / "TFP101" / "bad.py").read_text())
    project.write("b.py", Path(FIXTURES / "TFP201" / "bad.py").read_text())
    log = json.loads(cli("--output-format", "sarif", "a.py", "b.py").out)
    errors = list(validator.iter_errors(log))
    assert not errors, errors[:3]
    results = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    fx = results["TFP101"]["fixes"][0]
    assert fx["properties"]["applicability"] == "safe"
    change = fx["artifactChanges"][0]
    assert change["artifactLocation"]["uri"] == "a.py"
    reps = change["replacements"]
    assert {r["insertedContent"]["text"] for r in reps} == {"", "    model = build_model()  # expect: TFP101\n"}
    assert results["TFP201"]["fixes"][0]["properties"]["applicability"] == "unsafe"


# -- runnable fixtures: --verify no longer confirms the mistake ------------------------------

@pytest.mark.verify
@pytest.mark.skipif(__import__("importlib").util.find_spec("tensorflow") is None, reason="needs tensorflow")
def test_verify_after_fix(tmp_path):
    """The bad fixture is CONFIRMED and, run in the same call, its fixed version is not."""
    from tfpar_lint.finding import CONFIRMED
    from tfpar_lint.verify import verify_findings
    from tfpar_lint.verify.testing import expected_findings

    cases = {code: FIXTURES / code / "bad.py"
             for code in ("TFP101", "TFP301", "TFP201", "TFP401", "TFP501", "TFP502")}  # the issue's examples
    scripts, findings = [], []
    for code, src_path in cases.items():
        src = src_path.read_text()
        out = engine.fix_source(src, str(src_path), enabled=ALL, unsafe=True)
        assert any(f.code == code for f in out.fixed)
        for tag, text in (("bad", src), ("fixed", out.source)):
            p = tmp_path / f"{code}_{tag}.py"
            p.write_text(text)
            scripts.append(str(p))
            findings += [f for f in expected_findings(str(p)) if f.code == code]
    verify_findings(scripts, findings, devices="cpu:2", max_steps=3, timeout=120.0)
    status = {(os.path.basename(f.path), f.code): f.verification.status for f in findings}
    for code in cases:
        assert status[(f"{code}_bad.py", code)] == CONFIRMED, (code, status)
        assert status[(f"{code}_fixed.py", code)] != CONFIRMED, (code, status)


def test_tf_function_fix_decorates_the_step_called_from_a_loop():
    src = Path(FIXTURES / "TFP701" / "bad.py").read_text()
    looped = src.replace(
        "for step in range(50):\n    per_replica_loss = strategy.run(step_fn, args=(next(iterator),))  # expect: TFP701\n",
        "def train_step(batch):\n    return strategy.run(step_fn, args=(batch,))  # expect: TFP701\n\n\n"
        "for step in range(50):\n    per_replica_loss = train_step(next(iterator))\n")
    assert looped != src
    res = engine.lint_source(looped, "x.py", enabled=ALL)
    (f,) = [f for f in res.findings if f.code == "TFP701"]
    assert f.fix["applicability"] == UNSAFE
    out = engine.fix_source(looped, "x.py", enabled=ALL, unsafe=True)
    assert "@tf.function\ndef train_step(batch):\n" in out.source
    assert not [g for g in out.result.findings if g.code == "TFP701"]
    # the run written directly in the loop gets no fix (its body would have to become a function)
    assert [g.fix for g in engine.lint_source(src, "x.py", enabled=ALL).findings if g.code == "TFP701"] == [None]
