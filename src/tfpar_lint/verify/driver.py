"""Driver: run every script in instrumented child processes and judge findings.

* one child per script (``python -m tfpar_lint.verify.child spec.json``, or
  forked by the zygote) in its own process group, contained by
  :mod:`tfpar_lint.verify.sandbox`, running in the caller's working directory;
  its stdout/stderr come through capped relays (:mod:`tfpar_lint.verify.procs`),
  its memory is watched, and whatever it leaves running is killed at its end;
* Ctrl-C / SIGTERM: every run and its processes are killed, queued runs never
  start, finished runs are kept (:class:`Interrupted`); a second signal exits at once;
* ``timeout`` per run: on expiry SIGTERM to the whole group, SIGKILL after a
  short grace period; the child dumps its Python stacks (faulthandler) just
  before, so a hang is reported with where it hung;
* scripts that create ``MultiWorkerMirroredStrategy`` run as a local
  cluster: one child per worker with ``TF_CONFIG`` on free loopback ports;
  when a worker fails, its peers get a short grace period and are killed;
* runs are scheduled in parallel (``jobs`` slots; a cluster takes one slot
  per worker);
* TFP403 findings get a second run with the same global seed to compare.

No TensorFlow import in this module: it runs in the CLI process.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from tfpar_lint.files import FileTooLarge, NotRegularFile, read_regular
from tfpar_lint.finding import INCONCLUSIVE, Finding, Verification
from tfpar_lint import files
from tfpar_lint.verify import procs, report, sandbox, zygote
from tfpar_lint.verify import sandbox as sandbox_mod
from tfpar_lint.verify import procs as procs_mod
from tfpar_lint.verify.devices import DeviceRequest, host_has_gpu, parse_devices
from tfpar_lint.verify.probes import RunData
from tfpar_lint.verify.result import ScriptRun

KILL_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
# Limits per run (overridable through the environment): captured stdout and stderr, each; resident memory
# of the script and every process it started.
OUTPUT_MB = 4.0


def _env_mb(name: str) -> Optional[float]:
    """A positive number of MB from the environment; None when unset or not a positive finite number."""
    try:
        v = float(os.environ.get(name, ""))
    except ValueError:
        return None
    return v if 0 < v < float("inf") else None


def _output_cap() -> int:
    return int((_env_mb("TFPAR_VERIFY_OUTPUT_MB") or OUTPUT_MB) * 1024 * 1024)


PEER_GRACE = 10.0  # seconds a worker may outlive a failed peer
NUM_WORKERS = 2
FORCED_SEED = report.FORCED_SEED
_SRC_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _memory_limit() -> int:
    env = _env_mb("TFPAR_VERIFY_MEMORY_MB")
    if env:
        return int(env * 1024 * 1024)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 * 3 // 4
    except (OSError, ValueError, IndexError):
        pass
    return 16 << 30


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during ``--verify``: ``runs`` holds every run that had finished."""

    def __init__(self, runs, signum: int):
        super().__init__()
        self.runs = runs
        self.signum = signum


# Codes whose symptom is a scale: the script runs again on one replica (same
# data, same seeds) and the probe compares the first step of both runs.
ONE_REPLICA_CODES = {"TFP501", "TFP503", "TFP504", "TFP505", "TFP509", "TFP510", "TFP511", "TFP512", "TFP513",
                     "TFP514"}
PREEMPT_STEPS = 2

_MWMS = re.compile(r"MultiWorkerMirroredStrategy|CollectiveAllReduceStrategy")
_THREADS = re.compile(r"\bthreading\b|\bconcurrent\.futures\b|\bThreadPoolExecutor\b|\bThread\b")


def _code_only(text: str) -> str:
    """The script's names and attributes, without comments and strings (a
    docstring that mentions MultiWorkerMirroredStrategy is not a cluster)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deeply nested: the script's own fault
        return text
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.extend(a.name for a in node.names)
            if isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
    return " ".join(names) + " "


def _writes_tf_config(text: str) -> bool:
    """The script writes the TF_CONFIG environment variable itself (``os.environ["TF_CONFIG"] = ...``,
    ``setdefault``/``update``/``putenv``): it is its own launcher."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deeply nested: the script's own fault
        return False

    def is_name(node) -> bool:
        return isinstance(node, ast.Constant) and node.value == "TF_CONFIG"

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and is_name(node.slice):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "setdefault", "putenv", "update", "__setitem__"):
            if any(is_name(a) for a in node.args) or any(k.arg == "TF_CONFIG" for k in node.keywords):
                return True
            if any(isinstance(a, ast.Dict) and any(is_name(k) for k in a.keys) for a in node.args):
                return True
    return False


@dataclass
class _Job:
    index: int
    script: str  # absolute path
    findings: list[Finding]
    multiworker: bool
    uses_threads: bool
    rerun: bool  # a second run with the same seed (TFP403), or on one replica (loss scaling)
    lines: list[int] = field(default_factory=list)
    run_path: str = ""  # what the child runs (a notebook's code cells as one script)
    cell_map: dict = field(default_factory=dict)  # (cell, line) -> script line, notebooks only
    one_replica: bool = False  # the re-run uses one device (TFP501/503/504/505: the same step on one replica)
    preempt: bool = False  # worker 1 leaves after PREEMPT_STEPS steps (TFP704: is the peer's failure swallowed?)
    unrunnable: str = ""  # why the script is not run at all (not a regular file, too large, unreadable)
    own_tf_config: bool = False  # the script writes TF_CONFIG: its workers start without the verifier's


# A script (or notebook) is run only when its resolved path is a regular file of at most this many bytes;
# it is read without blocking (a FIFO named *.py) and without reading past the bound (a link to /dev/zero).
from tfpar_lint.verify.source import SCRIPT_MAX_BYTES  # noqa: E402


def _unreadable(shown: str, real: str, e: BaseException) -> str:
    import stat as stat_mod

    if isinstance(e, FileTooLarge):
        return f"not run: {shown} is larger than {SCRIPT_MAX_BYTES >> 20} MB"
    if isinstance(e, (NotRegularFile, IsADirectoryError)):
        try:
            mode = os.stat(real).st_mode
            kind = ("a directory" if stat_mod.S_ISDIR(mode) else "a FIFO" if stat_mod.S_ISFIFO(mode) else
                    "a character device" if stat_mod.S_ISCHR(mode) else "a block device" if stat_mod.S_ISBLK(mode)
                    else "a socket" if stat_mod.S_ISSOCK(mode) else "not a regular file")
        except OSError:
            kind = "not a regular file"
        via = f" ({shown} resolves to {real})" if os.path.abspath(shown) != real else ""
        return f"not run: {shown} is {kind}{via}; only regular files are run"
    if isinstance(e, UnicodeDecodeError):
        return f"not run: {shown} is not UTF-8 text"
    return f"not run: {shown} cannot be read: {getattr(e, 'strerror', None) or e}"


def _notebook_script(path: str, folder: str) -> tuple[str, dict, str]:
    """A notebook's code cells as one script: (script path, (cell, line) -> line, text)."""
    from tfpar_lint.notebook import code_cells

    cells = code_cells(read_regular(path, SCRIPT_MAX_BYTES).decode("utf-8"))
    out: list[str] = []
    cmap: dict = {}
    for number, src in cells:
        out.append(f"# --- cell {number} ---")
        for i, ln in enumerate(src.splitlines(), 1):
            out.append(ln)
            cmap[(number, i)] = len(out)
        out.append("")
    os.makedirs(folder, exist_ok=True)
    script = os.path.join(folder, os.path.splitext(os.path.basename(path))[0] + "_cells.py")
    text = "\n".join(out) + "\n"
    with open(script, "w", encoding="utf-8") as f:
        f.write(text)
    return script, cmap, text


class _Slots:
    """Counting semaphore that hands out n slots at once (clusters)."""

    def __init__(self, n: int):
        self.free = n
        self.total = n
        self.cv = threading.Condition()

    cancel: Optional[threading.Event] = None

    def acquire(self, n: int) -> int:
        """Take n slots; 0 when the verifier was interrupted meanwhile (the run must not start)."""
        n = min(n, self.total)
        with self.cv:
            while self.free < n:
                if self.cancel is not None and self.cancel.is_set():
                    return 0
                self.cv.wait(0.2)
            if self.cancel is not None and self.cancel.is_set():
                return 0
            self.free -= n
        return n

    def release(self, n: int) -> None:
        with self.cv:
            self.free += n
            self.cv.notify_all()


def default_jobs(req: DeviceRequest) -> int:
    if req.kind == "gpu" or (req.kind == "auto" and host_has_gpu()):
        return 1
    return max(1, os.cpu_count() or 1)


def verify_findings(scripts, findings, *, devices="auto", max_steps=3, timeout=120.0, script_args=(),
                    jobs=None, workdir=None, sandbox=None) -> list[ScriptRun]:
    """Run ``scripts`` and give every finding its verdict.  ``sandbox``: ``"auto"`` (the default, or
    ``TFPAR_VERIFY_SANDBOX``) runs each script in the namespace sandbox and raises
    :class:`sandbox.Unavailable` where it cannot be set up; ``"none"`` runs them unisolated."""
    sandbox_mode = sandbox_mod.requested(sandbox)
    req = parse_devices(devices)
    max_steps = max(1, int(max_steps))
    timeout = float(timeout)
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(os.path.realpath(f.path), []).append(f)
    order: list[str] = []
    for s in scripts:
        rp = os.path.realpath(s)
        if rp not in order:
            order.append(rp)
    display = {os.path.realpath(s): s for s in scripts}
    keep = workdir is not None or os.environ.get("TFPAR_VERIFY_KEEP") == "1"
    root = workdir or tempfile.mkdtemp(prefix="tfpar-verify-")
    os.makedirs(root, exist_ok=True)
    jobs_list: list[_Job] = []
    for i, rp in enumerate(order):
        fs = by_path.get(rp, [])
        run_path, cmap = rp, {}
        unrunnable = ""
        try:
            if rp.endswith(".ipynb"):
                run_path, cmap, text = _notebook_script(rp, os.path.join(root, f"{i:03d}-notebook"))
            else:
                text = read_regular(rp, SCRIPT_MAX_BYTES).decode("utf-8", "replace")
        except (OSError, ValueError) as e:
            text = ""
            unrunnable = _unreadable(display.get(rp, rp), rp, e)
        codes = {f.code for f in fs}
        code_text = _code_only(text)
        jobs_list.append(_Job(
            index=i, script=rp, findings=fs,
            multiworker=bool(_MWMS.search(code_text)) or any(c.startswith("TFP6") for c in codes),
            uses_threads=bool(_THREADS.search(code_text)) or any(c.startswith("TFP3") for c in codes),
            rerun="TFP403" in codes or bool(codes & ONE_REPLICA_CODES),
            one_replica="TFP403" not in codes and bool(codes & ONE_REPLICA_CODES),
            preempt="TFP704" in codes,
            own_tf_config=_writes_tf_config(text),
            lines=sorted({report.script_line(f, cmap) for f in fs}),
            run_path=run_path, cell_map=cmap, unrunnable=unrunnable,
        ))
    n_jobs = jobs if jobs and jobs > 0 else default_jobs(req)
    slots = _Slots(n_jobs)
    base_env = _child_env(req, None)
    try:
        mode, mode_detail = sandbox_mod.probe(os.path.join(root, "probe"), base_env, sandbox_mode)
    except sandbox_mod.Unavailable:
        if not keep:
            files.remove_tree(root)
        raise
    if mode == "none":
        sys.stderr.write(f"tfpar-lint: warning: {mode_detail}: the scripts run with your permissions, and only "
                         f"Python's own file writes are redirected (native code, other programs and the network "
                         f"are not contained)\n")
    ctx = dict(req=req, max_steps=max_steps, timeout=timeout, script_args=list(script_args or ()),
               root=root, slots=slots, zygote=None, cwd=os.getcwd(), display=display, sandbox=mode,
               sandbox_detail=mode_detail, cancel=threading.Event(), live=set(), live_lock=threading.Lock(),
               marker=f"{os.getpid()}-{os.path.basename(root)}", memory_limit=_memory_limit(),
               output_cap=_output_cap())
    slots.cancel = ctx["cancel"]
    was_subreaper = sandbox_mod.set_subreaper()  # orphans of the runs come back to this process, not to init
    n_runs = sum((NUM_WORKERS if j.multiworker else 1) * (2 if j.rerun else 1) for j in jobs_list)
    main_thread = threading.current_thread() is threading.main_thread()
    old_handlers = {}
    interrupted = [0]

    def on_signal(signum, frame):
        if interrupted[0]:  # the second Ctrl-C: kill everything and leave now
            _kill_everything(ctx)
            if not keep:
                files.remove_tree(root)
            os._exit(128 + signum)
        interrupted[0] = signum
        ctx["cancel"].set()
        raise KeyboardInterrupt

    if main_thread:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                old_handlers[sig] = signal.signal(sig, on_signal)
            except (ValueError, OSError):
                pass
    runs: list[ScriptRun] = []
    futs: dict = {}
    ex = cf.ThreadPoolExecutor(max_workers=max(1, n_jobs) * 2)
    try:
        if n_runs > 1 and os.environ.get("TFPAR_VERIFY_FORK", "1") != "0":
            try:
                ctx["zygote"] = zygote.Server(dict(base_env, HOME=_private_home(os.path.join(root, "zygote")),
                                                   **{procs.MARKER: ctx["marker"]}), os.path.join(root, "zygote.log"))
            except OSError:
                ctx["zygote"] = None
        # One task per run (a job with a re-run gives two tasks running in parallel).
        for job in jobs_list:
            futs[(job.index, 0)] = ex.submit(_execute, job, ctx, False)
            if job.rerun:
                futs[(job.index, 1)] = ex.submit(_execute, job, ctx, True)
        for job in jobs_list:
            data = futs[(job.index, 0)].result()
            if job.rerun:
                data.rerun = futs[(job.index, 1)].result()
            runs.append(_conclude_one(job, data, display.get(job.script, job.script), root if keep else "", ctx))
    except KeyboardInterrupt:
        ctx["cancel"].set()
        signum = interrupted[0] or signal.SIGINT
        interrupted[0] = interrupted[0] or signal.SIGINT
        ex.shutdown(wait=False, cancel_futures=True)
        _kill_everything(ctx)
        # Lose nothing: every run that had finished (also after one still running) is reported.
        done_paths = {r.path for r in runs}
        for job in jobs_list:
            keys = [(job.index, 0)] + ([(job.index, 1)] if job.rerun else [])
            fs = [futs.get(k) for k in keys]
            shown = display.get(job.script, job.script)
            if shown in done_paths or not all(f is not None and f.done() and not f.cancelled() for f in fs):
                continue
            try:
                data = fs[0].result()
                if job.rerun:
                    data.rerun = fs[1].result()
                if getattr(data, "interrupted", False) or getattr(data.rerun, "interrupted", False):
                    continue  # stopped or never started by the interrupt: not a result
                runs.append(report.conclude(job, data, shown, root if keep else "", ctx))
            except Exception:  # noqa: BLE001 - a run that cannot be concluded is not reported
                continue
        raise Interrupted(runs, signum) from None
    finally:
        ex.shutdown(wait=not interrupted[0], cancel_futures=True)
        if ctx["zygote"] is not None:
            ctx["zygote"].close(kill=bool(interrupted[0]))
        procs.sweep(ctx["marker"])
        if not keep:
            files.remove_tree(root)
        if was_subreaper:
            try:
                sandbox_mod.prctl(sandbox_mod.PR_SET_CHILD_SUBREAPER, 0)
            except OSError:
                pass
        for sig, h in old_handlers.items():
            try:
                # interrupted: the caller still reports what was found, and another signal leaves at once
                signal.signal(sig, _leave_now if interrupted[0] else h)
            except (ValueError, OSError):
                pass
    return runs


def _leave_now(signum, frame):
    os._exit(128 + signum)


def _kill_everything(ctx: dict) -> None:
    """SIGKILL every run now (their whole process trees), the fork server, and what carries the marker."""
    with ctx["live_lock"]:
        live = list(ctx["live"])
    roots = []
    for proc in live:
        proc.killed = True
        proc.kill_reason = proc.kill_reason or "interrupted"
        roots.append(proc.p.pid)
        try:
            os.killpg(proc.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
    zyg = ctx.get("zygote")
    if zyg is not None:
        try:
            os.killpg(zyg.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        roots.append(zyg.p.pid)
    procs.kill(procs.descendants(roots))
    procs.sweep(ctx["marker"])


# ------------------------------------------------------------------ running
def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _private_home(folder: str) -> str:
    """A run's own HOME (in its scratch: Keras writes ~/.keras/keras.json when it is imported, and a
    script's ~/ files must not reach the user's home, with a sandbox or without)."""
    home = os.path.join(folder, "home")
    os.makedirs(home, exist_ok=True)
    return home


def _child_env(req: DeviceRequest, tf_config: Optional[str]) -> dict[str, str]:
    env = dict(os.environ)
    if "PYTHONUSERBASE" not in env:  # the user's site-packages stay importable under a private HOME
        import site

        env["PYTHONUSERBASE"] = site.getuserbase()
    env["PYTHONPATH"] = _SRC_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTHONHASHSEED", "0")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if req.kind == "cpu" or (req.kind == "auto" and not host_has_gpu()):
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.pop("TF_CONFIG", None)
    if tf_config:
        env["TF_CONFIG"] = tf_config
    return env


class _Proc:
    def __init__(self, popen: subprocess.Popen, rundir: str, worker: Optional[int], relays=()):
        self.p = popen
        self.rundir = rundir
        self.worker = worker
        self.killed = False
        self.kill_reason = ""
        self.sigkilled = False  # still alive KILL_GRACE after SIGTERM: the verifier sent SIGKILL
        self.relays = list(relays)
        self.start: Optional[int] = None  # its start time (procs.start_time): a pid names one process


def _spawn(job: _Job, ctx: dict, rundir: str, deadline: float, *, worker=None, tf_config=None,
           seed=None, one=False, cluster_pid=None, tmpdir=None) -> _Proc:
    os.makedirs(rundir, exist_ok=True)
    start_dir = os.path.join(rundir, "cwd")  # where the interpreter starts; the script runs in ctx["cwd"]
    tmpdir = tmpdir or os.path.join(rundir, "tmp")  # a cluster's workers share one, as on one machine
    sync = os.path.join(os.path.dirname(rundir), "sync") if worker is not None else None
    # With a holder, the workers' shared folder lives in its scratch tmpfs (inside the quota); a real
    # folder only for workers without one (--sandbox none).
    for d in (start_dir, tmpdir) + ((sync,) if sync and not cluster_pid else ()):
        os.makedirs(d, exist_ok=True)
    marker = f"{ctx['marker']}/{os.path.relpath(rundir, ctx['root'])}"
    spec = {
        "script": job.run_path or job.script,
        "argv0": ctx["display"].get(job.script, job.script),
        "cwd": ctx["cwd"],
        "guard_dir": os.path.dirname(job.script),
        "script_args": ctx["script_args"],
        "devices": _one_device(ctx["req"]) if one else str(ctx["req"]),
        "max_steps": ctx["max_steps"],
        "lines": job.lines,
        "deadline": deadline,
        "hard_grace": KILL_GRACE + PEER_GRACE + 20,
        "result": os.path.join(rundir, "result.json"),
        "stacks": os.path.join(rundir, "stacks.txt"),
        "sandbox": ctx["sandbox"],
        "scratch": os.path.join(rundir, "fs"),
        "tmpdir": tmpdir,
        "cluster_pid": cluster_pid,
        "protected_pids": [os.getpid()] + ([ctx["zygote"].p.pid] if ctx.get("zygote") is not None else []),
        "worker_index": worker,
        "num_workers": NUM_WORKERS if worker is not None else 1,
        "tf_config": tf_config,
        "own_tf_config": job.own_tf_config,
        "uses_threads": job.uses_threads,
        "seed": seed,
        "np_seed": seed if job.one_replica else None,
        "preempt_after_steps": PREEMPT_STEPS if (job.preempt and worker == 1) else 0,
        # the workers of a local cluster agree there on the step at which they all stop
        "sync_dir": sync,
    }
    spec_path = os.path.join(rundir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    # A script that writes TF_CONFIG runs as it would without the verifier; the strategy gets the
    # verifier's cluster only where the script had written its own TF_CONFIG (instrument.py).
    env = _child_env(ctx["req"], None if job.own_tf_config else tf_config)
    env[procs.MARKER] = marker
    env["TMPDIR"] = tmpdir
    env["HOME"] = _private_home(rundir)
    relays = []
    fifos = []
    for name in ("stdout", "stderr"):
        fifo = os.path.join(rundir, f"{name}.fifo")
        os.mkfifo(fifo, 0o600)
        fifos.append(fifo)
        relays.append(procs.OutputRelay(fifo, os.path.join(rundir, f"{name}.txt"), ctx["output_cap"]))
    try:
        zyg: Optional[zygote.Server] = ctx.get("zygote")
        if zyg is not None and zyg.wait_ready(120) and not zyg.dead:
            try:
                fp = zyg.spawn(spec_path, start_dir, env, fifos[0], fifos[1])
                return _register(ctx, _Proc(fp, rundir, worker, relays))  # type: ignore[arg-type]
            except RuntimeError:
                pass
        out = open(fifos[0], "wb")
        err = open(fifos[1], "wb")
        try:
            p = subprocess.Popen(
                [sys.executable, "-m", "tfpar_lint.verify.child", spec_path],
                cwd=start_dir, env=env, stdout=out, stderr=err,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        finally:
            out.close()
            err.close()
        return _register(ctx, _Proc(p, rundir, worker, relays))
    except BaseException:
        for r in relays:
            r.finish(1.0)
        raise


_HAVE_PROC = os.path.isdir("/proc/self")


def _same(proc: _Proc) -> bool:
    """``proc``'s pid still names the process that was started (not a number reused since it was
    reaped); True where /proc cannot tell."""
    if not _HAVE_PROC:
        return True
    return proc.start is not None and procs.start_time(proc.p.pid) == proc.start


def _register(ctx: dict, proc: _Proc) -> _Proc:
    proc.start = procs.start_time(proc.p.pid)
    with ctx["live_lock"]:
        ctx["live"].add(proc)
    if ctx["cancel"].is_set():  # interrupted while it was starting
        _kill_group(proc, "interrupted", grace=0.0)
    return proc


def _one_device(req: DeviceRequest) -> str:
    kind = req.kind
    if kind == "auto":
        kind = "gpu" if host_has_gpu() else "cpu"
    return f"{kind}:1"


def _kill_group(proc: _Proc, reason: str, grace: float = KILL_GRACE) -> None:
    """SIGTERM to the run's process group (the child dumps its stacks and writes its result),
    SIGKILL after ``grace``, then SIGKILL to every process below it (a ``setsid`` child has left
    the group; in namespaces mode the PID namespace takes them all when the script dies)."""
    if proc.p.poll() is not None or not _same(proc):
        return  # it has ended (a forked child's exit status is on its way from the fork server)
    proc.killed = True
    proc.kill_reason = reason
    # Every number is checked against the process it named when it was read: a process that ends
    # during the grace is reaped, and its pid (or process group id) may be another program's
    # process or thread a moment later (pid_max 32768, TensorFlow's many threads).  Killing that
    # by mistake is how a run can die of SIGKILL before its own time-out.
    tree = procs.identities(procs.descendants([proc.p.pid]))
    try:
        os.killpg(proc.p.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    if grace > 0:
        try:
            proc.p.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    if _same(proc):
        proc.sigkilled = proc.p.poll() is None
        tree.update(procs.identities(procs.descendants([proc.p.pid])))
        try:
            os.killpg(proc.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    procs.kill(tree, expect=tree)
    try:
        proc.p.wait(5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


def _execute(job: _Job, ctx: dict, rerun: bool) -> RunData:
    n = NUM_WORKERS if job.multiworker else 1
    got = ctx["slots"].acquire(n)
    t0 = time.time()
    try:
        if ctx["cancel"].is_set() or not got:
            raise _NotStarted()
        if job.unrunnable:
            raise _Unrunnable(job.unrunnable)
        data = _execute_now(job, ctx, rerun)
        if job.multiworker and _step_bound_race(data):
            # The workers agree on the step at which they stop (Recorder.agree), so this should
            # not happen; if it does, the run is reported as it was (never re-run, never turned
            # into NOT_REPRODUCED: the outcome stays "error" and the findings INCONCLUSIVE).
            notes = getattr(data, "driver_notes", None)
            if isinstance(notes, list):
                notes.append("a worker hit UnavailableError while its peer had stopped at the step bound "
                             "(the run is reported as it was, not re-run)")
        return data
    except Exception as e:  # the driver itself failed (spawn, disk): report, never crash the CLI
        msg = ("not run: the verifier was interrupted" if isinstance(e, _NotStarted)
               else str(e) if isinstance(e, (_Refused, _Unrunnable)) else
               f"the verifier could not run the script: {e}")
        err = {"type": "Interrupted" if isinstance(e, _NotStarted) else "NotRunnable" if isinstance(e, _Unrunnable)
               else type(e).__name__, "message": msg,
               "frames": [], "script_lines": [], "location": ""}
        data = RunData(path=job.script, workers=[{"outcome": "failed", "error": err, "notes": []}],
                       outcome="failed", seconds=time.time() - t0)
        data.exit_codes, data.killed, data.driver_notes = [None], [False], []  # type: ignore[attr-defined]
        if isinstance(e, _Refused):  # which sandbox would have run it (the reason is the error)
            kind = "sandbox" if ctx.get("sandbox") == "namespaces" else "no sandbox"
            data.driver_notes.append(f"{kind}: {ctx.get('sandbox_detail', '')}")  # type: ignore[attr-defined]
        data.interrupted = isinstance(e, _NotStarted)  # type: ignore[attr-defined]
        return data
    finally:
        ctx["slots"].release(got)


class _NotStarted(Exception):
    """The verifier was interrupted before this run started."""


class _Unrunnable(Exception):
    """The script is not a regular file of bounded size, or cannot be read: it is not run."""


class _Refused(Exception):
    """The run would be unsafe here and was not started (its message says why and what to set)."""


# opt-in to a local cluster whose gRPC servers listen on every interface (no network namespace)
EXPOSED_CLUSTER_ENV = "TFPAR_VERIFY_EXPOSED_CLUSTER"


def _step_bound_race(data: RunData) -> bool:
    """A worker failed with a collective ``UnavailableError`` while another was stopped by the step bound."""
    workers = [w or {} for w in data.workers]
    unavailable = any((w.get("error") or {}).get("type") == "UnavailableError" for w in workers)
    stopped = any(w.get("outcome") == "stopped" for w in workers)
    return data.outcome == "error" and unavailable and stopped


def _execute_now(job: _Job, ctx: dict, rerun: bool) -> RunData:
    stem = os.path.splitext(os.path.basename(job.script))[0]
    base = os.path.join(ctx["root"], f"{job.index:03d}-{stem}{'-rerun' if rerun else ''}")
    timeout = ctx["timeout"]
    t0 = time.time()
    deadline = t0 + timeout
    seed = FORCED_SEED if job.rerun else None
    running: list[_Proc] = []
    notes: list[str] = []
    holder = None
    try:
        if job.multiworker:
            if ctx["sandbox"] == "namespaces":
                try:
                    os.makedirs(base, exist_ok=True)
                    holder = sandbox.ClusterHolder(_child_env(ctx["req"], None), os.path.join(base, "fs"),
                                                   ctx["cwd"], writable=(base,))
                except OSError as e:
                    notes.append(f"no private namespaces for the cluster ({e}): each worker has its own sandbox")
            if holder is None and os.environ.get(EXPOSED_CLUSTER_ENV) != "1":
                raise _Refused(
                    "not run: a multi-worker script runs as a local cluster, and without a private network "
                    "namespace (none on this machine) TensorFlow's unauthenticated gRPC servers would listen "
                    f"on every interface; set {EXPOSED_CLUSTER_ENV}=1 to run it anyway on a trusted network")
            ports = _free_ports(NUM_WORKERS)
            cluster = {"worker": [f"localhost:{p}" for p in ports]}
            for w in range(NUM_WORKERS):
                tfc = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": w}})
                running.append(_spawn(job, ctx, os.path.join(base, f"worker{w}"), deadline, worker=w,
                                      tf_config=tfc, seed=seed, cluster_pid=holder.pid if holder else None,
                                      tmpdir=os.path.join(base, "tmp")))
            where = ("in a private network namespace whose only interface is loopback" if holder else
                     "(TensorFlow's gRPC servers listen on every interface: no network namespace on this machine)")
            notes.append(f"local cluster of {NUM_WORKERS} workers on loopback ports {', '.join(map(str, ports))} "
                         f"{where}")
        else:
            running.append(_spawn(job, ctx, base, deadline, seed=seed, one=rerun and job.one_replica))
        return _wait_runs(job, ctx, base, running, notes, t0, deadline)
    finally:
        for p in running:
            _kill_group(p, p.kill_reason or "interrupted", grace=0.0)
            with ctx["live_lock"]:
                ctx["live"].discard(p)
        if holder is not None:
            holder.close()


def _wait_runs(job: _Job, ctx: dict, base: str, procs_: list, notes: list, t0: float, deadline: float) -> RunData:
    procs = procs_
    timeout = ctx["timeout"]
    limit = ctx["memory_limit"]
    next_mem = 0.0
    hung = False
    peer_deadline = None
    oom_before = procs_mod.oom_kills()
    while True:
        alive = [p for p in procs if p.p.poll() is None]
        if not alive:
            break
        now = time.time()
        failed = [p for p in procs if p.p.poll() not in (None, 0)]
        if failed and peer_deadline is None and len(procs) > 1:
            peer_deadline = now + PEER_GRACE
        if peer_deadline is not None and now >= peer_deadline:
            for p in alive:
                _kill_group(p, f"still running {PEER_GRACE:.0f} s after worker {failed[0].worker} failed")
                notes.append(f"worker {p.worker} killed {PEER_GRACE:.0f} s after worker {failed[0].worker} failed "
                             f"(blocked waiting for its peer)")
            continue
        if now >= deadline + 0.3:
            hung = True
            for p in alive:
                _kill_group(p, f"timeout {timeout:g} s")
            continue
        if ctx["cancel"].is_set():
            for p in alive:
                _kill_group(p, "interrupted", grace=0.5)
            continue
        if now >= next_mem:
            next_mem = now + 0.5
            for p in alive:
                if not _same(p):  # ended a moment ago (its exit is on its way): not another process's memory
                    continue
                rss = procs_mod.tree_rss([p.p.pid])
                files = procs_mod.scratch_bytes(p.p.pid, ctx["root"])  # what it wrote lives in RAM (tmpfs)
                if not files:  # no sandbox: the mirror of what it wrote, on the run folder's disk
                    files = procs_mod.tree_bytes(os.path.join(p.rundir, "fs", "overlay"))
                if rss + files > limit:
                    what = f"its processes used {rss >> 20} MB" + (f" and its writes {files >> 20} MB" if files else "")
                    _kill_group(p, f"memory limit: {what}, the limit is {limit >> 20} MB")
                    p.memory_killed = p.killed  # False when it ended by itself meanwhile
                    if p.memory_killed:
                        notes.append(f"killed at the memory limit ({limit >> 20} MB; TFPAR_VERIFY_MEMORY_MB "
                                     f"raises it)")
        try:
            alive[0].p.wait(0.05)
        except subprocess.TimeoutExpired:
            pass
    seconds = time.time() - t0
    notes.extend(_death_notes(procs, timeout, limit, oom_before, seconds))
    # Whatever the script left behind (a Popen child, a setsid child, a fork ignoring SIGTERM) dies now.
    swept = procs_mod.sweep(ctx["marker"] + "/" + os.path.relpath(base, ctx["root"]), [p.p.pid for p in procs],
                            {p.p.pid: p.start for p in procs if p.start is not None})
    for p in procs:
        for r in p.relays:
            r.finish(5.0)
    if swept:
        notes.append(f"killed {swept} process{'es' if swept != 1 else ''} the script left running")
    results = []
    for p in procs:
        r = _read_json(os.path.join(p.rundir, "result.json"))
        _add_refusals(r, _read_json(os.path.join(p.rundir, sandbox_mod.REFUSED_NAME), 1 << 16), notes)
        results.append(r)
    hang_loc = ""
    if hung or any(p.killed for p in procs):
        locs = []
        for p in procs:
            if p.killed:
                loc = _hang_location(os.path.join(p.rundir, "stacks.txt"), job.script, (job.run_path,))
                if loc:
                    locs.append((f"worker {p.worker}: " if p.worker is not None else "") + loc)
        hang_loc = "; ".join(locs)
    for p, r in zip(procs, results):
        if getattr(p, "memory_killed", False):
            r.update({"outcome": "failed", "error": {"type": "MemoryLimit", "message": f"killed ({p.kill_reason})",
                                                     "frames": [], "script_lines": [], "location": ""}})
    outcome = _outcome(procs, results, hung)
    # A child that died without a result (segfault, SIGKILL): keep its stderr tail.
    for p, r in zip(procs, results):
        if not r:
            tail = _tail(os.path.join(p.rundir, "stderr.txt"))
            r.update({"outcome": "failed", "notes": [],
                      "error": {"type": "ProcessError",
                                "message": (f"killed ({p.kill_reason})" if p.killed else
                                            f"exited with status {p.p.returncode} without a result") +
                                           (f"; stderr: {tail}" if tail and not p.killed else ""),
                                "frames": [], "script_lines": [], "location": ""}} if not p.killed else {})
    data = RunData(path=job.script, workers=results, outcome=outcome, seconds=seconds, hang=hang_loc,
                   hang_seconds=timeout if hung else 0.0)
    data.exit_codes = [p.p.returncode for p in procs]  # type: ignore[attr-defined]
    data.killed = [p.killed for p in procs]  # type: ignore[attr-defined]
    data.driver_notes = notes  # type: ignore[attr-defined]
    data.rundir = base  # type: ignore[attr-defined]
    data.interrupted = any(p.kill_reason == "interrupted" for p in procs)  # type: ignore[attr-defined]
    data.outputs = [_outputs(p, ctx["output_cap"]) for p in procs]  # type: ignore[attr-defined]
    data.sandbox = [(r or {}).get("sandbox", "") for r in results]  # type: ignore[attr-defined]
    sb_notes = []
    for r in results:
        r = r or {}
        if r.get("sandbox_error"):
            sb_notes.append(f"the sandbox could not be entered, and the script was not run: {r['sandbox_error']}")
        elif r.get("sandbox_detail"):
            sb_notes.append(f"sandbox: {r['sandbox_detail']}")
        elif r.get("sandbox") == "none" or (not r.get("sandbox") and ctx["sandbox"] == "none"):
            sb_notes.append(f"no sandbox: {ctx['sandbox_detail']}; the script ran with your permissions; only "
                            f"Python's own file writes outside the run folder were redirected to a copy in it")
        elif not r.get("sandbox"):  # no result (os._exit, a crash): what the driver asked for
            sb_notes.append(f"sandbox: {ctx['sandbox_detail']}")
    for r in results:
        err = (r or {}).get("error")
        detail = str((r or {}).get("sandbox_detail", ""))
        if isinstance(err, dict) and err.get("type") == "PermissionError" and "(tfpar-lint is root)" in detail:
            sb_notes.append("the script failed with PermissionError: tfpar-lint runs as root, so the script ran as an "
                            "unprivileged uid, and files it does not own (root's files over 1 MB, folders outside "
                            "its own) stay read-only to it; verify as the files' owner (an ordinary user) to run it "
                            "as it runs for you")
            break
    refused = report.refused(results)
    if refused:
        sb_notes.append(f"sandbox: the script tried to change mounts or namespaces, or to trace a process "
                        f"({', '.join(refused)}), and was refused")
    data.sandbox_notes = sb_notes  # type: ignore[attr-defined]
    strategies = data.strategies()
    data.replicas = max((s.get("replicas", 0) for s in strategies), default=0)
    devs: list[str] = []
    for s in strategies:
        for d in s.get("devices", []):
            if d not in devs:
                devs.append(d)
    if not devs:
        for r in results:
            for d in (r or {}).get("devices", []):
                d2 = d if len(results) == 1 else f"worker{results.index(r)}{d}"
                if d2 not in devs:
                    devs.append(d2)
    data.devices = devs
    return data


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _death_notes(procs: list, timeout: float, limit: int, oom_before: Optional[int], seconds: float) -> list[str]:
    """Say which limit ended each process that did not end by itself: the verifier's time-out or
    memory limit (SIGTERM, and SIGKILL when it was still alive ``KILL_GRACE`` s later), or a
    signal the verifier did not send (the kernel's OOM killer, another program)."""
    out = []
    for p in procs:
        who = f"worker {p.worker}" if p.worker is not None else "the script"
        rc = p.p.returncode
        if p.killed:
            how = f"SIGTERM, then SIGKILL {KILL_GRACE:g} s later" if p.sigkilled else "SIGTERM"
            out.append(f"{who} was stopped by the verifier: {p.kill_reason} ({how})")
        elif rc is not None and rc < 0 and -rc in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            oom_after = procs_mod.oom_kills()
            why = (f"the kernel's OOM killer killed {oom_after - oom_before} process(es) on this machine meanwhile "
                   f"(/proc/vmstat oom_kill): most likely that" if oom_before is not None and oom_after is not None
                   and oom_after > oom_before else "no OOM kill was counted on this machine meanwhile: another program")
            out.append(f"{who} was killed by {_signal_name(-rc)} after {seconds:.1f} s, not by the verifier (its "
                       f"limits: time-out {timeout:g} s, memory {limit >> 20} MB, output cap): {why}")
    return out


def _outputs(p: _Proc, cap: int) -> dict:
    out = {}
    for r, name in zip(p.relays, ("stdout", "stderr")):
        out[name] = procs_mod.read_text(os.path.join(p.rundir, f"{name}.txt"), cap + 128 * 1024)
        out[name + "_bytes"] = r.total
    return out


def _outcome(procs, results, hung) -> str:
    if hung:
        return "hung"
    outs = [(r or {}).get("outcome", "failed") for r in results]
    if any(getattr(p, "memory_killed", False) for p in procs):
        return "failed"
    if any(p.killed for p in procs):
        # a worker killed after its peer failed
        return "error" if "error" in outs else "hung"
    for o in ("failed", "error", "hung"):
        if o in outs:
            return o
    return "stopped" if "stopped" in outs else "ok"


def _read_json(path: str, max_size: int = sandbox_mod.RESULT_MAX) -> dict:
    """A JSON object the run wrote (its result, the relay's refusals): a regular file only, read
    without blocking, at most ``max_size`` bytes, never through a link; {} for anything else (a
    FIFO or link the script planted, a text too large, too deep or not an object).  The script can
    write these (see docs/verify.md, Security): what comes back is data to check, not to trust."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        import stat as stat_mod

        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or st.st_size > max_size:
            return {}
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = files.read_bounded(fh, max_size)
        if len(data) > max_size:
            return {}
        obj = json.loads(data)
    except (OSError, ValueError, RecursionError, MemoryError):
        return {}
    finally:
        os.close(fd)
    return obj if isinstance(obj, dict) else {}


def _add_refusals(result: dict, relay: dict, notes: list) -> None:
    """What the relay answered for the seccomp filter (every refused call, however it was made) joins
    the calls the child saw from Python (``sandbox_refused``)."""
    seen = result.get("sandbox_refused")
    seen = [str(x)[:80] for x in seen[:sandbox_mod.REFUSED_MAX]] if isinstance(seen, list) else []
    refused = relay.get("refused")
    if isinstance(refused, dict):
        for name, count in list(refused.items())[:sandbox_mod.REFUSED_MAX]:
            n = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
            label = f"{str(name)[:80]}" + (f" ({n} times)" if n > 1 else "")
            if not any(str(name) == s or s.endswith(f"({name})") or s.startswith(f"{name} (") for s in seen):
                seen.append(label)
    if seen:
        result["sandbox_refused"] = seen
    dropped = relay.get("result_dropped")
    if isinstance(dropped, int) and dropped > 0:
        notes.append(f"the run's result was larger than {dropped >> 20} MB and was not read")


def _read_tail(path: str, n: int) -> str:
    """The last ``n`` bytes of the regular file ``path`` as text (never a FIFO, a device or a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        import stat as stat_mod

        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            return ""
        os.lseek(fd, max(0, st.st_size - n), os.SEEK_SET)
        parts, got = [], 0
        while got < n:
            chunk = os.read(fd, min(1 << 16, n - got))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _tail(path: str, n: int = 600) -> str:
    text = _read_tail(path, 4000)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-4:])[-n:]


_THREAD_HDR = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)", re.M)
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+) in (.+)$', re.M)


_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the verifier's frames (child.py, probes)


def _hang_location(stacks_path: str, script: str, also: tuple = ()) -> str:
    """``script.py:40 in <module> (innermost: threading.py:320 in wait)`` from a faulthandler dump.

    The place is the user's: the innermost frame of the script (or of ``also``, the file the child
    ran for a notebook) in the main thread, else in any thread, else the innermost frame outside
    the verifier's own files; a verifier frame (``child.py``) is never the answer."""
    # Only the last part (the relay keeps no more), and only as the script's own output: it ran in
    # the script's process, which can write there too.  A place it names must be a line of the script.
    text = _read_tail(stacks_path, sandbox_mod.STACKS_MAX)
    if not text.strip():
        return ""
    blocks = []
    heads = list(_THREAD_HDR.finditer(text))
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        frames = _FRAME.findall(text[h.end():end])
        blocks.append(frames)
    if not blocks:
        return ""
    blocks.reverse()  # the latest dump first: text the script wrote there before it is not the answer
    main = next((b for b in blocks if any(fn.endswith(os.path.join("verify", "child.py")) and fun.strip() ==
                                          "_run_script" for fn, _, fun in b)), blocks[0])
    mine = {os.path.realpath(p) for p in (script,) + tuple(also) if p}
    lines = 0
    for p in (script,) + tuple(also):
        try:
            lines = max(lines, read_regular(p, SCRIPT_MAX_BYTES).count(b"\n") + 1)
        except OSError:
            continue

    def ours(fn: str) -> bool:
        return os.path.realpath(fn).startswith(os.path.realpath(_OWN_DIR))

    # a frame of the script at a line it does not have was not written by faulthandler
    blocks = [[f for f in b if os.path.realpath(f[0]) not in mine or 0 < int(f[1]) <= lines] for b in blocks]
    main = next((b for b in blocks if any(fn.endswith(os.path.join("verify", "child.py")) and fun.strip() ==
                                          "_run_script" for fn, _, fun in b)), blocks[0])

    def user(block) -> Optional[tuple]:
        return next(((fn, ln, fun) for fn, ln, fun in block
                     if os.path.realpath(fn) in mine and 0 < int(ln) <= lines), None)

    hit = user(main)
    if hit is None:
        for b in blocks:
            hit = user(b)
            if hit is not None:
                main = b
                break
    inner_frames = [f for f in main if not ours(f[0])]
    inner = f"{os.path.basename(inner_frames[0][0])}:{inner_frames[0][1]} in {inner_frames[0][2].strip()}" \
        if inner_frames else ""
    if hit is None:
        return inner or "in the verifier's set-up, before the script started"
    where = f"{os.path.basename(script)}:{hit[1]} in {hit[2].strip()}"
    if inner_frames and inner_frames[0] != hit:
        return f"{where} (innermost: {inner})"
    return where


def _conclude_one(job: _Job, data: RunData, display: str, keep_root: str = "",
                  ctx: Optional[dict] = None) -> ScriptRun:
    """:func:`report.conclude`, and if judging this run fails (a verifier bug, a result too deep to
    walk), a failed run of this script alone: the other scripts' verdicts are kept."""
    try:
        return report.conclude(job, data, display, keep_root, ctx)
    except (Exception, RecursionError) as e:  # noqa: BLE001
        why = f"the verifier could not judge this run: {type(e).__name__}: {e}"
        for f in job.findings:
            f.verification = Verification(status=INCONCLUSIVE, evidence=why, replicas=0, devices=[], seconds=0.0)
        return ScriptRun(path=display, outcome="failed", exit_status=None, seconds=round(data.seconds, 2),
                         replicas=0, devices=[], workers=len(data.workers), strategies=[], steps=0, error=why,
                         hang_location="", notes=[why], startup_seconds=0, workdir="",
                         sandbox=report._sandbox_name(data, ctx), sandbox_refused=[], stdout="", stderr="")
