"""--verify on the thread family's TF1-style and eager fixtures (issue 18), real TensorFlow on
logical CPU devices: the TF1 read-modify-write push (graph ops built once per worker, run by
`Session.run` from 8 threads) is confirmed with a count of lost updates; the unsynchronised TF1
`apply_gradients` push, the per-worker lock and the late-bound lambda are confirmed with what the
probe saw; the locked twin gets nothing.  Findings come from the `# expect:` comments."""
from __future__ import annotations

import importlib.util
import os
import re

import pytest

from tfpar_lint.finding import CONFIRMED, NOT_REPRODUCED
from tfpar_lint.verify.testing import expected_findings

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (pip install 'tfpar-lint[verify]')"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures")
SCRIPTS = [os.path.join(FIX, p) for p in ("TFP301/bad_tf1_push.py", "TFP302/bad.py", "TFP302/good.py",
                                          "TFP303/bad.py", "TFP304/bad.py")]


@pytest.fixture(scope="module")
def verified():
    from tfpar_lint.verify import verify_findings

    findings = {p: expected_findings(p) for p in SCRIPTS}
    runs = verify_findings(SCRIPTS, [f for fs in findings.values() for f in fs], devices="cpu:2", timeout=300.0)
    return {os.path.realpath(r.path): r for r in runs}, findings


def _one(verified, rel):
    runs, findings = verified
    path = os.path.join(FIX, rel)
    (f,) = findings[path]
    return f, runs[os.path.realpath(path)]


def test_tf1_read_modify_write_push_confirmed_with_lost_updates(verified):
    f, run = _one(verified, "TFP301/bad_tf1_push.py")
    v = f.verification
    assert v.status == CONFIRMED, (v.status, v.evidence, run.summary())
    m = re.search(r"(\d+) read-modify-write updates by session runs from (\d+) threads; (\d+) were computed "
                  r"from a value another update had already started from \((\d+) updates lost\)", v.evidence)
    assert m, v.evidence
    writes, threads, stale, lost = map(int, m.groups())
    assert writes == 8 * 500 and threads == 8 and lost == stale and 0 < lost < writes, v.evidence


def test_tf1_apply_gradients_push_confirmed(verified):
    f, run = _one(verified, "TFP302/bad.py")
    v = f.verification
    assert v.status == CONFIRMED, (v.status, v.evidence, run.summary())
    assert "updates lost" in v.evidence or "started while another thread's update" in v.evidence, v.evidence


def test_tf1_push_under_a_shared_lock_shows_nothing(verified):
    _runs, _findings = verified
    run = _runs[os.path.realpath(os.path.join(FIX, "TFP302/good.py"))]
    assert run.status == NOT_REPRODUCED, run.summary()
    threads = next(o for o in run.observations if o.family == "threads")
    assert threads.status == NOT_REPRODUCED, threads.summary
    assert "no lost update" in threads.summary or "none started while" in threads.summary, threads.summary
    assert "updates lost" not in threads.summary and "was still running" not in threads.summary


def test_per_worker_lock_confirmed_by_overlapping_steps(verified):
    f, run = _one(verified, "TFP304/bad.py")
    v = f.verification
    assert v.status == CONFIRMED, (v.status, v.evidence, run.summary())
    m = re.search(r"(\d+) optimizer steps on .* from (\d+) threads: (\d+) started while", v.evidence)
    assert m and int(m.group(2)) == 4 and int(m.group(3)) > 0, v.evidence


def test_late_bound_lambda_confirmed(verified):
    f, run = _one(verified, "TFP303/bad.py")
    v = f.verification
    assert v.status == CONFIRMED, (v.status, v.evidence, run.summary())
    assert "`worker` rebound after the thread was made" in v.evidence, v.evidence
