"""A two-worker local cluster stops every worker at the same collective step (real TensorFlow).

A flagged line that only worker 1 runs leaves worker 0 with a line "still to come" for the
whole run: deciding alone, worker 1 would stop at the step bound while worker 0 went on into
the next step's collective and failed with UnavailableError once its peer had gone.  The
workers agree on the step instead (``Recorder.agree``).
"""
from __future__ import annotations

import importlib.util

import pytest

from tfpar_lint.finding import Finding

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
]

SCRIPT = """\
import json
import os

import tensorflow as tf

task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index", 0)
strategy = tf.distribute.MultiWorkerMirroredStrategy()


@tf.function
def step():
    out = strategy.run(lambda: tf.constant(1.0))
    return strategy.reduce("SUM", out, axis=None)


for i in range(100):
    total = step()
    if task == 1:
        print("worker 1 at step", i, float(total))
"""
FLAGGED = 19  # the print only worker 1 runs


def test_workers_stop_at_the_same_step(tmp_path):
    from tfpar_lint.verify import verify_findings

    (tmp_path / "s").mkdir()
    path = tmp_path / "s" / "chief_differs.py"  # the run folder must not be inside the script's folder
    path.write_text(SCRIPT)
    assert SCRIPT.splitlines()[FLAGGED - 1].strip().startswith("print(")
    f = Finding("TFP604", "", "", str(path), FLAGGED, 1, FLAGGED, 1)
    (run,) = verify_findings([str(path)], [f], devices="cpu:2", max_steps=2, timeout=150.0, workdir=str(tmp_path / "w"))
    assert run.workers == 2, run.summary()
    assert run.outcome == "stopped", run.summary()
    assert "UnavailableError" not in run.error and not run.hang_location, run.summary()
    # both stopped by the step bound, after the same number of steps (the hard cap: worker 0
    # still had the flagged line to come)
    assert any(n.startswith("stopped after 20 steps") for n in run.notes), run.notes
    assert run.steps == 20, run.summary()
    assert "the workers of the local cluster agreed to stop at the same step" in run.notes, run.notes


def test_unsharded_workers_are_a_runtime_finding_without_the_linter():
    """fixtures/TFP204/bad.py run with no static finding: the workers read the same data from
    a dataset distributed with AutoShardPolicy.OFF, reported on its own (RUNTIME) at the
    experimental_distribute_dataset call; the corrected fixture gets nothing."""
    import os

    from tfpar_lint.finding import RUNTIME
    from tfpar_lint.verify import verify_findings

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "TFP204")
    bad, good = os.path.join(root, "bad.py"), os.path.join(root, "good.py")
    runs = {os.path.basename(r.path): r for r in verify_findings([bad, good], [], devices="cpu:2", timeout=150.0)}
    got = [(d["code"], d["line"], d["verification"]["status"]) for d in runs["bad.py"].runtime_findings]
    assert ("TFP204", 15, RUNTIME) in got, runs["bad.py"].summary()
    assert "read the same data" in runs["bad.py"].runtime_findings[0]["verification"]["evidence"]
    assert runs["good.py"].runtime_findings == [], runs["good.py"].summary()
