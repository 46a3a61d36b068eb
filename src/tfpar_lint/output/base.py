"""Report formats: ``text`` (default, flake8's), ``concise`` and ``full`` (ruff's), ``json``, ``sarif``, ``github``.

Every format receives a :class:`Report` (the findings, the files that could
not be linted, and the verifier's script runs when ``--verify`` ran) and
writes it to a text stream.

Files that could not be linted (unreadable, not UTF-8, syntax error, broken
notebook, skipped, given up) are reported in every format, with flake8's
codes: ``E999`` for a syntax error, ``E902`` for a file not read (I/O,
decoding, invalid notebook, not a regular file, over the size limit), and
``E903`` when the analysis gave up (the worker crashed, timed out or ran out
of memory, or libcst cannot parse code that Python accepts).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Optional

from tfpar_lint.finding import COULD_NOT_RUN, FileError, Finding, error_code  # noqa: F401  (re-exported)

FORMATS = ("text", "concise", "full", "json", "sarif", "github")


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    runs: list[Any] = field(default_factory=list)  # verify.ScriptRun objects
    verified: bool = False
    root: str = "."  # paths in SARIF are made relative to this
    verbose: bool = False  # --verify text report: full findings, evidence, notes and probe observations
    unsafe_fixes: bool = False  # unsafe fixes count as applicable ([*] marker)
    color: bool = False  # ANSI colours (text, concise, full)
    show_source: bool = False  # text: flake8's --show-source
    sources: dict[str, str] = field(default_factory=dict)  # path -> text, where not read from disk
    notes: list[str] = field(default_factory=list)  # the run's notes (findings held back: versions.withheld_summary)

    def fixable(self, f: Finding) -> bool:
        from tfpar_lint.fix import applicable

        return applicable(f.fix, self.unsafe_fixes)

    def source_line(self, f: Finding) -> Optional[str]:
        """The physical line a finding points at (None for notebooks or unreadable files)."""
        if f.cell is not None:
            return None
        text = self.sources.get(f.path)
        if text is None:
            try:
                with open(f.path, encoding="utf-8", errors="replace", newline="") as fh:
                    text = fh.read()
            except OSError:
                return None
            self.sources[f.path] = text
        lines = text.splitlines()
        return lines[f.line - 1] if 0 < f.line <= len(lines) else None

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=lambda f: f.sort_key())

    def sorted_errors(self) -> list[FileError]:
        return sorted(self.errors, key=lambda e: (e.path, e.line, e.col))


BOLD, RED, CYAN, BLUE, RESET = "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[34m", "\x1b[0m"


def paint(text: str, *styles: str, on: bool) -> str:
    return "".join(styles) + text + RESET if on and text else text


def error_name(code: str) -> str:
    return {"E999": "syntax-error", "E903": "analysis-gave-up", NOT_RUN_CODE: "could-not-run"}.get(code, "io-error")


# --verify: a script that did not run through and showed nothing (verdict COULD_NOT_RUN) is reported
# like a file that could not be linted, with this code, in every format.
NOT_RUN_CODE = "E904"


def not_run(report: "Report") -> list[Any]:
    """The verifier's script runs whose verdict is COULD_NOT_RUN, in the order they ran."""
    return [r for r in report.runs if getattr(r, "status", "") == COULD_NOT_RUN]


def not_run_message(run: Any) -> str:
    """``COULD_NOT_RUN: crash before any training step: ValueError: ... (x.py:3)``."""
    return f"COULD_NOT_RUN: {getattr(run, 'reason', '') or getattr(run, 'error', '') or 'not verified'}"


def status_label(status: str) -> str:
    """The verdict as printed everywhere: CONFIRMED, NOT_REPRODUCED, INCONCLUSIVE, RUNTIME, COULD_NOT_RUN."""
    return status.upper()


def first_sentence(text: str, limit: int = 110) -> str:
    """The evidence's first clause (up to ``; `` or ``. `` outside brackets and quotes),
    at most ``limit`` characters, for the one-line report."""
    depth, quote, end = 0, "", len(text)
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and ch in ";." and text[i + 1:i + 2] == " ":
            end = i
            break
    s = " ".join(text[:end].split())
    if len(s) > limit:
        cut = s.rfind(" ", 0, limit - 1)
        s = s[:cut if cut > limit // 2 else limit - 1].rstrip(" ,;:(") + "..."
    return s


_DEVICE = re.compile(r"device:([A-Za-z_]+):(\d+)$")


def short_device(name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:CPU:0`` -> ``/cpu:0``."""
    m = _DEVICE.search(name)
    return f"/{m.group(1).lower()}:{m.group(2)}" if m else name


def verification_line(f: Finding) -> Optional[str]:
    """``-> CONFIRMED: evidence (2 replicas on /cpu:0,/cpu:1, 4.1 s)``."""
    v = f.verification
    if v is None:
        return None
    extra = []
    if v.replicas:
        where = f" on {','.join(short_device(d) for d in v.devices)}" if v.devices else ""
        extra.append(f"{v.replicas} replica{'s' if v.replicas != 1 else ''}{where}")
    elif v.devices:
        extra.append(",".join(short_device(d) for d in v.devices))
    extra.append(f"{v.seconds:.1f} s")
    return f"-> {status_label(v.status)}: {v.evidence} ({', '.join(extra)})"


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\udc80-\udcff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(m: "re.Match[str]") -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    if o >= 0xDC80:  # a byte of the file name that is not UTF-8 (os.fsdecode's surrogateescape)
        o -= 0xDC00
    return f"\\x{o:02x}"


_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def display_path(path: str, controls: bool = True) -> str:
    """``path`` as the reports print it: control characters (a newline in a file name would
    split the one-line-per-finding output) and bytes that are not UTF-8 are written as
    ``\\n``, ``\\r``, ``\\t`` and ``\\xNN``; every other path is printed as it is.
    ``controls=False``: only the bytes that are not UTF-8."""
    rx = _UNPRINTABLE if controls else _NOT_UTF8
    return rx.sub(_escape_char, path) if rx.search(path) else path


# What a terminal would act on: C0 and C1 controls (ESC starts a colour, a cursor move or an OSC 52
# clipboard write; BEL rings), DEL, bytes that are not UTF-8, and the bidirectional overrides.
_TERMINAL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")


def _escape_terminal(m: "re.Match[str]") -> str:
    c = m.group()
    if "\u202a" <= c <= "\u2069":
        return f"\\u{ord(c):04x}"
    return _escape_char(m)


def printable(text: str, keep: str = "") -> str:
    """``text`` that a verified script (or a file name) chose, safe to print on a terminal: every
    control character but those in ``keep`` (``"\\t"`` for output lines) written as ``\\xNN``
    (``\\n``, ``\\r``, ``\\t`` by name), as pytest and ruff print what they did not write."""
    if not _TERMINAL.search(text):
        return text
    if keep:
        return _TERMINAL.sub(lambda m: m.group() if m.group() in keep else _escape_terminal(m), text)
    return _TERMINAL.sub(_escape_terminal, text)


def relative_uri(path: str, root: str) -> tuple[str, bool]:
    """``(uri, is_relative)``: a forward-slash path relative to ``root`` when inside it,
    else a ``file://`` URI; percent-encoded from the file name's bytes (RFC 3986)."""
    from urllib.parse import quote

    ab = os.path.abspath(path)
    try:
        rel = os.path.relpath(ab, os.path.abspath(root))
    except ValueError:
        rel = None
    if rel is not None and not rel.startswith(os.pardir):
        return quote(os.fsencode(PurePosixPath(*Path(rel).parts).as_posix()), safe="/"), True
    return Path(ab).as_uri(), False
