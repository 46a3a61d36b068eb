"""TFP900: a ``# noqa`` directive whose tfpar-lint codes suppress nothing.

The work is done by the engine from the text of the file (``noqa.unused_report``),
since it needs every other rule's findings before ``# noqa`` is applied: it runs
in the standalone command only (flake8 applies ``# noqa`` itself).
"""
from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule


class UnusedNoqa(Rule):
    CODE = "TFP900"
    NAME = "unused-noqa"
    SUMMARY = "`# noqa` directive whose tfpar-lint codes suppress nothing (unused, non-enabled or unknown codes)"
    FIX_HINT = "Remove the codes that suppress nothing (the whole comment when none is left)."
    DEFAULT_ENABLED = False
    SEVERITY = "warning"
    FIXABLE = "safe"
    TEXT_ONLY = True  # judged from the text and the other rules' findings, never parsed for itself

    def check(self) -> Iterator[Report]:
        return iter(())
