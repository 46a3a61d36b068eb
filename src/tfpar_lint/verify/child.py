"""Instrumented child: ``python -m tfpar_lint.verify.child SPEC.json``.

Order matters: stack dumps armed, TensorFlow imported, logical devices
configured (before any op), probes installed, then the script runs from a
marked copy of its text (same line numbers) as ``__main__`` in the working
directory the driver chose.  The result (observations, error, markers that
fired) is written as JSON to ``spec["result"]`` whatever happens; the
process then leaves with ``os._exit`` so that stray non-daemon threads or a
slow TensorFlow shutdown cannot hang it.
"""
from __future__ import annotations

import builtins
import faulthandler
import json
import linecache
import os
import signal
import sys
import threading
import time
import types

from tfpar_lint.verify.runtime import STOP_SENTINEL, Recorder, VerifierStop, describe_error as _describe_error


_os_exit = os._exit  # the verifier's own exits (the script's os._exit is caught: _catch_os_exit)


class VerifierTimeout(BaseException):
    """Raised in the main thread when the driver sends SIGTERM at the timeout."""


_STATE: dict = {}


def main(argv: list[str]) -> int:
    spec_path = argv[0]
    with open(spec_path) as f:
        spec = json.load(f)
    from tfpar_lint.verify import sandbox

    # SIGKILL of tfpar-lint (or of the fork server) takes this run down: a link of the chain
    parent = os.getppid()
    sandbox.die_with_parent(parent if parent in (spec.get("protected_pids") or [parent]) else None)
    t_start = time.time()
    result: dict = {"outcome": "failed", "notes": [], "pid": os.getpid()}
    # The stack dumps go through a pipe to the process outside the script (the relay, or the
    # fallback's reaper), which keeps only their last part (sandbox.STACKS_MAX): the script holds
    # the write end, and a file there would let it fill the disk.
    stacks_r, stacks_w = os.pipe()
    stacks = os.fdopen(stacks_w, "w")
    _STATE.update(spec=spec, result=result, stacks=stacks, stacks_r=stacks_r, t_start=t_start)
    _contain(spec, result)
    remaining = spec["deadline"] - time.time()
    if remaining > 0:
        faulthandler.dump_traceback_later(max(0.5, remaining), exit=False, file=stacks)
    signal.signal(signal.SIGTERM, _on_sigterm)
    os.environ.pop("TFPAR_VERIFY_SPEC", None)

    R = None
    try:
        R = _setup(spec, result)
        result["startup_seconds"] = round(time.time() - t_start, 3)
        _run_script(spec, R, result)
    except VerifierTimeout:
        result["outcome"] = "hung"
    except BaseException as e:  # set-up failure (devices, imports)
        result["outcome"] = "failed"
        result["error"] = _describe_error(e, R, spec["script"])
    finally:
        faulthandler.cancel_dump_traceback_later()
        _finish(R, result, spec, t_start)
    code = 0 if result["outcome"] in ("ok", "stopped") else 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        _end_descendants()
    finally:
        _os_exit(code)


def _end_descendants() -> None:
    """The script is over: nothing it started may outlive it (this process is their subreaper
    without a sandbox; with one, the PID namespace ends with it anyway)."""
    try:
        from tfpar_lint.verify import procs

        me = os.getpid()
        procs.kill(procs.descendants([me]) - {me})
    except Exception:  # pragma: no cover
        pass


def _contain(spec: dict, result: dict) -> None:
    """Enter the sandbox (namespaces) or arm the Python-level guard, then go to
    the directory ``python script.py`` would run in.  In namespaces mode this
    process becomes a relay and the rest runs in a forked child (PID 1 of its
    own PID namespace)."""
    import resource
    import tempfile

    from tfpar_lint.verify import sandbox

    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the user's folder
    except (ValueError, OSError):
        pass
    rundir = os.path.dirname(os.path.abspath(spec["result"]))
    # Only the relay outside the sandbox keeps this descriptor (see sandbox.enter); the sandboxed
    # process hands its result over a pipe.
    _STATE["result_dirfd"] = os.open(rundir, os.O_RDONLY | os.O_DIRECTORY)
    mode = spec.get("sandbox") or "none"
    cwd = spec.get("cwd") or os.getcwd()
    if mode == "namespaces":
        try:
            t0 = time.time()
            c = sandbox.enter(spec["scratch"], cwd, spec.get("cluster_pid"),
                              result=(_STATE["result_dirfd"], os.path.basename(spec["result"])),
                              sync=spec.get("sync_dir") if not spec.get("cluster_pid") else None,
                              keep=(_STATE["stacks"].fileno(),), stacks=_STATE.pop("stacks_r"),
                              writable=tuple(p for p in (spec.get("tmpdir"), os.environ.get("HOME")) if p))
            _STATE.pop("result_dirfd", None)  # closed in here: only the relay holds it
            if spec.get("sync_dir"):  # the cluster's shared folder, as the sandbox shows it
                spec["sync_dir"] = sandbox.SYNC_DIR
                os.makedirs(sandbox.SYNC_DIR, exist_ok=True)
            result["sandbox_seconds"] = round(time.time() - t0, 4)
            result["sandbox"] = "namespaces"
            result["sandbox_detail"] = c.detail
            result["pid"] = os.getpid()
        except BaseException as e:  # noqa: BLE001 - never run the script outside the sandbox asked for
            result["sandbox"] = "namespaces"
            result["sandbox_error"] = f"{type(e).__name__}: {e}"
            result["outcome"] = "failed"
            result["error"] = {"type": "SandboxError", "message": f"the sandbox could not be entered ({type(e).__name__}: "
                               f"{e}); the script was not run", "frames": [], "script_lines": [], "location": ""}
            _finish(None, result, spec, _STATE.get("t_start", time.time()))
            _os_exit(1)
    sandbox.watch(refuse=mode != "namespaces")
    if mode != "namespaces":
        # --sandbox none, asked for by name: nothing is isolated; the Python-level guard redirects what
        # Python's own file layer writes outside the run folder, and nothing else.
        result["sandbox"] = "none"
        _STATE["python_guard"] = [rundir, spec.get("tmpdir") or rundir] + (
            [spec["sync_dir"]] if spec.get("sync_dir") else [])
        # No PID namespace: this process stays outside as the run's subreaper, and kills what the
        # script left (setsid, double forks, execve) once it has ended; the script runs in a child.
        # It keeps the tail of the script's stack dumps too (the pipe's read end).
        sandbox.reaper_split(stacks=_STATE.pop("stacks_r"), dirfd=_STATE["result_dirfd"])
        result["pid"] = os.getpid()
        try:
            os.chdir(cwd)
        except OSError:
            pass
    tempfile.tempdir = None  # the zygote may have cached its own TMPDIR
    deadline = float(spec.get("deadline", 0) or 0)
    if deadline:
        # A last resort when the driver itself is gone: nobody else would end this process.
        def _watchdog():
            time.sleep(max(1.0, deadline - time.time() + float(spec.get("hard_grace", 30))))
            _os_exit(124)

        from tfpar_lint.verify.runtime import own_thread

        # Marked as the verifier's: the threads probe watches variables only while the script has threads.
        own_thread(threading.Thread(target=_watchdog, name="tfpar-verify-watchdog", daemon=True)).start()


def _on_sigterm(signum, frame):  # pragma: no cover - exercised by the hang test
    if threading.current_thread() is threading.main_thread():
        raise VerifierTimeout()


def _setup(spec: dict, result: dict) -> Recorder:
    t0 = time.time()
    import tensorflow as tf

    result["tf_import_seconds"] = round(time.time() - t0, 3)
    from tfpar_lint.verify import devices as dev
    from tfpar_lint.verify import instrument, probes, source, synthetic

    req = dev.parse_devices(spec["devices"])
    worker = spec.get("worker_index")
    devs, notes, split = dev.configure(req, worker, spec.get("num_workers", 1))

    try:
        tf.debugging.disable_traceback_filtering()
    except Exception:
        pass
    try:
        import keras

        keras.config.disable_traceback_filtering()
    except Exception:
        pass

    script = os.path.realpath(spec["script"])
    from tfpar_lint.files import read_regular_text
    from tfpar_lint.verify.source import SCRIPT_MAX_BYTES

    text = read_regular_text(script, SCRIPT_MAX_BYTES)  # a regular file, read without blocking, bounded
    marked_text, marks = source.instrument(text, [int(x) for x in spec.get("lines", [])])
    R = Recorder(script, int(spec["max_steps"]), marks)
    R.devices = devs
    R.worker_mode = worker is not None
    R.worker_index = worker
    R.num_workers = int(spec.get("num_workers", 1) or 1)
    R.sync_dir = spec.get("sync_dir") or None  # local cluster: where the workers agree on when to stop
    R.own_tf_config = bool(spec.get("own_tf_config"))  # started without the verifier's TF_CONFIG
    for n in notes:
        R.note(n)
    R.text = marked_text
    R.source_text = text  # what a traceback shows, as under `python script.py`
    from tfpar_lint.verify import runtime

    runtime.REC = R

    def mark(mid, value=None):
        return R.mark(mid, value)

    from tensorflow.python.autograph.impl import api as ag_api

    builtins.__tfpar_mark__ = ag_api.do_not_convert(mark)

    instrument.install(R, spec.get("tf_config"), split)
    for name in probes.PROBE_MODULES:
        probes.load(name).install(R)
    synthetic.install(R.note)
    if spec.get("uses_threads"):
        sys.setswitchinterval(1e-6)
        R.note("sys.setswitchinterval(1e-6) to encourage thread interleaving")
    seed = spec.get("seed")
    if seed is not None:
        tf.random.set_seed(int(seed))
        R.note(f"global seed set to {seed} before the script")
    if spec.get("np_seed") is not None:
        import random

        import numpy as np

        np.random.seed(int(spec["np_seed"]))
        random.seed(int(spec["np_seed"]))
        R.note(f"numpy and random seeded with {spec['np_seed']} before the script")
    if spec.get("preempt_after_steps"):
        R.preempt_after = int(spec["preempt_after_steps"])

        def preempt():
            R.note(f"worker {worker} left after {R.preempt_after} steps (preemption simulated by the verifier)")
            result["outcome"] = "ok"
            result["preempted"] = True
            R.leave()
            faulthandler.cancel_dump_traceback_later()
            _finish(R, result, spec, time.time())
            _os_exit(0)

        R.on_preempt = preempt
    result["setup_seconds"] = round(time.time() - t0, 3)
    return R


def _run_script(spec: dict, R: Recorder, result: dict) -> None:
    script = R.script
    text = R.text
    lines = text.splitlines(keepends=True)
    _protect_linecache({script: lines, spec["script"]: lines})
    mod = types.ModuleType("__main__")
    mod.__file__ = script
    mod.__builtins__ = builtins
    mod.__spec__ = None
    mod.__loader__ = None
    old_main = sys.modules.get("__main__")
    sys.modules["__main__"] = mod
    sys.argv = [spec.get("argv0") or spec["script"]] + list(spec.get("script_args", []))
    sdir = os.path.dirname(script)
    guard = os.path.realpath(spec.get("guard_dir") or sdir)
    sys.path[:0] = [guard] if guard == sdir else [guard, sdir]
    sys.dont_write_bytecode = True
    if _STATE.get("python_guard"):
        from tfpar_lint.verify import sandbox

        sandbox.install_python_guard(_STATE["python_guard"], protected_pids=spec.get("protected_pids") or [],
                                     overlay=os.path.join(spec["scratch"], "overlay"))
    t0 = time.time()
    _catch_os_exit(spec, R, result, t0)
    try:
        # compiled in here: a file too deeply nested for Python fails as under `python script.py`
        code = compile(text, script, "exec", dont_inherit=True)
        exec(code, mod.__dict__)
        result["outcome"] = "ok"
    except VerifierStop:
        result["outcome"] = "stopped"
    except VerifierTimeout:
        result["outcome"] = "hung"
    except SystemExit as e:
        if e.code in (None, 0):
            result["outcome"] = "ok"
        else:
            result["outcome"] = "error"
            result["error"] = _describe_error(e, R, script)
            _print_uncaught(e, R, spec)
    except BaseException as e:
        if isinstance(e, StopIteration) and getattr(R, "loop_cuts", 0):
            # next() past the end of a dataset the verifier cut at --max-steps elements
            R.stop_reason = R.stop_reason or f"stopped after {R.max_steps} elements of a dataset (next() past the cut)"
            result["outcome"] = "stopped"
        elif STOP_SENTINEL in str(e) and R.stop_reason:
            result["outcome"] = "stopped"
        else:
            result["outcome"] = "error"
            result["error"] = _describe_error(e, R, script)
            _print_uncaught(e, R, spec)
    finally:
        result["script_seconds"] = round(time.time() - t0, 3)
        if old_main is not None:
            sys.modules["__main__"] = old_main


def _catch_os_exit(spec: dict, R: Recorder, result: dict, t0: float) -> None:
    """A script may end with ``os._exit(code)``: Python then runs no ``finally`` and the result
    would never be written.  The script's own process writes it first (code 0 is a normal end,
    as under ``python script.py``); its forked children (``multiprocessing`` workers leave through
    ``os._exit`` too) pass straight through."""
    real_exit = os._exit
    me = os.getpid()

    def _exit(code):
        if os.getpid() == me and not _STATE.get("exiting"):
            _STATE["exiting"] = True
            try:
                faulthandler.cancel_dump_traceback_later()
                n = int(code)
            except (TypeError, ValueError, OverflowError):
                n = 1
            try:
                result["script_seconds"] = round(time.time() - t0, 3)
                if n == 0:
                    result["outcome"] = "ok"
                else:
                    result["outcome"] = "error"
                    result["error"] = {"type": "SystemExit", "message": f"os._exit({n})", "frames": [],
                                       "script_lines": [], "location": ""}
                R.note(f"the script left with os._exit({n})")
                _finish(R, result, spec, _STATE.get("t_start", t0))
                sys.stdout.flush()
                sys.stderr.flush()
                _end_descendants()
            except BaseException:  # noqa: BLE001 - leave as the script asked, whatever happens
                pass
        real_exit(code)

    _exit.__doc__ = real_exit.__doc__
    os._exit = _exit


def _print_uncaught(e: BaseException, R: Recorder, spec: dict) -> None:
    """Write to the script's stderr what Python writes when a script ends with ``e``: the
    traceback (the script's lines as written, without the verifier's frames), or the message
    of ``SystemExit("...")``.  Never raises."""
    try:
        if isinstance(e, SystemExit):
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        else:
            print("".join(_traceback_lines(e, R, spec)), end="", file=sys.stderr)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - the report must not depend on it
        pass


def _traceback_lines(e: BaseException, R: Recorder, spec: dict) -> list[str]:
    import traceback

    lines = R.source_text.splitlines(keepends=True)
    marked = R.text.splitlines(keepends=True)
    names = {R.script, spec.get("script")}
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the verifier's frames (its exec, the probes)
    saved = {n: linecache.cache.get(n) for n in names}
    for n in names:  # the traceback shows the script's lines as written, not the marked copy
        linecache.cache[n] = (len(R.source_text), None, lines, n)
    try:
        top = te = traceback.TracebackException(type(e), e, e.__traceback__)
        seen: set = set()
        while te is not None and id(te) not in seen:
            seen.add(id(te))
            te.stack[:] = [f for f in te.stack if not os.path.abspath(f.filename).startswith(ours)]
            for f in te.stack:
                n = f.lineno or 0
                if f.filename in names and 0 < n <= min(len(lines), len(marked)) and lines[n - 1] != marked[n - 1]:
                    f.colno = f.end_colno = None  # its columns are those of the marked line: no carets
            te = te.__cause__ or (None if te.__suppress_context__ else te.__context__)
        return list(top.format())
    finally:
        for n, v in saved.items():
            if v is None:
                linecache.cache.pop(n, None)
            else:
                linecache.cache[n] = v


def _protect_linecache(files: dict) -> None:
    """Serve the marked text for the script from linecache, always.

    AutoGraph re-reads a function's source through linecache and, for a
    ``__main__`` module with ``__file__``, calls ``linecache.updatecache``
    first, which would reload the unmarked file from disk."""
    entries = {fn: (sum(len(x) for x in lines), None, lines, fn) for fn, lines in files.items()}
    linecache.cache.update(entries)
    orig = linecache.updatecache

    def updatecache(filename, module_globals=None):
        if filename in entries:
            linecache.cache[filename] = entries[filename]
            return entries[filename][2]
        return orig(filename, module_globals)

    linecache.updatecache = updatecache


def _finish(R, result: dict, spec: dict, t_start: float) -> None:
    if R is not None:
        R.leave()
    try:
        if R is not None:
            from tfpar_lint.verify import probes

            result["probes"] = {}
            for name in probes.PROBE_MODULES:
                try:
                    result["probes"][name] = probes.load(name).collect(R)
                except BaseException as e:  # pragma: no cover
                    result["probes"][name] = {}
                    R.note(f"{name} probe failed to report: {type(e).__name__}: {e}")
            result["marks"] = {str(k): v for k, v in R.marks.items()}
            result["ran"] = {str(k): v for k, v in R.ran.items()}
            result["strategies"] = [{k: v for k, v in s.items() if not k.startswith("_")} for s in R.strategies]
            result["devices"] = R.devices
            result["steps"] = max(R.total_steps(), getattr(R, "keras_steps", 0))
            result["stop_reason"] = R.stop_reason
            result["peer_left"] = R.peer_left
            result["notes"] = list(R.notes)
            result["caught"] = R.caught
            result["fn_errors"] = R.fn_errors
            result["run_sites"] = R.run_sites
        result["seconds"] = round(time.time() - t_start, 3)
        from tfpar_lint.verify import sandbox
        from tfpar_lint.verify.sandbox import own_writes

        refused = sandbox.attempts()
        if refused:
            result["sandbox_refused"] = refused
        data = json.dumps(result, default=_json_default).encode()
        if sandbox.send_result(data):  # inside the sandbox: the relay outside writes the file
            return
        dfd = _STATE.get("result_dirfd")
        name = os.path.basename(spec["result"])
        if dfd is None:  # pragma: no cover - before _contain
            dfd = os.open(os.path.dirname(os.path.abspath(spec["result"])), os.O_RDONLY | os.O_DIRECTORY)
        # Through the run folder's descriptor, opened before the sandbox: the real folder, not the overlay.
        with own_writes():
            fd = os.open(name + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dfd)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(name + ".tmp", name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException as e:  # pragma: no cover
        sys.stderr.write(f"tfpar-verify child: could not write the result: {e!r}\n")


def _json_default(o):
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
    except Exception:
        pass
    return repr(o)


if __name__ == "__main__":
    main(sys.argv[1:])
