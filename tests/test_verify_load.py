"""The verdicts of ``--verify`` do not depend on how busy the machine is (issue 31).

The runnable truth set (``../shared/realcode/runnable/RUNNABLE.tsv``: its scripts, read where they
are, and its ``seeds/NNN_exK.py`` rows, code block K of the seed document NNN of ``../shared/seeds``,
written to a temporary folder) and the multi-worker fixtures (local clusters: the runs a busy machine
broke) are verified twice with the CLI (``--verify --devices cpu:2 --format json``, one call per
pass): as the machine is, then while 2 x CPUs processes spin on the CPUs.  Every script must get the
same findings with the same verdicts (a script that could not run is an E904 record, so its verdict
is compared too), and the truth set's rows must be what RUNNABLE.tsv says (bad: a CONFIRMED or
RUNTIME finding; good: none) in both passes.  Two multi-worker fixtures run beside the truth set;
``benchmarks/verify_load.py`` holds the functions and runs the same comparison on every multi-worker
fixture, or every fixture (the numbers are in runtime_verify/RESULTS.md).
"""
from __future__ import annotations

import importlib.util
import os

import pytest

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
REALCODE = os.path.join(SHARED, "realcode")
SEEDS = os.path.join(SHARED, "seeds")

pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
]


# Two of the multi-worker fixtures (the runs a busy machine broke: local clusters), one with a mistake
# and one without; benchmarks/verify_load.py runs every one of them (the numbers: runtime_verify/RESULTS.md).
CLUSTER = [os.path.join(ROOT, "fixtures", "TFP609", "bad.py"), os.path.join(ROOT, "fixtures", "TFP609", "good.py")]


def _bench():
    spec = importlib.util.spec_from_file_location("tfpar_bench_verify_load",
                                                  os.path.join(ROOT, "benchmarks", "verify_load.py"))
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def runs():
    import shutil

    if not os.path.isfile(os.path.join(REALCODE, "runnable", "RUNNABLE.tsv")) or not os.path.isdir(SEEDS):
        pytest.skip(f"the runnable truth set ({REALCODE}/runnable) or the seeds ({SEEDS}) are not on this machine")
    bench = _bench()
    folder = bench.readable_folder("tfpar-load-test-")  # pytest's tmp_path is private to its user
    try:
        truth = bench.truth_rows(REALCODE, SEEDS, folder)
        res = bench.idle_and_loaded([p for p, _ in truth] + CLUSTER, folder, load=2.0)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    res["truth"] = truth
    res["bench"] = bench
    return res


def test_both_passes_ran_every_script(runs):
    assert runs["spinners"] == 2 * runs["bench"].cpu_count()
    for which in ("idle", "loaded"):
        assert runs[which + "_run"]["exit"] in (0, 1, 2), runs[which + "_run"]["stderr"]
        assert set(runs[which]) == {os.path.realpath(p) for p in runs["paths"]}
    assert len(runs["truth"]) >= 10 and any(k == "good" for _, k in runs["truth"])


@pytest.mark.parametrize("which", ["idle", "loaded"])
def test_truth_rows_as_labelled(runs, which):
    missed = {os.path.basename(p): (kind, runs[which][os.path.realpath(p)]) for p, kind in runs["truth"]
              if runs["bench"].misses_truth(runs[which][os.path.realpath(p)], kind)}
    assert not missed, f"{which}: {missed}\n{runs[which + '_run']['stderr']}"


def test_same_verdicts_idle_and_under_load(runs):
    diff = runs["bench"].differences(runs)
    evidence = {k: v for k, v in runs["loaded_run"]["evidence"].items() if any(k.startswith(p) for p in diff)}
    assert not diff, (f"verdicts that differ (idle, loaded): {diff}\nloaded run's evidence: {evidence}\n"
                      f"loaded run: {runs['loaded_run']['seconds']} s, load {runs['loaded_run']['load_start']}")


def test_a_starved_run_says_the_machine_was_too_busy_and_a_hang_does_not(monkeypatch):
    """Under 4 x CPUs spinning processes, with the time-outs not scaled (TFPAR_VERIFY_LOAD_SCALE=1):
    a script that computes until its time-out waited for a CPU longer than it ran, and the reason
    says so with the figures; a script that hangs (sleeps) did not, and is reported as hung."""
    from tfpar_lint.finding import COULD_NOT_RUN
    from tfpar_lint.verify import verify_findings

    bench = _bench()
    spin = os.path.join(ROOT, "tests", "data_verify", "load", "spin.py")
    hang = os.path.join(ROOT, "tests", "data_verify", "hang.py")
    monkeypatch.setenv("TFPAR_VERIFY_LOAD_SCALE", "1")
    with bench.cpu_load(4 * bench.cpu_count()):
        runs = {os.path.basename(r.path): r for r in verify_findings([spin, hang], [], devices="cpu:2", timeout=12.0)}
    starved, hung = runs["spin.py"], runs["hang.py"]
    assert starved.status == COULD_NOT_RUN and hung.status == COULD_NOT_RUN
    assert starved.reason.startswith("timeout: the machine was too busy (load average "), starved.reason
    assert "waited" in starved.reason and "the script was at spin.py:" in starved.reason, starved.reason
    assert hung.reason.startswith("timeout: hung at hang.py:8"), hung.reason


def test_the_time_outs_scale_with_the_load_measured_at_the_start(monkeypatch):
    """busy.measure() sees 2 x CPUs spinning processes (0.1 s of CPU work takes about 2.5 times as long),
    and a scale of 2.5 turns --timeout 4 into a 10 s deadline, said in the notes and the reason."""
    from tfpar_lint.verify import busy, verify_findings

    bench = _bench()
    monkeypatch.delenv("TFPAR_VERIFY_LOAD_SCALE", raising=False)
    with bench.cpu_load(2 * bench.cpu_count()):
        import time

        time.sleep(1.0)
        load = busy.measure()
    assert load.scale >= 1.5 and not load.forced, load
    monkeypatch.setenv("TFPAR_VERIFY_LOAD_SCALE", "2.5")
    assert busy.measure().scale == 2.5
    hang = os.path.join(ROOT, "tests", "data_verify", "hang.py")
    (run,) = verify_findings([hang], [], devices="cpu:2", timeout=4.0)
    assert any("time-outs scaled x2.5" in n and "(--timeout 4 s -> 10 s)" in n for n in run.notes), run.notes
    assert run.outcome == "hung" and run.seconds >= 9.5, run.summary()
    # idle, a sleeping script is "hung"; on a machine busier than the scale allowed for, its start-up
    # may have waited for a CPU as long as it ran ("the machine was too busy"): the deadline is 10 s both ways
    assert run.reason.startswith(("timeout: hung at hang.py:8", "timeout: the machine was too busy")), run.reason
    assert "hang.py:8" in run.reason and "killed after 10 s" in run.reason, run.reason
