"""Runtime verifier parts that need no TensorFlow: markers, devices, reports, parsing."""
from __future__ import annotations

import ast
import os

import pytest

from tfpar_lint.finding import CONFIRMED, COULD_NOT_RUN, INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify.devices import DeviceRequest, parse_devices
from tfpar_lint.verify.result import FamilyObservation, ScriptRun, family_of
from tfpar_lint.verify.source import instrument
from tfpar_lint.verify.testing import expected_findings


def test_markers_keep_line_numbers():
    src = (
        "import x\n"
        "if a:  b = f(1,\n"
        "   2)\n"
        "elif c > 3:\n"
        "    pass\n"
        "for i in range(3):\n"
        "    with s.scope() as q, t():\n"
        "        y = g('\u00fc'); z = 2\n"
        "@dec\n"
        "def f(): return 1\n"
    )
    new, marks = instrument(src, [1, 3, 4, 6, 7, 8, 10, 99])
    assert len(new.splitlines()) == len(src.splitlines())
    ast.parse(new)
    assert marks == {1: 1, 3: 2, 4: 4, 6: 6, 7: 7, 8: 8, 10: 10}
    lines = new.splitlines()
    assert lines[0] == "__tfpar_mark__(1); import x"
    assert lines[3] == "elif (__tfpar_mark__(4) or (c > 3)):"
    assert lines[5] == "for i in __tfpar_mark__(6, (range(3))):"
    assert lines[7].strip().startswith("__tfpar_mark__(8); y = g(")


def test_markers_leave_unparsable_text_alone():
    assert instrument("def (:\n", [1]) == ("def (:\n", {})


@pytest.mark.parametrize("spec,want", [
    ("auto", DeviceRequest("auto")), (None, DeviceRequest("auto")), ("cpu", DeviceRequest("cpu", 2)),
    ("cpu:4", DeviceRequest("cpu", 4)), ("gpu", DeviceRequest("gpu")), ("GPU:2", DeviceRequest("gpu", 2)),
])
def test_parse_devices(spec, want):
    assert parse_devices(spec) == want


@pytest.mark.parametrize("spec", ["tpu:3", "cpu:0", "gpu:x", "2"])
def test_parse_devices_rejects(spec):
    with pytest.raises(ValueError):
        parse_devices(spec)


def test_family_of():
    assert family_of("TFP101") == "scope" and family_of("TFP203") == "input"
    assert family_of("TFP301") == "threads" and family_of("TFP403") == "randomness"
    assert family_of("TFP501") == "loss" and family_of("TFP604") == "lifecycle" and family_of("TFP701") == "execution"
    assert family_of("TFP801") is None and family_of("E902") is None


def test_expected_findings(tmp_path):
    p = tmp_path / "s.py"
    p.write_text("a = 1\nb = 2  # expect: TFP101, TFP105\nc = 3  # Expect: TFP201\n")
    got = [(f.code, f.line) for f in expected_findings(str(p))]
    assert got == [("TFP101", 2), ("TFP105", 2), ("TFP201", 3)]


@pytest.mark.parametrize("comment", ["# expect: tfp201", "# expect: TFP299", "# expect: TFP104"])
def test_expected_findings_uses_the_one_strict_parser(tmp_path, comment):
    from tfpar_lint.expectations import ExpectationError

    p = tmp_path / "s.py"
    p.write_text(f"a = 1\nb = 2  {comment}\n")
    with pytest.raises(ExpectationError, match="s.py:2"):
        expected_findings(str(p))


def test_scriptrun_summary_and_dict():
    run = ScriptRun(path="train.py", outcome="stopped", exit_status=0, seconds=3.25, replicas=2,
                    devices=["/job:localhost/replica:0/task:0/device:CPU:0", "/device:CPU:1"],
                    notes=["stopped after 3 steps of step"],
                    observations=[FamilyObservation("scope", "TFP1xx", NOT_REPRODUCED, "ok"),
                                  FamilyObservation("input", "TFP2xx", CONFIRMED, "same data")])
    s = run.summary()
    assert s.startswith("train.py: stopped in 3.2 s, 2 replicas on CPU:0,CPU:1;")
    assert "input probe: same data" in s and "\n" not in s and "CONFIRMED" not in s
    assert run.status == CONFIRMED
    assert ScriptRun.from_dict(run.to_dict()) == run
    hung = ScriptRun(path="t.py", outcome="hung", hang_location="t.py:8 in <module>")
    assert hung.status == COULD_NOT_RUN and hung.unverified and "hung at t.py:8 in <module>" in hung.summary()


def test_hang_location_from_faulthandler_dump(tmp_path):
    from tfpar_lint.verify.driver import _hang_location

    script = str(tmp_path / "train.py")
    # a place the dump names must be a line the script has (text the script wrote is not evidence)
    (tmp_path / "train.py").write_text("import threading\n" + "pass\n" * 9)
    child = os.path.join("x", "tfpar_lint", "verify", "child.py")
    dump = tmp_path / "stacks.txt"
    dump.write_text(
        "Timeout (0:00:20)!\n"
        "Thread 0x00007f1 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 320 in wait\n'
        "\n"
        "Thread 0x00007f2 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 327 in wait\n'
        f'  File "{script}", line 8 in <module>\n'
        f'  File "{child}", line 150 in _run_script\n'
    )
    assert _hang_location(str(dump), script) == "train.py:8 in <module> (innermost: threading.py:327 in wait)"


def test_cluster_detection_ignores_docstrings():
    from tfpar_lint.verify.driver import _MWMS, _code_only

    doc = '"""Under MultiWorkerMirroredStrategy this would..."""\nimport tensorflow as tf\n'
    assert not _MWMS.search(_code_only(doc))
    assert _MWMS.search(_code_only("import tensorflow as tf\ns = tf.distribute.MultiWorkerMirroredStrategy()\n"))


# -- a local cluster stops at the same step on every worker ------------------------------------

def _recorders(folder, n=2):
    from tfpar_lint.verify.runtime import Recorder

    out = []
    for i in range(n):
        r = Recorder("/x/train.py", 3, {})
        r.sync_dir, r.num_workers, r.worker_index, r.sync_wait = str(folder), n, i, 5.0
        out.append(r)
    return out


def _decide(recs, tag, wishes):
    import threading

    got = [None] * len(recs)

    def run(i):
        got[i] = recs[i].agree(tag, wishes[i])

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(recs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    return got


@pytest.mark.parametrize("wishes, want", [((True, True), True), ((True, False), False), ((False, True), False),
                                          ((False, False), False)])
def test_workers_agree_on_the_step_bound(tmp_path, wishes, want):
    """Each worker's wish to stop depends on its own flagged lines still to come; stopping
    alone would leave the peer blocked in the next collective. All stop, or none."""
    recs = _recorders(tmp_path)
    assert _decide(recs, "step-train-3", wishes) == [want, want]


def test_worker_whose_peer_left_stops_without_waiting(tmp_path):
    import time

    a, b = _recorders(tmp_path)
    b.leave()
    t0 = time.time()
    assert a.agree("step-train-3", True) is True
    assert time.time() - t0 < a.sync_wait  # behaviour: it did not wait for the peer's decision
    single = _recorders(tmp_path, 1)[0]
    single.sync_dir = None
    assert single.agree("x", False) is False and single.agree("x", True) is True


def test_step_bound_race_is_reported_as_it_was(monkeypatch, tmp_path):
    """A run where one worker hit UnavailableError while its peer stopped at the step bound is
    never re-run and never NOT_REPRODUCED: it stays an error, the finding INCONCLUSIVE, and a
    note says what happened."""
    from tfpar_lint.finding import Finding
    from tfpar_lint.verify import driver, report
    from tfpar_lint.verify.probes import RunData

    err = {"type": "UnavailableError", "message": "Collective ops is aborted by: peer left", "frames": [],
           "script_lines": [9], "location": "t.py:9"}
    workers = [{"outcome": "stopped", "notes": [], "steps": 3, "marks": {"9": 1}, "ran": {"1": 1}, "probes": {}},
               {"outcome": "error", "error": err, "notes": [], "steps": 3, "marks": {"9": 1}, "ran": {"1": 1},
                "probes": {}}]
    calls = []

    def fake_now(job, ctx, rerun):
        calls.append(rerun)
        data = RunData(path=job.script, workers=[dict(w) for w in workers], outcome="error", seconds=1.0)
        data.exit_codes, data.killed, data.driver_notes = [0, 1], [False, False], []
        return data

    monkeypatch.setattr(driver, "_execute_now", fake_now)
    f = Finding("TFP601", "", "", str(tmp_path / "t.py"), 9, 1, 9, 1)
    job = driver._Job(index=0, script=str(tmp_path / "t.py"), findings=[f], multiworker=True, uses_threads=False,
                      rerun=False, lines=[9])
    import threading

    ctx = {"slots": driver._Slots(2), "cancel": threading.Event()}
    data = driver._execute(job, ctx, False)
    assert calls == [False]  # run once, not re-run
    assert any("UnavailableError" in n and "not re-run" in n for n in data.driver_notes)
    run = report.conclude(job, data, "t.py")
    assert run.outcome == "error"
    assert f.verification.status != NOT_REPRODUCED, f.verification
    assert any("not re-run" in n for n in run.notes)


# -- --devices: the device plan, decided from the number of GPUs alone -------------------------

@pytest.mark.parametrize("spec, gpus, names, visible, split, split_gpu", [
    ("auto", 0, ["/device:CPU:0", "/device:CPU:1"], (), 2, False),
    ("auto", 1, ["/device:GPU:0", "/device:GPU:1"], (0,), 2, True),  # one GPU split into 2 logical GPUs
    ("auto", 2, ["/device:GPU:0", "/device:GPU:1"], (0, 1), 0, False),  # all GPUs
    ("auto", 4, [f"/device:GPU:{i}" for i in range(4)], (0, 1, 2, 3), 0, False),
    ("gpu", 1, ["/device:GPU:0", "/device:GPU:1"], (0,), 2, True),
    ("gpu", 3, ["/device:GPU:0", "/device:GPU:1", "/device:GPU:2"], (0, 1, 2), 0, False),
    ("gpu:3", 1, ["/device:GPU:0", "/device:GPU:1", "/device:GPU:2"], (0,), 3, True),
    ("gpu:2", 4, ["/device:GPU:0", "/device:GPU:1"], (0, 1), 0, False),
    ("cpu:4", 2, [f"/device:CPU:{i}" for i in range(4)], (), 4, False),  # GPUs hidden
    ("cpu:1", 0, ["/device:CPU:0"], (), 0, False),
])
def test_device_plan(spec, gpus, names, visible, split, split_gpu):
    from tfpar_lint.verify.devices import plan

    p = plan(parse_devices(spec), gpus, memory_mb=1024)
    assert (list(p.names), p.visible, p.split, p.split_gpu) == (names, visible, split, split_gpu)
    if split_gpu:
        assert p.memory_mb == 1024 and p.note == f"GPU 0 split into {len(names)} logical GPUs of 1024 MiB"


@pytest.mark.parametrize("gpus, worker, visible, split", [(2, 1, (1,), 0), (4, 0, (0,), 0), (1, 1, (0,), 1),
                                                          (0, 1, (), 0)])
def test_device_plan_for_cluster_workers(gpus, worker, visible, split):
    from tfpar_lint.verify.devices import plan

    p = plan(parse_devices("auto"), gpus, worker_index=worker, num_workers=2)
    assert len(p.names) == 1 and (p.visible, p.split) == (visible, split)
    assert p.kind == ("gpu" if gpus else "cpu")


def test_device_plan_gpu_without_gpu_is_an_error():
    from tfpar_lint.verify.devices import plan

    with pytest.raises(RuntimeError, match="no GPU"):
        plan(parse_devices("gpu"), 0)


def test_scope_evidence_names_the_compile_line_itself():
    """A model built outside the scope and compiled inside a helper: the evidence names the
    ``compile`` call (innermost script line), not the call of the helper."""
    from tfpar_lint.verify.probes import RunData
    from tfpar_lint.verify.probes.scope import _misuses

    obs = {"objects": [{"kind": "model", "cls": "Sequential", "strategy": None, "lines": [5]}],
           "compiles": [{"model": 0, "strategy": 0, "model_strategy": None, "optimizer": None, "metrics": [],
                         "lines": [12, 30]}],  # compile at line 12, inside a function called at line 30
           "fits": [], "applies": []}
    run = RunData(path="t.py", workers=[{"strategies": [{"type": "MirroredStrategy", "replicas": 2}],
                                         "probes": {"scope": obs}}], outcome="ok", seconds=1.0)
    ((ob, use),) = _misuses(run, obs)
    assert "compiled under MirroredStrategy (2 replicas) (line 12)" in use, use


# -- runtime findings: one per mistake, never beside a static finding of it ---------------------

def _race_run(path):
    from tfpar_lint.verify.probes import RunData

    var = {"name": "v:0", "first": 0.0, "expected": 5.0, "final": 1.0, "writes": 5, "stale": 2, "threads": 5,
           "sites": {"10": {"writes": 5, "stale": 2, "kind": "assign"}}, "kinds": ["assign"], "unit": 1.0,
           "graph_writes": False}
    return RunData(path=path, workers=[{"probes": {"threads": {"variables": [var]}}}], outcome="ok", seconds=1.0)


def _job(path, findings, cell_map=None):
    from tfpar_lint.verify import driver, report

    return driver._Job(index=0, script=path, findings=findings, multiworker=False, uses_threads=True, rerun=False,
                       cell_map=cell_map or {})


def _static(path, code, line, status):
    from tfpar_lint.finding import Finding, Verification

    f = Finding(code, "", "", path, line, 1, line, 1)
    f.verification = Verification(status=status, evidence="static verdict")
    return f


def test_runtime_finding_where_nothing_static_covers_it():
    from tfpar_lint.finding import RUNTIME
    from tfpar_lint.verify import driver, report

    (g,) = report.runtime_findings(_job("t.py", []), _race_run("t.py"), "t.py")
    assert (g.code, g.line, g.verification.status, g.name) == ("TFP301", 10, RUNTIME,
                                                               "thread-unlocked-read-modify-write")
    assert "5 updates from 5 threads should give 5, the final value is 1" in g.verification.evidence
    # a finding of another family elsewhere does not cover it
    other = _static("t.py", "TFP201", 10, CONFIRMED)
    assert [x.code for x in report.runtime_findings(_job("t.py", [other]), _race_run("t.py"), "t.py")] == ["TFP301"]


@pytest.mark.parametrize("line, status", [(10, NOT_REPRODUCED), (11, INCONCLUSIVE), (10, CONFIRMED)])
def test_static_finding_at_the_place_gets_the_verdict(line, status):
    from tfpar_lint.verify import driver, report

    f = _static("t.py", "TFP301", line, status)
    assert report.runtime_findings(_job("t.py", [f]), _race_run("t.py"), "t.py") == []
    assert f.verification.status == CONFIRMED
    if status != CONFIRMED:
        assert "threads should give 5" in f.verification.evidence


def test_confirmed_static_finding_of_the_code_elsewhere_covers_it():
    from tfpar_lint.verify import driver, report

    f = _static("t.py", "TFP301", 40, CONFIRMED)
    assert report.runtime_findings(_job("t.py", [f]), _race_run("t.py"), "t.py") == []
    g = _static("t.py", "TFP301", 40, NOT_REPRODUCED)  # not confirmed: a different place, a finding of its own
    assert [x.line for x in report.runtime_findings(_job("t.py", [g]), _race_run("t.py"), "t.py")] == [10]


def test_runtime_finding_in_a_notebook_points_into_its_cell():
    from tfpar_lint.verify import driver, report

    (g,) = report.runtime_findings(_job("n.ipynb", [], {(3, 2): 10, (3, 3): 11}), _race_run("n.ipynb"), "n.ipynb")
    assert (g.cell, g.line) == (3, 2)


def test_reports_carry_the_end_of_the_output():
    from tfpar_lint.verify.result import OUTPUT_IN_REPORTS

    run = ScriptRun(path="t.py", stdout="x" * (3 * OUTPUT_IN_REPORTS) + "END", stderr="short")
    d = run.to_dict()
    assert len(d["stdout"]) == OUTPUT_IN_REPORTS and d["stdout"].endswith("END") and d["stdout"].startswith("[...]")
    assert d["stderr"] == "short"
    assert ScriptRun.from_dict(d).to_dict() == d


def test_output_relay_caps_and_keeps_the_tail(tmp_path):
    import threading

    from tfpar_lint.verify.procs import OutputRelay

    fifo = str(tmp_path / "out.fifo")
    os.mkfifo(fifo)
    relay = OutputRelay(fifo, str(tmp_path / "out.txt"), cap=1000, tail=100)

    def write():
        with open(fifo, "wb") as f:
            for i in range(500):
                f.write(b"%04d......\n" % i)  # 11 bytes a line, 5500 in all

    t = threading.Thread(target=write)
    t.start()
    t.join(30)
    relay.finish(10)
    text = (tmp_path / "out.txt").read_text()
    assert text.startswith("0000......\n") and text.endswith("0499......\n")
    assert relay.total == 5500 and relay.dropped == 4500
    assert "output truncated: 4400 bytes dropped after the first 1000 bytes; the last 100 bytes follow" in text
    assert len(text) < 1300


@pytest.mark.parametrize("value, cap", [("2", 2 << 20), ("0.5", 1 << 19), ("nan", 4 << 20), ("-1", 4 << 20),
                                        ("lots", 4 << 20), ("inf", 4 << 20)])
def test_output_cap_from_environment(monkeypatch, value, cap):
    from tfpar_lint.verify.driver import _memory_limit, _output_cap

    monkeypatch.setenv("TFPAR_VERIFY_OUTPUT_MB", value)
    monkeypatch.setenv("TFPAR_VERIFY_MEMORY_MB", value)
    assert _output_cap() == cap
    assert _memory_limit() > 0


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process identities are read from /proc")
def test_a_process_number_is_killed_only_while_it_names_the_process_that_was_seen():
    """procs.kill(..., expect=) re-reads each pid's start time: a number whose process ended and was
    reused (another program's process, or a thread: kill(tid) ends the whole process) is left alone."""
    import signal
    import subprocess
    import sys
    import threading

    from tfpar_lint.verify import procs

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        seen = procs.identities([p.pid])
        assert seen == {p.pid: procs.start_time(p.pid)}
        procs.kill([p.pid], expect={p.pid: seen[p.pid] + 1})  # as if the number had been reused
        assert p.poll() is None
        procs.kill([p.pid], expect={})  # never seen: not killed either
        assert p.poll() is None
        procs.kill([p.pid], expect=seen)
        assert p.wait(10) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # a thread's id has its own start time, never the one its number had as a process
    tids = []
    ev = threading.Event()
    t = threading.Thread(target=lambda: (tids.append(threading.get_native_id()), ev.wait(10)))
    t.start()
    try:
        while not tids:
            pass
        assert procs.start_time(tids[0]) is not None  # /proc/TID/stat is readable
        assert procs.identities([p.pid]) == {}  # the ended process: no identity, nothing to kill
    finally:
        ev.set()
        t.join()


def test_sweep_leaves_a_root_whose_number_names_another_process_now():
    import subprocess
    import sys

    from tfpar_lint.verify import procs

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = procs.start_time(p.pid)
        assert procs.sweep("tfpar-no-such-marker", [p.pid], {p.pid: start + 7}) == 0
        assert p.poll() is None
        assert procs.sweep("tfpar-no-such-marker", [p.pid], {p.pid: start}) == 1
        assert p.wait(10) < 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_the_report_says_which_limit_ended_a_process():
    """A run killed by the verifier says by which limit and how; one killed by a signal the verifier
    did not send says so (the OOM killer when the kernel counted one meanwhile)."""
    import signal
    import types

    from tfpar_lint.verify import driver, report

    def proc(rc, killed=False, reason="", sigkilled=False, worker=None):
        return types.SimpleNamespace(p=types.SimpleNamespace(returncode=rc), killed=killed, kill_reason=reason,
                                     sigkilled=sigkilled, worker=worker)

    notes = driver._death_notes([proc(None, True, "timeout 60 s", True)], 60.0, 1500 << 20, 0, 63.4)
    assert notes == ["the script was stopped by the verifier: timeout 60 s (SIGTERM, then SIGKILL 3 s later)"]
    notes = driver._death_notes([proc(-signal.SIGKILL, worker=1)], 60.0, 1500 << 20, None, 57.7)
    assert len(notes) == 1 and notes[0].startswith("worker 1 was killed by SIGKILL after 57.7 s, not by the "
                                                   "verifier (its limits: time-out 60 s, memory 1500 MB")
    oom = driver.procs_mod.oom_kills()
    if oom is not None:
        notes = driver._death_notes([proc(-signal.SIGKILL)], 60.0, 1500 << 20, oom - 1, 57.7)
        assert "OOM killer killed" in notes[0] and "most likely that" in notes[0]
        notes = driver._death_notes([proc(-signal.SIGKILL)], 60.0, 1500 << 20, oom + 10 ** 9, 57.7)
        assert "no OOM kill was counted" in notes[0]
    assert driver._death_notes([proc(0), proc(1), proc(-signal.SIGSEGV)], 60.0, 1 << 30, 0, 1.0) == []
