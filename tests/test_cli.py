"""The tfpar-lint command: exit codes, selection, inputs, bad input, verify plumbing."""
from __future__ import annotations

import json
import os
import re
import sys
import types

import pytest

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED, RUNTIME, Finding, Verification
from tfpar_lint.verify.result import ScriptRun  # no TensorFlow import


def _tfp101_line(path: str = "a.py") -> str:
    return f"{path}:3:9: TFP101 "


# -- exit codes ------------------------------------------------------------------

def test_finding_exits_1_and_prints_flake8_style_line(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    r = cli("a.py")
    assert r.rc == 1
    assert len(r.lines) == 1
    assert r.lines[0].startswith(_tfp101_line())
    assert r.err == ""


def test_clean_files_exit_0(project, cli, snippets):
    project.write("good.py", snippets.clean)
    project.write("plain.py", "print('no tensorflow here')\n")
    r = cli("good.py", "plain.py")
    assert (r.rc, r.out) == (0, "")


def test_real_process_exit_codes(project, tfpar, snippets):
    project.write("a.py", snippets.tfp101)
    project.write("good.py", snippets.clean)
    assert tfpar("good.py").rc == 0
    r = tfpar("a.py")
    assert r.rc == 1 and r.out.startswith(_tfp101_line())
    r = tfpar("--select", "NOPE999", "a.py")
    assert r.rc == 2 and "NOPE999" in r.err and "Traceback" not in r.err


def test_exit_zero(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    r = cli("--exit-zero", "a.py")
    assert r.rc == 0 and r.lines[0].startswith(_tfp101_line())


def test_default_path_is_cwd(project, cli, snippets):
    project.write("pkg/a.py", snippets.tfp101)
    r = cli()
    assert r.rc == 1
    assert r.lines[0].startswith(_tfp101_line(os.path.join("pkg", "a.py")))


# -- bad input: one clear line, exit 2, others still linted ----------------------

def test_syntax_error_reported_and_other_files_still_linted(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    project.write("broken.py", snippets.syntax_error)
    r = cli("a.py", "broken.py")
    assert r.rc == 1  # a diagnostic, as ruff: exit 1
    broken = [ln for ln in r.lines if ln.startswith("broken.py:")]
    assert len(broken) == 1, r.out
    assert re.match(r"broken\.py:[1-9][0-9]*:[0-9]+: E999 \S", broken[0]), broken[0]
    assert any(ln.startswith(_tfp101_line()) for ln in r.lines)
    assert "Traceback" not in r.out + r.err


def test_syntax_error_line_is_pythons(project, cli, snippets):
    """The E999 line is the one Python's compiler (and flake8) names.

    libcst's ParserSyntaxError.raw_line is sometimes the line after the error (here 4 for an
    error on line 3); the engine should locate syntax errors with ``compile()``/``ast.parse``.
    """
    project.write("broken.py", snippets.syntax_error)
    with pytest.raises(SyntaxError) as exc:
        compile(snippets.syntax_error, "broken.py", "exec")
    assert exc.value.lineno == snippets.syntax_error_line
    r = cli("broken.py")
    assert r.rc == 1  # a diagnostic, as ruff: exit 1
    assert r.lines[0].startswith(f"broken.py:{snippets.syntax_error_line}:"), r.lines[0]


def test_non_utf8_file(project, cli, snippets):
    project.write("latin.py", b"# tensorflow strategy\nx = '\xe9\xff'\n")
    project.write("a.py", snippets.tfp101)
    r = cli("latin.py", "a.py")
    assert r.rc == 1  # a diagnostic, as ruff: exit 1
    bad = [ln for ln in r.lines if ln.startswith("latin.py:")]
    assert len(bad) == 1 and " E902 " in bad[0] and "UTF-8" in bad[0]
    assert any(ln.startswith(_tfp101_line()) for ln in r.lines)


def test_empty_file_is_clean(project, cli):
    project.write("__init__.py", "")
    r = cli("__init__.py")
    assert (r.rc, r.out, r.err) == (0, "", "")


def test_missing_path(project, tfpar, snippets):
    project.write("a.py", snippets.tfp101)
    r = tfpar("does/not/exist.py", "a.py")
    assert r.rc == 1  # a diagnostic, as ruff: exit 1
    assert "Traceback" not in r.out + r.err
    missing = [ln for ln in r.out.splitlines() if ln.startswith("does/not/exist.py")]
    assert len(missing) == 1 and "E902" in missing[0]
    assert _tfp101_line() in r.out


def _obey_file_permissions() -> None:
    """preexec_fn for a root subprocess: drop CAP_DAC_OVERRIDE (1) and CAP_DAC_READ_SEARCH (2) from the
    capability bounding set (prctl PR_CAPBSET_DROP = 24), so the program it runs, still uid 0, can no
    longer read a file whose mode denies its owner (running as `nobody` instead does not work where the
    interpreter lives under root's private home)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes (chmod 0) are what this test relies on")
def test_unreadable_file(project, cli, snippets):
    import subprocess

    from conftest import _package_root

    p = project.write("secret.py", snippets.tfp101)
    project.write("ok.py", snippets.tfp101)
    p.chmod(0)
    try:
        if os.geteuid() != 0:
            r = cli("--no-cache", "secret.py", "ok.py")
            rc, lines = r.rc, r.lines
        else:  # root reads anything: run the CLI in a subprocess without that power
            try:
                probe = subprocess.run(["cat", "secret.py"], cwd=project.root, capture_output=True,
                                       preexec_fn=_obey_file_permissions)
            except (OSError, subprocess.SubprocessError) as exc:
                pytest.skip(f"running as root and the capabilities that bypass file modes cannot be dropped "
                            f"here ({exc}); as any non-root user this test runs in-process")
            assert probe.returncode != 0, "the capability drop did not take effect"
            env = dict(os.environ, PYTHONPATH=_package_root())
            pr = subprocess.run([sys.executable, "-m", "tfpar_lint", "--no-cache", "secret.py", "ok.py"],
                                cwd=project.root, capture_output=True, text=True, env=env,
                                preexec_fn=_obey_file_permissions, timeout=300)
            rc, lines = pr.returncode, [ln for ln in pr.stdout.splitlines() if ln.strip()]
    finally:
        p.chmod(0o644)
    assert rc == 1, lines  # a diagnostic, as ruff: exit 1
    assert lines[0].startswith("ok.py:3:9: TFP101 "), lines  # the readable file is still linted
    assert lines[1].startswith("secret.py:") and "E902" in lines[1], lines


def test_dash_reads_stdin_under_stdin_filename(project, cli, snippets):
    r = cli("-", "--stdin-filename", "x.py", stdin=snippets.tfp101.encode())
    assert r.rc == 1 and r.lines[0].startswith(_tfp101_line("x.py"))


def test_broken_config_is_one_line_exit_2(project, tfpar, snippets):
    project.write("a.py", snippets.tfp101)
    project.write("pyproject.toml", "[tool.tfpar-lint]\nselekt = ['TFP1']\n")
    r = tfpar("a.py")
    assert r.rc == 2
    assert r.out == ""
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert "selekt" in r.err and "pyproject.toml" in r.err


def test_invalid_toml_is_one_line_exit_2(project, tfpar, snippets):
    project.write("a.py", snippets.tfp101)
    project.write("pyproject.toml", "[tool.tfpar-lint\nselect = \n")
    r = tfpar("a.py")
    assert r.rc == 2 and "pyproject.toml" in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_internal_error_is_one_line(project, cli, snippets, monkeypatch):
    import tfpar_lint.engine

    def boom(*a, **k):
        raise RuntimeError("simulated engine bug")
    monkeypatch.setattr(tfpar_lint.engine, "lint_paths", boom)
    project.write("a.py", snippets.tfp101)
    r = cli("a.py")
    assert r.rc == 2 and r.err.strip() == (
        "tfpar-lint: error: internal error: RuntimeError: simulated engine bug "
        "(set TFPAR_LINT_DEBUG=1 to see the traceback)")
    monkeypatch.setenv("TFPAR_LINT_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli("a.py")


def test_usage_errors_exit_2(project, cli):
    assert cli("--jobs", "0").rc == 2
    assert cli("--format", "xml").rc == 2
    r = cli("--no-such-flag")
    assert r.rc == 2 and "--no-such-flag" in r.err
    assert cli("--devices", "tpu:3", "--verify", "x.py").rc == 2


# -- selection ----------------------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    ((), 1),
    (("--select", "TFP101"), 1),
    (("--select", "TFP1"), 1),
    (("--select", "TFP"), 1),
    (("--select", "ALL"), 1),
    (("--select", "model-outside-scope"), 1),
    (("--select", "TFP2"), 0),
    (("--ignore", "TFP101"), 0),
    (("--ignore", "TFP1"), 0),
    (("--ignore", "model-outside-scope"), 0),
    (("--select", "TFP1", "--ignore", "TFP101"), 0),   # ignore is more specific
    (("--select", "TFP101", "--ignore", "TFP1"), 1),   # select is more specific
    (("--select", "TFP1", "--ignore", "TFP1"), 0),     # equal: ignore wins
    (("--select", "TFP2", "--extend-select", "TFP101"), 1),
    (("--select", "TFP2,TFP101"), 1),
])
def test_selection(project, cli, snippets, args, expected):
    project.write("a.py", snippets.tfp101)
    r = cli(*args, "a.py")
    assert r.rc == expected, (args, r.out, r.err)
    assert (len(r.lines) == 1) == (expected == 1)


def test_unknown_selector(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    r = cli("--ignore", "TFP1O1", "a.py")
    assert r.rc == 2 and "TFP1O1" in r.err and r.out == ""


def test_cli_select_overrides_config_like_ruff(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    project.write("pyproject.toml", "[tool.tfpar-lint]\nignore = ['TFP101']\n")
    assert cli("a.py").rc == 0
    assert cli("--select", "TFP101", "a.py").rc == 1        # --select replaces the file's selection
    assert cli("--extend-select", "TFP2", "a.py").rc == 0   # --extend-select keeps the file's ignore
    assert cli("--no-config", "a.py").rc == 1


def test_per_file_ignores(project, cli, snippets):
    project.write("src/a.py", snippets.tfp101)
    project.write("tests/test_a.py", snippets.tfp101)
    project.write("pyproject.toml", "[tool.tfpar-lint]\n[tool.tfpar-lint.per-file-ignores]\n"
                                    "'tests/*' = ['TFP1']\n")
    r = cli(".")
    assert r.rc == 1
    assert [ln.split(":")[0] for ln in r.lines] == [os.path.join("src", "a.py")]


def test_config_flag_and_format_key(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    project.write("conf/custom.toml", "format = 'json'\nselect = ['TFP1']\n")
    r = cli("--config", "conf/custom.toml", "a.py")
    assert r.rc == 1
    assert json.loads(r.out)[0]["code"] == "TFP101"
    r = cli("--config", "missing.toml", "a.py")
    assert r.rc == 2 and "missing.toml" in r.err


def test_config_found_upward(project, cli, snippets, monkeypatch):
    project.write("pyproject.toml", "[tool.tfpar-lint]\nignore = ['TFP1']\n")
    project.write("sub/deeper/a.py", snippets.tfp101)
    monkeypatch.chdir(project.root / "sub" / "deeper")
    assert cli("a.py").rc == 0
    r = cli("--show-settings")
    assert str(project.root / "pyproject.toml") in r.out


def test_show_settings_explains(project, cli):
    project.write("pyproject.toml", "[tool.tfpar-lint]\nignore = ['TFP1']\n")
    r = cli("--show-settings", "--extend-select", "TFP101")
    assert r.rc == 0
    row = [ln for ln in r.out.splitlines() if ln.strip().startswith("TFP101")][0]
    assert " on " in row and "extend-select 'TFP101' (command line)" in row
    row = [ln for ln in r.out.splitlines() if ln.strip().startswith("TFP102")][0]
    assert " off " in row and "ignore 'TFP1' (pyproject.toml)" in row


# -- information --------------------------------------------------------------------

def test_statistics(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    project.write("b.py", snippets.tfp101)
    r = cli("--statistics", "a.py", "b.py")
    assert r.rc == 1
    stats = [ln for ln in r.lines if not ln.startswith(("a.py", "b.py"))]
    assert len(stats) == 1
    count, code = stats[0].split()[:2]
    assert (count, code) == ("2", "TFP101")


def test_list_rules(cli):
    from tfpar_lint import registry

    r = cli("--list-rules")
    assert r.rc == 0
    lines = r.out.splitlines()
    assert lines[0].split()[:3] == ["CODE", "NAME", "DEFAULT"]
    rules = registry.all_rules()
    assert len(lines) == len(rules) + 1
    for rule, line in zip(rules, lines[1:]):
        parts = line.split()
        assert parts[:3] == [rule.CODE, rule.NAME, "on" if rule.DEFAULT_ENABLED else "off"]
    data = json.loads(cli("--list-rules", "--format", "json").out)
    assert [d["code"] for d in data] == [r.CODE for r in rules]


def test_rule_page(cli):
    r = cli("rule", "TFP101")
    assert r.rc == 0 and "TFP101" in r.out
    assert cli("--explain", "tfp101").out == r.out
    assert cli("--explain", "model-outside-scope").out == r.out
    bad = cli("rule", "TFP998")
    assert bad.rc == 2 and "TFP998" in bad.err
    assert cli("rule").rc == 2


def test_rule_page_prefers_checkout_rules_folder(tmp_path, monkeypatch):
    from tfpar_lint import cli as cli_mod

    page = cli_mod.rule_page_path("TFP101")
    repo_page = cli_mod.Path(cli_mod.__file__).resolve().parents[2] / "rules" / "TFP101.md"
    assert repo_page.is_file() and page == repo_page


def test_version(cli):
    from tfpar_lint import __version__

    r = cli("--version")
    assert r.rc == 0 and __version__ in r.out


# -- inputs ---------------------------------------------------------------------------

def test_stdin(project, cli, snippets):
    r = cli("-", stdin=snippets.tfp101.encode())
    assert r.rc == 1 and r.lines[0].startswith("<stdin>:3:9: TFP101")
    r = cli("--stdin-filename", "pkg/train.py", stdin=snippets.tfp101.encode())
    assert r.rc == 1 and r.lines[0].startswith("pkg/train.py:3:9: TFP101")


def test_stdin_notebook(project, cli, tfp101_notebook):
    r = cli("-", "--stdin-filename", "nb.ipynb", stdin=tfp101_notebook.encode())
    assert r.rc == 1 and r.lines[0].startswith("nb.ipynb:cell_3:2:9: TFP101"), r.out


def test_stdin_per_file_ignores_and_force_exclude(project, cli, snippets):
    project.write("pyproject.toml", "[tool.tfpar-lint]\nextend-exclude = ['generated']\n"
                                    "[tool.tfpar-lint.per-file-ignores]\n'tests/*' = ['ALL']\n")
    src = snippets.tfp101.encode()
    assert cli("-", "--stdin-filename", "tests/t.py", stdin=src).rc == 0
    assert cli("-", "--stdin-filename", "generated/g.py", stdin=src).rc == 1
    assert cli("-", "--stdin-filename", "generated/g.py", "--force-exclude", stdin=src).rc == 0


def test_folder_walk_with_excludes(project, cli, snippets):
    for rel in ["pkg/a.py", "pkg/sub/b.py", "venv/lib/c.py", "build/d.py", ".git/e.py",
                "pkg/gen/f.py", "notes/g.txt", "pkg/h_pb2.py"]:
        project.write(rel, snippets.tfp101)
    project.write("pyproject.toml", "[tool.tfpar-lint]\nextend-exclude = ['pkg/gen', '*_pb2.py']\n")
    r = cli(".")
    got = sorted(ln.split(":")[0] for ln in r.lines)
    assert got == sorted([os.path.join("pkg", "a.py"), os.path.join("pkg", "sub", "b.py")]), r.out
    # a file named explicitly is linted whatever its extension or excludes...
    r = cli("notes/g.txt", "venv/lib/c.py")
    assert len(r.lines) == 2
    # ...unless --force-exclude
    r = cli("--force-exclude", "notes/g.txt", "venv/lib/c.py")
    assert len(r.lines) == 1 and r.lines[0].startswith("notes/g.txt")
    # --exclude replaces the defaults
    r = cli("--exclude", "pkg", ".")
    got = {ln.split(":")[0].split(os.sep)[0] for ln in r.lines}
    assert got == {"venv", "build", ".git"}


def test_no_files_found_warns_exit_0(project, cli):
    (project.root / "empty").mkdir()
    r = cli("empty")
    assert r.rc == 0 and r.out == "" and "no Python files" in r.err


def test_jobs_parallel_same_result(project, cli, snippets):
    for i in range(12):
        project.write(f"m{i:02d}.py", snippets.tfp101 if i % 2 else snippets.clean)
    serial = cli("-j", "1", ".")
    parallel = cli("-j", "4", ".")
    assert serial.rc == parallel.rc == 1
    assert serial.out == parallel.out and len(serial.lines) == 6


def test_output_file(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    r = cli("--format", "json", "--output-file", "out/report.json", "a.py")
    assert r.rc == 2  # out/ does not exist: clear error, no traceback
    assert "out/report.json" in r.err
    (project.root / "out").mkdir()
    r = cli("--format", "json", "--output-file", "out/report.json", "a.py")
    assert r.rc == 1 and r.out == ""
    assert json.loads((project.root / "out" / "report.json").read_text())[0]["code"] == "TFP101"


def test_progress_bar_only_on_tty_with_many_files(project, cli, snippets, monkeypatch):
    for i in range(25):
        project.write(f"m{i:02d}.py", snippets.clean)
    r = cli("-j", "1", ".")
    assert r.err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    r = cli("-j", "1", ".")
    assert "25/25 files" in r.err
    r = cli("-j", "1", "--no-progress", ".")
    assert "files" not in r.err


def test_double_dash_without_verify_means_paths(project, cli, snippets):
    project.write("-odd.py", snippets.tfp101)
    r = cli("--", "-odd.py")
    assert r.rc == 1 and r.lines[0].startswith("-odd.py:3:9")


# -- --verify plumbing (with a stand-in verifier; the real one needs TensorFlow) -----

def _fake_run(script, outcome="stopped", runtime=()):
    run = ScriptRun(path=script, outcome=outcome, seconds=4.12, replicas=2, devices=["/cpu:0", "/cpu:1"], steps=3,
                    notes=["stopped after 3 steps of step"])
    run.runtime_findings = [f.to_dict() for f in runtime]
    return run


@pytest.fixture
def fake_verify(monkeypatch):
    calls = {}

    def install(status, outcome="stopped", runtime_code=None):
        def verify_findings(scripts, findings, *, devices="auto", max_steps=3, timeout=120.0,
                            script_args=(), jobs=None, workdir=None):
            calls.update(scripts=list(scripts), devices=devices, max_steps=max_steps, timeout=timeout,
                         script_args=list(script_args))
            for f in findings:
                f.verification = Verification(status=status, evidence="variable is not mirrored",
                                              replicas=2, devices=["/cpu:0", "/cpu:1"], seconds=4.12)
            runs = []
            for s in scripts:
                extra = []
                if runtime_code:
                    g = Finding(runtime_code, "thread-unlocked-read-modify-write", "seen at runtime", s, 2, 1, 2, 1)
                    g.verification = Verification(status=RUNTIME, evidence="5 updates should give 5, got 1",
                                                  replicas=0, seconds=4.12)
                    extra.append(g)
                runs.append(_fake_run(s, outcome, extra))
            return runs
        mod = types.ModuleType("tfpar_lint.verify")
        mod.verify_findings = verify_findings
        mod.__path__ = [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "tfpar_lint",
                                     "verify")]  # its TensorFlow-free parts (what --verify runs, --devices) are real
        monkeypatch.setitem(sys.modules, "tfpar_lint.verify", mod)
        monkeypatch.setattr("tfpar_lint.cli._tensorflow_available", lambda: True)
        return calls
    return install


def test_verify_confirmed_text(project, cli, snippets, fake_verify):
    calls = fake_verify(CONFIRMED)
    project.write("train.py", snippets.tfp101)
    r = cli("--verify", "--devices", "cpu:2", "--max-steps", "3", "--timeout", "60", "train.py",
            "--", "--epochs", "1")
    assert r.rc == 1
    assert r.lines[0] == ("train.py: stopped after 3 steps of step (the step bound, --max-steps); "
                          "2 replicas on cpu:0,cpu:1; 4.1 s; 1 CONFIRMED")
    assert r.lines[1] == "train.py:3:9: TFP101 CONFIRMED: variable is not mirrored"
    assert r.lines[2].startswith("    fix: Build the model inside `with strategy.scope():`")  # the rule's fix
    assert r.lines[3].startswith("== 1 script run: 1 CONFIRMED, 0 RUNTIME")
    assert r.lines[4].startswith("Next: ")
    assert calls == {"scripts": ["train.py"], "devices": "cpu:2", "max_steps": 3, "timeout": 60.0,
                     "script_args": ["--epochs", "1"]}
    r = cli("--verify", "-v", "train.py")
    assert r.lines[1].startswith("train.py:3:9: TFP101 ") and "CONFIRMED" not in r.lines[1]
    assert r.lines[2] == "    CONFIRMED: variable is not mirrored (2 replicas on /cpu:0,/cpu:1, 4.1 s)"


@pytest.mark.parametrize("status, rc", [(CONFIRMED, 1), (INCONCLUSIVE, 2), (NOT_REPRODUCED, 0)])
def test_verify_exit_codes(project, cli, snippets, fake_verify, status, rc):
    """A finding the run could not decide leaves the script unverified: exit 2, never 0."""
    fake_verify(status)
    project.write("train.py", snippets.tfp101)
    assert cli("--verify", "train.py").rc == rc
    assert cli("--verify", "--exit-zero", "train.py").rc == 0


def test_verify_runtime_finding_exits_1_in_every_format(project, cli, snippets, fake_verify):
    """A mistake the run showed where the linter is silent is a finding of its own (RUNTIME)."""
    fake_verify(CONFIRMED, runtime_code="TFP301")
    project.write("train.py", snippets.clean)
    r = cli("--verify", "train.py")
    assert r.rc == 1
    assert "train.py:2:1: TFP301 RUNTIME: 5 updates should give 5, got 1" in r.lines
    r = cli("--verify", "--format", "json", "train.py")
    assert r.rc == 1
    (d,) = json.loads(r.out)
    assert (d["code"], d["line"], d["verification"]["status"]) == ("TFP301", 2, RUNTIME)
    r = cli("--verify", "--format", "sarif", "train.py")
    (res,) = json.loads(r.out)["runs"][0]["results"]
    assert res["ruleId"] == "TFP301" and res["properties"]["verification"]["status"] == RUNTIME
    from tfpar_lint.finding import VERDICTS

    assert json.loads(r.out)["runs"][0]["invocations"][0]["properties"]["verdicts"] == VERDICTS


def test_verify_script_that_could_not_run_exits_2(project, cli, snippets, fake_verify):
    fake_verify(INCONCLUSIVE, outcome="failed")
    project.write("train.py", snippets.tfp101)
    r = cli("--verify", "train.py")
    assert r.rc == 2 and "COULD_NOT_RUN" in r.lines[0]
    project.write("clean.py", snippets.clean)  # no finding at all: still not "clean"
    r = cli("--verify", "--format", "json", "clean.py")
    assert r.rc == 2
    (d,) = json.loads(r.out)
    assert (d["code"], d["verification"]["status"]) == ("E904", "COULD_NOT_RUN")


def test_verify_json_and_sarif(project, cli, snippets, fake_verify):
    fake_verify(NOT_REPRODUCED)
    project.write("train.py", snippets.tfp101)
    r = cli("--verify", "--format", "json", "train.py")
    assert r.rc == 0
    assert json.loads(r.out)[0]["verification"]["status"] == NOT_REPRODUCED
    assert r.err.startswith("train.py: stopped after 3 steps")  # run headers go to stderr, stdout stays JSON
    r = cli("--verify", "--format", "sarif", "train.py")
    log = json.loads(r.out)
    assert log["runs"][0]["results"][0]["properties"]["verification"]["replicas"] == 2
    assert log["runs"][0]["invocations"][0]["properties"]["scriptRuns"][0]["steps"] == 3


def test_help_names_the_verdicts_and_exit_codes(cli):
    from tfpar_lint.finding import VERDICTS

    out = " ".join(build_help().split())
    for v in VERDICTS:
        assert v in out
    assert ("2 when a script COULD_NOT_RUN or a finding is INCONCLUSIVE (not with --exit- zero), else 1 when a "
            "finding is CONFIRMED or RUNTIME, else 0") in out


def build_help() -> str:
    from tfpar_lint.cli import build_parser

    return build_parser().format_help()


def test_verify_clean_script_still_runs_and_exits_0(project, cli, snippets, fake_verify):
    """A script without findings is still run (a mistake the linter missed would be RUNTIME)."""
    calls = fake_verify(CONFIRMED)
    project.write("train.py", snippets.clean)
    assert cli("--verify", "train.py").rc == 0
    assert [os.path.basename(s) for s in calls["scripts"]] == ["train.py"]


def test_verify_defaults_left_to_the_verifier(project, cli, snippets, fake_verify):
    calls = fake_verify(CONFIRMED)
    project.write("train.py", snippets.tfp101)
    cli("--verify", "train.py")
    assert (calls["devices"], calls["max_steps"], calls["timeout"], calls["script_args"]) == (
        "auto", 3, 120.0, [])


def test_verify_without_tensorflow(project, cli, snippets, monkeypatch):
    monkeypatch.setattr("tfpar_lint.cli._tensorflow_available", lambda: False)
    project.write("train.py", snippets.tfp101)
    r = cli("--verify", "train.py")
    assert r.rc == 2
    # a line that works today (tfpar-lint is not on PyPI): this interpreter's pip, the extra's requirements
    assert f"{sys.executable} -m pip install " in r.err and "tensorflow-cpu" in r.err
    assert "tfpar-lint[verify]" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_verify_package_unimportable(project, cli, snippets, monkeypatch):
    monkeypatch.setattr("tfpar_lint.cli._tensorflow_available", lambda: True)
    monkeypatch.setitem(sys.modules, "tfpar_lint.verify", None)  # import fails
    project.write("train.py", snippets.tfp101)
    r = cli("--verify", "train.py")
    assert r.rc == 2 and "-m pip install " in r.err and "tensorflow-cpu" in r.err


def test_verify_usage_errors(project, cli, snippets):
    project.write("train.py", snippets.tfp101)
    assert cli("--verify", "-", stdin=b"").rc == 2
    assert cli("--max-steps", "3", "train.py").rc == 2
    assert cli("--verify", "--max-steps", "0", "train.py").rc == 2
    assert cli("--verify", "--timeout", "-1", "train.py").rc == 2


# -- the real verifier (needs TensorFlow; slow) ----------------------------------------------

REAL_TFP101_SCRIPT = """\
import numpy as np
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
x = np.random.rand(32, 4).astype("float32")
y = np.random.rand(32, 1).astype("float32")
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
with strategy.scope():
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
"""

REAL_GOOD_SCRIPT = REAL_TFP101_SCRIPT.replace(
    "model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])\nwith strategy.scope():\n",
    "with strategy.scope():\n    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])\n")


@pytest.mark.verify
def test_verify_for_real(project, cli):
    """The real verifier through the CLI: a known-bad script is CONFIRMED and exits 1,
    its corrected version gets no finding and exits 0 (in-process CLI, so that this checkout's
    code runs; the verifier's children are real processes with real TensorFlow)."""
    from tfpar_lint.cli import _tensorflow_available

    if not _tensorflow_available():
        pytest.skip("TensorFlow is not installed (bash scripts/dev.sh setup installs it)")
    assert REAL_GOOD_SCRIPT != REAL_TFP101_SCRIPT
    project.write("train.py", REAL_TFP101_SCRIPT)
    project.write("good.py", REAL_GOOD_SCRIPT)
    r = cli("--verify", "--devices", "cpu:2", "--max-steps", "2", "--timeout", "240", "train.py")
    assert r.rc == 1, r.out + r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("train.py: ") and lines[0].endswith("1 CONFIRMED"), r.out
    assert lines[1].startswith("train.py:8:9: TFP101 CONFIRMED: "), r.out
    r = cli("--verify", "--devices", "cpu:2", "--max-steps", "2", "--timeout", "240", "good.py")
    assert r.rc == 0, r.out + r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("good.py: ran to the end; 2 replicas on cpu:0,cpu:1; ") and lines[0].endswith(
        "nothing found"), r.out
    assert lines[1].startswith("== 1 script run: 0 CONFIRMED, 0 RUNTIME"), r.out


def test_verify_dir_runs_every_entry_point_that_uses_a_strategy(project, snippets):
    """``--verify DIR`` runs the folder's scripts that use a strategy, flagged or not; it skips setup.py,
    tests and modules that are not an entry point (saying why), and never runs files without a strategy;
    named files always run."""
    from tfpar_lint.cli import _scripts_to_run
    from tfpar_lint.discovery import discover

    project.write("pkg/setup.py", "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n")
    project.write("pkg/clean.py", snippets.clean)  # no finding, uses a strategy: runs
    project.write("pkg/flagged.py", snippets.tfp101)
    project.write("pkg/plain.py", "import os\nprint(os.getcwd())\n")  # no strategy: never run
    project.write("pkg/tests/check_train.py", snippets.clean)  # under tests/
    project.write("pkg/test_train.py", snippets.clean)
    project.write("pkg/strategies.py", "import tensorflow as tf\nSTRATEGY = tf.distribute.MirroredStrategy()\n")
    project.write("pkg/main.py", "from strategies import STRATEGY\nprint(STRATEGY.num_replicas_in_sync)\n")
    project.write("pkg/lib.py", "import tensorflow as tf\n\n\ndef make():\n    return tf.distribute.MirroredStrategy()\n")
    project.write("pkg/guarded.py", "import tensorflow as tf\n\n\ndef main():\n    tf.distribute.MirroredStrategy()\n\n\n"
                                    "if __name__ == '__main__':\n    main()\n")
    project.write("named.py", "print('not distributed')\n")
    found = discover(["pkg", "named.py"], [], str(project.root))
    flagged = Finding("TFP101", "model-outside-scope", "m", os.path.join("pkg", "flagged.py"), 3, 9, 3, 9)
    got = _scripts_to_run(found.files, ["pkg", "named.py"], [flagged])
    assert sorted(os.path.basename(p) for p in got) == ["clean.py", "flagged.py", "guarded.py", "main.py", "named.py"]
    from tfpar_lint.verify.select import select

    sel = select(found.files, ["pkg", "named.py"], [flagged.path])
    why = {os.path.relpath(p, "pkg"): w for p, w in sel.skipped}
    assert why == {"setup.py": "setup script", os.path.join("tests", "check_train.py"): "test", "test_train.py": "test",
                   "strategies.py": "module imported by main.py, no __main__ entry point",
                   "lib.py": "module that only defines things, no entry point"}, why
    assert sel.no_strategy == 1


def test_verify_dir_says_what_it_skipped(project, cli, snippets, fake_verify):
    calls = fake_verify(NOT_REPRODUCED)
    project.write("pkg/setup.py", "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n")
    project.write("pkg/train.py", snippets.clean)
    r = cli("--verify", "pkg")
    assert [os.path.basename(p) for p in calls["scripts"]] == ["train.py"]
    assert "--verify did not run: pkg/setup.py (setup script)" in r.err, r.err


def test_verify_refuses_devices_the_machine_cannot_give(project, cli, snippets, monkeypatch):
    """No silent fallback: --devices gpu[:N] without a GPU is a usage error (exit 2, one clear line)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr("tfpar_lint.cli._tensorflow_available", lambda: True)
    project.write("train.py", snippets.tfp101)
    for spec in ("gpu", "gpu:2"):
        r = cli("--verify", "--devices", spec, "train.py")
        assert r.rc == 2, r.out + r.err
        assert f"--devices {spec}: this machine has no GPU" in r.err and "cpu:N" in r.err, r.err
        assert len(r.err.strip().splitlines()) == 1, r.err
    from tfpar_lint.verify.devices import unmet

    assert unmet("cpu:4") is None and unmet("auto") is None
