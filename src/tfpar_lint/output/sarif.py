"""SARIF 2.1.0 (one run), as GitHub code scanning and other viewers read it.

* ``tool.driver``: ``name``, ``version``, ``informationUri``, and every rule
  (``id``, ``name``, ``shortDescription``, ``fullDescription``, ``helpUri``,
  ``defaultConfiguration`` with ``level`` and ``enabled``).
* ``results``: ``ruleId``, ``ruleIndex``, ``level``, ``message``, one
  location with ``artifactLocation.uri`` relative to the project root with
  forward slashes (``uriBaseId: "%SRCROOT%"``, defined in
  ``originalUriBaseIds``; files outside the root get an absolute ``file://``
  URI) and ``region`` ``startLine``/``startColumn``/``endLine``/``endColumn``
  (1-based, end column exclusive, as SARIF wants).  A notebook finding's region
  is its place in the ``.ipynb`` file's JSON text (the characters of the
  cell's ``source`` strings, from ``data.ipynb_region``); its cell and the
  line inside the cell are in the message and ``properties.cell``.  The
  verifier's verdict goes into the result's ``properties.verification``.
* Files that could not be linted: ``invocations[0].toolExecutionNotifications``
  (level ``error``, ``descriptor.id`` E999/E902, with the location), and
  ``executionSuccessful`` false.  The same for a script ``--verify`` could not run (verdict
  ``COULD_NOT_RUN``, descriptor E904, the reason and the last stderr lines in the message and in
  ``properties.verification``).  The verifier's script runs (each with its ``status``) go into
  ``invocations[0].properties.scriptRuns``, and what each verdict (``CONFIRMED``,
  ``RUNTIME``, ``NOT_REPRODUCED``, ``INCONCLUSIVE``, ``COULD_NOT_RUN``) means into
  ``invocations[0].properties.verdicts``.
* The run's notes (findings held back because nothing states the TensorFlow version they depend
  on): ``invocations[0].toolExecutionNotifications`` with level ``note`` and ``descriptor.id``
  ``version-not-stated``.
"""
from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any, TextIO

from tfpar_lint import __version__
from tfpar_lint.output.base import NOT_RUN_CODE, Report, display_path, error_code, not_run, not_run_message, relative_uri

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/tfpar-lint/tfpar-lint"


def help_uri(code: str) -> str:
    return f"{INFORMATION_URI}/blob/main/rules/{code}.md"


def level(severity: str) -> str:
    return {"error": "error", "warning": "warning", "info": "note", "note": "note"}.get(severity, "warning")


def _rule_descriptor(rule: Any) -> dict[str, Any]:
    doc = inspect.cleandoc(rule.__doc__ or "") if rule.__doc__ else ""
    summary = rule.SUMMARY or (doc.split("\n\n")[0] if doc else rule.NAME)
    full = doc or summary
    return {
        "id": rule.CODE,
        "name": rule.NAME,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": full},
        "helpUri": help_uri(rule.CODE),
        "defaultConfiguration": {"level": level(rule.SEVERITY), "enabled": bool(rule.DEFAULT_ENABLED)},
        "properties": {"tags": [rule.CODE[:4] + "xx"]},
    }


def _location(path: str, root: str, line: int, col: int, end_line: int, end_col: int) -> dict[str, Any]:
    uri, rel = relative_uri(path, root)
    art: dict[str, Any] = {"uri": uri}
    if rel:
        art["uriBaseId"] = "%SRCROOT%"
    phys: dict[str, Any] = {"artifactLocation": art}
    if line >= 1:
        region = {"startLine": line, "startColumn": max(col, 1)}
        if end_line >= line:
            region["endLine"] = end_line
            if end_col >= 1 and (end_line > line or end_col >= max(col, 1)):
                region["endColumn"] = end_col
        phys["region"] = region
    return {"physicalLocation": phys}


def sarif_fix(f: Any, root: str) -> dict[str, Any]:
    """A finding's fix as a SARIF ``fix``: one artifactChange, one replacement per edit
    (``deletedRegion`` 1-based with an exclusive end column, as the results' regions)."""
    art = _location(f.path, root, 0, 0, 0, 0)["physicalLocation"]["artifactLocation"]
    replacements = []
    for e in f.fix["edits"]:
        replacements.append({
            "deletedRegion": {"startLine": e["location"]["row"], "startColumn": e["location"]["column"],
                              "endLine": e["end_location"]["row"], "endColumn": e["end_location"]["column"]},
            "insertedContent": {"text": e["content"]},
        })
    return {
        "description": {"text": f.fix["message"]},
        "artifactChanges": [{"artifactLocation": art, "replacements": replacements}],
        "properties": {"applicability": f.fix["applicability"]},
    }


def _finding_location(f: Any, root: str) -> dict[str, Any]:
    if f.cell is None:
        return _location(f.path, root, f.line, f.col, f.end_line, f.end_col)
    region = f.data.get("ipynb_region") if isinstance(f.data, dict) else None
    if isinstance(region, dict):  # the place in the .ipynb file's JSON text
        return _location(f.path, root, region["line"], region["col"], region["end_line"], region["end_col"])
    return _location(f.path, root, 0, 0, 0, 0)  # the notebook, no region: cell lines are not file lines


def build(report: Report) -> dict[str, Any]:
    from tfpar_lint import registry

    rules = list(registry.all_rules())
    index = {r.CODE: i for i, r in enumerate(rules)}
    descriptors = [_rule_descriptor(r) for r in rules]
    results = []
    for f in report.sorted_findings():
        if f.code not in index:  # a finding from a rule unknown to the registry
            index[f.code] = len(descriptors)
            descriptors.append({"id": f.code, "name": f.name, "shortDescription": {"text": f.message},
                                "helpUri": help_uri(f.code)})
        text = f.message if f.cell is None else f"{f.message} (cell {f.cell}, line {f.line}, col {f.col})"
        res: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": level(f.severity),
            "message": {"text": text},
            "locations": [_finding_location(f, report.root)],
        }
        related = f.data.get("related_line") if isinstance(f.data, dict) and f.cell is None else None
        if isinstance(related, int) and related >= 1:
            # the other place the message names ("strategy.run (line 61)"): SARIF's related location
            col = f.data.get("related_col", 1)
            res["relatedLocations"] = [{"id": 1, **_location(f.path, report.root, related, col if isinstance(col, int)
                                                             else 1, related, 0),
                                        "message": {"text": f"line {related}"}}]
        if f.fix and f.cell is None:
            res["fixes"] = [sarif_fix(f, report.root)]
        props: dict[str, Any] = {}
        if f.cell is not None:
            props["cell"] = f.cell
        if f.fix_hint:
            props["fixHint"] = f.fix_hint
        if f.verification is not None:
            props["verification"] = f.verification.to_dict()
        elif report.verified:
            props["verification"] = None
        if props:
            res["properties"] = props
        results.append(res)

    notifications = []
    for err in report.sorted_errors():
        code = error_code(err)
        notifications.append({
            "level": "error",
            "message": {"text": f"{display_path(err.path)}: {err.message}"},
            "descriptor": {"id": code},
            # a notebook's error lines are counted in its cell (the message names it), not in the file
            "locations": [_location(err.path, report.root, err.line, err.col, err.line, 0) if not
                          err.path.endswith(".ipynb") else _location(err.path, report.root, 0, 0, 0, 0)],
        })
    for note in report.notes:  # the run's notes: findings held back for want of a TensorFlow version
        notifications.append({"level": "note", "message": {"text": note}, "descriptor": {"id": "version-not-stated"}})
    for run in not_run(report):  # --verify: a script that did not run through proves nothing
        tail = "".join(f"\n{ln}" for ln in getattr(run, "stderr_tail", []))
        notifications.append({
            "level": "error",
            "message": {"text": f"{display_path(run.path)}: {not_run_message(run)}{tail}"},
            "descriptor": {"id": NOT_RUN_CODE},
            "locations": [_location(run.path, report.root, 0, 0, 0, 0)],
            "properties": {"verification": {"status": run.status, "evidence": run.reason,
                                            "stderr": list(getattr(run, "stderr_tail", []))}},
        })
    invocation: dict[str, Any] = {
        "executionSuccessful": not report.errors and not not_run(report),
        "toolExecutionNotifications": notifications,
    }
    if report.runs:
        from tfpar_lint.finding import VERDICTS

        invocation["properties"] = {
            "scriptRuns": [r.to_dict() if hasattr(r, "to_dict") else str(r) for r in report.runs],
            "verdicts": dict(VERDICTS),  # what each properties.verification.status means
        }

    root_uri = Path(os.path.abspath(report.root)).as_uri().rstrip("/") + "/"
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "tfpar-lint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": descriptors,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root_uri}},
            "invocations": [invocation],
            "results": results,
            "columnKind": "unicodeCodePoints",
        }],
    }


def write(report: Report, stream: TextIO, *, statistics: bool = False) -> None:
    json.dump(build(report), stream, indent=2, default=str)
    stream.write("\n")
