"""Runtime verifier on real TensorFlow (logical CPU devices, no mocks of TensorFlow).

All scripts (fixtures of TFP1xx-TFP7xx, tutorials, tests/data_verify) run in one
``verify_findings`` call, in parallel; the hanging script runs beside it with a
short timeout.  Findings come from the scripts' ``# expect: TFPnnn`` comments
(code and line), so these tests do not depend on the linter.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import threading
import time

import pytest

from tfpar_lint.finding import CONFIRMED, COULD_NOT_RUN, INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify.result import family_of
from tfpar_lint.verify.testing import expected_findings

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")
DATA = os.path.join(ROOT, "tests", "data_verify")
FAMILY_DIRS = sorted(d for d in glob.glob(os.path.join(FIXTURES, "TFP[1-7][0-9][0-9]")) if os.path.isdir(d))
BAD = sorted(p for d in FAMILY_DIRS for p in glob.glob(os.path.join(d, "bad*.py")))
GOOD = sorted(p for d in FAMILY_DIRS for p in glob.glob(os.path.join(d, "good*.py")))
TUTORIALS = sorted(glob.glob(os.path.join(FIXTURES, "tutorials", "*.py")))
HANG = os.path.join(DATA, "hang.py")
OWN = sorted(p for p in glob.glob(os.path.join(DATA, "*.py")) if p != HANG)
HANG_TIMEOUT = 30.0

# Findings whose verdict on TensorFlow 2.21 / Keras 3.15 is not CONFIRMED, each with the verdict
# the run must give and why (the fixture docstrings say the same).  Every other finding of a
# REQUIRED rule must be CONFIRMED.  (code, fixture path under fixtures/) -> (verdict, what TF does)
EXPECTED_VERDICTS = {
    ("TFP403", "TFP403/bad.py"): (NOT_REPRODUCED, "unseeded RNG in a replica fn: replicas differ, two runs "
                                                  "with the same seed agree"),
    # (TFP401 fires only where the replica fn or the step runs eagerly: both of its fixtures are CONFIRMED;
    # set_seed in a tf.function is applied at trace time, good_traced.py, and is not reported)
    ("TFP403", "TFP401/bad_train_step.py"): (NOT_REPRODUCED, "dropout in the replica fn: draws differ"),
    ("TFP403", "TFP404/bad.py"): (NOT_REPRODUCED, "the shuffle TFP404 flags: replicas draw different permutations "
                                                  "(that is TFP404's point), two runs with the same seed agree"),
    # set_seed runs eagerly in the replica fn right before the dropout: both replicas draw the same mask.
    ("TFP403", "TFP401/bad.py"): (CONFIRMED, "dropout right after set_seed in the replica fn: identical masks"),
    ("TFP403", "TFP401/bad_keras.py"): (CONFIRMED, "dropout right after set_seed in the eager replica fn: "
                                                   "identical masks"),
    # the shared optimizer's "Unknown variable" (TFP703) is raised while tracing, before its lazy slots could fail
    ("TFP113", "TFP703/bad.py"): (NOT_REPRODUCED, "TFP703's error comes first: no placeholder error"),
}


# The rules of issue 3 (the verifier must decide these); other TFP1xx-4xx codes
# only need a verdict with evidence.
REQUIRED = {"TFP101", "TFP102", "TFP103", "TFP105", "TFP106", "TFP201", "TFP202", "TFP203",
            "TFP301", "TFP401", "TFP402", "TFP403",
            # beyond issue 3, observed as well
            "TFP107", "TFP108", "TFP109", "TFP204", "TFP206", "TFP207",
            # issue 4: the new rules whose symptom shows on CPU
            "TFP205", "TFP208", "TFP501", "TFP502", "TFP503", "TFP504", "TFP505", "TFP506", "TFP507",
            "TFP601", "TFP603", "TFP604", "TFP606", "TFP701", "TFP702", "TFP703", "TFP704",
            # issue 18: the thread family's new rules
            "TFP302", "TFP303", "TFP304",
            # issue 17: a random draw split by replica id (the replicas' draws differ)
            "TFP404",
            # issue 19
            "TFP110", "TFP111", "TFP112", "TFP113", "TFP209", "TFP508", "TFP509", "TFP510", "TFP511", "TFP512",
            "TFP608", "TFP705",
            # issue 27: gradients from outside strategy.run, a gathered loss, a one-sided training callback, one
            # save path for every worker
            "TFP513", "TFP514", "TFP609", "TFP610"}

# Rules the verifier's design cannot show (documented on the rule page): the
# verdict must say so (INCONCLUSIVE / NOT_REPRODUCED with the reason), never CONFIRMED.
NOT_SHOWN_BY_VERIFIER = {
    "TFP602": "the fixture writes TF_CONFIG only when given --worker_hosts, which the verifier does not pass "
              "(tests/test_verify_verdicts.py has a script that writes it after the strategy: CONFIRMED)",
    "TFP607": "a misidentified chief needs a cluster with a chief task, or the branch each worker took: the "
              "verifier runs workers only and marks the flagged statement",
    "TFP210": "the verifier runs no parameter-server cluster",
}
# the word the verdict's evidence must hold for each of them
NOT_SHOWN_EVIDENCE = {"TFP602": "TF_CONFIG", "TFP607": "chief", "TFP210": "parameter-server"}
# Rules whose symptom is an error raised before any strategy exists.
NO_STRATEGY = {"TFP601"}


def _expected(code: str, path: str) -> str:
    return EXPECTED_VERDICTS.get((code, os.path.relpath(path, FIXTURES).replace(os.sep, "/")), (CONFIRMED,))[0]


def _rel(p: str) -> str:
    return os.path.relpath(p, ROOT)


def _snapshot(folders):
    """path -> sha256 of the content, for every file under ``folders``."""
    import hashlib

    out = {}
    for folder in folders:
        for dirpath, _dirnames, filenames in os.walk(folder):
            for f in filenames:
                p = os.path.join(dirpath, f)
                with open(p, "rb") as fh:
                    out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


NOTEBOOK_CELLS = [
    ("markdown", "# TFP105 in a notebook"),
    ("code", "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"),
    ("code", "%matplotlib inline\ncounter = tf.Variable(0.0)\nstrategy.run(lambda: counter.assign_add(1.0))\n"),
]


def _notebook(folder: str) -> str:
    import json

    cells = [{"cell_type": t, "source": src, "metadata": {}, **({"outputs": [], "execution_count": None}
                                                               if t == "code" else {})}
             for t, src in NOTEBOOK_CELLS]
    path = os.path.join(folder, "tfp105.ipynb")
    with open(path, "w") as f:
        json.dump({"cells": cells, "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
                   "nbformat": 4, "nbformat_minor": 5}, f)
    return path


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    from tfpar_lint.finding import Finding
    from tfpar_lint.verify import verify_findings

    notebook = _notebook(str(tmp_path_factory.mktemp("nb")))
    scripts = BAD + GOOD + TUTORIALS + OWN + [notebook]
    findings = {p: expected_findings(p) for p in scripts + [HANG] if p != notebook}
    findings[notebook] = [Finding("TFP105", "", "", notebook, 2, 1, 2, 1, cell=3)]
    before = _snapshot([FIXTURES, DATA])
    hang_out: dict = {}

    def run_hang():
        t0 = time.time()
        hang_out["runs"] = verify_findings([HANG], findings[HANG], devices="cpu:2", timeout=HANG_TIMEOUT)
        hang_out["wall"] = time.time() - t0

    th = threading.Thread(target=run_hang)
    th.start()
    t0 = time.time()
    flat = [f for p in scripts for f in findings[p]]
    runs = verify_findings(scripts, flat, devices="cpu:2", max_steps=3, timeout=180.0)
    wall = time.time() - t0
    th.join()
    after = _snapshot([FIXTURES, DATA])
    by_path = {os.path.realpath(r.path): r for r in runs}
    by_path[os.path.realpath(HANG)] = hang_out["runs"][0]
    return {"runs": by_path, "findings": findings, "wall": wall, "hang_wall": hang_out["wall"], "notebook": notebook,
            "before": before, "after": after, "order": [r.path for r in runs]}


def _run(verified, path):
    return verified["runs"][os.path.realpath(path)]


def _fam_findings(verified, path):
    return [f for f in verified["findings"][path] if family_of(f.code)]


@pytest.mark.parametrize("path", BAD, ids=_rel)
def test_bad_fixture_confirmed(verified, path):
    run = _run(verified, path)
    fs = _fam_findings(verified, path)
    assert fs, f"{_rel(path)} has no '# expect:' finding of TFP1xx-TFP7xx"
    for f in fs:
        v = f.verification
        assert v is not None, f"{f.code}:{f.line} not verified"
        why = f"{_rel(path)}:{f.line} {f.code}: {v.status}: {v.evidence}\n{run.summary()}"
        if f.code in NOT_SHOWN_BY_VERIFIER:
            assert v.status in (NOT_REPRODUCED, INCONCLUSIVE) and NOT_SHOWN_EVIDENCE[f.code] in v.evidence, why
            continue
        assert f.code in REQUIRED, f"{why}\n{f.code} is neither REQUIRED nor NOT_SHOWN_BY_VERIFIER: say which"
        # Where TensorFlow 2.21 does not show the symptom the verifier must say so (NOT_REPRODUCED),
        # never confirm; everywhere else it must confirm.
        assert v.status == _expected(f.code, path), why
        assert v.evidence and v.seconds > 0, why
        assert len(v.devices) >= 2, why
        words = EVIDENCE_WORDS.get((f.code, os.path.relpath(path, FIXTURES).replace(os.sep, "/")))
        assert words is None or words in v.evidence, f"{why}\nthe evidence lacks {words!r}"
        if not f.code.startswith("TFP3") and f.code != "TFP108" and f.code not in NO_STRATEGY:  # no strategy needed
            assert v.replicas >= 2, why


# Words the CONFIRMED evidence must hold where one symptom is not enough to tell (issue 27's rules:
# gradients applied N times, a gathered loss, one-sided callbacks, one save path for every worker).
EVIDENCE_WORDS = {
    ("TFP513", "TFP513/bad.py"): "2.00x",
    ("TFP513", "TFP513/bad_untouched.py"): "tuple index out of range",
    ("TFP514", "TFP514/bad.py"): "2.00x",
    ("TFP514", "TFP514/bad_merge_call.py"): "2.00x",
    ("TFP609", "TFP609/bad.py"): "differ",
    ("TFP609", "TFP609/bad_custom.py"): "differ",
    ("TFP609", "TFP609/bad_early_stopping.py"): "UnavailableError",
    ("TFP610", "TFP610/bad.py"): "all wrote",
    ("TFP610", "TFP610/bad_cli.py"): "all wrote",
}


# Good fixtures correct only on separate machines: the verifier's local cluster runs its workers on
# one machine, so a local path every worker writes collides there (the verdict must say so).
ONE_MACHINE = {"TFP610/good_separate_machines.py": "share this machine's disk"}


@pytest.mark.parametrize("path", GOOD + TUTORIALS, ids=_rel)
def test_good_fixture_and_tutorial_not_reproduced(verified, path):
    run = _run(verified, path)
    said = ONE_MACHINE.get(os.path.relpath(path, FIXTURES).replace(os.sep, "/"))
    if said is not None:
        seen = [d["verification"]["evidence"] for d in run.runtime_findings if d["code"] == "TFP604"]
        assert seen and all(said in e for e in seen), run.summary()
        return
    assert run.outcome in ("ok", "stopped"), run.summary()
    assert run.status == NOT_REPRODUCED, run.summary()
    assert {o.family for o in run.observations} == {"scope", "input", "threads", "randomness", "loss", "lifecycle",
                                                    "execution"}
    assert not _fam_findings(verified, path), f"{_rel(path)} is a good script with '# expect:' lines"
    # A correct script gets no finding at runtime either.
    assert run.runtime_findings == [], [(d["code"], d["line"], d["verification"]["evidence"])
                                        for d in run.runtime_findings]


@pytest.mark.parametrize("path", [p for p in OWN if expected_findings(p)], ids=_rel)
def test_own_bad_scripts(verified, path):
    run = _run(verified, path)
    name = os.path.basename(path)
    for f in _fam_findings(verified, path):
        v = f.verification
        why = f"{name}:{f.line} {f.code}: {v.status}: {v.evidence}\n{run.summary()}"
        if name == "crash_early.py":
            assert v.status == INCONCLUSIVE and "before line 7 ran" in v.evidence and "KeyError" in v.evidence, why
        elif f.code == "TFP403":
            assert v.status == NOT_REPRODUCED and "two runs with the same global seed" in v.evidence, why
        else:
            assert v.status == CONFIRMED, why


@pytest.mark.parametrize("path", [p for p in OWN if not expected_findings(p)], ids=_rel)
def test_own_good_scripts(verified, path):
    run = _run(verified, path)
    assert run.status == NOT_REPRODUCED, run.summary()


def test_crash_reported_with_error(verified):
    run = _run(verified, os.path.join(DATA, "crash_early.py"))
    assert run.outcome == "error" and run.exit_status == 1
    assert run.error.startswith("KeyError: 'global_batch'") and "crash_early.py:6" in run.error
    assert run.status == COULD_NOT_RUN and run.reason.startswith("crash before any training step: KeyError")


def test_hang_killed_within_timeout(verified):
    import re

    run = _run(verified, HANG)
    (f,) = verified["findings"][HANG]
    # on a busy machine the time-out is scaled with the load measured at the start, and the notes say so
    scaled = [re.search(r"time-outs scaled x([\d.]+) \(--timeout [\d.]+ s -> (\d+) s\)", n) for n in run.notes]
    timeout = next((float(m.group(2)) for m in scaled if m), HANG_TIMEOUT)
    assert run.outcome == "hung" and run.exit_status is None, run.summary()
    assert timeout - 1 <= run.seconds < timeout + 10, run.summary()
    assert verified["hang_wall"] < timeout + 15
    assert run.hang_location.startswith("hang.py:8 in <module>"), run.hang_location
    assert f.verification.status == INCONCLUSIVE
    assert f.verification.evidence.startswith(f"hung after {timeout:.0f} s at hang.py:8"), f.verification.evidence


def test_two_worker_local_cluster(verified):
    bad = _run(verified, os.path.join(DATA, "mwms_bad_dataset_fn.py"))
    good = _run(verified, os.path.join(DATA, "mwms_good.py"))
    for run in (bad, good):
        assert run.workers == 2 and run.replicas == 2, run.summary()
        assert any("local cluster of 2 workers" in n for n in run.notes), run.summary()
        assert [d.split("/task:")[1][0] for d in run.devices] == ["0", "1"], run.devices
        assert "worker0/CPU:0,worker1/CPU:0" in run.summary()
    (f,) = verified["findings"][os.path.join(DATA, "mwms_bad_dataset_fn.py")]
    assert f.verification.status == CONFIRMED
    assert "every worker reads the same data" in f.verification.evidence, f.verification.evidence
    assert good.status == NOT_REPRODUCED, good.summary()
    for fixture in ("TFP609/bad.py", "TFP610/bad.py", "TFP609/good.py"):  # multi-worker fixtures: a cluster
        run = _run(verified, os.path.join(FIXTURES, fixture))
        assert run.workers == 2, run.summary()


def test_notebook_cells_run_as_one_script(verified):
    (f,) = verified["findings"][verified["notebook"]]
    assert f.verification.status == CONFIRMED, f.verification
    assert "(cell 3, line 2 = line " in f.verification.evidence


def test_custom_loop_and_fit_are_bounded(verified):
    loop = _run(verified, os.path.join(DATA, "scope_good.py"))
    assert loop.outcome == "stopped" and loop.steps == 3, loop.summary()
    assert any(n.startswith("stopped after 3 ") for n in loop.notes), loop.notes
    fit = _run(verified, os.path.join(DATA, "keras_mnist_fit.py"))
    assert fit.outcome == "ok", fit.summary()
    assert any("Keras fit bounded to 3 steps per epoch" in n for n in fit.notes), fit.notes


def test_keras_datasets_offline_are_synthetic(verified):
    run = _run(verified, os.path.join(DATA, "keras_mnist_fit.py"))
    if not any("synthetic" in n for n in run.notes):
        pytest.skip("the MNIST file is cached or the network is reachable: the real data was used")
    assert any("keras.datasets.mnist.load_data replaced by synthetic arrays" in n for n in run.notes)


def test_script_folders_not_written(verified):
    """No fixture or script file changed (content hash before and after the runs), and no
    new file appeared next to the scripts."""
    before, after = verified["before"], verified["after"]
    changed = sorted(p for p in before if p in after and before[p] != after[p])
    assert not changed, changed
    # fixtures/ may be edited by others while the suite runs: only new non-source files count there.
    new = [p for p in after if p not in before and not (p.startswith(FIXTURES + os.sep) and p.endswith((".py", ".md")))]
    assert not new, new


def test_scriptrun_is_printable(verified):
    from tfpar_lint.verify import ScriptRun

    for run in verified["runs"].values():
        s = run.summary()
        assert "\n" not in s and s.startswith(run.path)
        d = run.to_dict()
        assert d["status"] == run.status
        assert ScriptRun.from_dict(d).to_dict() == d
