"""Recall of tfpar-lint's default rules on the bug zoo (fixtures/zoo/), per rule family.

    .venv/bin/python scripts/zoo_report.py           # print the table, the misses and the false positives
    .venv/bin/python scripts/zoo_report.py --write   # also rewrite docs/measurements.md's table and fixtures/zoo/RESULTS.md

The zoo has one folder per family (``1xx_scope`` ... ``7xx_execution``); missing folders are reported
with zero programs. Each ``bad_<slug>.py``/``.ipynb`` marks its mistakes with ``# expect: TFPnnn``; a
``good_<slug>`` twin carries none. Every file is linted with the rules that are on by default (what
``tfpar-lint fixtures/zoo/`` runs). Counting:

* a label is a *hit* when a finding of the same family (first digit of the code) lies within one
  line of it (in the same notebook cell); recall = hits / labels, per family of the label's code;
* every finding on a ``good_*`` twin is a false positive (counted under the folder's family);
* a finding on a ``bad_*`` program with no label of its family within one line is an
  *unlabelled finding* (reported separately: either a mistake the label missed or a false positive).

tests/test_zoo.py checks that docs/measurements.md and fixtures/zoo/RESULTS.md hold exactly what this computes.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "fixtures" / "zoo"
README = ROOT / "docs" / "measurements.md"  # the page holding the recall table (it moved from README.md)
RESULTS = ZOO / "RESULTS.md"
START = "<!-- zoo-recall:start -->"
END = "<!-- zoo-recall:end -->"

# (family digit, folder); the folder's name starts with the family's code prefix
FAMILIES = (
    ("1", "1xx_scope"),
    ("2", "2xx_input"),
    ("3", "3xx_threads"),
    ("4", "4xx_randomness"),
    ("5", "5xx_loss"),
    ("6", "6xx_lifecycle"),
    ("7", "7xx_execution"),
)
HEADER_KEYS = ("zoo", "source", "tf", "checked", "shapes")
SUFFIXES = (".py", ".ipynb")


@dataclass(frozen=True)
class Label:
    path: str          # relative to the repository root, POSIX
    cell: Optional[int]  # notebook code cell (1-based, as tfpar-lint numbers them); None for .py
    line: int
    code: str

    @property
    def family(self) -> str:
        return self.code[3]

    def where(self) -> str:
        return f"{self.path}:{'cell_%d:' % self.cell if self.cell is not None else ''}{self.line}"


@dataclass(frozen=True)
class Found:
    path: str
    cell: Optional[int]
    line: int
    code: str
    message: str

    @property
    def family(self) -> str:
        return self.code[3]

    def where(self) -> str:
        return f"{self.path}:{'cell_%d:' % self.cell if self.cell is not None else ''}{self.line}"


@dataclass
class ZooFile:
    path: Path
    kind: str                      # "bad" or "good"
    slug: str
    family: str
    labels: list[Label] = field(default_factory=list)
    findings: list[Found] = field(default_factory=list)
    error: Optional[str] = None


def rel(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def code_chunks(path: Path) -> list[tuple[Optional[int], str]]:
    """(cell, text) pieces of a zoo file: the whole file for .py, each code cell for .ipynb."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        from tfpar_lint.notebook import code_cells

        return [(number, src) for number, src in code_cells(text)]
    return [(None, text)]


def header(path: Path) -> dict[str, str]:
    """The ``# key: value`` lines at the top of the file (of its first code cell for a notebook)."""
    chunks = code_chunks(path)
    out: dict[str, str] = {}
    if not chunks:
        return out
    for line in chunks[0][1].splitlines():
        m = re.match(r"#\s*([a-z_]+):\s*(.*?)\s*$", line)
        if not m:
            break
        out.setdefault(m.group(1), m.group(2))
    return out


def labels_of(path: Path) -> list[Label]:
    """The ``# expect:`` labels, read by the project's one parser (an unknown or retired code raises)."""
    from tfpar_lint.expectations import parse_expect_line

    out = []
    for cell, text in code_chunks(path):
        for lineno, line in enumerate(text.splitlines(), start=1):
            where = f"{rel(path)}:{'cell_%d:' % cell if cell is not None else ''}{lineno}"
            for code in parse_expect_line(line, where):
                out.append(Label(rel(path), cell, lineno, code))
    return out


def zoo_files(zoo: Path = ZOO) -> list[ZooFile]:
    files = []
    for family, folder in FAMILIES:
        d = zoo / folder
        if not d.is_dir():
            continue
        for p in sorted(d.iterdir()):
            if p.suffix not in SUFFIXES or not p.is_file():
                continue
            kind, _, slug = p.stem.partition("_")
            files.append(ZooFile(p, kind, slug, family))
    return files


def lint(files: list[ZooFile]) -> list[ZooFile]:
    """Fill labels and default-rule findings of every file."""
    from tfpar_lint.engine import lint_file
    from tfpar_lint.registry import default_codes

    enabled = set(default_codes())
    for zf in files:
        zf.labels = labels_of(zf.path)
        result = lint_file(str(zf.path), enabled=enabled)
        if result.error is not None:
            zf.error = result.error.message
        zf.findings = [Found(rel(zf.path), f.cell, f.line, f.code, f.message) for f in result.findings]
    return files


def is_hit(label: Label, findings: list[Found]) -> bool:
    return any(f.family == label.family and f.cell == label.cell and abs(f.line - label.line) <= 1
               for f in findings)


def is_labelled(finding: Found, labels: list[Label]) -> bool:
    return any(lab.family == finding.family and lab.cell == finding.cell and abs(finding.line - lab.line) <= 1
               for lab in labels)


@dataclass
class Row:
    family: str
    folder: str
    bad: int = 0
    good: int = 0
    labels: int = 0
    hits: int = 0
    twin_fp: int = 0
    unlabelled: int = 0

    @property
    def recall(self) -> Optional[float]:
        return self.hits / self.labels if self.labels else None


@dataclass
class Report:
    rows: list[Row]
    total: Row
    misses: list[Label]
    twin_findings: list[Found]
    unlabelled: list[Found]
    errors: list[str]

    def recall(self, family: str) -> Optional[float]:
        return next(r.recall for r in self.rows if r.family == family)


def compute(files: Optional[list[ZooFile]] = None) -> Report:
    files = lint(zoo_files()) if files is None else files
    rows = {fam: Row(fam, folder) for fam, folder in FAMILIES}
    misses: list[Label] = []
    twin_findings: list[Found] = []
    unlabelled: list[Found] = []
    errors = [f"{rel(zf.path)}: {zf.error}" for zf in files if zf.error]
    for zf in files:
        row = rows[zf.family]
        if zf.kind == "good":
            row.good += 1
            row.twin_fp += len(zf.findings)
            twin_findings += zf.findings
            continue
        row.bad += 1
        for lab in zf.labels:
            r = rows[lab.family]
            r.labels += 1
            if is_hit(lab, zf.findings):
                r.hits += 1
            else:
                misses.append(lab)
        for f in zf.findings:
            if not is_labelled(f, zf.labels):
                row.unlabelled += 1
                unlabelled.append(f)
    total = Row("all", "")
    for r in rows.values():
        for k in ("bad", "good", "labels", "hits", "twin_fp", "unlabelled"):
            setattr(total, k, getattr(total, k) + getattr(r, k))
    return Report(list(rows.values()), total, misses, twin_findings, unlabelled, errors)


def _pct(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.2f}"


def table(report: Report) -> str:
    lines = [
        "| family | folder | bad programs | twins | labelled mistakes | hits | recall | findings on twins (FP) | unlabelled findings on bad programs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report.rows:
        folder = f"`fixtures/zoo/{r.folder}/`"
        lines.append(f"| TFP{r.family}xx | {folder} | {r.bad} | {r.good} | {r.labels} | {r.hits} | "
                     f"{_pct(r.recall)} | {r.twin_fp} | {r.unlabelled} |")
    t = report.total
    lines.append(f"| **all** | | {t.bad} | {t.good} | {t.labels} | {t.hits} | **{_pct(t.recall)}** | "
                 f"{t.twin_fp} | {t.unlabelled} |")
    return "\n".join(lines) + "\n"


def readme_block(report: Report) -> str:
    return f"{START}\n{table(report)}{END}"


def _source_line(path: str, cell: Optional[int], line: int) -> str:
    p = ROOT / path
    for c, text in code_chunks(p):
        if c == cell:
            lines = text.splitlines()
            if 1 <= line <= len(lines):
                return lines[line - 1].strip()
    return ""


def results_md(report: Report) -> str:
    out = [
        "# Bug zoo: results of the default rules",
        "",
        "Written by `scripts/zoo_report.py --write` (do not edit by hand); checked by `tests/test_zoo.py`.",
        "A label is found when a default-rule finding of the same family lies within one line of it.",
        "",
        table(report).rstrip("\n"),
        "",
        f"## Missed labels ({len(report.misses)})",
        "",
    ]
    out += [f"- `{m.where()}` {m.code}: `{_source_line(m.path, m.cell, m.line)}`" for m in report.misses] or ["none"]
    out += ["", f"## Findings on good twins ({len(report.twin_findings)})", ""]
    out += [f"- `{f.where()}` {f.code}: {f.message}" for f in report.twin_findings] or ["none"]
    out += ["", f"## Unlabelled findings on bad programs ({len(report.unlabelled)})", ""]
    out += [f"- `{f.where()}` {f.code}: {f.message}" for f in report.unlabelled] or ["none"]
    if report.errors:
        out += ["", "## Files that could not be linted", ""] + [f"- {e}" for e in report.errors]
    return "\n".join(out) + "\n"


def replace_block(text: str, block: str) -> str:
    i, j = text.find(START), text.find(END)
    if i < 0 or j < i:
        raise SystemExit(f"{rel(README)} has no {START} ... {END} markers")
    return text[:i] + block + text[j + len(END):]


def readme_table_now(text: Optional[str] = None) -> Optional[str]:
    text = README.read_text(encoding="utf-8") if text is None else text
    i, j = text.find(START), text.find(END)
    return None if i < 0 or j < i else text[i:j + len(END)]


def main(argv: list[str]) -> int:
    report = compute()
    sys.stdout.write(results_md(report))
    if "--write" in argv:
        README.write_text(replace_block(README.read_text(encoding="utf-8"), readme_block(report)), encoding="utf-8")
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(results_md(report), encoding="utf-8")
        print(f"\nwrote {rel(README)} and {rel(RESULTS)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
