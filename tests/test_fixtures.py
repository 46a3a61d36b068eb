"""Every ``# expect: TFPnnn`` line of fixtures/ is reported, and nothing else is."""
from __future__ import annotations

from pathlib import Path

import pytest

from tfpar_lint.engine import lint_file
from tfpar_lint.expectations import expected_in_source, fixture_files
from tfpar_lint.registry import all_rules, default_codes

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
ALL = [r.CODE for r in all_rules()]
FILES = fixture_files(FIXTURES)


def test_fixture_tree_is_complete():
    """Every rule has a bad and a good fixture, and every bad fixture expects its own code."""
    missing = []
    for r in all_rules():
        folder = FIXTURES / r.CODE
        bad = sorted(folder.glob("bad*.py"))
        good = sorted(folder.glob("good*.py"))
        if not bad or not good:
            missing.append(f"{r.CODE}: bad={len(bad)} good={len(good)}")
            continue
        for b in bad:
            codes = {c for _, c in expected_in_source(b.read_text())}
            if r.CODE not in codes:
                missing.append(f"{b.relative_to(ROOT)} has no '# expect: {r.CODE}'")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture(path: Path):
    source = path.read_text()
    expected = expected_in_source(source)
    if path.name.startswith("good") or path.parent.name == "tutorials":
        assert not expected, "good fixtures carry no '# expect:'"
    # the default rules (as `tfpar-lint fixtures/` runs them), plus the folder's own rule when it is
    # off by default; '# expect:' lines of other off-by-default rules are checked in their own runs
    enabled = set(default_codes())
    if path.parent.name in ALL:
        enabled.add(path.parent.name)
    expected = {(line, c) for line, c in expected if c in enabled}
    result = lint_file(str(path), enabled=enabled)
    assert result.error is None, result.error
    found = {(f.line, f.code) for f in result.findings}
    messages = {(f.line, f.code): f.message for f in result.findings}
    extra = sorted(found - expected)
    missed = sorted(expected - found)
    assert not extra and not missed, (
        f"false positives: {[(l, c, messages[(l, c)]) for l, c in extra]}\nmissed: {missed}"
    )


@pytest.mark.parametrize("path", [p for p in FILES if p.name.startswith("bad")],
                         ids=[str(p.relative_to(FIXTURES)) for p in FILES if p.name.startswith("bad")])
def test_off_by_default_expectations_hold_with_every_rule(path: Path):
    """An off-by-default rule marked on a line of any fixture is found there when every rule is on."""
    off = {r.CODE for r in all_rules() if not r.DEFAULT_ENABLED}
    expected = {(line, c) for line, c in expected_in_source(path.read_text()) if c in off}
    found = {(f.line, f.code) for f in lint_file(str(path), enabled=ALL).findings if f.code in off}
    assert expected <= found


def _reported(stdout: str) -> set[tuple[str, int, str]]:
    import re

    out = set()
    for line in stdout.splitlines():
        m = re.match(r"^(.*?):(\d+):(\d+): (TFP\d{3}) ", line)
        if m:
            out.add((Path(m.group(1)).resolve().relative_to(ROOT).as_posix(), int(m.group(2)), m.group(4)))
    return out


def _all_expected(codes) -> set[tuple[str, int, str]]:
    return {(p.relative_to(ROOT).as_posix(), line, c)
            for p in FILES for line, c in expected_in_source(p.read_text()) if c in codes}


def test_cli_and_flake8_report_exactly_the_expected_findings_on_fixtures():
    """The issue's done-when: `tfpar-lint fixtures/` (default rules) and `flake8 --select TFP fixtures/`
    (flake8's explicit select turns the opt-in rules on too) report exactly the '# expect:' lines."""
    import shutil
    import subprocess
    import sys

    cli = subprocess.run([sys.executable, "-m", "tfpar_lint", "fixtures/"], cwd=ROOT, capture_output=True, text=True)
    assert cli.returncode == 1, cli.stderr
    assert _reported(cli.stdout) == _all_expected(default_codes())
    if shutil.which("flake8") is None and not (Path(sys.executable).parent / "flake8").exists():
        pytest.skip("flake8 is not installed")
    fl = subprocess.run([sys.executable, "-m", "flake8", "--select", "TFP", "fixtures/"], cwd=ROOT,
                        capture_output=True, text=True)
    assert fl.returncode == 1, fl.stderr
    # the noqa rules (TFP9xx) judge `# noqa` comments, which flake8 handles itself: command only
    noqa_rules = {r.CODE for r in all_rules() if getattr(r, "TEXT_ONLY", False)}
    assert _reported(fl.stdout) == _all_expected(set(ALL) - noqa_rules)
