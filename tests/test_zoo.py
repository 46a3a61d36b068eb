"""The bug zoo (fixtures/zoo/): file format, no finding on the correct twins, the recall table in
docs/measurements.md and fixtures/zoo/RESULTS.md is the one the default rules give today, and the recall targets."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tfpar_lint.registry import all_rules

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("zoo_report", ROOT / "scripts" / "zoo_report.py")
zoo_report = importlib.util.module_from_spec(_spec)
sys.modules["zoo_report"] = zoo_report  # dataclasses look their module up there
_spec.loader.exec_module(zoo_report)

LIVE = {r.CODE for r in all_rules()}
FILES = zoo_report.zoo_files()
FOLDERS = {folder for _, folder in zoo_report.FAMILIES}


@pytest.fixture(scope="module")
def report():
    return zoo_report.compute()


def test_zoo_has_only_known_folders_and_file_kinds():
    """Seven family folders; files named bad_<slug> or good_<slug> (a good_ file without a bad_ of the
    same slug is a standalone correct program: it counts for false positives only)."""
    if not zoo_report.ZOO.is_dir():
        pytest.skip("no fixtures/zoo yet")
    problems = []
    for p in zoo_report.ZOO.iterdir():
        if p.is_dir() and p.name not in FOLDERS and p.name != "__pycache__":
            problems.append(f"unknown zoo folder {p.name} (expected one of {sorted(FOLDERS)})")
    for zf in FILES:
        if zf.kind not in ("bad", "good") or not zf.slug:
            problems.append(f"{zoo_report.rel(zf.path)}: name must be bad_<slug> or good_<slug>")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("zf", FILES, ids=[zoo_report.rel(zf.path) for zf in FILES])
def test_zoo_file_format(zf):
    """Header keys present and filled in; labels only on bad programs, and only live rule codes."""
    head = zoo_report.header(zf.path)
    missing = [k for k in zoo_report.HEADER_KEYS if not head.get(k)]
    assert not missing, f"header lacks {missing} (first lines must be '# key: value' for {zoo_report.HEADER_KEYS})"
    assert list(head)[:len(zoo_report.HEADER_KEYS)] == list(zoo_report.HEADER_KEYS), (
        f"header keys out of order: {list(head)}")
    assert "PENDING" not in " ".join(head.values())
    assert head["source"].startswith(("http://", "https://")), "source must be the report's URL"
    labels = zoo_report.labels_of(zf.path)
    if zf.kind == "good":
        assert not labels, "a good twin carries no '# expect:'"
    else:
        assert labels, "a bad program marks its mistakes with '# expect: TFPnnn'"
    dead = sorted({lab.code for lab in labels} - LIVE)
    assert not dead, f"'# expect:' names codes that are not live rules: {dead}"


def test_no_finding_on_good_twins(report):
    assert not report.errors, "\n".join(report.errors)
    assert not report.twin_findings, "\n".join(f"{f.where()} {f.code} {f.message}" for f in report.twin_findings)


def test_readme_and_results_hold_the_current_recall(report):
    """docs/measurements.md's table and fixtures/zoo/RESULTS.md are what the rules give now (rerun
    `scripts/zoo_report.py --write` after changing rules or the zoo)."""
    assert zoo_report.readme_table_now() == zoo_report.readme_block(report)
    if FILES:
        assert zoo_report.RESULTS.read_text(encoding="utf-8") == zoo_report.results_md(report)


def test_report_counts_hits_near_labels_only():
    """The scoring itself: same family within one line (and the same notebook cell) is a hit."""
    lab = zoo_report.Label("x.py", None, 10, "TFP101")
    near = zoo_report.Found("x.py", None, 11, "TFP102", "")
    far = zoo_report.Found("x.py", None, 12, "TFP101", "")
    other_family = zoo_report.Found("x.py", None, 10, "TFP201", "")
    other_cell = zoo_report.Found("x.py", 2, 10, "TFP101", "")
    assert zoo_report.is_hit(lab, [near])
    assert not zoo_report.is_hit(lab, [far, other_family, other_cell])
    assert zoo_report.is_labelled(near, [lab]) and not zoo_report.is_labelled(far, [lab])


def test_recall_targets(report):
    """Done-when: recall >= 0.90 for each core family (1xx-4xx), >= 0.80 over the whole zoo."""
    low = {fam: report.recall(fam) for fam in "1234" if (report.recall(fam) or 0.0) < 0.90}
    assert not low, f"core families under 0.90: {low}"
    assert (report.total.recall or 0.0) >= 0.80, f"overall recall {report.total.recall}"
