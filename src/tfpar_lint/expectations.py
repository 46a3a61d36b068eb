"""``# expect: TFPnnn`` comments in fixtures (flake8-bugbear eval-file style): the one parser.

Used by the fixture tests, the precision/recall report and the verifier tests
(:mod:`tfpar_lint.verify.testing` imports it).

The form, decided once: the comment ``# expect:`` (the word ``expect`` in any case, spaces
allowed around the colon) followed by one or more codes separated by commas and/or spaces,
and nothing else. A code is written as the linter prints it, ``TFP`` and three digits in
upper case. Anything else after ``# expect:`` -- a lower-case code, prose, a code of no rule
(``TFP299``) or of a retired rule (``TFP104``) -- raises :class:`ExpectationError` naming the
file and line, so a mistyped expectation can never be dropped silently.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Collection, Iterable, Optional

# The comment itself; group "body" is everything after the colon up to the end of the line.
EXPECT_RE = re.compile(r"#\s*expect\s*:(?P<body>.*)$", re.IGNORECASE)
CODE_RE = re.compile(r"TFP\d{3}")


class ExpectationError(ValueError):
    """An ``# expect:`` comment that does not name only codes of existing rules."""


def _known_codes() -> frozenset[str]:
    from tfpar_lint.registry import all_rules

    return frozenset(r.CODE for r in all_rules())


def parse_expect_line(line: str, where: str = "<line>",
                      known: Optional[Collection[str]] = None) -> list[str]:
    """The codes of the ``# expect:`` comment on ``line`` ([] when there is none).

    ``known`` is the set of valid codes (default: every rule of the registry)."""
    m = EXPECT_RE.search(line)
    if not m:
        return []
    body = m.group("body").strip()
    tokens = [t for t in re.split(r"[\s,]+", body) if t]
    if not tokens or any(not CODE_RE.fullmatch(t) for t in tokens) or body.endswith(",") or ",," in body.replace(" ", ""):
        raise ExpectationError(f"{where}: malformed '# expect:' comment {m.group(0).strip()!r}: "
                               "write '# expect: TFPnnn' (several codes separated by commas), nothing else")
    valid = _known_codes() if known is None else frozenset(known)
    unknown = [t for t in tokens if t not in valid]
    if unknown:
        raise ExpectationError(f"{where}: '# expect:' names {', '.join(unknown)}, which is no current rule "
                               "(unknown or retired code)")
    return tokens


def expected_in_source(source: str, path: str = "<source>",
                       known: Optional[Collection[str]] = None) -> set[tuple[int, str]]:
    """{(line, code)} from the ``# expect:`` comments of a file; raises :class:`ExpectationError`."""
    out: set[tuple[int, str]] = set()
    valid = _known_codes() if known is None else frozenset(known)
    for lineno, line in enumerate(source.splitlines(), start=1):
        for code in parse_expect_line(line, f"{path}:{lineno}", valid):
            out.add((lineno, code))
    return out


def expected_in_file(path: Path | str, known: Optional[Collection[str]] = None) -> set[tuple[int, str]]:
    p = Path(path)
    return expected_in_source(p.read_text(encoding="utf-8"), str(p), known)


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
