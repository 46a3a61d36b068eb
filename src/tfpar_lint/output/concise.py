"""ruff's ``concise`` format: ``path:line:col: CODE [*] message``, one line per finding.

``[*]`` marks a finding whose fix ``--fix`` would apply (an unsafe fix only
with ``--unsafe-fixes``).  Files that could not be linted read
``path:line:col: E999 reason``.  The summary line ("Found 2 errors.") is
written by the command after the report.
"""
from __future__ import annotations

from typing import TextIO

from tfpar_lint.output.base import BOLD, CYAN, RED, Report, error_code, paint, verification_line
from tfpar_lint.output.text import location, one_line


def head(report: Report, f) -> str:
    c = report.color
    mark = f" [{paint('*', CYAN, on=c)}]" if report.fixable(f) else ""
    return f"{location(f, c)}{paint(':', CYAN, on=c)} {paint(f.code, BOLD, RED, on=c)}{mark} {one_line(f.message)}"


def error_lines(report: Report) -> list[tuple[tuple, list[str]]]:
    rows = []
    for err in report.sorted_errors():
        code = error_code(err)
        rows.append(((err.path, 0, err.line, err.col, code),
                     [f"{err.path}:{err.line}:{err.col}: {paint(code, BOLD, RED, on=report.color)} "
                      f"{one_line(err.message)}"]))
    return rows


def write(report: Report, stream: TextIO, *, statistics: bool = False) -> None:
    if statistics:  # ruff: the counts replace the findings
        write_statistics(report, stream)
        return
    rows = error_lines(report)
    for f in report.sorted_findings():
        lines = [head(report, f)]
        v = verification_line(f)
        if v is not None:
            lines.append("    " + one_line(v))
        rows.append((f.sort_key(), lines))
    rows.sort(key=lambda r: r[0])
    for _, lines in rows:
        for line in lines:
            stream.write(line + "\n")
    for run in report.runs:
        stream.write((run.summary() if hasattr(run, "summary") else str(run)).rstrip("\n") + "\n")


def write_statistics(report: Report, stream: TextIO) -> None:
    """ruff's ``--statistics``: count, code, [*] when every one is fixable, rule name."""
    from collections import Counter

    counts: Counter[str] = Counter()
    names: dict[str, str] = {}
    fixable: dict[str, bool] = {}
    for f in report.findings:
        counts[f.code] += 1
        names[f.code] = f.name
        fixable[f.code] = fixable.get(f.code, True) and report.fixable(f)
    for err in report.errors:
        c = error_code(err)
        counts[c] += 1
        names[c] = "syntax-error" if c == "E999" else "io-error"
        fixable[c] = False
    width = max((len(c) for c in counts), default=0)
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        stream.write(f"{n}\t{code:<{width}}\t{'[*] ' if fixable[code] else '[ ] '}{names[code]}\n")
