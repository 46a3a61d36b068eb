"""flake8-style text: ``path:line:col: CODE message`` (1-based line and column).

Notebook findings read ``path:cell_N:line:col: CODE message`` (line inside the
cell).  Control characters and bytes that are not UTF-8 in a path are
escaped (:func:`tfpar_lint.output.display_path`), so each finding stays on
one line.  Files that could not be linted read ``path:line:col: E999 reason`` /
``path:0:0: E902 reason``, on standard output like flake8.  With ``--verify``
an indented ``-> CONFIRMED: ...`` line follows each finding and each script's
run summary follows the findings.  ``--statistics`` appends flake8's
``count  CODE first-message`` lines.
"""
from __future__ import annotations

from collections import Counter
from typing import TextIO

from tfpar_lint.finding import Finding
from tfpar_lint.output import BOLD, CYAN, RED, Report, display_path, error_code, paint, verification_line


def location(f: Finding, color: bool = False) -> str:
    sep = paint(":", CYAN, on=color)
    path = paint(display_path(f.path), BOLD, on=color)
    if f.cell is not None:
        return f"{path}{sep}cell_{f.cell}{sep}{f.line}{sep}{f.col}"
    return f"{path}{sep}{f.line}{sep}{f.col}"


def caret_lines(line: str, col: int) -> list[str]:
    """flake8's --show-source: the line, then a caret under the column (tabs kept so it lines up)."""
    pad = "".join(c if c == "\t" else " " for c in line[:max(col - 1, 0)])
    return [line, pad + "^"]


def one_line(s: str) -> str:
    """One finding, one line (for grep and editors): newlines become spaces."""
    return " ".join(s.splitlines()) if ("\n" in s or "\r" in s) else s


def format_finding(f: Finding, color: bool = False) -> str:
    sep = paint(":", CYAN, on=color)
    return f"{location(f, color)}{sep} {paint(f.code, BOLD, RED, on=color)} {one_line(f.message)}"


def write(report: Report, stream: TextIO, *, statistics: bool = False) -> None:
    rows: list[tuple[tuple, list[str]]] = []
    for err in report.sorted_errors():
        code = error_code(err)
        rows.append(((err.path, 0, err.line, err.col, code),
                     [f"{display_path(err.path)}:{err.line}:{err.col}: {code} {one_line(err.message)}"]))
    for f in report.sorted_findings():
        lines = [format_finding(f, report.color)]
        if report.show_source:
            src = report.source_line(f)
            if src is not None:
                lines.extend(caret_lines(src, f.col))
        v = verification_line(f)
        if v is not None:
            lines.append("    " + one_line(v))
        elif report.verified:
            lines.append("    -> UNVERIFIED: the verifier did not run this finding")
        rows.append((f.sort_key(), lines))
    rows.sort(key=lambda r: r[0])
    for _, lines in rows:
        for line in lines:
            stream.write(line + "\n")
    for run in report.runs:
        summary = run.summary() if hasattr(run, "summary") else str(run)
        stream.write(summary.rstrip("\n") + "\n")
    if statistics:
        write_statistics(report, stream)


def write_statistics(report: Report, stream: TextIO) -> None:
    """flake8's ``--statistics``: ``count     CODE first message`` per code."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for err in report.sorted_errors():
        c = error_code(err)
        counts[c] += 1
        first.setdefault(c, one_line(err.message))
    for f in report.sorted_findings():
        counts[f.code] += 1
        first.setdefault(f.code, one_line(f.message))
    for code in sorted(counts):
        stream.write(f"{counts[code]:<5} {code} {first[code]}\n")
