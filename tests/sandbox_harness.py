"""Run a snippet inside the ``--verify`` sandbox, without TensorFlow (tests of issue 29).

    python tests/sandbox_harness.py RUNDIR CWD SNIPPET [CLUSTER_PID]

The process forks as the verifier's run process does: the child enters the sandbox exactly as
``child.py`` does (``sandbox.enter`` with the run folder's descriptor, the stack dumps' pipe, its
``HOME`` and temporary folder), then runs SNIPPET (a file) with ``report(obj)`` in its globals,
which hands ``obj`` to the relay as the run's result (``RUNDIR/result.json``).  The relay writes
``stacks.txt`` and ``refused.json`` there as in a real run.  This process waits for the relay and
writes ``RUNDIR/harness.json``: the relay's exit status and its peak memory (``wait4``).
"""
from __future__ import annotations

import json
import os
import sys


def main(argv: list) -> int:
    rundir, cwd, snippet = argv[0], argv[1], argv[2]
    cluster_pid = int(argv[3]) if len(argv) > 3 else None
    from tfpar_lint.verify import sandbox

    os.makedirs(os.path.join(rundir, "tmp"), exist_ok=True)
    os.makedirs(os.path.join(rundir, "home"), exist_ok=True)
    dirfd = os.open(rundir, os.O_RDONLY | os.O_DIRECTORY)
    with open(snippet) as f:  # read outside: the snippet's folder need not be the script's to read
        text = f.read()
    stacks_r, stacks_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.environ["HOME"] = os.path.join(rundir, "home")
        os.environ["TMPDIR"] = os.path.join(rundir, "tmp")
        code = 1
        try:
            c = sandbox.enter(os.path.join(rundir, "fs"), cwd, cluster_pid, result=(dirfd, "result.json"),
                              keep=(stacks_w,), stacks=stacks_r,
                              writable=(os.environ["TMPDIR"], os.environ["HOME"]))
            sent = []

            def report(obj):
                if not sent:
                    sent.append(True)
                    sandbox.send_result(json.dumps(obj).encode())

            env = {"report": report, "detail": c.detail, "stacks_fd": stacks_w, "__name__": "__main__"}
            exec(compile(text, snippet, "exec"), env)
            report({"ok": True})
            code = 0
        except BaseException as e:  # noqa: BLE001
            try:
                sandbox.send_result(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)
    os.close(stacks_w)
    os.close(stacks_r)
    os.close(dirfd)
    _, status, usage = os.wait4(pid, 0)
    with open(os.path.join(rundir, "harness.json"), "w") as f:
        json.dump({"status": os.waitstatus_to_exitcode(status), "relay_maxrss_kb": usage.ru_maxrss}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
