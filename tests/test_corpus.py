"""Precision on real code: the corpus of third-party distributed-TensorFlow files in tests/corpus.

The files were written by others (TensorFlow docs, Model Garden, Keras, Hugging Face, ...; see
tests/corpus/SOURCES.md), not together with the rules, so what the linter says about them measures
its precision. The default rules must report exactly the entries of tests/corpus/expected.txt,
the findings triaged as true positives or intentional demonstrations (tests/corpus/TRIAGE.md).
A new finding makes the test fail: triage it, then either record it in expected.txt (a real bug
in that code) or fix the rule (a false positive). Every file must also lint without an error:
the corpus is code that runs, so a notebook or file the linter cannot parse is a linter bug.
"""
from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from tfpar_lint.engine import FileResult, lint_file
from tfpar_lint.registry import all_rules, default_codes

CORPUS = Path(__file__).resolve().parent / "corpus"
EXPECTED = CORPUS / "expected.txt"
SOURCES = CORPUS / "SOURCES.md"
FILES = sorted(p for p in CORPUS.iterdir()
               if p.suffix in (".py", ".ipynb") and p.name != "conftest.py")
ALL_CODES = {r.CODE for r in all_rules()}


def _key(path: Path, finding) -> str:
    where = f"cell_{finding.cell}:{finding.line}" if finding.cell is not None else str(finding.line)
    return f"{path.name}:{where}:{finding.code}"


def _expected() -> set[str]:
    lines = (ln.strip() for ln in EXPECTED.read_text().splitlines())
    return {ln for ln in lines if ln and not ln.startswith("#")}


@lru_cache(maxsize=None)
def _results() -> dict[Path, FileResult]:
    return {p: lint_file(str(p), enabled=default_codes()) for p in FILES}


def test_corpus_is_present_and_documented():
    assert len(FILES) >= 30, f"only {len(FILES)} corpus files"
    sources = SOURCES.read_text()
    undocumented = [p.name for p in FILES if p.name not in sources]
    assert not undocumented, f"files missing from SOURCES.md: {undocumented}"


def test_expected_entries_are_well_formed():
    bad = []
    for entry in sorted(_expected()):
        name, *where, code = entry.split(":")
        path = CORPUS / name
        if not path.is_file() or code not in ALL_CODES:
            bad.append(entry)
        elif path.suffix == ".ipynb" and not (len(where) == 2 and where[0].startswith("cell_")):
            bad.append(entry)
        elif path.suffix == ".py" and not (len(where) == 1 and where[0].isdigit()):
            bad.append(entry)
    assert not bad, f"malformed expected.txt entries: {bad}"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_file_lints_without_error(path: Path):
    result = _results()[path]
    assert result.error is None, f"{path.name}: {result.error}"


def test_findings_are_the_triaged_ones():
    found: dict[str, str] = {}
    for path, result in _results().items():
        for f in result.findings:
            found[_key(path, f)] = f.message
    expected = _expected()
    new = sorted(set(found) - expected)
    gone = sorted(expected - set(found))
    assert not new and not gone, (
        "new findings (triage them: a real bug goes to expected.txt, a false positive is fixed in "
        "the rule):\n" + "\n".join(f"  {k}: {found[k]}" for k in new)
        + "\nexpected but no longer reported:\n" + "\n".join(f"  {k}" for k in gone)
    )


def test_cli_on_the_whole_corpus():
    """The command line walks the folder and reports (JSON) without crashing."""
    r = subprocess.run([sys.executable, "-m", "tfpar_lint", "--format", "json", str(CORPUS)],
                       capture_output=True, text=True, timeout=600)
    assert "Traceback" not in r.stderr, r.stderr
    findings = json.loads(r.stdout)
    assert not [f for f in findings if f["code"] == "E999" or "internal error" in f["message"]], (
        [f for f in findings if f["code"] == "E999" or "internal error" in f["message"]])
    assert r.returncode in (0, 1), (r.returncode, r.stderr[-2000:])
