"""Expressions too deep for libcst (issue 12): tfpar_lint.deep guards every libcst parse.

What Python rejects is E999 in Python's words and never reaches libcst; what Python accepts is
analysed, with the expressions libcst cannot cope with made opaque (an unknown value, a note on
standard error), so the TFP101 finding of the program around them is still reported, at the same
line and column.  The command, the flake8 plugin (which parses in flake8's own process) and
``--fix`` (which re-lints in the command's own process) run as real subprocesses: a crash of
libcst would show as a crash here, not take the test process with it.
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from conftest import REPO_ROOT, TFP101_SRC, run_subprocess
from tfpar_lint import deep

SRC = str(REPO_ROOT / "src")
HEADER = TFP101_SRC  # TFP101 at line 3, col 9

# Python accepts these; libcst alone crashes, stalls or refuses them.
ACCEPTED = {
    "and_7057": "z = " + " and ".join(["a"] * 7057) + "\n",  # overflows the main thread's stack in libcst
    "and_50000": "z = " + " and ".join(["a"] * 50000) + "\n",
    "strings_3001": "z = " + " ".join(["'x'"] * 3001) + "\n",  # libcst's parser stops at 3,000
    # the same over 31 lines of 100: the trigger does not fire; libcst's refusal makes it opaque
    "strings_3001_wrapped": "z = (\n" + "\n".join(" ".join(["'x'"] * 100) for _ in range(30)) + "\n'x')\n",
    "plus_2500": "z = " + " + ".join(["a"] * 2500) + "\n",  # libcst: about 2 s
    "plus_2500_multiline": "z = (\n" + " +\n".join(["    a"] * 2500) + "\n)\n",
}
# Python 3.11 rejects these (too many nested parentheses; RecursionError at about 3,000 levels).
REJECTED = {
    "parens_10000": "z = " + "(" * 10000 + "1" + ")" * 10000 + "\n",
    "plus_5000": "z = " + " + ".join(["a"] * 5000) + "\n",
    "attr_50000": "z = a" + ".b" * 50000 + "\n",
}
# flake8 itself (its own ast.parse, or pyflakes) fails on these before or beside our plugin.
FLAKE8_CANNOT = {"plus_2500", "plus_2500_multiline", "plus_5000", "attr_50000"}


def python_accepts(src: str) -> bool:
    try:
        compile(src, "x.py", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, RecursionError, MemoryError):
        return False
    return True


# -- the pieces, in process (nothing here reaches libcst with a deep expression) --------------

def test_the_trigger_fires_on_the_pathological_inputs_only():
    for name, body in {**ACCEPTED, **REJECTED}.items():
        if name != "strings_3001_wrapped":
            assert deep.suspicious(HEADER + body), name
    assert not deep.suspicious(HEADER + ACCEPTED["strings_3001_wrapped"])
    # small files never trigger; ordinary code rarely does: Keras's own modules (measured 4-5% of
    # keras and tf_keras files on 2026-11-28), else this package's (whose long rule messages
    # trigger it more often: 12 of 116 files that day)
    assert not deep.suspicious("z = " + " + ".join(["a"] * 400) + "\n")
    own = sorted((REPO_ROOT / "src" / "tfpar_lint").rglob("*.py"))
    assert len(own) > 40
    import importlib.util

    spec = importlib.util.find_spec("keras")
    ordinary = sorted(Path(spec.submodule_search_locations[0]).rglob("*.py")) if spec and \
        spec.submodule_search_locations else own
    fired = [p.name for p in ordinary if deep.suspicious(p.read_text(encoding="utf-8", errors="replace"))]
    assert len(fired) <= len(ordinary) // (8 if ordinary is own else 12), fired
    for p in own:  # and nothing in real code is deep enough to be made opaque
        text = p.read_text(encoding="utf-8")
        assert deep.deep_spans(ast.parse(text), deep._Lines(text)) == [], p


def test_heights_follow_libcst_nesting():
    src = "x = a and b and c and d\ny = 'a' 'b'\n"
    tree = ast.parse(src)
    h = deep.heights(tree, deep._Lines(src))
    boolop = tree.body[0].value
    assert h[id(boolop)] == 2 + 3  # ((a and b) and c) and d: three levels over the names
    deep_chain = "z = " + " + ".join(["a"] * 200)
    t2 = ast.parse(deep_chain)
    assert deep.heights(t2, deep._Lines(deep_chain))[id(t2.body[0].value)] == 200


def test_opaque_text_keeps_every_line_and_column_outside_the_span():
    chain = " + ".join(["ü"] * 150)
    src = ("é = 'ü'; z = (é + " + chain + " + é); print(z)  # tail\r\n"
           "w = [f(\n  " + " +\n  ".join(["b.c"] * 100) + "\n)]; v = 1\n" + HEADER)
    tree = ast.parse(src)
    lines = deep._Lines(src)
    spans = deep.deep_spans(tree, lines)
    assert len(spans) == 2
    out = deep.opaque_text(src, spans)
    assert len(out) == len(src)
    inside = set()
    for a, b in spans:
        inside.update(range(a, b))
    assert all(out[i] == src[i] for i in range(len(src)) if i not in inside)
    assert all(out[i] == src[i] for i in inside if src[i] in "\r\n")  # every line break kept
    # libcst parses it; a name after a span is where it is in the original text
    module = cst.parse_module(out)
    assert module.code == out
    wrapper = MetadataWrapper(module)
    pos = wrapper.resolve(PositionProvider)
    found = {}
    for node, rng in pos.items():
        if isinstance(node, cst.Name) and node.value in ("print", "v", "model"):
            found.setdefault(node.value, (rng.start.line, rng.start.column))
    first_line = src.split("\r\n")[0]
    assert found["print"] == (1, first_line.index("print"))
    def where(i: int) -> tuple[int, int]:
        return src.count("\n", 0, i) + 1, i - (src.rfind("\n", 0, i) + 1)

    assert found["v"] == where(src.index("v = 1")) == (103, 4)
    assert found["model"] == where(src.index("model = "))


def test_what_python_rejects_never_reaches_libcst():
    with pytest.raises(deep.PythonRejects) as info:
        deep.parse_module(HEADER + REJECTED["parens_10000"])
    assert info.value.message == "too many nested parentheses" and info.value.line == 6


def test_a_libcst_refusal_is_retried_with_the_statement_opaque():
    src = HEADER + ACCEPTED["strings_3001_wrapped"]
    with pytest.raises(cst.ParserSyntaxError):
        cst.parse_module(src)  # libcst alone (a refusal, not a crash: safe in process)
    tree, opaque = deep.parse_module(src)
    assert opaque == 1 and tree.code.splitlines()[:5] == src.splitlines()[:5]


def test_a_file_libcst_still_cannot_parse_keeps_its_error():
    with pytest.raises(cst.ParserSyntaxError):
        deep.parse_module(HEADER + "\\\r\n")


# -- the command, the flake8 plugin and --fix, as subprocesses ------------------------------

def _write(folder: Path, names) -> None:
    folder.mkdir(exist_ok=True)
    for name in names:
        body = {**ACCEPTED, **REJECTED}[name]
        (folder / f"{name}.py").write_bytes((HEADER + body).encode("utf-8"))


def _cli(folder: Path, *args: str):
    return run_subprocess([sys.executable, "-m", "tfpar_lint", "--no-config", "--no-cache", "--no-progress",
                           "--select", "ALL", *args], folder, env={"PYTHONPATH": SRC}, timeout=600)


def test_the_command_reports_python_s_verdict_or_the_findings(tmp_path):
    names = sorted({**ACCEPTED, **REJECTED})
    _write(tmp_path, names)
    r = _cli(tmp_path, "-j2", "--format", "json", "-o", "report.json", *[f"{n}.py" for n in names])
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    assert r.rc == 1  # the files Python rejects are diagnostics (E999), as ruff
    records: dict = {}
    for rec in json.loads((tmp_path / "report.json").read_text(encoding="utf-8")):
        records.setdefault(rec["path"], []).append(rec)
    for name in names:
        got = [(x["code"], x["line"], x["column"] if "column" in x else x.get("col")) for x in records[f"{name}.py"]]
        if python_accepts(HEADER + {**ACCEPTED, **REJECTED}[name]):
            assert got == [("TFP101", 3, 9)], (name, got)
        else:
            assert [c for c, _, _ in got] == ["E999"], (name, got)
    assert records["parens_10000.py"][0]["message"] == "syntax error: too many nested parentheses"
    # the opaque expressions are named on standard error, one note per file
    for name in ACCEPTED:
        if python_accepts(HEADER + ACCEPTED[name]):
            assert f"warning: {name}.py: 1 expression too deep for libcst" in r.err, (name, r.err)


def test_positions_after_a_deep_expression_are_unchanged(tmp_path):
    pre = "ü = (\n" + " +\n".join(["    ü"] * 300) + ")  # é\n"
    (tmp_path / "late.py").write_text(pre + HEADER, encoding="utf-8")
    r = _cli(tmp_path, "late.py")
    line = pre.count("\n") + 3
    assert r.lines == [f"late.py:{line}:9: TFP101 " + r.lines[0].split(" TFP101 ", 1)[1]], r
    assert "1 expression too deep" in r.err


def test_flake8_reports_what_the_command_reports(tmp_path):
    pytest.importorskip("flake8")
    names = sorted(n for n in {**ACCEPTED, **REJECTED} if n not in FLAKE8_CANNOT)
    _write(tmp_path, names)
    (tmp_path / "a.py").write_text(HEADER)
    files = [f"{n}.py" for n in names] + ["a.py"]
    cli = _cli(tmp_path, "-j2", *files)
    r = run_subprocess([sys.executable, "-m", "flake8", "--isolated", "-j1", "--select", "TFP,E999", *files],
                       tmp_path, env={"PYTHONPATH": SRC}, timeout=600)
    assert "Traceback" not in r.err and "failed during execution" not in r.out + r.err, r
    assert r.rc == 1

    def rows(lines):  # (path, line, code) per finding; flake8 numbers E999's column its own way
        out = set()
        for ln in lines:
            path, line, _col, rest = ln.split(":", 3)
            out.add((path, int(line), rest.split()[0]))
        return out

    cli_rows = rows(ln for ln in cli.lines if ".py:" in ln)
    assert rows(r.lines) == cli_rows, (r.lines, cli.lines)
    assert ("and_7057.py", 3, "TFP101") in cli_rows and ("parens_10000.py", 6, "E999") in cli_rows


def test_fix_applies_only_the_fix_and_never_crashes(tmp_path):
    names = sorted({**ACCEPTED, **REJECTED})
    _write(tmp_path, names)
    (tmp_path / "a.py").write_text(HEADER)
    r = _cli(tmp_path, "--fix", "--unsafe-fixes", "a.py")
    fixed_header = (tmp_path / "a.py").read_text()
    assert r.rc == 0 and fixed_header != HEADER, r
    r = _cli(tmp_path, "--fix", "--unsafe-fixes", *[f"{n}.py" for n in names])
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    assert r.rc == 1, r  # a diagnostic, as ruff: exit 1
    for name in names:
        body = {**ACCEPTED, **REJECTED}[name]
        after = (tmp_path / f"{name}.py").read_bytes().decode("utf-8")
        if python_accepts(HEADER + body):
            assert after == fixed_header + body, name  # the fix, and not a byte of the deep expression
        else:
            assert after == HEADER + body, name  # E999: nothing to fix
