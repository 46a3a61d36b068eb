"""Fork server: import TensorFlow once, fork one child per run.

``import tensorflow`` (which also imports Keras 3) is most of a child's
start-up cost.  The driver starts one zygote per ``verify_findings`` call;
the zygote imports TensorFlow *without initialising its runtime* (no op,
no device query) and then forks a child for every run request.  Each child
starts its own session (process group), redirects its output, replaces its
environment, re-seeds Python's and NumPy's global generators (as a fresh
process would have different ones), and runs :func:`child.main`, which
configures the logical devices as usual: TensorFlow's runtime is only
initialised after the fork.

Protocol (JSON lines): requests on stdin ``{"id", "spec", "cwd", "env",
"stdout", "stderr"}``; replies on stdout ``{"ready": true}``, ``{"id",
"pid"}``, ``{"exit": pid, "code": status}``.  The zygote is single-threaded
(no thread can hold a lock across ``fork``); it exits at end of input once
its children are reaped.

Disable with ``TFPAR_VERIFY_FORK=0`` (one fresh interpreter per run).
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Optional


# ------------------------------------------------------------ the driver's side
class ForkedProc:
    """A child forked by the zygote, with the part of Popen's API the driver uses."""

    def __init__(self, zygote: "Server", pid: int):
        self.z = zygote
        self.pid = pid
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            self.returncode = self.z.exit_code(self.pid)
            if self.returncode is None and self.z.dead:
                # The zygote died (killed by a script?): this child was re-parented to the driver
                # (a child subreaper), which reaps it; or it is someone else's and /proc says if it lives.
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                    if pid == self.pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
                except ChildProcessError:
                    if not os.path.exists(f"/proc/{self.pid}") or _zombie(self.pid):
                        self.returncode = -9
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        end = None if timeout is None else time.time() + timeout
        while self.poll() is None:
            if end is not None and time.time() >= end:
                raise subprocess.TimeoutExpired("zygote child", timeout)
            with self.z.cv:
                self.z.cv.wait(0.05)
        return self.returncode  # type: ignore[return-value]


class Server:
    """The driver's side of the fork server: starts it, sends run requests, collects exit codes."""

    def __init__(self, env: dict[str, str], log: str):
        self.cv = threading.Condition()
        self.pids: dict[int, int] = {}
        self.exits: dict[int, int] = {}
        self.ready = False
        self.dead = False
        self.next_id = 0
        self.write_lock = threading.Lock()
        self.logf = open(log, "wb")
        self.p = subprocess.Popen([sys.executable, "-m", "tfpar_lint.verify.zygote"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.logf,
                                  start_new_session=True)
        self.reader = threading.Thread(target=self._read, name="tfpar-zygote-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for raw in self.p.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            with self.cv:
                if msg.get("ready"):
                    self.ready = True
                elif "id" in msg:
                    self.pids[msg["id"]] = msg["pid"]
                elif "exit" in msg:
                    self.exits[msg["exit"]] = msg["code"]
                self.cv.notify_all()
        with self.cv:
            self.dead = True
            self.cv.notify_all()

    def wait_ready(self, timeout: float) -> bool:
        end = time.time() + timeout
        with self.cv:
            while not self.ready and not self.dead and time.time() < end:
                self.cv.wait(0.1)
            return self.ready and not self.dead

    def exit_code(self, pid: int) -> Optional[int]:
        with self.cv:
            return self.exits.get(pid)

    def spawn(self, spec_path: str, cwd: str, env: dict[str, str], stdout: str, stderr: str) -> ForkedProc:
        with self.write_lock:
            rid = self.next_id
            self.next_id += 1
            req = {"id": rid, "spec": spec_path, "cwd": cwd, "env": env, "stdout": stdout, "stderr": stderr}
            assert self.p.stdin is not None
            try:
                self.p.stdin.write((json.dumps(req) + "\n").encode())
                self.p.stdin.flush()
            except (OSError, ValueError) as e:  # the zygote is gone: the caller starts a fresh interpreter
                raise RuntimeError(f"the zygote died: {e}") from None
        with self.cv:
            while rid not in self.pids:
                if self.dead:
                    raise RuntimeError("the zygote died")
                self.cv.wait(0.1)
            return ForkedProc(self, self.pids[rid])

    def close(self, kill: bool = False) -> None:
        try:
            if self.p.stdin:
                self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(0.1 if kill else 30)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.logf.close()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rfind(b")") + 2:][:1] in (b"Z", b"X")
    except OSError:
        return True



# ------------------------------------------------------------ the server
def _reply(out, obj) -> None:
    out.write(json.dumps(obj) + "\n")
    out.flush()


def main() -> int:
    from tfpar_lint.verify import sandbox

    try:  # die with the driver; adopt the orphans of the children (reaped below, killed by the driver)
        sandbox.prctl(sandbox.PR_SET_PDEATHSIG, 9)
    except (OSError, AttributeError):
        pass
    sandbox.set_subreaper()
    proto_in = os.fdopen(os.dup(0), "r")
    proto_out = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # anything printed at import goes to the zygote's stderr
    t0 = time.time()
    import tensorflow  # noqa: F401 - the shared, expensive part
    import numpy  # noqa: F401

    import tfpar_lint.verify.child  # noqa: F401
    import tfpar_lint.verify.instrument  # noqa: F401
    import tfpar_lint.verify.probes.input  # noqa: F401
    import tfpar_lint.verify.probes.randomness  # noqa: F401
    import tfpar_lint.verify.probes.scope  # noqa: F401
    import tfpar_lint.verify.probes.threads  # noqa: F401

    _reply(proto_out, {"ready": True, "import_seconds": round(time.time() - t0, 3)})
    children: set[int] = set()
    eof = False
    buf = ""
    fd = proto_in.fileno()
    while not eof or children:
        if not eof:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                chunk = os.read(fd, 65536).decode()
                if not chunk:
                    eof = True
                buf += chunk
                while "\n" in buf:
                    line, buf = buf.split("\n", 1)
                    if line.strip():
                        req = json.loads(line)
                        sys.stdout.flush()
                        sys.stderr.flush()
                        pid = os.fork()
                        if pid == 0:
                            _child(req, proto_in, proto_out)  # never returns
                        children.add(pid)
                        _reply(proto_out, {"id": req["id"], "pid": pid})
        else:
            time.sleep(0.05)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            if pid in children:
                children.discard(pid)
                try:
                    _reply(proto_out, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})
                except (BrokenPipeError, OSError):  # the driver is gone
                    eof = True
    return 0


def _child(req: dict, proto_in, proto_out) -> None:
    code = 70
    try:
        from tfpar_lint.verify import sandbox

        sandbox.die_with_parent()  # the zygote's death (SIGKILL of tfpar-lint) takes this run with it
        os.setsid()
        try:
            proto_in.close()
            proto_out.close()
        except Exception:
            pass
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import random

        import numpy as np

        random.seed()
        np.random.seed()
        from tfpar_lint.verify import child

        child.main([req["spec"]])  # leaves with os._exit
    except BaseException as e:  # pragma: no cover
        try:
            os.write(2, f"tfpar-verify zygote child failed: {e!r}\n".encode())
        except Exception:
            pass
    finally:
        os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
