"""The ruff-style command line: one test per flag, as ruff documents it (issue 11)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TFP301 = """\
import threading
import tensorflow as tf

counter = tf.Variable(0.0)


def work():
    for _ in range(10):
        counter.assign(counter + 1.0)  # racy


threads = [threading.Thread(target=work) for _ in range(4)]
"""
TFP201 = (ROOT / "fixtures" / "TFP201" / "bad.py").read_text()


def test_check_is_an_alias(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    plain, check = cli("a.py"), cli("check", "a.py")
    assert plain.rc == check.rc == 1 and plain.out == check.out


def test_output_format_and_format_alias(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    a = cli("--output-format", "json", "a.py")
    b = cli("--format", "json", "a.py")
    assert json.loads(a.out) == json.loads(b.out) and json.loads(a.out)[0]["code"] == "TFP101"
    r = cli("check", "--output-format", "nope", "a.py")
    assert r.rc == 2 and "nope" in r.err


def test_concise_marks_fixable_and_summarises(project, cli):
    project.write("t.py", TFP301)
    project.write("d.py", TFP201)
    r = cli("check", "--output-format", "concise", "t.py", "d.py")
    assert r.rc == 1
    assert re.search(r"^t\.py:9:9: TFP301 \[\*\] ", r.out, re.M)
    assert re.search(r"^d\.py:27:13: TFP201 `", r.out, re.M)  # unsafe fix: no [*] without --unsafe-fixes
    assert r.lines[-2:] == ["Found 2 errors.",
                            "[*] 1 fixable with `--fix` (1 unsafe fix available with `--fix --unsafe-fixes`)."]
    u = cli("check", "--output-format", "concise", "--unsafe-fixes", "t.py", "d.py")
    assert re.search(r"^d\.py:27:13: TFP201 \[\*\] ", u.out, re.M) and u.lines[-1] == "[*] 2 fixable with `--fix`."


def test_all_checks_passed(project, cli, snippets):
    project.write("ok.py", snippets.clean)
    r = cli("check", "--output-format", "concise", "ok.py")
    assert (r.rc, r.lines) == (0, ["All checks passed!"])
    assert cli("check", "ok.py").out == ""  # text stays flake8's: silent when clean


def test_full_shows_source_and_caret(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    r = cli("check", "--output-format", "full", "a.py")
    lines = r.out.splitlines()
    i = lines.index("3 | model = tf.keras.Sequential([tf.keras.layers.Dense(1)])")
    assert lines[i - 2] == " --> a.py:3:9"
    assert lines[i + 1] == "  |         " + "^" * len("tf.keras.Sequential([tf.keras.layers.Dense(1)])")
    assert lines[0].startswith("TFP101 [*] ") and any(ln.startswith("help: Move the Keras model") for ln in lines)
    assert "Found 1 error." in lines


def test_show_source_and_count(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    r = cli("check", "--show-source", "--count", "a.py")
    assert r.lines[1:] == ["model = tf.keras.Sequential([tf.keras.layers.Dense(1)])", "        ^", "1"]


def test_quiet_silent_verbose(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    q = cli("check", "-q", "--output-format", "concise", "a.py")
    assert q.rc == 1 and len(q.lines) == 1 and "Found" not in q.out
    s = cli("check", "-s", "--output-format", "concise", "a.py")
    assert (s.rc, s.out, s.err) == (1, "", "")
    v = cli("check", "-v", "a.py")
    assert v.rc == 1 and "1 file(s) to lint" in v.err and "[tfpar-lint]" in v.err


@pytest.mark.parametrize("color, env, colored", [
    ("always", {}, True), ("never", {"FORCE_COLOR": "1"}, False), ("auto", {}, False),
    ("auto", {"FORCE_COLOR": "1"}, True), ("auto", {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ("always", {"NO_COLOR": "1"}, True),
])
def test_color(project, cli, snippets, monkeypatch, color, env, colored):
    for k in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    project.write("a.py", snippets.tfp101)
    r = cli("check", "--color", color, "--output-format", "concise", "a.py")
    assert ("\x1b[" in r.out) is colored


def test_fix_writes_and_summarises(project, cli):
    p = project.write("t.py", TFP301)
    r = cli("check", "--fix", "t.py")
    assert r.rc == 0 and r.lines == ["Found 1 error (1 fixed, 0 remaining)."]
    assert "counter.assign_add(1.0)  # racy" in p.read_text()
    assert p.read_text().replace("counter.assign_add(1.0)", "counter.assign(counter + 1.0)") == TFP301
    assert cli("check", "--fix", "t.py").lines == ["All checks passed!"]  # ruff prints it in fix mode


def test_fix_leaves_unsafe_without_flag(project, cli):
    p = project.write("d.py", TFP201)
    r = cli("check", "--fix", "d.py")
    assert r.rc == 1 and p.read_text() == TFP201
    assert r.lines[-2:] == ["Found 1 error.", "1 unsafe fix available with `--fix --unsafe-fixes`."]
    r = cli("check", "--fix", "--unsafe-fixes", "d.py")
    assert r.rc == 0 and "experimental_distribute_dataset(tf.data" in p.read_text()


def test_show_fixes(project, cli):
    project.write("t.py", TFP301)
    r = cli("check", "--fix", "--show-fixes", "t.py")
    assert "Fixed 1 error:\n- t.py:\n    1 \u00d7 TFP301 (thread-unlocked-read-modify-write)\n" in r.out


def test_diff_writes_nothing(project, cli, snippets):
    p = project.write("t.py", TFP301)
    r = cli("check", "--diff", "t.py")
    assert r.rc == 1 and p.read_text() == TFP301
    assert "--- t.py\n+++ t.py\n" in r.out
    assert "-        counter.assign(counter + 1.0)  # racy\n+        counter.assign_add(1.0)  # racy\n" in r.out
    assert r.lines[-1] == "Would fix 1 error."
    project.write("ok.py", snippets.clean)
    assert (cli("check", "--diff", "ok.py").rc, cli("check", "--diff", "ok.py").out) == (0, "")


def test_fix_only_and_exit_non_zero_on_fix(project, cli, snippets):
    project.write("t.py", TFP301)
    project.write("d.py", TFP201)
    r = cli("check", "--fix-only", "t.py", "d.py")
    assert r.rc == 0  # d.py's finding (an unsafe fix) is not reported
    assert r.lines == ["Fixed 1 error (1 additional fix available with `--unsafe-fixes`)."]
    project.write("t.py", TFP301)
    assert cli("check", "--fix", "--exit-non-zero-on-fix", "t.py").rc == 1


def test_fix_stdin_prints_the_fixed_code(project, cli):
    r = cli("check", "--fix", "-", "--stdin-filename", "t.py", stdin=TFP301.encode())
    assert r.out == TFP301.replace("counter.assign(counter + 1.0)", "counter.assign_add(1.0)")
    assert "1 fixed" in r.err


def test_add_noqa(project, cli):
    p = project.write("t.py", TFP301)
    d = project.write("d.py", TFP201)
    r = cli("check", "--add-noqa", "t.py", "d.py")
    assert r.rc == 0 and r.err == "Added 2 noqa directives.\n"
    assert "counter.assign(counter + 1.0)  # racy  # noqa: TFP301\n" in p.read_text()
    assert "sizes = step(x)  # expect: TFP201  # noqa: TFP201\n" in d.read_text()
    assert cli("check", "t.py", "d.py").rc == 0
    assert cli("check", "--add-noqa", "t.py").err == "Added 0 noqa directives.\n"


def test_add_noqa_merges_codes_and_keeps_multiline_statements_valid(project, cli):
    src = ("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
           "model = tf.keras.Sequential(  # noqa: E501\n    [tf.keras.layers.Dense(1)])\n"
           "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\n")
    p = project.write("m.py", src)
    cli("check", "--add-noqa", "m.py")
    # merged into the comment already on the finding's line (inside brackets flake8 maps noqa per line)
    assert "model = tf.keras.Sequential(  # noqa: E501, TFP101\n    [tf.keras.layers.Dense(1)])\n" in p.read_text()
    compile(p.read_text(), "m.py", "exec")
    assert cli("check", "m.py").rc == 0


def test_unused_noqa_tfp900(project, cli, snippets):
    project.write("ok.py", snippets.clean.replace("loss=\"mse\")", "loss=\"mse\")  # noqa: TFP101, E501"))
    assert cli("check", "ok.py").rc == 0  # off by default, like RUF100
    r = cli("check", "--extend-select", "TFP900", "ok.py")
    assert r.rc == 1 and "TFP900 Unused `noqa` directive (unused: `TFP101`)" in r.out
    cli("check", "--extend-select", "TFP900", "--fix", "ok.py")
    assert "# noqa: E501" in (project.root / "ok.py").read_text() and "TFP101" not in (project.root / "ok.py").read_text()
    project.write("x.py", "x = 1  # noqa: TFP108, TFP999\n")
    r = cli("check", "--extend-select", "TFP900", "x.py")
    assert "(non-enabled: `TFP108`; unknown: `TFP999`)" in r.out


def test_upper_case_noqa_agrees_with_flake8(project, cli, proc):
    src = TFP201.replace("# expect: TFP201", "# NOQA: TFP201")
    project.write("d.py", src)
    assert cli("check", "d.py").rc == 0
    violation = pytest.importorskip("flake8.violation")
    line = src.splitlines()[26] + "\n"
    assert violation.Violation("TFP201", "d.py", 27, 1, "m", line).is_inline_ignored(False) is True
    r = proc([sys.executable, "-m", "flake8", "--select", "TFP", "d.py"], project.root,
             env={"PYTHONPATH": str(ROOT / "src")})
    assert (r.rc, r.out) == (0, "")


def test_named_folder_matching_an_exclude_is_linted(project, cli):
    project.write("build/a.py", TFP301)
    project.write("build/venv/b.py", TFP301)
    project.write("src/build/c.py", TFP301)
    r = cli("check", "build")
    assert [ln.split(":")[0] for ln in r.lines] == [os.path.join("build", "a.py")]
    assert cli("check", ".").out == ""  # excluded when walking from above
    assert cli("check", "--force-exclude", "build").out == ""


def test_demo_text_is_true():
    """scripts/dev.sh demo says every '# expect:' line of the project it lints is reported, and that
    each finding needs another file: run its command with and without whole-project analysis."""
    from tfpar_lint.verify.testing import expected_findings

    dev = (ROOT / "scripts" / "dev.sh").read_text()
    m = re.search(r"\.venv/bin/tfpar-lint (check (fixtures/\S+)[^|]*?) \|\|", dev)
    assert m and "every '# expect:' line is reported" in dev and "needs another file" in dev
    args, folder = m.group(1).split(), m.group(2)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))

    def run(*extra):
        out = subprocess.run([sys.executable, "-m", "tfpar_lint", *args, *extra, "--no-cache", "-q"], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=600).stdout
        return {tuple(re.match(r"(.+?):(\d+):\d+: (\S+)", ln).groups()) for ln in out.splitlines()}

    want = set()
    for p in sorted((ROOT / folder).glob("**/*.py")):
        for f in expected_findings(str(p)):
            want.add((str(p.relative_to(ROOT)), str(f.line), f.code))
    assert len(want) >= 5
    assert run() == want
    assert run("--no-project") == set()


def test_fix_keeps_crlf_and_bom(project, cli):
    crlf = (ROOT / "fixtures" / "TFP101" / "bad.py").read_text().replace("\n", "\r\n").encode()
    bom = b"\xef\xbb\xbf" + TFP301.encode()
    a = project.write("crlf.py", crlf)
    b = project.write("bom.py", bom)
    r = cli("check", "--fix", "crlf.py", "bom.py")
    assert r.lines == ["Found 2 errors (2 fixed, 0 remaining)."]
    data = a.read_bytes()
    assert data.count(b"\r\n") == crlf.count(b"\r\n") and b"\n" not in data.replace(b"\r\n", b"")
    assert b"\r\n    model = build_model()  # expect: TFP101\r\n" in data
    assert b.read_bytes() == bom.replace(b"counter.assign(counter + 1.0)", b"counter.assign_add(1.0)")


def test_fix_settings_in_pyproject(project, cli):
    p = project.write("t.py", TFP301)
    project.write("pyproject.toml", "[tool.tfpar-lint]\nfix = true\nshow-fixes = true\n")
    r = cli("check", "--no-fix", "t.py")
    assert r.rc == 1 and p.read_text() == TFP301  # the command line wins
    r = cli("check", "t.py")
    assert r.rc == 0 and "counter.assign_add(1.0)" in p.read_text() and "Fixed 1 error:" in r.out
    d = project.write("d.py", TFP201)
    project.write("pyproject.toml", "[tool.tfpar-lint]\nfix = true\nunsafe-fixes = true\n")
    assert cli("check", "d.py").rc == 0 and "experimental_distribute_dataset(tf.data" in d.read_text()
    project.write("pyproject.toml", "[tool.tfpar-lint]\nfix = 'yes'\n")
    r = cli("check", "t.py")
    assert r.rc == 2 and "'fix' must be true or false" in r.err


def test_statistics_replace_findings_in_ruff_formats():
    """ruff's --statistics: a count per code instead of the findings (concise and full); the
    flake8-style text format keeps flake8's meaning (findings, then counts)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    folder = "fixtures/project/bad"

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "tfpar_lint", "check", folder, "--no-cache", *extra],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)

    plain = run("--output-format", "concise")
    codes = [ln.split(" ")[1] for ln in plain.stdout.splitlines() if ln.startswith(folder)]
    for fmt in ("concise", "full"):
        r = run("--output-format", fmt, "--statistics")
        assert r.returncode == 1
        assert folder not in r.stdout  # no finding lines
        table = [ln.split("\t") for ln in r.stdout.splitlines() if "\t" in ln]
        assert {c: int(n) for n, c, _ in table} == {c: codes.count(c) for c in set(codes)}
        assert f"Found {len(codes)} errors." in r.stdout
    text = run("--output-format", "text", "--statistics")
    assert sum(ln.startswith(folder) for ln in text.stdout.splitlines()) == len(codes)


# -- issue 23: ruff's exit codes for files it cannot parse, and ruff's JSON field names ---------------

def test_syntax_error_is_a_diagnostic_and_exit_zero_obeys(project, cli, snippets):
    project.write("broken.py", snippets.syntax_error)
    project.write("clean.py", "x = 1\n")
    r = cli("check", "broken.py", "clean.py")
    assert r.rc == 1 and "E999" in r.out, r  # ruff: a syntax error is a diagnostic of its file
    z = cli("check", "--exit-zero", "broken.py", "clean.py")
    assert z.rc == 0 and "E999" in z.out, z
    missing = cli("check", "no_such_file.py")
    assert missing.rc == 1 and "E902" in missing.out, missing
    assert cli("check", "--exit-zero", "no_such_file.py").rc == 0


def test_json_carries_ruffs_field_names(project, cli, snippets):
    project.write("t.py", TFP301)
    project.write("m.py", "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
                          "model = tf.keras.Sequential(\n    [tf.keras.layers.Dense(1)])\n"
                          "with strategy.scope():\n    model.compile('sgd', 'mse')\n")
    project.write("broken.py", snippets.syntax_error)
    r = cli("check", "--output-format", "json", "t.py", "m.py", "broken.py")
    data = json.loads(r.out)
    ruff_keys = {"code", "message", "filename", "location", "end_location", "fix", "url", "noqa_row", "cell"}
    for d in data:
        assert ruff_keys <= set(d), d
        assert os.path.isabs(d["filename"]) and Path(d["filename"]).name == d["path"]
        assert d["location"] == {"row": d["line"], "column": d["col"]}
        assert d["end_location"] == {"row": d["end_line"], "column": d["end_col"]}
    t = next(d for d in data if d["code"] == "TFP301")
    assert t["url"].endswith("/rules/TFP301.md") and t["fix"]["applicability"] == "safe"
    assert t["noqa_row"] == t["line"] and t["cell"] is None
    syntax = next(d for d in data if d["code"] == "E999")
    assert syntax["url"] is None and syntax["fix"] is None
    m = next(d for d in data if d["path"] == "m.py")
    # the noqa row is the line `--add-noqa` writes the comment on
    added = cli("check", "--add-noqa", "m.py")
    assert added.rc == 0
    lines = (Path(m["filename"])).read_text().splitlines()
    assert "# noqa: " + m["code"] in lines[m["noqa_row"] - 1]


def test_mistyped_command_and_options_before_the_command(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    r = cli("chek", ".")
    assert r.rc == 2 and "unknown command 'chek' (did you mean 'check'?)" in r.err and r.out == "", r
    assert "did you mean 'rule'" in cli("rul", "TFP101").err
    # an existing file of that name is linted, not taken for a command
    project.write("chek", snippets.tfp101)
    assert cli("chek").rc == 1
    # options before the command, as ruff takes them
    before = cli("--no-cache", "check", "a.py")
    value = cli("--select", "TFP1", "check", "a.py")
    assert before.rc == value.rc == 1 and before.out == value.out == cli("check", "a.py").out
    assert "check:" not in before.out and "E902" not in before.out
