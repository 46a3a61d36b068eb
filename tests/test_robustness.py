"""Linting never crashes and never imports TensorFlow."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from tfpar_lint.engine import lint_paths
from tfpar_lint.registry import all_rules

ALL = [r.CODE for r in all_rules()]


def _package_files(names):
    files = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        for root in spec.submodule_search_locations:
            for dirpath, _, filenames in os.walk(root):
                files += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
    return sorted(files)


def test_lint_installed_tensorflow_and_keras_without_error():
    files = _package_files(["tensorflow", "keras"])
    if len(files) < 500:
        pytest.skip(f"tensorflow/keras not installed (found {len(files)} files)")
    results = lint_paths(files, enabled=ALL, jobs=os.cpu_count())
    errors = [r.error.render() for r in results if r.error is not None]
    assert len(results) == len(files)
    assert not errors, "\n".join(errors[:20])


def test_linting_does_not_import_tensorflow(tmp_path):
    src = tmp_path / "train.py"
    src.write_text(
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "with strategy.scope():\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
    )
    code = (
        "import sys\n"
        "from tfpar_lint.engine import lint_file\n"
        f"r = lint_file({str(src)!r})\n"
        "assert [f.code for f in r.findings] == ['TFP101'], r\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras')]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# -- issue 12, lint half: one file can never hang or sink the run ------------------------------
#
# Each test runs the real command in a subprocess (a crash of libcst must not take the test
# process with it) on this checkout's code, and checks the contract: the run finishes, every
# file is reported (findings, or a per-file E902/E903/E999 error naming the reason), the run
# exits 2 when a file could not be linted, and nothing says "internal error".

from pathlib import Path  # noqa: E402

from conftest import REPO_ROOT, TFP101_SRC, default_signals, make_notebook, run_subprocess  # noqa: E402

SRC = str(REPO_ROOT / "src")
HEADER = TFP101_SRC  # a TFP101 finding at line 3, col 9: the pre-filter lets every file below through


def pathological(name: str) -> str:
    """The inputs of issue 12 (each after the TFP101 program, so the file is parsed)."""
    body = {
        "and_chain": "z = " + " and ".join(["a"] * 7057) + "\n",
        "parens": "z = " + "(" * 10000 + "1" + ")" * 10000 + "\n",
        "attr_chain": "z = a" + ".b" * 50000 + "\n",
        "backslash_crlf": "\\\r\n",
        "adjacent_strings": "z = " + " ".join(["'x'"] * 3001) + "\n",
        "nested_lists": "z = " + "[" * 100000 + "]" * 100000 + "\n",
    }[name]
    return HEADER + body


# libcst never sees the crashing and slow inputs any more (tfpar_lint.deep, tests/test_deep.py);
# the tests of the worker supervision turn that guard off to crash and stall libcst for real.
GUARD_OFF = {"TFPAR_LINT_DEEP": "off"}


def lint(cwd, *args, timeout=300, stdin=None, env=None):
    """``python -m tfpar_lint --no-config --no-cache ARGS`` in ``cwd`` (this checkout's code)."""
    return run_subprocess([sys.executable, "-m", "tfpar_lint", "--no-config", "--no-cache", "--no-progress",
                           *args], cwd, stdin=stdin, env={"PYTHONPATH": SRC, **(env or {})}, timeout=timeout)


def json_report(cwd, *args, timeout=300, env=None):
    r = lint(cwd, "--format", "json", "-o", "report.json", *args, timeout=timeout, env=env)
    assert "internal error" not in r.err and "Traceback" not in r.err, r.err
    records = json.loads((Path(cwd) / "report.json").read_text(encoding="utf-8"))
    by_path: dict = {}
    for rec in records:
        by_path.setdefault(rec["path"], []).append(rec)
    return r, by_path


def no_worker_left(marker: str) -> list[str]:
    """Processes still running whose command line names ``marker`` (the run's folder)."""
    left = []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmd and "tfpar_lint" in cmd:
            left.append(f"{pid}: {cmd[:200]}")
    return left


import json  # noqa: E402


@pytest.mark.parametrize("jobs", ["-j1", "-j2"])
def test_a_worker_crash_costs_only_its_file(tmp_path, jobs):
    (tmp_path / "crash.py").write_text(pathological("nested_lists"))  # libcst overflows its stack: SIGSEGV
    (tmp_path / "a.py").write_text(HEADER)
    (tmp_path / "b.py").write_text(HEADER)
    r, rep = json_report(tmp_path, jobs, "crash.py", "a.py", "b.py", env=GUARD_OFF)
    assert r.rc == 2, r
    [crash] = rep["crash.py"]
    assert crash["code"] == "E903" and crash["error"] is True
    assert crash["message"].startswith("analysis gave up: the worker process was killed by SIG"), crash
    assert [f["code"] for f in rep["a.py"]] == ["TFP101"] and [f["code"] for f in rep["b.py"]] == ["TFP101"]
    assert not no_worker_left(str(tmp_path))


@pytest.mark.parametrize("jobs", ["-j1", "-j2"])
def test_a_file_past_the_timeout_costs_only_itself(tmp_path, jobs):
    (tmp_path / "slow.py").write_text(pathological("attr_chain"))  # libcst needs about a minute
    (tmp_path / "a.py").write_text(HEADER)
    r, rep = json_report(tmp_path, jobs, "--file-timeout", "2", "slow.py", "a.py", env=GUARD_OFF)
    assert r.rc == 2
    [slow] = rep["slow.py"]
    assert (slow["code"], slow["message"]) == (
        "E903", "analysis gave up: used more than 2 s of CPU time, the per-file limit (set with --file-timeout)")
    assert [f["code"] for f in rep["a.py"]] == ["TFP101"]
    assert not no_worker_left(str(tmp_path))
    # --exit-zero is obeyed: the file is reported, the findings exit 0
    r, rep = json_report(tmp_path, jobs, "--exit-zero", "--file-timeout", "2", "slow.py", "a.py", env=GUARD_OFF)
    assert r.rc == 0 and rep["slow.py"][0]["code"] == "E903" and [f["code"] for f in rep["a.py"]] == ["TFP101"]


def test_file_timeout_from_the_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.tfpar-lint]\nfile-timeout = 2\n")
    (tmp_path / "slow.py").write_text(pathological("attr_chain"))
    r = run_subprocess([sys.executable, "-m", "tfpar_lint", "--no-cache", "slow.py"], tmp_path,
                       env={"PYTHONPATH": SRC, **GUARD_OFF}, timeout=300)
    assert r.rc == 2 and r.lines == ["slow.py:0:0: E903 analysis gave up: used more than 2 s of CPU time, "
                                     "the per-file limit (set with --file-timeout)"], r


def test_the_pathological_inputs_of_issue_12(tmp_path):
    names = ["and_chain", "parens", "attr_chain", "backslash_crlf", "adjacent_strings", "nested_lists"]
    for name in names:
        (tmp_path / f"{name}.py").write_bytes(pathological(name).encode())
    big = HEADER + "x = 1\n" * (50 * 1024 * 1024 // 6 + 1)  # a 50 MB file
    (tmp_path / "big.py").write_text(big)
    (tmp_path / "a.py").write_text(HEADER)
    r, rep = json_report(tmp_path, "-j2", "--file-timeout", "5", ".")
    assert r.rc == 2
    assert [f["code"] for f in rep["a.py"]] == ["TFP101"]
    for name in names + ["big"]:
        assert rep.get(f"{name}.py"), f"{name}.py lost: {sorted(rep)}"
    codes = {p: [(f["code"], f["message"]) for f in recs] for p, recs in rep.items()}
    # Python accepts it; libcst's tokenizer cannot: not a syntax error of the user's
    [(code, msg)] = codes["backslash_crlf.py"]
    assert code == "E903" and msg.startswith("analysis gave up: libcst cannot parse this file, though Python can")
    # Python accepts them; libcst gets them with the long expression made opaque (tfpar_lint.deep)
    for name in ("adjacent_strings", "and_chain"):
        assert [c for c, _ in codes[f"{name}.py"]] == ["TFP101"], codes[f"{name}.py"]
    assert codes["big.py"] == [("E902", "skipped: 50 MiB, over the size limit of 10 MiB (max-file-size, --max-file-size)")]
    # Python rejects these: its verdict (E999), and libcst never crashes on them
    for name in ("parens", "nested_lists"):
        assert codes[f"{name}.py"] == [("E999", "syntax error: too many nested parentheses")], codes[f"{name}.py"]
    # 50,000 levels: CPython 3.11 gives RecursionError (E999); a Python that accepts it gets TFP101
    assert [c for c, _ in codes["attr_chain.py"]] in (["E999"], ["TFP101"]), codes["attr_chain.py"]
    assert not no_worker_left(str(tmp_path))


# The analysis's own recursion (semantic.py gave up at about 490 terms of `a + a + ...` and on 500
# nested lambdas until the semantic model became iterative).  Valid code that libcst parses must be
# analysed: findings, never an error.
SEMANTIC_RECURSION = {
    "plus_600_terms": "z = " + " + ".join(["a"] * 600) + "\n",
    "lambda_500_deep": "z = " + "lambda: " * 500 + "1\n",
    "and_chain_7057": "z = " + " and ".join(["a"] * 7057) + "\n",
}


@pytest.mark.parametrize("name", sorted(SEMANTIC_RECURSION))
def test_valid_code_libcst_parses_is_analysed(name, monkeypatch):
    from tfpar_lint.engine import lint_source_supervised

    # the guard would make these expressions opaque: off, so that the semantic model walks them
    monkeypatch.setenv("TFPAR_LINT_DEEP", "off")
    r = lint_source_supervised(HEADER + SEMANTIC_RECURSION[name], "deep.py", enabled=ALL)
    assert r.error is None, r.error
    assert [f.code for f in r.findings] == ["TFP101"]


def test_non_regular_files_are_skipped_given_or_walked(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(tmp_path / "fifo.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    (tmp_path / "a.py").write_text(HEADER)
    for args in (["fifo.py", "zero.py", "a.py"], ["."]):
        r = lint(tmp_path, *args, timeout=120)
        assert r.rc == 1, r  # a diagnostic, as ruff: exit 1
        assert r.lines == [
            "a.py:3:9: TFP101 " + r.lines[0].split(" TFP101 ", 1)[1],
            "fifo.py:0:0: E902 skipped: not a regular file (a FIFO)",
            "zero.py:0:0: E902 skipped: not a regular file (a character device)",
        ], r
    # the cache's lookup reads files too: it must not block on the FIFO either
    r = run_subprocess([sys.executable, "-m", "tfpar_lint", "--no-config", "--cache-dir", str(tmp_path / "c"), "."],
                       tmp_path, env={"PYTHONPATH": SRC}, timeout=120)
    assert r.rc == 1 and len(r.lines) == 3


def test_max_file_size_flag_and_setting(tmp_path):
    (tmp_path / "a.py").write_text(HEADER + "x = 1\n" * 400)  # 2.5 KB
    r = lint(tmp_path, "--max-file-size", "2K", "a.py")
    assert r.rc == 1 and r.lines == [
        "a.py:0:0: E902 skipped: 2.5 KiB, over the size limit of 2 KiB (max-file-size, --max-file-size)"], r
    assert lint(tmp_path, "--max-file-size", "3K", "a.py").rc == 1
    assert lint(tmp_path, "--max-file-size", "0", "a.py").rc == 1  # 0: no limit
    r = lint(tmp_path, "--max-file-size", "ten", "a.py")
    assert r.rc == 2 and "--max-file-size" in r.err and "Traceback" not in r.err
    (tmp_path / "pyproject.toml").write_text('[tool.tfpar-lint]\nmax-file-size = "2K"\n')
    r = run_subprocess([sys.executable, "-m", "tfpar_lint", "--no-cache", "a.py"], tmp_path,
                       env={"PYTHONPATH": SRC})
    assert r.rc == 1 and "E902 skipped: 2.5 KiB, over the size limit of 2 KiB" in r.out
    r = lint(tmp_path, "-", "--stdin-filename", "a.py", "--max-file-size", "1K", stdin=(HEADER * 20).encode())
    assert r.rc == 1 and r.lines == [
        "a.py:0:0: E902 skipped: over the size limit of 1 KiB (max-file-size, --max-file-size)"], r


@pytest.mark.parametrize("setting", ['exclude = ["sub/[z-a].py"]', 'extend-exclude = ["[z-a].py"]',
                                     'per-file-ignores = { "sub/[z-a].py" = ["TFP1"] }'])
def test_bad_glob_in_the_settings_is_a_clear_error(tmp_path, setting):
    (tmp_path / "pyproject.toml").write_text(f"[tool.tfpar-lint]\n{setting}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text(HEADER)
    r = run_subprocess([sys.executable, "-m", "tfpar_lint", "--no-cache", "."], tmp_path, env={"PYTHONPATH": SRC})
    assert r.rc == 2 and r.out == ""
    assert "invalid glob" in r.err and "[z-a].py" in r.err and "bad character range" in r.err, r.err
    assert "internal error" not in r.err


def test_bad_glob_on_the_command_line_is_a_clear_error(tmp_path):
    (tmp_path / "a.py").write_text(HEADER)
    r = lint(tmp_path, "--extend-exclude", "sub/[z-a].py", ".")
    assert r.rc == 2 and "--extend-exclude" in r.err and "invalid glob 'sub/[z-a].py'" in r.err, r.err


def test_notebook_json_nested_1000_deep_is_a_per_file_error(tmp_path):
    deep = "[" * 1000 + "]" * 1000
    (tmp_path / "deep.ipynb").write_text('{"cells": [], "metadata": {"x": %s}, "nbformat": 4}' % deep)
    (tmp_path / "a.py").write_text(HEADER)
    r = lint(tmp_path, ".")
    assert r.rc == 1  # a diagnostic, as ruff: exit 1
    assert "deep.ipynb:0:0: E902 invalid notebook: its JSON is nested too deeply to read" in r.lines, r
    assert any(line.startswith("a.py:3:9: TFP101") for line in r.lines)


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_non_utf8_file_name_with_output_file(tmp_path, fmt):
    name = os.fsdecode(b"caf\xe9.py")  # Latin-1: not UTF-8
    try:
        (tmp_path / name).write_text(HEADER)
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses the name")
    (tmp_path / "a.py").write_text(HEADER)
    r = lint(tmp_path, "--format", fmt, "-o", "report.out", ".")
    assert r.rc == 1 and "internal error" not in r.err, r
    text = (tmp_path / "report.out").read_bytes().decode("utf-8")  # valid UTF-8
    if fmt == "text":
        assert [ln.split(" TFP101 ")[0] for ln in text.splitlines()] == ["a.py:3:9:", "caf\\xe9.py:3:9:"]
    elif fmt == "json":
        assert sorted(f["path"] for f in json.loads(text)) == ["a.py", "caf\\xe9.py"]
    elif fmt == "sarif":
        uris = sorted(res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                      for res in json.loads(text)["runs"][0]["results"])
        assert uris == ["a.py", "caf%E9.py"]  # RFC 3986: the name's bytes, percent-encoded
    else:
        assert "file=caf\\xe9.py,line=3" in text


def test_newline_in_a_file_name_keeps_one_finding_per_line(tmp_path):
    try:
        (tmp_path / "new\nline.py").write_text(HEADER)
    except OSError:
        pytest.skip("this file system refuses the name")
    r = lint(tmp_path, ".")
    assert r.rc == 1 and len(r.lines) == 1 and r.lines[0].startswith("new\\nline.py:3:9: TFP101 "), r
    rep = json.loads(lint(tmp_path, "--format", "json", ".").out)
    assert rep[0]["path"] == "new\nline.py"  # JSON carries the real name
    sarif = json.loads(lint(tmp_path, "--format", "sarif", ".").out)
    uri = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "new%0Aline.py"


def test_closed_stdin_and_stdout(tmp_path):
    (tmp_path / "a.py").write_text(HEADER)
    env = dict(os.environ, PYTHONPATH=SRC)
    cmd = [sys.executable, "-m", "tfpar_lint", "--no-config", "--no-cache"]
    p = subprocess.run(cmd + ["-"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    assert p.returncode == 0  # an empty stdin is a clean file
    p = subprocess.run(" ".join(cmd) + " - <&-", shell=True, cwd=tmp_path, env=env, capture_output=True)
    assert p.returncode == 1 and b"E902 cannot read stdin: standard input is closed" in p.stdout, p
    p = subprocess.run(" ".join(cmd) + " a.py >&-", shell=True, cwd=tmp_path, env=env, capture_output=True)
    assert p.returncode == 2, p
    assert p.stderr.decode() == "tfpar-lint: error: standard output is closed; write the report with -o FILE\n"
    p = subprocess.run(" ".join(cmd) + " -o out.txt a.py >&-", shell=True, cwd=tmp_path, env=env, capture_output=True)
    assert p.returncode == 1 and (tmp_path / "out.txt").read_text().startswith("a.py:3:9: TFP101")
    p = subprocess.run(" ".join(cmd) + " --select NOPE a.py 2>&-", shell=True, cwd=tmp_path, env=env,
                       capture_output=True)
    assert p.returncode == 2 and b"Traceback" not in p.stdout


def test_same_bytes_same_result_from_a_path_and_from_stdin(tmp_path):
    data = b"# -*- coding: no-such-codec -*-\n" + HEADER.encode()
    (tmp_path / "a.py").write_bytes(data)
    from_path = lint(tmp_path, "a.py")
    from_stdin = lint(tmp_path, "-", "--stdin-filename", "a.py", stdin=data)
    assert from_path.rc == from_stdin.rc == 1
    assert from_path.out == from_stdin.out and "TFP101" in from_path.out
    latin = "# -*- coding: latin-1 -*-\n# caf\xe9\n".encode("latin-1") + HEADER.encode()
    (tmp_path / "b.py").write_bytes(latin)
    assert lint(tmp_path, "b.py").out.replace("b.py", "x") == \
        lint(tmp_path, "-", "--stdin-filename", "b.py", stdin=latin).out.replace("b.py", "x") != ""


def test_stdin_is_linted_in_a_supervised_worker(tmp_path):
    r = lint(tmp_path, "-", "--stdin-filename", "x.py", stdin=pathological("nested_lists").encode(), env=GUARD_OFF)
    assert r.rc == 2 and r.lines[0].startswith("x.py:0:0: E903 analysis gave up: the worker process was killed by SIG")


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "-1", "0"])
def test_verify_timeout_must_be_finite_and_positive(tmp_path, value):
    (tmp_path / "a.py").write_text(HEADER)
    r = lint(tmp_path, "--verify", f"--timeout={value}", "a.py")
    assert r.rc == 2 and r.out == ""
    assert "--timeout must be a positive, finite number of seconds" in r.err, r.err


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "soon"])
def test_file_timeout_must_be_finite(tmp_path, value):
    r = lint(tmp_path, f"--file-timeout={value}", ".")
    assert r.rc == 2 and "--file-timeout" in r.err and "Traceback" not in r.err, r.err


def test_jobs_is_capped_at_the_cpus():
    from tfpar_lint.engine import MAX_JOBS, cpu_count, effective_jobs

    assert effective_jobs(10**9) == min(cpu_count(), MAX_JOBS)
    assert effective_jobs(None) == min(cpu_count(), MAX_JOBS)
    assert effective_jobs(1) == 1


def test_jobs_far_above_the_cpus_still_lints(tmp_path):
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(HEADER)
    r = lint(tmp_path, "-j", "100000", ".")
    assert r.rc == 1 and len(r.lines) == 6, r


def test_flake8_plugin_reports_what_the_cli_reports(tmp_path):
    pytest.importorskip("flake8")
    # libcst refuses it (3,001 adjacent strings) and, with the guard off, nothing makes it opaque
    (tmp_path / "strings.py").write_text(pathological("adjacent_strings"))
    (tmp_path / "a.py").write_text(HEADER)
    cli_out = lint(tmp_path, "strings.py", env=GUARD_OFF).lines
    assert len(cli_out) == 1 and " E903 " in cli_out[0]
    r = run_subprocess([sys.executable, "-m", "flake8", "--isolated", "--select", "TFP", "strings.py", "a.py"],
                       tmp_path, env={"PYTHONPATH": SRC, **GUARD_OFF})
    cli_message = cli_out[0].split(" E903 ", 1)[1]
    assert f"strings.py:1:1: TFP000 E903 {cli_message}" in r.lines, r
    assert any(ln.startswith("a.py:3:9: TFP101 ") for ln in r.lines)


def test_notebook_locations_in_sarif_point_into_the_ipynb(tmp_path):
    nb = make_notebook([("markdown", "# x\n"), ("code", HEADER)])
    (tmp_path / "t.ipynb").write_text(nb)
    sarif = json.loads(lint(tmp_path, "--format", "sarif", "t.ipynb").out)
    region = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    line = nb.split("\n")[region["startLine"] - 1]
    assert line[region["startColumn"] - 1:].startswith("tf.keras.Sequential(")


def _task(args):
    """A worker task that does what it is told (real crashes, real hangs)."""
    import time

    what, value = args
    if what == "segv":
        import ctypes

        ctypes.string_at(0)  # a read at address 0: SIGSEGV in this thread, as in libcst's parser
    elif what == "abort":
        os.abort()
    elif what == "exit":
        os._exit(value)
    elif what == "hang":
        time.sleep(value)
    elif what == "spin":  # busy for `value` s of wall-clock time
        end = time.monotonic() + value
        while time.monotonic() < end:
            pass
    elif what == "raise":
        raise ValueError("boom")
    elif what == "memory":
        return bytearray(value)  # past the worker's address-space cap: MemoryError
    return value * 2


@pytest.mark.parametrize("jobs", [1, 2])
def test_supervisor_blames_the_culprit_and_reruns_the_innocent(jobs, monkeypatch):
    from tfpar_lint import workers
    from tfpar_lint.workers import run_tasks

    monkeypatch.setattr(workers, "WALL_FACTOR", 3)  # a blocked task is given up after 9 s

    tasks = [("ok", 1), ("segv", 0), ("ok", 2), ("ok", 3), ("hang", 60), ("ok", 4), ("abort", 0),
             ("ok", 5), ("raise", 0), ("exit", 3), ("ok", 6), ("memory", 8 << 30), ("ok", 7)]
    got: dict = {}

    def put(k, v):
        assert k not in got, f"task {k} answered twice"
        got[k] = v

    run_tasks(_task, tasks, jobs=jobs, timeout=3, memory_limit=2 << 30,
              on_result=lambda k, v: put(k, ("ok", v)), on_failure=lambda k, why: put(k, ("failed", why)))
    assert sorted(got) == list(range(len(tasks)))
    assert [got[k] for k, t in enumerate(tasks) if t[0] == "ok"] == [("ok", 2 * v) for w, v in tasks if w == "ok"]
    assert got[1] == ("failed", "the worker process was killed by SIGSEGV")
    assert got[4][0] == "failed" and got[4][1].startswith(
        "gave no answer within 9 s of wall-clock time (3x the per-file limit of 3 s of CPU time, set with "
        "--file-timeout), having used 0.")
    assert got[6] == ("failed", "the worker process was killed by SIGABRT")
    assert got[8] == ("failed", "ValueError: boom")
    assert got[9] == ("failed", "the worker process exited with code 3")
    assert got[11] == ("failed", "out of memory")


def test_the_per_file_limit_counts_cpu_time():
    """A task that computes for longer than the limit is stopped when it has used the limit in CPU
    time (however busy the machine, which only stretches the wall-clock time it takes); a task that
    sleeps as long uses no CPU time and is let finish."""
    from tfpar_lint.workers import run_tasks

    got: dict = {}
    run_tasks(_task, [("spin", 120), ("hang", 4), ("ok", 1)], jobs=1, timeout=2,
              on_result=lambda k, v: got.setdefault(k, ("ok", v)),
              on_failure=lambda k, why: got.setdefault(k, ("failed", why)))
    assert got == {0: ("failed", "used more than 2 s of CPU time, the per-file limit (set with --file-timeout)"),
                   1: ("ok", 8), 2: ("ok", 2)}


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_no_worker_outlives_the_run(tmp_path, sig):
    """Killed or interrupted while a worker parses: the worker goes too (no orphan)."""
    import signal
    import time

    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc")
    (tmp_path / "slow.py").write_text(pathological("attr_chain"))
    env = dict(os.environ, PYTHONPATH=SRC, **GUARD_OFF)
    p = subprocess.Popen([sys.executable, "-m", "tfpar_lint", "--no-config", "--no-cache", "--file-timeout", "0",
                          str(tmp_path / "slow.py")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=default_signals)  # SIGINT may be inherited ignored (nohup, a background job)
    try:
        deadline = time.monotonic() + 60
        while len(no_worker_left(str(tmp_path))) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # the command and its worker
        assert len(no_worker_left(str(tmp_path))) == 2
        p.send_signal(getattr(signal, sig))
        p.wait(30)
        deadline = time.monotonic() + 10
        while no_worker_left(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not no_worker_left(str(tmp_path))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_notebook_syntax_error_has_no_file_line_in_sarif_and_github(tmp_path):
    nb = make_notebook([("markdown", "# x\n"), ("code", HEADER), ("code", "x = = 1\n")])
    (tmp_path / "t.ipynb").write_text(nb)
    text = lint(tmp_path, "t.ipynb")
    assert text.rc == 1 and "E999 syntax error in cell 3" in text.out, text
    sarif = json.loads(lint(tmp_path, "--format", "sarif", "t.ipynb").out)
    [note] = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert "region" not in note["locations"][0]["physicalLocation"] and "cell 3" in note["message"]["text"]
    gh = lint(tmp_path, "--format", "github", "t.ipynb").out
    assert gh.startswith("::error file=t.ipynb,title=E999::syntax error in cell 3"), gh


def test_a_fifo_in_the_project_does_not_stall_the_files_that_import_it(tmp_path):
    """The whole-project analysis reads the project's other files: it skips a FIFO too."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text(HEADER + "from pkg import helper\n")
    os.mkfifo(tmp_path / "pkg" / "helper.py")
    for cache in (["--no-cache"], ["--cache-dir", str(tmp_path / "c")], ["--cache-dir", str(tmp_path / "c")]):
        r = run_subprocess([sys.executable, "-m", "tfpar_lint", "--file-timeout", "20", *cache, "pkg/train.py"],
                           tmp_path, env={"PYTHONPATH": SRC}, timeout=120)
        assert r.rc == 1 and len(r.lines) == 1 and r.lines[0].startswith("pkg/train.py:3:9: TFP101 "), r


def test_read_regular_refuses_what_is_not_a_regular_file(tmp_path):
    from tfpar_lint.files import FileTooLarge, NotRegularFile, read_regular, read_regular_text

    (tmp_path / "a.py").write_bytes(b"x = 1\r\ny = 2\n")
    assert read_regular(str(tmp_path / "a.py")) == b"x = 1\r\ny = 2\n"
    assert read_regular_text(str(tmp_path / "a.py")) == "x = 1\ny = 2\n"  # as open(..., encoding="utf-8")
    with pytest.raises(FileTooLarge):
        read_regular(str(tmp_path / "a.py"), max_size=4)
    with pytest.raises(NotRegularFile):
        read_regular("/dev/zero")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "f.py")
        with pytest.raises(NotRegularFile):
            read_regular(str(tmp_path / "f.py"))
