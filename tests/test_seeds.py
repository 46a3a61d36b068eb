"""Acceptance from the seed documents (issue 8, part 1).

The seed documents and their labels live outside the repository, in ``../shared/seeds/``
(``README.md`` there explains ``EXPECTED.tsv``).  Their code blocks are read at run time and
linted together, as a user would, with the CLI and the default rules:

* every labelled mistake is reported within one line of its label by a default rule of the
  labelled family (``A``..``D`` = TFP1xx..TFP4xx, ``other:NAME`` = any TFP rule), except
  ``hardcoded-device``, which only an opt-in rule may report.  The blocks state no TensorFlow
  version, so a mistake that holds only on some versions (one optimizer for two variable lists:
  TensorFlow 2.11 on) is held back, and the run's note names its block (issue 28); linted with
  ``--tf-version 2.21``, the version the labels were checked on (EXPECTED.tsv's notes), it is
  reported;
* nothing else is reported on any block;
* the blocks that are not valid Python give a clear parse error, exit 2, and the other blocks
  are still linted.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

SEEDS = REPO_ROOT.parent / "shared" / "seeds"
FAMILY = {"A": "TFP1", "B": "TFP2", "C": "TFP3", "D": "TFP4"}
OPT_IN = {"other:hardcoded-device"}
ITEM = re.compile(r"([A-D]|other:[\w-]+)\(([^)]*)\)")

pytestmark = pytest.mark.skipif(not (SEEDS / "EXPECTED.tsv").is_file(),
                                reason=f"the seed documents are not beside the repository ({SEEDS})")


def _rows() -> list[dict]:
    lines = (SEEDS / "EXPECTED.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:] if line.strip()]


def _lint(paths: list[str], cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfpar_lint", "--no-cache", "--format", "json", *extra, *paths],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def _found(proc: subprocess.CompletedProcess) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for item in json.loads(proc.stdout):
        found.setdefault(str(Path(item["path"]).resolve()), []).append(item)
    return found


def _labels(expected: str) -> list[tuple[str, list[int]]]:
    if expected == "none":
        return []
    return [(label, [int(x.strip().lstrip("L")) for x in lines.split(",") if x.strip()])
            for label, lines in ITEM.findall(expected)]


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory):
    """Write every labelled block to a file and lint them all in one CLI run (JSON output)."""
    tmp = tmp_path_factory.mktemp("seeds")
    files = {}
    for row in _rows():
        text = (SEEDS / row["seed"]).read_text(encoding="utf-8")
        blocks = re.findall(r"```python\n(.*?)```", text, re.S)
        path = tmp / f"{row['seed'][:3]}_block{row['block']}.py"
        path.write_text(blocks[int(row["block"]) - 1], encoding="utf-8")
        files[str(path)] = row
    proc = _lint(sorted(files), tmp)
    return files, _found(proc), proc


@pytest.fixture(scope="module")
def seed_run_221(seed_run):
    """The same blocks linted as code for TensorFlow 2.21, the version their labels were checked on."""
    files, _found_default, _proc = seed_run
    proc = _lint(sorted(files), Path(next(iter(files))).parent, "--tf-version", "2.21")
    return files, _found(proc), proc


def _missed(files, found) -> list[tuple[str, dict, str, list[int]]]:
    out = []
    for path, row in files.items():
        got = [f for f in found.get(str(Path(path).resolve()), []) if not f.get("error")]
        for label, lines in _labels(row["expected"]):
            if label in OPT_IN:
                continue
            family = FAMILY.get(label, "TFP")
            if not any(f["code"].startswith(family) and any(abs(f["line"] - w) <= 1 for w in lines) for f in got):
                out.append((path, row, label, lines))
    return out


def test_seed_blocks_were_read(seed_run):
    files, _found, _proc = seed_run
    kinds = {row["kind"] for row in files.values()}
    assert len(files) == len(_rows()) >= 10
    assert kinds == {"bad", "good", "syntax"}


def test_every_labelled_mistake_is_reported_by_a_default_rule_of_its_family(seed_run_221):
    files, found, _proc = seed_run_221
    missed = [f"{row['seed']} block {row['block']}: {label} at {lines}; got "
              f"{[(f['line'], f['code']) for f in found.get(str(Path(path).resolve()), [])]}"
              for path, row, label, lines in _missed(files, found)]
    assert not missed, "\n".join(missed)


def test_without_a_version_a_mistake_is_reported_or_held_back_with_a_note(seed_run):
    """As a user runs it (no version stated anywhere): a labelled mistake the run does not report is
    one that holds only on some versions, and the note, once for the run, names its block."""
    files, found, proc = seed_run
    missed = _missed(files, found)
    unexplained = []
    for path, row, label, lines in missed:
        alone = _lint([Path(path).name], Path(path).parent)
        notes = [ln for ln in alone.stderr.splitlines() if "no TensorFlow version stated for" in ln]
        if len(notes) != 1 or Path(path).name not in notes[0]:
            unexplained.append(f"{row['seed']} block {row['block']}: {label} at {lines}: {alone.stderr}")
    assert not unexplained, "\n".join(unexplained)
    if not missed:
        pytest.skip("no seed block holds a mistake of some versions only")
    assert proc.stderr.count("no TensorFlow version stated for") == 1, proc.stderr


@pytest.mark.parametrize("which", ["seed_run", "seed_run_221"])
def test_nothing_else_is_reported(which, request):
    files, found, _proc = request.getfixturevalue(which)
    extra = []
    for path, row in files.items():
        wanted = [w for _label, lines in _labels(row["expected"]) for w in lines]
        for f in found.get(str(Path(path).resolve()), []):
            if f.get("error"):
                if row["kind"] != "syntax":
                    extra.append(f"{row['seed']} block {row['block']}: error {f['message']}")
                continue
            if not any(abs(f["line"] - w) <= 1 for w in wanted):
                extra.append(f"{row['seed']} block {row['block']}: line {f['line']} {f['code']} {f['message']}")
    assert not extra, "\n".join(extra)


def test_syntax_blocks_give_a_clear_parse_error_and_exit_1(seed_run):
    """The seeds' note says exit 2; issue 23 made syntax errors diagnostics as in ruff (exit 1,
    0 under --exit-zero), which is what the seeds' users of ruff expect."""
    files, found, proc = seed_run
    assert proc.returncode == 1, proc.stderr
    syntax = [p for p, row in files.items() if row["kind"] == "syntax"]
    assert syntax
    for path in syntax:
        errors = [f for f in found.get(str(Path(path).resolve()), []) if f.get("error")]
        assert len(errors) == 1 and errors[0]["code"] == "E999", errors
        assert "syntax error" in errors[0]["message"]
    # the other blocks were still linted: the bad ones have findings
    bad = [p for p, row in files.items() if row["kind"] == "bad"
           and any(label not in OPT_IN for label, _ in _labels(row["expected"]))]
    assert all(found.get(str(Path(p).resolve())) for p in bad)
