"""GitHub Actions workflow commands, one annotation per finding:

``::warning file=PATH,line=L,col=C,endLine=EL,endColumn=EC,title=CODE::message``

``::error`` for rules whose severity is ``error`` and for files that could not
be linted.  A notebook finding is annotated at its place in the ``.ipynb``
file's JSON text (``data.ipynb_region``: the line of the cell's ``source``
string), with ``cell N, line L, col C`` in the message.  The verifier's
verdict, when present, is appended to the message on a new line.
"""
from __future__ import annotations

from typing import TextIO

from tfpar_lint.output.base import (NOT_RUN_CODE, Report, display_path, error_code, not_run, not_run_message,
                               verification_line)


def _data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(s: str) -> str:
    # %0A/%0D carry a newline in a file name exactly; only bytes that are not UTF-8 are escaped
    return _data(display_path(s, controls=False)).replace(":", "%3A").replace(",", "%2C")


def write(report: Report, stream: TextIO, *, statistics: bool = False) -> None:
    for err in report.sorted_errors():
        code = error_code(err)
        props = [f"file={_prop(err.path)}"]
        if err.line and not err.path.endswith(".ipynb"):  # a notebook's lines are counted in the cell
            props += [f"line={err.line}", f"col={max(err.col, 1)}"]
        props.append(f"title={_prop(code)}")
        stream.write(f"::error {','.join(props)}::{_data(err.message)}\n")
    for run in not_run(report):
        tail = "".join(f"\n{ln}" for ln in getattr(run, "stderr_tail", []))
        stream.write(f"::error file={_prop(run.path)},title={_prop(NOT_RUN_CODE)}::{_data(not_run_message(run) + tail)}\n")
    for f in report.sorted_findings():
        level = "error" if f.severity == "error" else "warning"
        msg = f.message
        region = f.data.get("ipynb_region") if f.cell is not None and isinstance(f.data, dict) else None
        if f.cell is not None:
            props = [f"file={_prop(f.path)}"]
            if isinstance(region, dict):  # the place in the .ipynb file's JSON text
                props += [f"line={region['line']}", f"col={region['col']}",
                          f"endLine={region['end_line']}", f"endColumn={region['end_col']}"]
            props.append(f"title={_prop(f'{f.code} (cell {f.cell})')}")
            msg = f"cell {f.cell}, line {f.line}, col {f.col}: {msg}"
        else:
            props = [f"file={_prop(f.path)}", f"line={f.line}", f"col={f.col}",
                     f"endLine={f.end_line}", f"endColumn={f.end_col}", f"title={_prop(f.code)}"]
        v = verification_line(f)
        if v:
            msg += "\n" + v
        stream.write(f"::{level} {','.join(props)}::{_data(msg)}\n")
