"""Precision on real code that is not in the repository: pinned PyPI packages, downloaded at test time.

tests/pypi_wheels.py downloads the wheels pinned in tests/pypi_corpus/packages.tsv into a cache outside
the repository and extracts every ``.py`` that contains ``tf.distribute``, ``tensorflow.distribute`` or
``tensorflow.python.distribute``. The command line lints them with the default rules and with
``--select ALL``; each run must report exactly the findings of tests/pypi_corpus/expected.tsv (all of
them with ``--select ALL``, those of default-on rules otherwise), each triaged in
tests/pypi_corpus/TRIAGE.md. A new finding fails: read the code, then either add it to expected.tsv
with its reason (a true bug) or fix the rule (a false positive).

Only an unreachable package index skips these tests (with pip's own words as the reason); a pin that no
longer resolves or a wheel whose SHA-256 changed fails them.
"""
from __future__ import annotations

import re
import socket
import sys
from collections import Counter
from pathlib import Path

import pytest

import pypi_wheels as pw
from tfpar_lint.registry import all_rules, default_codes

pytestmark = pytest.mark.slow  # builds environments or wheels, or downloads: handed out first under xdist

ALL_CODES = {r.CODE for r in all_rules()}


# -- the files of the test (no network needed) ----------------------------------------------------

def test_packages_are_pinned():
    pkgs = pw.load_packages()
    assert len(pkgs) >= 5
    for p in pkgs:
        assert re.fullmatch(r"\d+(\.\d+)+", p.version), p
        assert re.fullmatch(r"[0-9a-f]{64}", p.sha256), p
        assert p.wheel.endswith(".whl") and p.wheel.startswith(p.name.replace("-", "_") + "-" + p.version + "-")
        assert p.files > 0, p
    assert len({p.name for p in pkgs}) == len(pkgs)


def test_expectations_are_well_formed():
    pkgs = {(p.name, p.version) for p in pw.load_packages()}
    rows = pw.load_expected()
    bad = [e for e in rows
           if (e.package, e.version) not in pkgs or e.code not in ALL_CODES or e.line < 1
           or e.verdict not in ("TP", "FP") or len(e.reason.split()) < 8 or not e.path.endswith(".py")]
    assert not bad, f"malformed rows in {pw.EXPECTED_TSV.name} (a reason takes at least 8 words): {bad}"
    dupes = [k for k, n in Counter(e.key for e in rows).items() if n > 1]
    assert not dupes, dupes


def _triage_rows() -> list[tuple[str, str, str, int, str, str]]:
    """(package, version, path, line, code, verdict) of each finding row of TRIAGE.md's tables."""
    out = []
    for line in pw.TRIAGE_MD.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 7 and re.fullmatch(r"\d+", cells[3]) and re.fullmatch(r"TFP\d{3}", cells[4]):
            out.append((cells[0], cells[1], cells[2], int(cells[3]), cells[4], cells[5]))
    return out


def test_triage_matches_the_expectations_file():
    """TRIAGE.md has one row per finding: its TP and FP rows are exactly expected.tsv's."""
    triage = _triage_rows()
    assert triage, f"no finding rows in {pw.TRIAGE_MD}"
    in_md = {(p, v, path, line, code): verdict for p, v, path, line, code, verdict in triage}
    in_tsv = {e.key: e.verdict for e in pw.load_expected()}
    assert len(in_md) == len(triage), "a finding appears twice in TRIAGE.md"
    assert in_md == in_tsv, (f"TRIAGE.md only: {sorted(set(in_md.items()) - set(in_tsv.items()))}\n"
                             f"expected.tsv only: {sorted(set(in_tsv.items()) - set(in_md.items()))}")


# -- the download harness --------------------------------------------------------------------------

def test_network_errors_are_told_from_other_failures():
    refused = ("Could not fetch URL https://index.invalid/simple/x/: connection error: HTTPSConnectionPool("
               "host='index.invalid', port=443): Max retries exceeded with url: /simple/x/ (Caused by "
               "NewConnectionError('Failed to establish a new connection: [Errno 111] Connection refused')) "
               "- skipping")
    assert pw.network_failure("Looking in indexes: x\n" + refused + "\nERROR: No matching distribution")
    missing = ("ERROR: Could not find a version that satisfies the requirement x==9.9 (from versions: 1.0)\n"
               "ERROR: No matching distribution found for x==9.9")
    assert pw.network_failure(missing) is None


def _loopback_port_nobody_listens_on() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connecting is refused


def test_unreachable_index_raises_network_unavailable(tmp_path, monkeypatch):
    """With every connection refused (a proxy on a closed loopback port), the harness says
    NetworkUnavailable (the skip), not DownloadError (a failure)."""
    import os

    proxy = f"http://127.0.0.1:{_loopback_port_nobody_listens_on()}"
    env = dict(os.environ, HTTPS_PROXY=proxy, HTTP_PROXY=proxy, https_proxy=proxy, http_proxy=proxy,
               PIP_NO_CACHE_DIR="1", NO_PROXY="", no_proxy="")
    pkg = pw.load_packages()[0]
    with pytest.raises(pw.NetworkUnavailable, match="could not reach the package index"):
        pw.ensure_wheel(pkg, tmp_path, env=env)
    assert not (tmp_path / pkg.wheel).exists()


def _smallest() -> pw.Package:
    return min(pw.load_packages(), key=lambda p: (pw.cache_dir() / p.wheel).stat().st_size)


def test_wrong_checksum_is_a_failure_not_a_skip(tmp_path, pypi_corpus):
    """A pinned wheel whose bytes differ from the pin fails the download (never skips)."""
    real = _smallest()
    forged = pw.Package(real.name, real.version, real.wheel, "0" * 64, real.files)
    with pytest.raises(pw.DownloadError, match="SHA-256"):
        pw.ensure_wheel(forged, tmp_path)


def test_missing_pin_is_a_failure_not_a_skip(tmp_path, pypi_corpus):
    """A pinned version that the index does not have (yanked, mistyped) fails the download."""
    real = _smallest()
    gone = pw.Package(real.name, "0.0.0", real.wheel.replace(real.version, "0.0.0"), real.sha256, real.files)
    with pytest.raises(pw.DownloadError, match="No matching distribution|Could not find a version"):
        pw.ensure_wheel(gone, tmp_path)


def test_cached_wheel_is_reused_and_a_corrupt_one_replaced(tmp_path, pypi_corpus):
    pkg = _smallest()
    cached = pw.ensure_wheel(pkg, pw.cache_dir())
    copy = tmp_path / pkg.wheel
    copy.write_bytes(cached.read_bytes())
    stamp = copy.stat().st_mtime_ns
    assert pw.ensure_wheel(pkg, tmp_path) == copy and copy.stat().st_mtime_ns == stamp  # no download
    copy.write_bytes(b"not a wheel")
    assert pw.ensure_wheel(pkg, tmp_path) == copy and pw.sha256_of(copy) == pkg.sha256


# -- the corpus itself -------------------------------------------------------------------------------

def test_selection_picks_the_pinned_number_of_files(pypi_corpus):
    counts = Counter(pkg.name for pkg, _ in pypi_corpus.files)
    assert {p.name: counts[p.name] for p in pypi_corpus.packages} == {p.name: p.files for p in pypi_corpus.packages}
    for (pkg, rel) in pypi_corpus.files:
        text = (pypi_corpus.root / pkg.folder / rel).read_text(encoding="utf-8", errors="replace")
        assert pw.uses_tf_distribute(text), rel
    # the rest of each package is there too, for the linter's cross-file analysis, but not linted
    for p in pypi_corpus.packages:
        assert pypi_corpus.extracted[p.name] > counts[p.name], p.name


@pytest.fixture(scope="module")
def runs(pypi_corpus):
    return {mode: pw.lint(pypi_corpus, select_all=(mode == "all")) for mode in ("default", "all")}


@pytest.mark.parametrize("mode", ["default", "all"])
def test_every_file_lints_without_error(runs, mode):
    _, entries = runs[mode]
    errors = [e for e in entries if e.get("error")]
    assert not errors, errors


@pytest.mark.parametrize("mode", ["default", "all"])
def test_findings_are_exactly_the_triaged_ones(pypi_corpus, runs, mode):
    rc, entries = runs[mode]
    found = {pw.finding_key(pypi_corpus, e): e["message"] for e in entries if not e.get("error")}
    codes = ALL_CODES if mode == "all" else set(default_codes())
    expected = {e.key for e in pw.load_expected() if e.code in codes}
    new = sorted(set(found) - expected)
    gone = sorted(expected - set(found))
    assert not new and not gone, (
        f"[{mode}] new findings (triage them: a true bug goes to expected.tsv and TRIAGE.md with its reason, "
        "a false positive is fixed in the rule):\n"
        + "\n".join("  " + "\t".join(map(str, k)) + f"\t{found[k]}" for k in new)
        + "\nexpected but no longer reported:\n" + "\n".join("  " + "\t".join(map(str, k)) for k in gone))
    assert rc == (1 if found else 0)
