"""Helpers for tests and manual checks: findings from ``# expect:`` comments.

The fixture convention is ``# expect: TFP101`` (several codes separated by
commas or spaces) on the offending line.  ``expected_findings`` turns those
comments into :class:`Finding` objects (code and line only) so the verifier
can be tested without the linter.
"""
from __future__ import annotations

import re

from tfpar_lint.finding import Finding

_EXPECT = re.compile(r"#\s*expect:\s*((?:TFP\d{3}[\s,]*)+)", re.I)


def expected_findings(path: str) -> list[Finding]:
    out: list[Finding] = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            m = _EXPECT.search(line)
            if not m:
                continue
            for code in re.findall(r"TFP\d{3}", m.group(1).upper()):
                out.append(Finding(code=code, name="", message="from # expect comment", path=path, line=i,
                                   col=1, end_line=i, end_col=1))
    return out
