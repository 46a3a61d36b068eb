"""``# expect: TFPnnn`` comments in fixtures (flake8-bugbear eval-file style).

Used by the fixture tests, the precision/recall report and the verifier tests.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

EXPECT_RE = re.compile(r"#\s*expect:\s*((?:TFP\d{3}\s*,?\s*)+)")
CODE_RE = re.compile(r"TFP\d{3}")


def expected_in_source(source: str) -> set[tuple[int, str]]:
    """{(line, code)} from the ``# expect:`` comments of a file."""
    out: set[tuple[int, str]] = set()
    for lineno, line in enumerate(source.splitlines(), start=1):
        m = EXPECT_RE.search(line)
        if m:
            for code in CODE_RE.findall(m.group(1)):
                out.add((lineno, code))
    return out


def fixture_files(root: Path, exclude_dirs: Iterable[str] = ()) -> list[Path]:
    """The ``*.py`` files under ``root``, skipping the top-level folders named in ``exclude_dirs``."""
    skip = set(exclude_dirs)
    return sorted(p for p in root.rglob("*.py")
                  if "__pycache__" not in p.parts and p.relative_to(root).parts[0] not in skip)


def score(pairs: Iterable[tuple[set, set]]) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) over (expected, found) pairs."""
    tp = fp = fn = 0
    for expected, found in pairs:
        tp += len(expected & found)
        fp += len(found - expected)
        fn += len(expected - found)
    return tp, fp, fn
