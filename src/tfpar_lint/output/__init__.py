"""Report formats: flake8's text lines, ruff's concise and full, JSON, SARIF, GitHub annotations.

The shared pieces (the report, paths, colours, error codes) are in :mod:`.base`; each format is
one module; :func:`write` picks one."""
from __future__ import annotations

from typing import Callable, TextIO

from tfpar_lint.output import concise, full, github, json as json_fmt, sarif, text
from tfpar_lint.output.base import (  # noqa: F401  (the names callers import from tfpar_lint.output)
    FORMATS, Report, paint, error_code, error_name, NOT_RUN_CODE, not_run, not_run_message, status_label, first_sentence, _DEVICE, short_device, verification_line, _UNPRINTABLE, _NAMED, _escape_char, _NOT_UTF8, display_path, relative_uri,
)


def write(fmt: str, report: Report, stream: TextIO, *, statistics: bool = False) -> None:
    writers: dict[str, Callable[..., None]] = {
        "text": text.write, "concise": concise.write, "full": full.write,
        "json": json_fmt.write, "sarif": sarif.write, "github": github.write,
    }
    if fmt not in writers:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt in ("concise", "full") and report.verified and report.runs:
        # --verify's report is the same in every human-readable format (one line per script and
        # per finding, the verdict counts, what to do next)
        text.write_verified(report, stream)
        if statistics:
            {"concise": concise, "full": full}[fmt].write_statistics(report, stream)
        return
    writers[fmt](report, stream, statistics=statistics)


__all__ = ["FORMATS", "Report", "write", "error_code", "verification_line", "relative_uri", "display_path", "not_run",
           "NOT_RUN_CODE"]

