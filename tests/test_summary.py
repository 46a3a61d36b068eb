"""Per-module summaries (issue 9): what each summary says, that they spare parses of other project
modules without changing a finding, and that they are cached on disk by content and shared by
later runs, the CLI on one file (pre-commit) and the flake8 plugin."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tfpar_lint import engine
from tfpar_lint.expectations import expected_in_source
from tfpar_lint.semantic import summary
from tfpar_lint.semantic.summary import SummaryStore, may_reach, summarise

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "fixtures" / "project"

REPORT = '''"""Writes the run settings next to the checkpoints."""
import tensorflow as tf

import config
import models  # noqa: F401  (registers the custom layers)

strategy = tf.distribute.MirroredStrategy()


def describe():
    print(config.LOG_DIR, config.LAYERS, strategy.num_replicas_in_sync)
'''


def make_project(tmp: Path, reports: int = 4) -> Path:
    """fixtures/project/bad with its batch size in ``config.py`` (constants only) and
    ``reports`` scripts in ``tools/`` that import ``config`` and ``models`` but call and hand over
    nothing of theirs."""
    proj = tmp / "proj"
    shutil.copytree(PROJECT / "bad", proj)
    (proj / "pyproject.toml").write_text("[project]\nname = 'proj'\n", encoding="utf-8")
    (proj / "config.py").write_text('"""Run settings."""\nGLOBAL_BATCH = 8\nLOG_DIR = "/tmp/tfpar-logs"\n'
                                    "LAYERS = (16, 8)\n", encoding="utf-8")
    train = proj / "train.py"
    text = train.read_text(encoding="utf-8")
    assert "\nGLOBAL_BATCH = 8\n" in text
    train.write_text(text.replace("\nGLOBAL_BATCH = 8\n", "\nfrom config import GLOBAL_BATCH\n"), encoding="utf-8")
    (proj / "tools").mkdir()
    (proj / "tools" / "__init__.py").write_text("", encoding="utf-8")
    for i in range(reports):
        (proj / "tools" / f"report_{i}.py").write_text(REPORT, encoding="utf-8")
    return proj


def files_of(proj: Path) -> list[str]:
    return sorted(str(p) for p in proj.rglob("*.py") if ".tfpar_lint_cache" not in p.parts)


def lint_alone(path: str, options: engine.AnalysisOptions) -> tuple[list, int, dict]:
    """Lint one file as flake8 / pre-commit do (a fresh process's Project): findings, the other
    modules parsed, the project's summary counters."""
    engine._PROJECTS.clear()
    try:
        r = engine.lint_file(path, options=options)
        projects = list(engine._PROJECTS.values())
        parsed = sum(p.read for p in projects)
        store = projects[0].summaries if projects else None
        counters = {"computed": store.computed, "loaded": store.loaded, "written": store.written,
                    **projects[0].spared} if store is not None else {}
    finally:
        engine._PROJECTS.clear()
    assert r.error is None, r.error
    return [(f.line, f.col, f.code, f.message) for f in r.findings], parsed, counters


@pytest.fixture
def summaries_off(monkeypatch):
    def off(flag: bool) -> None:
        monkeypatch.setenv(summary.ENV, "0" if flag else "1")
    return off


# ---------------------------------------------------------------------------- what a summary says
def test_summary_lists_defs_calls_and_inert_names():
    s = summarise(textwrap.dedent('''
        import tensorflow as tf
        from models import build
        BATCH = 64
        NAMES = {"a": (1, 2)}
        LOG: str = f"/tmp/{BATCH}"
        EMPTY = None             # None is a value of its own
        MODEL = build()          # a call: inference follows it
        ALIAS = BATCH            # a name: followed
        TWICE = 1
        TWICE = 2                # bound twice
        COUNTER = 0
        def bump():
            global COUNTER       # rebound elsewhere
            COUNTER += 1
        class Trainer(tf.Module):
            def step(self):
                return super().__init__()
    '''))
    assert s["defs"] == ["Trainer", "bump", "step"]
    assert {"build", "__init__", "super"} <= set(s["calls"])
    assert s["inert"] == ["BATCH", "LOG", "NAMES"]
    assert s["bound"] == ["ALIAS", "BATCH", "COUNTER", "EMPTY", "LOG", "MODEL", "NAMES", "TWICE", "Trainer",
                          "build", "bump", "tf"]
    assert s["star_import"] is False and summarise("from x import *\n")["star_import"] is True
    assert s["hands_over"] is False
    assert json.loads(json.dumps(s)) == s  # JSON as it is


@pytest.mark.parametrize("code, hands_over", [
    ("def step(): pass\nstrategy.run(step)", False),
    ("strategy.run(lambda: 1)", False),
    ("import functools\ndef work(n): pass\nex.submit(functools.partial(work, 1))", False),
    ("import tensorflow as tf\ndef step(): pass\nstrategy.run(tf.function(step))", False),
    ("import threading\ndef loop(): pass\nthreading.Thread(target=loop).start()", False),
    ("def parse(x): return x\nds.map(parse)", False),
    ("from steps import train_step\nstrategy.run(train_step)", True),  # another module's
    ("import steps\nstrategy.run(steps.train_step)", True),
    ("def step(): pass\nstep = wrap(step)\nstrategy.run(step)", True),  # rebound
    ("def run_it(fn):\n    strategy.run(fn)", True),  # a parameter: anyone's
    ("strategy.run(self.step)", True),  # a method may be inherited from another module's class
    ("from workers import loop\nimport threading\nthreading.Thread(None, loop)", True),
    ("def step(): pass\nstrategy.run(*fns)", True),
    ("from tools import partial\ndef w(): pass\nex.submit(partial(w))", True),  # not functools'
    ("from x import *\nstrategy.run(step)", True),
])
def test_handed_over_callables(code, hands_over):
    s = summarise(code)
    assert s["hands_over"] is hands_over, s


def test_may_reach():
    importer = summarise("import config\nimport models\nmodels.build_model()\n")
    assert may_reach(importer, frozenset({"build_model", "build_optimizer"}))
    assert not may_reach(importer, frozenset({"make_strategy"}))
    assert may_reach(summarise("from steps import f\nstrategy.run(f)\n"), frozenset({"other"}))


def test_names_a_module_does_not_bind_need_no_parse(tmp_path, summaries_off):
    """``config.__file__`` and ``config.BATCH.attr``: the unknown value, config.py not parsed."""
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "config.py").write_text("BATCH = 64\ndef helper():\n    return 1\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\nimport config\nfrom config import helper\n"
        "strategy = tf.distribute.MirroredStrategy()\nprint(config.__file__, config.BATCH.real)\n", encoding="utf-8")
    engine._PROJECTS.clear()
    try:
        project = engine.project_for(str(tmp_path / "train.py"), engine.AnalysisOptions())
        module = project.module(str(tmp_path / "train.py"))
        assert project.unknown_without_parse(module, "config.__file__")
        assert project.unknown_without_parse(module, "config.BATCH.real")
        assert not project.unknown_without_parse(module, "config.helper")  # a function: parse it
        assert not project.unknown_without_parse(module, "config")  # the module itself
        assert str(tmp_path / "config.py") not in project.modules
        assert project.dependencies(module) == {str(tmp_path / "config.py")}  # for the result cache
    finally:
        engine._PROJECTS.clear()


def test_unparsable_text_has_no_summary():
    assert summarise("def f(:\n") is None


# ---------------------------------------------------------------------------- parses spared, same findings
def test_summaries_spare_parses_and_change_no_finding(tmp_path, summaries_off):
    proj = make_project(tmp_path)
    opts = engine.AnalysisOptions()
    parsed = {}
    for off in (True, False):
        summaries_off(off)
        parsed[off] = {}
        got = {}
        for f in files_of(proj):
            findings, n, counters = lint_alone(f, opts)
            got[f] = findings
            parsed[off][Path(f).relative_to(proj).as_posix()] = n
            assert (counters == {}) is off
        if off:
            without = got
        else:
            assert got == without
    # the split project still gives its expected findings
    for f, findings in without.items():
        assert {(l, c) for l, _col, c, _m in findings} == expected_in_source(Path(f).read_text(encoding="utf-8")), f
    # config.py's importers that call and hand over nothing of it are not parsed; nor is config.py
    # for train.py's GLOBAL_BATCH; nor the reports for models.py's callers
    for name in ("config.py", "models.py", "train.py"):
        assert parsed[False][name] < parsed[True][name], (name, parsed)
    assert sum(parsed[False].values()) < sum(parsed[True].values())


def test_same_findings_on_the_fixture_projects_with_and_without_summaries(summaries_off):
    for folder in ("bad", "good"):
        results = []
        for off in (True, False):
            summaries_off(off)
            results.append([lint_alone(f, engine.AnalysisOptions())[0] for f in files_of(PROJECT / folder)])
        assert results[0] == results[1], folder


# ---------------------------------------------------------------------------- cached on disk
def test_warm_run_reads_the_summaries_a_cold_run_wrote(tmp_path):
    proj = make_project(tmp_path)
    cache = tmp_path / "cache"
    opts = engine.AnalysisOptions(summary_dir=str(cache))
    target = str(proj / "config.py")
    cold, cold_parsed, c1 = lint_alone(target, opts)
    # config.py's importers: train.py, and four reports with one text (summaries go by content)
    assert c1["computed"] == 2 and c1["loaded"] == 0 and c1["written"] == 2
    entries = sorted((cache / "summaries" / f"v{summary.FORMAT}").rglob("*.json"))
    assert len(entries) == c1["written"]
    assert (cache / ".gitignore").is_file()
    warm, warm_parsed, c2 = lint_alone(target, opts)
    assert warm == cold and warm_parsed == cold_parsed
    assert c2["computed"] == 0 and c2["loaded"] == c1["computed"] and c2["written"] == 0
    # an edited module gets a new summary; the others are still read
    with open(proj / "tools" / "report_0.py", "a", encoding="utf-8") as fh:
        fh.write("# edited\n")
    _f, _n, c3 = lint_alone(target, opts)
    assert c3["computed"] == 1 and c3["loaded"] == 2


def test_corrupt_summaries_are_recomputed(tmp_path):
    proj = make_project(tmp_path)
    cache = tmp_path / "cache"
    opts = engine.AnalysisOptions(summary_dir=str(cache))
    target = str(proj / "models.py")
    cold, _n, c1 = lint_alone(target, opts)
    entries = sorted((cache / "summaries").rglob("*.json"))
    assert entries
    bad = ["", "not json", "[]", json.dumps({"key": "other", "summary": {}}),
           json.dumps({"key": entries[0].parent.name + entries[0].stem, "summary": {"format": summary.FORMAT}})]
    for i, e in enumerate(entries):
        e.write_text(bad[i % len(bad)], encoding="utf-8")
    again, _n, c2 = lint_alone(target, opts)
    assert again == cold
    assert c2["loaded"] == 0 and c2["computed"] == c1["computed"]
    for e in entries:  # rewritten, readable again
        assert SummaryStore(str(cache))._load(e.parent.name + e.stem) is not None


def cli(*args: str, cwd: Path) -> tuple[int, list[dict], str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run([sys.executable, "-m", "tfpar_lint", "--format", "json", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env)
    return proc.returncode, json.loads(proc.stdout or "[]"), proc.stderr


def summary_files(cache: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (cache / "summaries").rglob("*.json")}


def test_pre_commit_run_on_one_file_writes_then_reads_the_summaries(tmp_path):
    """The CLI on one changed file (what pre-commit passes) keeps the summaries of the modules it
    reads in the cache folder; the next run reads them (none is written again)."""
    proj = make_project(tmp_path)
    cache = proj / ".tfpar_lint_cache"
    rc, items, err = cli("train.py", cwd=proj)
    assert rc == 1, err
    want = expected_in_source((proj / "train.py").read_text(encoding="utf-8"))
    assert {(f["line"], f["code"]) for f in items} == want
    first = summary_files(cache)
    assert first
    (proj / "train.py").write_text((proj / "train.py").read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    rc, items, err = cli("train.py", cwd=proj)
    assert {(f["line"], f["code"]) for f in items} == want, err
    second = summary_files(cache)
    assert {p: t for p, t in second.items() if p in first} == first  # read, not rewritten


def test_flake8_plugin_shares_the_summaries(tmp_path):
    pytest.importorskip("flake8")
    proj = make_project(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "TFP", "steps.py"], cwd=proj,
                          capture_output=True, text=True, timeout=300, env=env)
    got = {(int(line.split(":")[1]), line.split(":", 3)[3].split()[0]) for line in proc.stdout.splitlines()}
    assert got == expected_in_source((proj / "steps.py").read_text(encoding="utf-8")), proc.stderr
    written = summary_files(proj / ".tfpar_lint_cache")
    assert written  # in the project's cache folder, where the CLI finds them
    _rc, items, err = cli("steps.py", cwd=proj)
    assert {(f["line"], f["code"]) for f in items} == got, err
    assert {p: t for p, t in summary_files(proj / ".tfpar_lint_cache").items() if p in written} == written
