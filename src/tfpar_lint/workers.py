"""Supervised worker processes: one file can crash or hang its worker, never the run.

Every file the engine parses is parsed in a worker process, also at ``-j1``
(libcst's native parser can die with SIGSEGV or SIGABRT on valid Python, and
a parse can take minutes).  The workers are persistent: a worker serves file
after file and is replaced only when it dies or is killed.  For each task
:func:`run_tasks` calls exactly one of

* ``on_result(k, value)``: the worker returned ``fn(tasks[k])``;
* ``on_failure(k, reason)``: the worker died on it (``"the worker process was
  killed by SIGSEGV"``), used more than ``timeout`` seconds of CPU time on it or
  gave no answer for ``WALL_FACTOR`` times that in wall-clock time (then it is
  killed), or ``fn`` raised (``"out of memory"``, ``"RecursionError: ..."``).

The tasks a dead worker had queued behind the culprit go to another worker.
A worker keeps ``DEPTH`` tasks in flight so it never waits for the parent;
it runs them in order, so the oldest unanswered one is the one that killed
it, and its clocks (CPU time, and the wall-clock backstop) start when the one
before it was answered.

Inside a worker the tasks run on a thread with a ``STACK_SIZE`` stack
(libcst's parser recurses on the C stack: ``z = a and a and ...`` with 7,057
terms overflows the main thread's stack but parses on this one), SIGINT is
ignored (the parent handles Ctrl-C and kills the workers), the address space
is capped at ``memory_limit`` bytes where the platform allows (an allocation
past it is a MemoryError or an abort, which costs only that file), its
standard error goes to /dev/null unless ``TFPAR_LINT_DEBUG`` is set (an
abort's Rust backtrace would clutter the report), and on Linux the worker is
killed when the parent dies.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from collections import deque
from typing import Any, Callable, Optional, Sequence

from tfpar_lint.finding import LIMIT_REASONS  # noqa: F401  (used by the limit messages)

DEPTH = 2
# 16 MB: twice the usual main-thread stack.  ``z = a and a and ...`` with 7,057
# terms parses on it (it overflows the main thread's); far deeper nesting, such
# as 10,000 nested parentheses (which Python itself rejects), still overflows,
# within a second and a few dozen MB, where a 64 MB stack let libcst run 50 s
# and take 10 GB before it failed.
STACK_SIZE = 16 << 20
# Per-file limit of the analysis (read, parse, rules), in seconds of the worker's CPU time
# (file-timeout / --file-timeout): a loaded machine slows a file down without making it cost more,
# so a busy machine gives the same results as an idle one.  Where the CPU time cannot be read (no
# /proc), the limit is wall-clock time.
DEFAULT_TIMEOUT = 60.0
# A worker that uses no CPU and gives no answer (blocked) is given up after this many times the
# limit in wall-clock time.
WALL_FACTOR = 20



def cpu_seconds(pid: int) -> Optional[float]:
    """CPU time (user + system, all threads) the process ``pid`` has used, or None where it cannot
    be read (no /proc, or the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        rest = data[data.rfind(b")") + 2:].split()
        return (int(rest[11]) + int(rest[12])) / _CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return None


try:
    _CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK"))
except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
    _CLOCK_TICKS = 100.0
# Files larger than this are skipped with E902 (max-file-size / --max-file-size).
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024


def signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def death_reason(exitcode: Optional[int]) -> str:
    if exitcode is None:
        return "the worker process stopped answering"
    if exitcode < 0:
        name = signal_name(-exitcode)
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"the worker process was killed by {name}{hint}"
    return f"the worker process exited with code {exitcode}"


# -- the worker side -------------------------------------------------------------

def _set_pdeathsig() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # pragma: no cover - no libc.prctl here
        pass


def _mapped_bytes() -> int:
    """The address space this process has mapped already (Linux: /proc/self/statm), or 0."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _limit_memory(limit: Optional[int]) -> None:
    """Cap the worker's address space at ``limit`` bytes beyond what it inherited mapped: a worker
    forked from a large process (a test session that loaded TensorFlow maps gigabytes) would
    otherwise start over the cap and fail its first allocation."""
    if not limit:
        return
    limit += _mapped_bytes()
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY or soft > limit:
            if hard != resource.RLIM_INFINITY:
                limit = min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError):  # pragma: no cover - no RLIMIT_AS here
        pass


def _serve(conn: Any, inherited: Sequence[Any], memory_limit: Optional[int]) -> None:
    """A worker's life: set up, then answer tasks on a big-stack thread until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for c in inherited:  # the parent's ends of the pipes (fork copies them)
        try:
            c.close()
        except OSError:
            pass
    _set_pdeathsig()
    _limit_memory(memory_limit)
    if not os.environ.get("TFPAR_LINT_DEBUG"):
        # libcst's aborts print a Rust backtrace; the parent reports the death in one line
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
        except OSError:  # pragma: no cover
            pass
        import faulthandler

        faulthandler.disable()  # it may write to a copy of the parent's stderr (pytest's does)
    import threading

    try:
        threading.stack_size(STACK_SIZE)
    except (ValueError, RuntimeError):  # pragma: no cover - platform refuses the size
        pass
    t = threading.Thread(target=_loop, args=(conn,), name="tfpar-lint-worker")
    t.start()
    t.join()


def _loop(conn: Any) -> None:
    _tune_gc()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        k, fn, args = msg
        try:
            reply: tuple[bool, Any] = (True, fn(args))
        except MemoryError:
            reply = (False, "out of memory")
        except RecursionError:
            reply = (False, "internal error: RecursionError (Python's recursion limit)")
        except BaseException as exc:  # noqa: B036 - everything becomes this file's error
            reply = (False, f"{type(exc).__name__}: {exc}")
        try:
            conn.send((k, reply))
        except (EOFError, OSError):
            return
        except Exception as exc:  # the value would not pickle
            conn.send((k, (False, f"result not transferable: {type(exc).__name__}: {exc}")))
        del reply


# -- the parent side ---------------------------------------------------------------

class _Worker:
    def __init__(self, ctx: Any, siblings: Sequence[Any], memory_limit: Optional[int]) -> None:
        parent, child = ctx.Pipe(duplex=True)
        # a forked child gets copies of the parent's pipe ends (its own and its siblings'): it
        # closes them, so that it sees end-of-file when the parent goes away
        inherited = [*siblings, parent] if ctx.get_start_method() == "fork" else []
        self.proc = ctx.Process(target=_serve, args=(child, inherited, memory_limit),
                                name="tfpar-lint-worker", daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        self.inflight: deque[int] = deque()
        self.deadline: Optional[float] = None  # wall clock: the backstop (or the limit, without /proc)
        self.cpu0: Optional[float] = None  # the worker's CPU time when its current task started

    def start_clock(self, limit: Optional[float], now: float) -> None:
        """The current task's limits start now: ``limit`` s of CPU time, and a wall-clock backstop."""
        if limit is None:
            self.deadline = self.cpu0 = None
            return
        self.cpu0 = cpu_seconds(self.proc.pid)
        self.deadline = now + (limit * WALL_FACTOR if self.cpu0 is not None else limit)

    def cpu_used(self) -> Optional[float]:
        if self.cpu0 is None:
            return None
        now = cpu_seconds(self.proc.pid)
        return None if now is None else now - self.cpu0

    def kill(self) -> None:
        try:
            self.proc.kill()
        except (OSError, AttributeError):  # pragma: no cover
            pass
        self.proc.join(5)
        self.close()

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:  # pragma: no cover
            pass

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.proc.join(2)
        if self.proc.is_alive():
            self.kill()
        else:
            self.close()


def _context() -> Any:
    import multiprocessing

    return multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")


def run_tasks(fn: Callable[[Any], Any], tasks: Sequence[Any], *, jobs: int = 1,
              timeout: Optional[float] = DEFAULT_TIMEOUT, memory_limit: Optional[int] = None,
              order: Optional[Sequence[int]] = None,
              on_result: Callable[[int, Any], None],
              on_failure: Callable[[int, str], None]) -> None:
    """Run ``fn(tasks[k])`` for every ``k`` in ``jobs`` supervised workers (see the module docstring).

    ``order`` is the order in which tasks are handed out (default: as given).
    ``timeout`` None or 0 means no limit.
    """
    from multiprocessing.connection import wait

    if not tasks:
        return
    ctx = _context()
    pending: deque[int] = deque(order if order is not None else range(len(tasks)))
    limit = timeout if timeout and timeout > 0 else None
    nworkers = max(1, min(jobs, len(tasks)))
    workers: list[Optional[_Worker]] = [None] * nworkers

    def live_conns() -> list[Any]:
        return [w.conn for w in workers if w is not None]

    def fail(i: int, reason: str) -> None:
        w = workers[i]
        assert w is not None
        w.kill()
        workers[i] = None
        if w.inflight:
            on_failure(w.inflight.popleft(), reason)
            pending.extendleft(reversed(w.inflight))  # the innocent ones go first, in their order

    try:
        while True:
            now = time.monotonic()
            for i in range(nworkers):
                w = workers[i]
                if w is None:
                    if not pending:
                        continue
                    w = workers[i] = _Worker(ctx, live_conns(), memory_limit)
                while pending and len(w.inflight) < DEPTH:
                    k = pending.popleft()
                    try:
                        w.conn.send((k, fn, tasks[k]))
                    except (OSError, ValueError):  # the worker is gone; found below
                        pending.appendleft(k)
                        break
                    if not w.inflight:
                        w.start_clock(limit, now)
                    w.inflight.append(k)
            busy = [i for i in range(nworkers) if workers[i] is not None and workers[i].inflight]  # type: ignore[union-attr]
            if not busy:
                break
            wait_for: list[Any] = []
            for i in busy:
                w = workers[i]
                wait_for += [w.conn, w.proc.sentinel]  # type: ignore[union-attr]
            # wake at the nearest wall-clock deadline, or when a worker could first have used its
            # CPU budget (a task cannot use more CPU time than wall time: one thread runs it)
            wakes: list[float] = []
            for i in busy:
                w = workers[i]  # type: ignore[assignment]
                if w.deadline is not None:  # type: ignore[union-attr]
                    wakes.append(w.deadline - time.monotonic())  # type: ignore[union-attr]
                used = w.cpu_used() if limit is not None else None  # type: ignore[union-attr]
                if used is not None:
                    wakes.append(max(0.05, limit - used))  # type: ignore[operator]
            wait(wait_for, None if not wakes else max(0.0, min(wakes)))
            for i in busy:
                w = workers[i]
                assert w is not None
                dead = False
                try:
                    while w.inflight and w.conn.poll():
                        k, (ok, value) = w.conn.recv()
                        if k != w.inflight[0]:  # pragma: no cover - protocol error
                            raise EOFError
                        w.inflight.popleft()
                        w.start_clock(limit if w.inflight else None, time.monotonic())
                        if ok:
                            on_result(k, value)
                        else:
                            on_failure(k, value)
                except (EOFError, OSError):
                    dead = True
                if not dead and w.inflight and not w.proc.is_alive():
                    dead = not w.conn.poll()
                if dead:
                    w.proc.join(5)
                    fail(i, death_reason(w.proc.exitcode))
                elif w.inflight and limit is not None:
                    used = w.cpu_used()
                    if used is not None and used >= limit:
                        fail(i, f"used more than {limit:g} s of CPU time, the per-file limit "
                                f"(set with --file-timeout)")
                    elif w.deadline is not None and time.monotonic() >= w.deadline:
                        if w.cpu0 is None:
                            fail(i, f"gave no answer within {limit:g} s, the per-file limit (set with "
                                    f"--file-timeout; wall-clock time: this platform does not show CPU time)")
                        else:
                            fail(i, f"gave no answer within {limit * WALL_FACTOR:g} s of wall-clock time "
                                    f"({WALL_FACTOR}x the per-file limit of {limit:g} s of CPU time, set with "
                                    f"--file-timeout), having used {used or 0:.1f} s of CPU time")
    finally:
        for w in workers:
            if w is not None:
                if w.inflight:
                    w.kill()
                else:
                    w.stop()


# libcst allocates millions of small objects per parsed file; with CPython's
# default thresholds (700, 10, 10) the cyclic GC runs every 700 allocations and
# walks the growing tree again and again (about 10% of the run).  Fewer, larger
# young-generation collections; full collections still happen (the semantic
# model of a file is cyclic garbage once the file is done).
GC_THRESHOLD = (10_000, 10, 10)


def _tune_gc() -> tuple[int, ...]:
    """Raise the GC thresholds to at least GC_THRESHOLD; returns the old ones."""
    import gc

    old = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(old, GC_THRESHOLD)))
    return old
