"""benchmarks/run.py --smoke: the table is produced and the cache gives the cold run's findings.

No timing is asserted (speed tests on shared CI machines are flaky); the
numbers themselves are for people to read in benchmarks/results.md.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds environments or wheels, or downloads: handed out first under xdist

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "run.py"


def _load_run_module():
    spec = importlib.util.spec_from_file_location("tfpar_bench_run", RUN)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_smoke_run_produces_the_table(tmp_path: Path):
    out = tmp_path / "results.md"
    raw = tmp_path / "raw.json"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--out", str(out), "--json", str(raw), "-q"],
        capture_output=True, text=True, timeout=1200, cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    assert "| what | -j | files | wall s | CPU s | files/s | peak RSS MB |" in text
    assert "## Targets" in text and "## How it was measured" in text
    assert "measured separately" in text  # the verifier is not part of this benchmark
    data = json.loads(raw.read_text(encoding="utf-8"))
    cases = {c["key"]: c for c in data["cases"]}
    for key in ("tfpar_cold_j1", "tfpar_cold_jN", "tfpar_warm_jN", "floor_ast", "floor_cst", "floor_sem_sub",
                "plugin"):
        assert cases[key]["samples"], f"{key}: not measured ({cases[key]['skip'] or cases[key]['failed']})"
    for key, case in cases.items():
        # a peer that is not installed is skipped with a reason; nothing fails
        assert not case["failed"], f"{key} failed: {case['failed']}"
        assert case["samples"] or case["skip"], key
        if case["skip"]:
            assert case["skip"] in text
    f = data["findings"]
    assert f["cold_findings"], "the smoke corpus (fixtures/) has findings"
    assert f["tfpar_cold_jN"] is True, "-jN gives the -j1 findings"
    assert f["tfpar_prime"] is True, "the run that writes the cache gives the cold findings"
    assert f["tfpar_warm_jN"] is True, "the cache gives the cold findings"
    plugin = cases["plugin"]["samples"][0]["result"]
    assert plugin["reported"] == 0, "the flake8 plugin reported on a file the pre-filter rejects"


def test_missing_peers_are_skipped_with_a_reason(tmp_path: Path, monkeypatch):
    run = _load_run_module()
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *a, **k):
        return None if name in ("flake8", "bugbear") else real_find_spec(name, *a, **k)

    monkeypatch.setattr(run.importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(run, "tool", lambda name: None)
    monkeypatch.setattr(run, "cli_has", lambda flag, env: False)
    files = [str(ROOT / "benchmarks" / "run.py")]
    cases = run.make_cases(files, files, tmp_path, 2, {})
    by = {c.key: c for c in cases}
    assert "flake8 not installed" in by["flake8_j1"].skip and by["flake8_j1"].cmd is None
    assert "ruff not installed" in by["ruff_all"].skip
    assert "TorchFix not installed" in by["torchfix_jN"].skip
    assert "no cache" in by["tfpar_warm_jN"].skip
    meta = {"jobs": 2, "command": "benchmarks/run.py --smoke", "date": "today", "total_s": 0.0,
            "machine": run.machine(), "versions": {}, "files": 1, "lines": 1, "bytes": 1,
            "per_source": {"x": 1}, "parsed": 1, "parsed_lines": 1, "repeat_limit": 60.0,
            "load_start": None, "load_end": None}
    text = run.render(cases, meta, {"cold_findings": None})
    for key in ("flake8_j1", "flake8_jN", "ruff_all", "ruff_default", "torchfix_jN", "tfpar_warm_jN"):
        assert f"skipped: {by[key].skip}" in text
    assert "not measured" in text


@pytest.mark.parametrize("argv", [["--runs", "0"]])
def test_bad_arguments(argv):
    proc = subprocess.run([sys.executable, str(RUN)] + argv, capture_output=True, text=True, timeout=120,
                          cwd=str(ROOT))
    assert proc.returncode == 2
