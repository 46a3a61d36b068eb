"""flake8-style text: ``path:line:col: CODE message`` (1-based line and column).

Notebook findings read ``path:cell_N:line:col: CODE message`` (line inside the
cell).  Control characters and bytes that are not UTF-8 in a path are
escaped (:func:`tfpar_lint.output.display_path`), so each finding stays on
one line.  Files that could not be linted read ``path:line:col: E999 reason`` /
``path:0:0: E902 reason``, on standard output like flake8.  ``--statistics``
appends flake8's ``count  CODE first-message`` lines.

With ``--verify`` the report reads like pytest's: per script one header line
(``path: how the run ended; replicas and devices; seconds; verdict counts``),
then one line per finding, ``path:line:col: CODE VERDICT: evidence`` (all of it), and under a
CONFIRMED or RUNTIME finding the rule's fix; a script that could not run
(``COULD_NOT_RUN``) shows why and the last lines of its stderr.  At the end a count of the
verdicts and what to do next.  ``-v`` also prints each finding's message, the run's notes and
what each probe checked.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import TextIO

from tfpar_lint.finding import CONFIRMED, COULD_NOT_RUN, INCONCLUSIVE, NOT_REPRODUCED, RUNTIME, Finding
from tfpar_lint.output.base import (BOLD, CYAN, RED, Report, display_path, error_code, paint, printable, short_device,
                               status_label, verification_line)


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
    """One finding, one line (for grep and editors): newlines become spaces, and the other control
    characters are escaped (:func:`printable`: a script's error text reaches the terminal here)."""
    return printable(" ".join(s.splitlines()) if ("\n" in s or "\r" in s) else s)


def format_finding(f: Finding, color: bool = False) -> str:
    sep = paint(":", CYAN, on=color)
    return f"{location(f, color)}{sep} {paint(f.code, BOLD, RED, on=color)} {one_line(f.message)}"


def write(report: Report, stream: TextIO, *, statistics: bool = False) -> None:
    if report.verified and report.runs:
        write_verified(report, stream)
        if statistics:
            write_statistics(report, stream)
        return
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


# -- --verify -------------------------------------------------------------------

ORDER = (CONFIRMED, RUNTIME, NOT_REPRODUCED, INCONCLUSIVE)


def _devices(run) -> str:
    devs = ",".join(short_device(d).lstrip("/") for d in getattr(run, "devices", []) or [])
    workers = f"{run.workers} workers, " if getattr(run, "workers", 1) > 1 else ""
    if getattr(run, "replicas", 0):
        return f"{workers}{run.replicas} replica{'s' if run.replicas != 1 else ''} on {devs or '?'}"
    return f"{workers}no strategy created" + (f" (devices {devs})" if devs else "")


def _ending(run) -> str:
    outcome = getattr(run, "outcome", "")
    notes = list(getattr(run, "notes", []) or [])
    if getattr(run, "status", "") == COULD_NOT_RUN:
        return f"{COULD_NOT_RUN}: {getattr(run, 'reason', '') or getattr(run, 'error', '')}"
    if outcome == "ok":
        return "ran to the end"
    if outcome == "stopped":
        why = next((n for n in notes if n.startswith("stopped ")), "stopped")
        return f"{why} (the step bound, --max-steps)"
    if outcome == "hung":
        where = f" at {run.hang_location}" if getattr(run, "hang_location", "") else ""
        return f"hung{where}; killed after {run.seconds:.0f} s"
    if outcome == "failed":
        return f"could not be run: {getattr(run, 'error', '') or 'no result'}"
    return f"failed with {getattr(run, 'error', '') or 'an error'}"


def script_header(run, verdicts: list[str]) -> str:
    counts = [f"{verdicts.count(v)} {v}" for v in ORDER if verdicts.count(v)]
    found = ", ".join(counts) if counts else "nothing found"
    sandbox = f"; sandbox: {run.sandbox}" if getattr(run, "sandbox", "") else ""
    if getattr(run, "sandbox", "") == "none":
        sandbox += " (NOTHING ISOLATED: --sandbox none)"
    if getattr(run, "sandbox_refused", None):
        sandbox += f" (refused: {', '.join(run.sandbox_refused)})"
    return printable(f"{display_path(run.path)}: {_ending(run)}; {_devices(run)}; {run.seconds:.1f} s{sandbox}; {found}")


def _key(path: str) -> str:
    return os.path.realpath(path)


def write_verified(report: Report, stream: TextIO) -> None:
    """The ``--verify`` text report (see the module docstring)."""
    for err in report.sorted_errors():
        stream.write(f"{display_path(err.path)}:{err.line}:{err.col}: {error_code(err)} {one_line(err.message)}\n")
    by_script: dict[str, list[Finding]] = {}
    for f in report.sorted_findings():
        by_script.setdefault(_key(f.path), []).append(f)
    shown: set[str] = set()
    total: list[str] = []
    not_run = 0
    for run in report.runs:
        key = _key(run.path)
        if key in shown:
            continue
        shown.add(key)
        fs = by_script.get(key, [])
        verdicts = [f.verification.status for f in fs if f.verification is not None]
        total += verdicts
        stream.write(script_header(run, verdicts) + "\n")
        if getattr(run, "status", "") == COULD_NOT_RUN:
            not_run += 1
            for ln in getattr(run, "stderr_tail", []) or []:
                stream.write(f"    | {one_line(ln)}".rstrip() + "\n")
        for f in fs:
            _write_finding(f, stream, report.verbose)
        if report.verbose:
            _write_run_detail(run, stream)
    for key, fs in by_script.items():  # findings of files the verifier did not run
        if key not in shown:
            for f in fs:
                _write_finding(f, stream, report.verbose)
    parts = ", ".join(f"{total.count(v)} {v}" for v in ORDER)
    n = len(shown)
    could = f"; {not_run} script{'s' if not_run != 1 else ''} {COULD_NOT_RUN}" if not_run else ""
    stream.write(f"== {n} script{'s' if n != 1 else ''} run: {parts}{could} ==\n")
    for line in next_steps(report.findings, report.verbose, report.runs):
        stream.write(line + "\n")


def _write_finding(f: Finding, stream: TextIO, verbose: bool) -> None:
    """``path:line:col: CODE VERDICT``, the whole evidence, and for a mistake the run showed, the
    rule's fix (``tfpar-lint rule CODE`` prints its page)."""
    v = f.verification
    if v is None:
        stream.write(f"{format_finding(f)}\n    UNVERIFIED: the verifier did not run this file\n")
        return
    if verbose:
        stream.write(format_finding(f) + "\n")
        line = verification_line(f) or ""
        stream.write("    " + one_line(line[3:] if line.startswith("-> ") else line) + "\n")
    else:
        stream.write(f"{location(f)}: {f.code} {status_label(v.status)}: {one_line(v.evidence)}\n")
    if v.status in (CONFIRMED, RUNTIME) and f.fix_hint:
        stream.write(f"    fix: {one_line(f.fix_hint)} (`tfpar-lint rule {f.code}`)\n")


def _write_run_detail(run, stream: TextIO) -> None:
    if getattr(run, "error", ""):
        stream.write(f"    error: {one_line(run.error)}\n")
    notes = [n for n in getattr(run, "notes", []) or []]
    if notes:
        stream.write(f"    notes: {one_line('; '.join(notes))}\n")
    for o in getattr(run, "observations", []) or []:
        stream.write(f"    {o.family} probe ({o.codes}) saw: {one_line(o.summary)}\n")


def next_steps(findings: list[Finding], verbose: bool, runs=()) -> list[str]:
    """One or two lines: what to do with this report."""
    out = []
    could_not = [display_path(r.path) for r in runs if getattr(r, "status", "") == COULD_NOT_RUN]
    broken = [display_path(r.path) for r in runs if getattr(r, "outcome", "ok") in ("error", "hung", "failed")
              and display_path(r.path) not in could_not]
    hit = sorted({f.code for f in findings if f.verification is not None
                  and f.verification.status in (CONFIRMED, RUNTIME)})
    undecided = any(f.verification is not None and f.verification.status == INCONCLUSIVE for f in findings)
    more = "" if verbose else "; -v shows the notes and what each probe checked"
    if hit:
        out.append(f"Next: fix the CONFIRMED and RUNTIME findings; `tfpar-lint rule CODE` explains each rule and "
                   f"its fix ({', '.join(hit)}){more}.")
    if could_not:
        names = ", ".join(could_not[:3]) + (", ..." if len(could_not) > 3 else "")
        out.append(f"{COULD_NOT_RUN}: {names} did not run through and showed nothing, so nothing in "
                   f"{'it' if len(could_not) == 1 else 'them'} was verified (exit status 2): fix the script, pass "
                   f"its arguments after --, or raise --timeout, then verify again.")
    if undecided:
        out.append("INCONCLUSIVE: the run could not decide (the flagged code did not run, or the probe cannot tell; "
                   "the evidence says which): pass the script's arguments after --, or raise --timeout / --max-steps.")
    if broken:
        names = ", ".join(broken[:3]) + (", ..." if len(broken) > 3 else "")
        its = "Its" if len(broken) == 1 else "Their"
        out.append(f"Not run to the end: {names}; only what ran before the end was checked. {its} last output lines "
                   f"are printed on stderr.")
    if not out and not findings:
        out.append("Nothing found: no finding, and the run showed no mistake.")
    elif not out:
        out.append("Nothing confirmed: the flagged code ran and behaved correctly on these devices (NOT_REPRODUCED), "
                   "and the run showed no other mistake.")
    return out
