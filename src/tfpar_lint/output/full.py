"""ruff's ``full`` format: each finding with the source line it points at and a caret.

::

    TFP101 [*] Keras model `model` is created outside ...
      --> train.py:29:9
       |
    29 | model = build_model()
       |         ^^^^^^^^^^^^^
       |
    help: Move the Keras model into the `with ...scope():` block below it

A finding spanning several lines underlines its first line to the end.  The
help line names the fix when there is one.  Notebook findings show no source.
"""
from __future__ import annotations

from typing import TextIO

from tfpar_lint.output.base import BLUE, BOLD, CYAN, RED, Report, paint, verification_line
from tfpar_lint.output.concise import error_lines, write_statistics
from tfpar_lint.output.text import location, one_line


def block(report: Report, f) -> list[str]:
    c = report.color
    mark = f" [{paint('*', CYAN, on=c)}]" if report.fixable(f) else ""
    out = [f"{paint(f.code, BOLD, RED, on=c)}{mark} {one_line(f.message)}"]
    src = report.source_line(f)
    num = str(f.line)
    gutter = " " * len(num)
    bar = paint("|", BLUE, BOLD, on=c)
    out.append(f"{gutter}{paint('-->', BLUE, BOLD, on=c)} {location(f)}")
    if src is not None:
        start = max(f.col - 1, 0)
        end = f.end_col - 1 if f.end_line == f.line else len(src)
        width = max(end - start, 1)
        pad = "".join(ch if ch == "\t" else " " for ch in src[:start])
        out += [f"{gutter} {bar}",
                f"{paint(num, BLUE, BOLD, on=c)} {bar} {src}",
                f"{gutter} {bar} {pad}{paint('^' * width, BOLD, RED, on=c)}",
                f"{gutter} {bar}"]
    if f.fix:
        out.append(f"help: {f.fix['message']}" + ("" if report.fixable(f) else " (unsafe fix: --unsafe-fixes)"))
    elif f.fix_hint:
        out.append(f"help: {one_line(f.fix_hint)}")
    v = verification_line(f)
    if v is not None:
        out.append("    " + one_line(v))
    return out


def write(report: Report, stream: TextIO, *, statistics: bool = False) -> None:
    if statistics:  # ruff: the counts replace the findings
        write_statistics(report, stream)
        return
    rows = error_lines(report)
    for f in report.sorted_findings():
        rows.append((f.sort_key(), block(report, f) + [""]))
    rows.sort(key=lambda r: r[0])
    for _, lines in rows:
        for line in lines:
            stream.write(line + "\n")
    for run in report.runs:
        stream.write((run.summary() if hasattr(run, "summary") else str(run)).rstrip("\n") + "\n")
