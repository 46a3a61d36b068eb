"""Runtime verifier parts that need no TensorFlow: markers, devices, reports, parsing."""
from __future__ import annotations

import ast
import os

import pytest

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED
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
    assert "TFP2xx confirmed: same data" in s and "\n" not in s
    assert run.status == CONFIRMED
    assert ScriptRun.from_dict(run.to_dict()) == run
    hung = ScriptRun(path="t.py", outcome="hung", hang_location="t.py:8 in <module>")
    assert hung.status == INCONCLUSIVE and "hung at t.py:8 in <module>" in hung.summary()


def test_hang_location_from_faulthandler_dump(tmp_path):
    from tfpar_lint.verify.driver import _hang_location

    script = str(tmp_path / "train.py")
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
