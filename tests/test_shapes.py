"""Value-following shapes that real training code uses (issue 8, part 3).

``tests/data_shapes/`` holds small programs, one shape each (a strategy never bound to a name,
helpers with branches, ``get_strategy()`` in a scope, trainer classes on ``self``, Thread
subclasses, thread pools, ``experimental_run_v2`` and ``call_for_each_replica`` with data from
closures, containers, ``functools.partial``, nested and decorated functions).  Lines marked
``# expect: TFPnnn`` must be reported with that code, nothing else; ``good_*`` twins must be
silent.  These are the shapes the bug zoo (``fixtures/zoo``) measures at scale."""
from __future__ import annotations

from pathlib import Path

import pytest

from tfpar_lint.engine import lint_file
from tfpar_lint.expectations import expected_in_source
from tfpar_lint.registry import all_rules

DATA = Path(__file__).resolve().parent / "data_shapes"
FILES = sorted(DATA.glob("*.py"))
ALL = frozenset(r.CODE for r in all_rules())


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_shape(path: Path):
    expected = expected_in_source(path.read_text(encoding="utf-8"))
    if path.name.startswith("good_"):
        assert not expected
    else:
        assert expected
    result = lint_file(str(path), enabled=ALL)
    assert result.error is None, result.error
    found = {(f.line, f.code) for f in result.findings}
    assert found == expected
