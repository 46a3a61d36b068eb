"""The verdicts of the issue-27 rules on real TensorFlow (2 logical CPU devices; the multi-worker
fixtures as a 2-worker cluster on loopback): each bad fixture CONFIRMED by its symptom, each good one
given nothing.  (tests/test_verify.py runs every fixture; this module runs these alone, with the
evidence each verdict must carry.)"""
from __future__ import annotations

import importlib.util
import os

import pytest

from tfpar_lint.finding import CONFIRMED, NOT_REPRODUCED
from tfpar_lint.verify.testing import expected_findings

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
]

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
# fixture -> words the CONFIRMED evidence of its finding must hold
BAD = {
    "TFP513/bad.py": "2.00x",
    "TFP513/bad_untouched.py": "tuple index out of range",
    "TFP514/bad.py": "2.00x",
    "TFP514/bad_merge_call.py": "2.00x",
    "TFP609/bad.py": "differ",
    "TFP609/bad_custom.py": "differ",
    "TFP609/bad_early_stopping.py": "UnavailableError",
    "TFP610/bad.py": "all wrote",
    "TFP610/bad_cli.py": "all wrote",
}
GOOD = ["TFP513/good.py", "TFP514/good.py", "TFP609/good.py", "TFP610/good.py"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from tfpar_lint.verify import verify_findings

    paths = [os.path.join(FIXTURES, p) for p in list(BAD) + GOOD]
    findings = {p: expected_findings(p) for p in paths}
    out = verify_findings(paths, [f for fs in findings.values() for f in fs], devices="cpu:2", timeout=150.0,
                          workdir=str(tmp_path_factory.mktemp("verify27")))
    rel = lambda p: os.path.relpath(p, FIXTURES).replace(os.sep, "/")  # noqa: E731
    return {rel(r.path): r for r in out}, {rel(p): fs for p, fs in findings.items()}


@pytest.mark.parametrize("fixture", sorted(BAD))
def test_bad_fixture_confirmed(runs, fixture):
    run, findings = runs[0][fixture], runs[1][fixture]
    code = fixture.split("/")[0]
    verdicts = [(f.code, f.verification.status, f.verification.evidence) for f in findings if f.code == code]
    assert verdicts and all(s == CONFIRMED for _c, s, _e in verdicts), run.summary()
    assert all(BAD[fixture] in e for _c, _s, e in verdicts), verdicts


@pytest.mark.parametrize("fixture", GOOD)
def test_good_fixture_not_reproduced(runs, fixture):
    run = runs[0][fixture]
    assert run.outcome in ("ok", "stopped"), run.summary()
    assert run.status == NOT_REPRODUCED, run.summary()
    assert run.runtime_findings == [], [(d["code"], d["line"], d["verification"]["evidence"])
                                        for d in run.runtime_findings]


def test_the_cluster_fixtures_ran_as_two_workers(runs):
    for fixture in ("TFP609/bad.py", "TFP610/bad.py", "TFP609/good.py"):
        assert runs[0][fixture].workers == 2, runs[0][fixture].summary()
