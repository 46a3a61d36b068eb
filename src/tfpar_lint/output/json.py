"""JSON: one top-level list, one object per reported problem.

Each finding is ``Finding.to_dict()``: ``code``, ``name``, ``message``,
``path``, ``line``, ``col``, ``end_line``, ``end_col`` (1-based; the end
column is exclusive), ``severity``, ``fix_hint``, plus ``cell`` for
notebooks, ``data`` when the rule recorded facts, and ``verification``
(``status``, ``evidence``, ``replicas``, ``devices``, ``seconds``) after
``--verify``.

Each object also carries ruff's field names, so tools written for ``ruff check
--output-format json`` read it unchanged: ``filename`` (absolute path),
``location`` and ``end_location`` (``{"row", "column"}``, 1-based, the end
column exclusive, as ruff's), ``fix`` (ruff's shape, or null), ``url`` (the
rule's page) and ``noqa_row`` (the line a ``# noqa`` for it goes on: the last
line of its logical line, as ``--add-noqa`` writes it), and ``cell`` (null
outside notebooks).

Design choice for files that could not be linted: the top level stays a list
(so ``jq '.[]'`` and every consumer of the findings keep working) and each
such file is one more object of the same shape with flake8's code ``E999``
(syntax error), ``E902`` (unreadable, not UTF-8, invalid notebook, skipped),
``E903`` (the analysis gave up) or, under ``--verify``, ``E904`` (a script that could not run:
verdict ``COULD_NOT_RUN``, with the reason and the last lines of its stderr in ``verification``), name ``syntax-error`` / ``io-error`` /
``analysis-gave-up``, ``severity: "error"``, and ``"error": true`` to pick
them out.  Objects are sorted by path, then position.  In a path, bytes that
are not UTF-8 are written ``\\xNN`` (JSON text is Unicode); everything else,
a newline included, is the path itself.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Optional, TextIO

from tfpar_lint.output.base import NOT_RUN_CODE, Report, display_path, error_code, error_name, not_run, not_run_message
from tfpar_lint.output.sarif import help_uri


def _ruff_fields(d: dict[str, Any], path: str, rows: Optional[Callable[[int], int]]) -> dict[str, Any]:
    """Add ruff's JSON field names to a record that has ours."""
    d["filename"] = path if path == "-" else os.path.abspath(path)
    d["location"] = {"row": d["line"], "column": d["col"]}
    d["end_location"] = {"row": d["end_line"], "column": d["end_col"]}
    d.setdefault("fix", None)
    d["url"] = help_uri(d["code"]) if d["code"].startswith("TFP") else None
    d["noqa_row"] = rows(d["line"]) if rows is not None and d.get("cell") is None else d["line"]
    d.setdefault("cell", None)
    return d


def _noqa_rows(path: str) -> Optional[Callable[[int], int]]:
    if path == "-" or path.endswith(".ipynb"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    from tfpar_lint.noqa import NoqaRows

    return NoqaRows(source)


def error_record(err: Any) -> dict[str, Any]:
    code = error_code(err)
    return {
        "code": code,
        "name": error_name(code),
        "message": err.message,
        "path": display_path(err.path, controls=False),
        "line": err.line,
        "col": err.col,
        "end_line": err.line,
        "end_col": err.col,
        "severity": "error",
        "fix_hint": "",
        "error": True,
    }


def run_record(run: Any) -> dict[str, Any]:
    """A script ``--verify`` could not run (verdict COULD_NOT_RUN): an error record (code E904) whose
    ``verification`` says why, with the last lines of the script's stderr."""
    line = int(getattr(run, "error_line", 0) or 0)
    return {
        "code": NOT_RUN_CODE, "name": error_name(NOT_RUN_CODE), "message": not_run_message(run),
        "path": display_path(run.path, controls=False), "line": line, "col": 1 if line else 0,
        "end_line": line, "end_col": 1 if line else 0, "severity": "error", "fix_hint": "", "error": True,
        "verification": {"status": run.status, "evidence": run.reason, "stderr": list(run.stderr_tail),
                         "replicas": run.replicas, "devices": list(run.devices), "seconds": run.seconds},
    }


def records(report: Report) -> list[dict[str, Any]]:
    rows: list[tuple[tuple, dict[str, Any]]] = []
    for err in report.sorted_errors():
        rows.append(((err.path, 0, err.line, err.col, error_code(err)),
                     _ruff_fields(error_record(err), err.path, None)))
    for run in not_run(report):
        rows.append(((run.path, 0, 0, 0, NOT_RUN_CODE), _ruff_fields(run_record(run), run.path, None)))
    noqa_rows: dict[str, Optional[Callable[[int], int]]] = {}
    for f in report.sorted_findings():
        d = f.to_dict()
        d["path"] = display_path(f.path, controls=False)
        if f.path not in noqa_rows:
            noqa_rows[f.path] = _noqa_rows(f.path)
        rows.append((f.sort_key(), _ruff_fields(d, f.path, noqa_rows[f.path])))
    rows.sort(key=lambda r: r[0])
    return [r for _, r in rows]


def write(report: Report, stream: TextIO, *, statistics: bool = False) -> None:
    json.dump(records(report), stream, indent=2)
    stream.write("\n")
