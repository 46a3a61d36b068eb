"""Report formats: text, json, sarif (schema-validated), github."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED, RUNTIME, FileError, Finding, Verification
from tfpar_lint.output import Report, error_code, write

REPO_ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO_ROOT / ".." / "shared" / "data" / "sarif-schema-2.1.0.json"


def _finding(**kw) -> Finding:
    base = dict(code="TFP101", name="model-outside-scope", message="model built outside the scope",
                path="pkg/train.py", line=3, col=9, end_line=3, end_col=56, severity="error",
                fix_hint="build it inside the scope")
    base.update(kw)
    return Finding(**base)


def _report(root: str = ".") -> Report:
    f1 = _finding()
    f2 = _finding(path="nb.ipynb", cell=4, line=2, col=5, end_line=2, end_col=20, severity="warning",
                  message="50% of it, with: commas, colons\nand a newline")
    f3 = _finding(path="pkg/train.py", line=10, col=1, end_line=11, end_col=4)
    f3.verification = Verification(status=CONFIRMED, evidence="weights differ across replicas",
                                   replicas=2, devices=["/cpu:0", "/cpu:1"], seconds=4.06)
    errors = [FileError("broken.py", "syntax error: invalid syntax", line=3, col=5),
              FileError("latin.py", "not valid UTF-8 (byte 3: invalid start byte)")]
    return Report(findings=[f3, f2, f1], errors=errors, root=root)


def render(fmt: str, report: Report, **kw) -> str:
    buf = io.StringIO()
    write(fmt, report, buf, **kw)
    return buf.getvalue()


def test_short_device_names_in_verdict_line():
    from tfpar_lint.output import verification_line

    f = _finding()
    f.verification = Verification(status=NOT_REPRODUCED, evidence="ran fine", replicas=2, seconds=1.0,
                                  devices=["/job:localhost/replica:0/task:0/device:CPU:0",
                                           "/job:localhost/replica:0/task:0/device:GPU:1"])
    assert verification_line(f) == "-> NOT_REPRODUCED: ran fine (2 replicas on /cpu:0,/gpu:1, 1.0 s)"


def test_error_codes():
    assert error_code(FileError("a.py", "syntax error: x", 1, 1)) == "E999"
    assert error_code(FileError("a.py", "not valid UTF-8 (byte 0)")) == "E902"
    assert error_code(FileError("a.py", "FileNotFoundError: no such file or directory")) == "E902"
    assert error_code(FileError("a.ipynb", "invalid notebook JSON: Expecting value")) == "E902"


# -- text -----------------------------------------------------------------------------

def test_text():
    out = render("text", _report()).splitlines()
    assert out == [
        "broken.py:3:5: E999 syntax error: invalid syntax",
        "latin.py:0:0: E902 not valid UTF-8 (byte 3: invalid start byte)",
        "nb.ipynb:cell_4:2:5: TFP101 50% of it, with: commas, colons and a newline",
        "pkg/train.py:3:9: TFP101 model built outside the scope",
        "pkg/train.py:10:1: TFP101 model built outside the scope",
        "    -> CONFIRMED: weights differ across replicas (2 replicas on /cpu:0,/cpu:1, 4.1 s)",
    ]


def test_text_statistics_like_flake8():
    out = render("text", _report(), statistics=True).splitlines()
    # flake8: f"{count:<5} {code} {first message}", sorted by code, after the findings
    assert out[-3] == "1     E902 not valid UTF-8 (byte 3: invalid start byte)"
    assert out[-2] == "1     E999 syntax error: invalid syntax"
    assert out[-1] == "3     TFP101 50% of it, with: commas, colons and a newline"


def _verified_report(verbose=False):
    from tfpar_lint.verify.result import FamilyObservation, ScriptRun

    def fnd(path, line, code, status, evidence):
        f = Finding(code, "name", f"{code} message", path, line, 1, line, 5)
        f.verification = Verification(status=status, evidence=evidence, replicas=2,
                                      devices=["/device:CPU:0", "/device:CPU:1"], seconds=3.0)
        return f

    runs = [
        ScriptRun(path="a.py", outcome="stopped", seconds=3.04, replicas=2, devices=["/device:CPU:0", "/device:CPU:1"],
                  notes=["stopped after 3 steps of step"],
                  observations=[FamilyObservation("execution", "TFP7xx", CONFIRMED, "strategy.run called eagerly")]),
        ScriptRun(path="b.py", outcome="ok", seconds=5.2, devices=["/device:CPU:0", "/device:CPU:1"]),
        ScriptRun(path="c.py", outcome="error", seconds=0.4, error="KeyError: 'x' (c.py:3)"),
    ]
    findings = [
        fnd("a.py", 4, "TFP201", CONFIRMED, "strategy.run at line 4 received identical data; 2 replicas (each) saw it"),
        fnd("a.py", 9, "TFP403", NOT_REPRODUCED, "replicas drew different values. More detail here"),
        fnd("b.py", 10, "TFP301", RUNTIME, "variable v: 5 updates from 5 threads should give 5, the final value is 1"),
        fnd("c.py", 7, "TFP101", INCONCLUSIVE, "the script failed before line 7 ran: KeyError"),
    ]
    return Report(findings=findings, runs=runs, verified=True, verbose=verbose)


def test_verify_report_reads_like_pytest():
    rep = _verified_report()
    rep.findings[0].fix_hint = "Iterate the distributed dataset."
    out = render("text", rep).splitlines()
    assert out == [
        "a.py: stopped after 3 steps of step (the step bound, --max-steps); 2 replicas on cpu:0,cpu:1; 3.0 s; "
        "1 CONFIRMED, 1 NOT_REPRODUCED",
        # the whole evidence, and the rule's fix under a mistake the run showed
        "a.py:4:1: TFP201 CONFIRMED: strategy.run at line 4 received identical data; 2 replicas (each) saw it",
        "    fix: Iterate the distributed dataset. (`tfpar-lint rule TFP201`)",
        "a.py:9:1: TFP403 NOT_REPRODUCED: replicas drew different values. More detail here",
        "b.py: ran to the end; no strategy created (devices cpu:0,cpu:1); 5.2 s; 1 RUNTIME",
        "b.py:10:1: TFP301 RUNTIME: variable v: 5 updates from 5 threads should give 5, the final value is 1",
        "c.py: COULD_NOT_RUN: KeyError: 'x' (c.py:3); no strategy created; 0.4 s; 1 INCONCLUSIVE",
        "c.py:7:1: TFP101 INCONCLUSIVE: the script failed before line 7 ran: KeyError",
        "== 3 scripts run: 1 CONFIRMED, 1 RUNTIME, 1 NOT_REPRODUCED, 1 INCONCLUSIVE; 1 script COULD_NOT_RUN ==",
        "Next: fix the CONFIRMED and RUNTIME findings; `tfpar-lint rule CODE` explains each rule and its fix "
        "(TFP201, TFP301); -v shows the notes and what each probe checked.",
        "COULD_NOT_RUN: c.py did not run through and showed nothing, so nothing in it was verified (exit status 2): "
        "fix the script, pass its arguments after --, or raise --timeout, then verify again.",
        "INCONCLUSIVE: the run could not decide (the flagged code did not run, or the probe cannot tell; the evidence "
        "says which): pass the script's arguments after --, or raise --timeout / --max-steps.",
    ]


def test_verify_report_verbose_and_no_family_verdicts():
    out = render("text", _verified_report(verbose=True))
    lines = out.splitlines()
    assert lines[1] == "a.py:4:1: TFP201 TFP201 message"
    assert lines[2] == ("    CONFIRMED: strategy.run at line 4 received identical data; 2 replicas (each) saw it "
                        "(2 replicas on /cpu:0,/cpu:1, 3.0 s)")
    assert "    notes: stopped after 3 steps of step" in lines
    assert "    execution probe (TFP7xx) saw: strategy.run called eagerly" in lines
    # A family observation is never printed as a verdict of a code that has no finding.
    for text in (out, render("text", _verified_report())):
        assert "TFP7xx CONFIRMED" not in text.upper()


def _not_run():
    from tfpar_lint.verify.result import ScriptRun

    return ScriptRun(path="t.py", outcome="error", seconds=1.0, error="ModuleNotFoundError: No module named 'x' (t.py:2)",
                     error_line=2, verdict="COULD_NOT_RUN", reason="import error: ModuleNotFoundError: No module "
                     "named 'x' (t.py:2)", stderr_tail=["Traceback (most recent call last):",
                                                        "ModuleNotFoundError: No module named 'x'"])


def test_verify_report_clean_and_not_run():
    from tfpar_lint.output import first_sentence
    from tfpar_lint.verify.result import ScriptRun

    rep = Report(findings=[], runs=[ScriptRun(path="ok.py", outcome="ok", seconds=1.0)], verified=True)
    assert render("text", rep).splitlines() == [
        "ok.py: ran to the end; no strategy created; 1.0 s; nothing found",
        "== 1 script run: 0 CONFIRMED, 0 RUNTIME, 0 NOT_REPRODUCED, 0 INCONCLUSIVE ==",
        "Nothing found: no finding, and the run showed no mistake.",
    ]
    # A script that did not run through is never "nothing found": it says why, with its last stderr lines.
    out = render("text", Report(findings=[], runs=[_not_run()], verified=True)).splitlines()
    assert out[:3] == ["t.py: COULD_NOT_RUN: import error: ModuleNotFoundError: No module named 'x' (t.py:2); no "
                       "strategy created; 1.0 s; nothing found",
                       "    | Traceback (most recent call last):", "    | ModuleNotFoundError: No module named 'x'"]
    assert out[3].endswith("; 1 script COULD_NOT_RUN =="), out
    assert out[4].startswith("COULD_NOT_RUN: t.py did not run through"), out
    assert not any(ln.startswith("Nothing found") for ln in out), out
    assert first_sentence("a (b; c) d; e") == "a (b; c) d"
    assert first_sentence("value 1.5 was read. Then more") == "value 1.5 was read"
    long = "word " * 60
    assert len(first_sentence(long)) <= 110 and first_sentence(long).endswith("...")


def test_not_run_script_is_in_every_machine_format():
    """JSON, SARIF and GitHub carry the same COULD_NOT_RUN verdict as the text report."""
    rep = Report(findings=[], runs=[_not_run()], verified=True)
    (d,) = json.loads(render("json", rep))
    assert (d["code"], d["name"], d["path"], d["line"], d["error"]) == ("E904", "could-not-run", "t.py", 2, True)
    assert d["verification"]["status"] == "COULD_NOT_RUN"
    assert d["verification"]["evidence"].startswith("import error: ModuleNotFoundError")
    assert d["verification"]["stderr"][-1] == "ModuleNotFoundError: No module named 'x'"
    log = json.loads(render("sarif", rep))
    inv = log["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    (n,) = inv["toolExecutionNotifications"]
    assert n["descriptor"]["id"] == "E904" and n["properties"]["verification"]["status"] == "COULD_NOT_RUN"
    assert inv["properties"]["scriptRuns"][0]["status"] == "COULD_NOT_RUN"
    gh = render("github", rep)
    assert gh.startswith("::error file=t.py,title=E904::COULD_NOT_RUN: import error"), gh


# -- json ------------------------------------------------------------------------------

def test_json_is_a_list_with_errors_inline():
    data = json.loads(render("json", _report()))
    assert isinstance(data, list) and len(data) == 5
    keys = {"code", "name", "message", "path", "line", "col", "end_line", "end_col", "severity", "fix_hint"}
    for d in data:
        assert keys <= set(d)
    errs = [d for d in data if d.get("error")]
    assert [(e["code"], e["name"], e["path"]) for e in errs] == [
        ("E999", "syntax-error", "broken.py"), ("E902", "io-error", "latin.py")]
    f = [d for d in data if d["path"] == "pkg/train.py"]
    assert f[0]["line"] == 3 and "verification" not in f[0]
    assert f[1]["verification"] == {"status": "CONFIRMED", "evidence": "weights differ across replicas",
                                    "replicas": 2, "devices": ["/cpu:0", "/cpu:1"], "seconds": 4.06}
    nb = [d for d in data if d["path"] == "nb.ipynb"][0]
    assert nb["cell"] == 4
    # round trip
    assert Finding.from_dict(f[1]).verification.replicas == 2


def test_json_empty():
    assert json.loads(render("json", Report())) == []


# -- sarif -----------------------------------------------------------------------------

# The four SARIF logs below are checked field by field in every checkout; validating them against the
# SARIF 2.1.0 JSON schema needs ../shared/data/sarif-schema-2.1.0.json (the schema file is not part of
# this repository), so only test_sarif_matches_the_schema skips where that folder is absent.


def _sarif_full(tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)  # the findings' relative paths are relative to the cwd
    return json.loads(render("sarif", _report(root=str(tmp_path))))


def _sarif_clean(tmp_path, monkeypatch) -> dict:
    return json.loads(render("sarif", Report()))


def _sarif_outside(tmp_path, monkeypatch) -> dict:
    outside = _finding(path=str(tmp_path.parent / "elsewhere.py"))
    return json.loads(render("sarif", Report(findings=[outside], root=str(tmp_path))))


def _sarif_cli(tmp_path, monkeypatch) -> tuple[int, dict]:
    from conftest import SYNTAX_ERROR_SRC, TFP101_SRC
    from tfpar_lint.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(TFP101_SRC, encoding="utf-8")
    (tmp_path / "pkg" / "broken.py").write_text(SYNTAX_ERROR_SRC, encoding="utf-8")
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    rc = main(["--no-cache", "--format", "sarif", "."])
    return rc, json.loads(out.getvalue())


def test_sarif_complete(tmp_path, monkeypatch):
    from tfpar_lint import __version__, registry

    log = _sarif_full(tmp_path, monkeypatch)
    assert log["version"] == "2.1.0" and log["$schema"].endswith(".json")
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "tfpar-lint" and driver["version"] == __version__
    assert driver["informationUri"].startswith("https://")
    ids = [r["id"] for r in driver["rules"]]
    assert ids == [r.CODE for r in registry.all_rules()]
    for rule, desc in zip(registry.all_rules(), driver["rules"]):
        assert desc["name"] == rule.NAME
        assert desc["shortDescription"]["text"] and desc["fullDescription"]["text"]
        assert desc["helpUri"].endswith(f"/{rule.CODE}.md")
        assert desc["defaultConfiguration"]["level"] in ("error", "warning", "note")
        assert desc["defaultConfiguration"]["enabled"] is bool(rule.DEFAULT_ENABLED)
    results = run["results"]
    assert len(results) == 3
    first = results[1]  # sorted: nb.ipynb, pkg/train.py:3, pkg/train.py:10
    assert first["ruleId"] == "TFP101" and first["level"] == "error"
    assert driver["rules"][first["ruleIndex"]]["id"] == "TFP101"
    loc = first["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/train.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 3, "startColumn": 9, "endLine": 3, "endColumn": 56}
    assert results[0]["properties"]["cell"] == 4 and results[0]["level"] == "warning"
    assert results[2]["properties"]["verification"]["status"] == "CONFIRMED"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    inv = run["invocations"][0]
    assert inv["executionSuccessful"] is False
    notes = inv["toolExecutionNotifications"]
    assert [(n["descriptor"]["id"], n["level"]) for n in notes] == [("E999", "error"), ("E902", "error")]
    assert notes[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3


def test_sarif_clean_run(tmp_path, monkeypatch):
    log = _sarif_clean(tmp_path, monkeypatch)
    assert log["version"] == "2.1.0"
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["invocations"][0]["executionSuccessful"] is True


def test_sarif_windows_style_and_outside_paths(tmp_path, monkeypatch):
    log = _sarif_outside(tmp_path, monkeypatch)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and "\\" not in uri


def test_sarif_from_cli(tmp_path, monkeypatch):
    rc, log = _sarif_cli(tmp_path, monkeypatch)
    assert rc == 1  # a diagnostic, as ruff: exit 1
    res = log["runs"][0]["results"]
    assert [x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for x in res] == ["pkg/a.py"]
    assert res[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert res[0]["locations"][0]["physicalLocation"]["region"]["startColumn"] == 9
    notes = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert len(notes) == 1 and notes[0]["descriptor"]["id"] == "E999"


@pytest.mark.parametrize("build", [_sarif_full, _sarif_clean, _sarif_outside, lambda t, m: _sarif_cli(t, m)[1]],
                         ids=["complete", "clean", "outside-paths", "from-cli"])
def test_sarif_matches_the_schema(build, tmp_path, monkeypatch):
    if not SCHEMA_PATH.is_file():
        pytest.skip(f"schema validation only: the SARIF 2.1.0 schema is not at {SCHEMA_PATH.resolve()} "
                    "(../shared/data is absent in this checkout); the other SARIF tests ran")
    import jsonschema

    validator = jsonschema.Draft4Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    errors = sorted(validator.iter_errors(build(tmp_path, monkeypatch)), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


# -- github ------------------------------------------------------------------------------

def test_github():
    out = render("github", _report()).splitlines()
    assert out[0] == "::error file=broken.py,line=3,col=5,title=E999::syntax error: invalid syntax"
    assert out[1] == "::error file=latin.py,title=E902::not valid UTF-8 (byte 3: invalid start byte)"
    assert out[2] == ("::warning file=nb.ipynb,title=TFP101 (cell 4)::cell 4, line 2, col 5: "
                      "50%25 of it, with: commas, colons%0Aand a newline")
    assert out[3] == ("::error file=pkg/train.py,line=3,col=9,endLine=3,endColumn=56,title=TFP101::"
                      "model built outside the scope")
    assert out[4].endswith("::model built outside the scope%0A-> CONFIRMED: weights differ across replicas "
                           "(2 replicas on /cpu:0,/cpu:1, 4.1 s)")
    assert len(out) == 5


def test_github_escapes_properties():
    f = _finding(path="dir,with:odd/a.py", severity="warning")
    out = render("github", Report(findings=[f]))
    assert out.startswith("::warning file=dir%2Cwith%3Aodd/a.py,line=3,")


def test_cli_github_format(project, cli, snippets):
    project.write("a.py", snippets.tfp101)
    r = cli("--format", "github", "a.py")
    assert r.rc == 1
    assert r.out.startswith("::error file=a.py,line=3,col=9,") or r.out.startswith("::warning file=a.py,line=3,col=9,")
    assert ",title=TFP101::" in r.out
