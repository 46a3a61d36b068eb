"""Helpers for tests and manual checks: findings from ``# expect:`` comments.

The fixture convention is ``# expect: TFP101`` (several codes separated by
commas or spaces) on the offending line; the one parser is
:mod:`tfpar_lint.expectations` (an unknown, retired or malformed code raises
:class:`~tfpar_lint.expectations.ExpectationError`). ``expected_findings`` turns
those comments into :class:`Finding` objects (code and line only) so the
verifier can be tested without the linter.
"""
from __future__ import annotations

from tfpar_lint.expectations import expected_in_file
from tfpar_lint.finding import Finding


def expected_findings(path: str) -> list[Finding]:
    return [Finding(code=code, name="", message="from # expect comment", path=path, line=line,
                    col=1, end_line=line, end_col=1)
            for line, code in sorted(expected_in_file(path))]
