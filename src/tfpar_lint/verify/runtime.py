"""Child-side state shared by the probes: the recorder, stack helpers, patching.

Everything here runs inside the instrumented child process.  TensorFlow is
imported by :mod:`tfpar_lint.verify.child` before any probe is installed.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.abc
import os
import re
import sys
import threading
import time
import traceback
from typing import Any, Callable, Optional


class VerifierStop(BaseException):
    """Raised in the script's main thread to end it once the evidence is in.

    A ``BaseException`` so that the script's own ``except Exception`` blocks
    do not swallow it; the child catches it and reports ``stopped``.
    """


STOP_SENTINEL = "TFPAR_VERIFY_STOP"
_OWN_THREAD = "_tfpar_verifier_thread"
SYNC_WAIT = 20.0  # seconds a worker waits for its peers' decision at the step bound

# Frames skipped when looking for the code that called a TensorFlow API:
# TensorFlow itself (dispatch, AutoGraph, ops built from other ops such as
# tf.image.random_* drawing with random_ops) and this package.
_TF_INTERNAL = (os.sep + "tensorflow" + os.sep,)
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def own_thread(t: threading.Thread) -> threading.Thread:
    """Mark a thread the verifier itself starts in the child (its watchdog): the probes that
    ask whether the script runs threads must not count it."""
    setattr(t, _OWN_THREAD, True)
    return t


def script_threads_running() -> bool:
    """Whether a thread other than the main thread and the verifier's own is alive: one the
    script started, or one TensorFlow started for it (MirroredStrategy's replica threads)."""
    if threading.active_count() <= 1:
        return False
    main = threading.main_thread()
    return any(t is not main and not getattr(t, _OWN_THREAD, False) for t in threading.enumerate())


class Recorder:
    """All observations of one child run; probes add their own sections."""

    def __init__(self, script: str, max_steps: int, marks: dict[int, int]):
        self.script = script  # absolute real path of the script
        self.max_steps = max_steps
        self.hard_cap = 10 * max_steps  # steps allowed while a flagged line is still to come
        self.marks = marks  # finding line -> marker id
        self.lock = threading.RLock()
        self.ran: dict[int, int] = {}  # marker id -> times reached
        self.ran_order: list[int] = []
        self.notes: list[str] = []
        self.strategies: list[dict[str, Any]] = []
        self.strategy_ids: dict[int, int] = {}  # id(strategy) -> index in strategies
        self.ag_map: dict[tuple[str, int], int] = {}  # autograph (file, line) -> script line
        self.ag_files: set[str] = set()
        self.steps: dict[Any, int] = {}  # step key -> completed calls
        self.step_names: dict[Any, str] = {}
        self.step_functions: set[int] = set()
        self.fn_stack = threading.local()
        self.keras_loop_depth = 0
        self.stop_reason = ""
        # local cluster: the step at which this worker wanted another step while a peer had already
        # left (its collectives would have had no peer)
        self.peer_left = ""
        self.main_thread = threading.main_thread()
        self.t0 = time.time()
        self.probes: list[Any] = []
        self.devices: list[str] = []
        self.worker_index: Optional[int] = None
        self.run_calls = 0
        self.worker_mode = False
        self.caught: list[dict[str, Any]] = []
        self.keras_steps = 0
        self.text = ""
        self.source_text = ""  # the script as written (the child runs `text`, its marked copy)
        self.run_sites: dict[str, dict[str, int]] = {}  # "line" -> {"eager": n, "traced": n}
        self.fn_errors: list[dict[str, Any]] = []  # exceptions that left an outer tf.function call
        self.preempt_after = 0  # fault injection: leave (as if preempted) after this many steps
        self.on_preempt: Optional[Callable[[], None]] = None
        # Local cluster: a folder every worker shares, where they agree on when to stop.
        self.data_tags: dict[int, Any] = {}  # id -> (tensor yielded by a plain tf.data iterator, its origin)
        self.kept: list[Any] = []
        self.replica_gradients = 0  # tape.gradient calls made inside replica functions
        self.tf_config_at_creation: list[dict[str, Any]] = []  # per MultiWorkerMirroredStrategy created
        self.tracing_step: Any = None  # the outer tf.function whose strategy.run is being traced
        self.sync_dir: Optional[str] = None
        self.num_workers = 1
        self.sync_wait = SYNC_WAIT
        self.load_scale = 1.0  # how busy the machine was at the start (verify/busy.py): waits scale with it

    # ------------------------------------------------------------ markers
    def mark(self, mid: int, value: Any = None) -> Any:
        with self.lock:
            n = self.ran.get(mid, 0)
            self.ran[mid] = n + 1
            if n == 0:
                self.ran_order.append(mid)
        return value

    # ------------------------------------------------------- data identity
    MAX_TAGS = 512

    def tag_data(self, element: Any, origin: Optional[tuple] = None) -> None:
        """Remember the tensors of one element a plain tf.data iterator yielded (by identity; the
        tensors are kept so that their ids stay theirs), with where it came from: (id of the dataset,
        position in its iterator, line of the ``iter()``).  A ``strategy.run``, step function or
        value function that receives them is then known to get dataset elements, and which ones,
        whatever their values."""
        for t in _leaves(element):
            if hasattr(t, "numpy") and hasattr(t, "dtype"):
                with self.lock:
                    self.data_tags[id(t)] = (t, origin)
                    while len(self.data_tags) > self.MAX_TAGS:
                        self.data_tags.pop(next(iter(self.data_tags)))

    def origin(self, t: Any) -> Optional[tuple]:
        """(dataset id, position, iter line) of a tensor tagged by :meth:`tag_data`, else None."""
        hit = self.data_tags.get(id(t))
        return hit[1] if hit is not None and hit[0] is t else None

    def from_data(self, obj: Any) -> bool:
        """Whether ``obj`` holds a tensor tagged by :meth:`tag_data`."""
        if not self.data_tags:
            return False
        return any((hit := self.data_tags.get(id(t))) is not None and hit[0] is t for t in _leaves(obj))

    def keep(self, obj: Any) -> None:
        """Keep ``obj`` alive to the end of the run (its id names it in the records)."""
        with self.lock:
            if len(self.kept) < 2000:
                self.kept.append(obj)

    def record_fn_error(self, e: BaseException, name: str) -> None:
        """An exception that left an outer ``tf.function`` call of the script."""
        if isinstance(e, VerifierStop) or STOP_SENTINEL in str(e) or len(self.fn_errors) >= 20:
            return
        try:
            d = describe_error(e, self, self.script)
            d["api"] = f"tf.function {name}"
            d["script_lines"] = sorted(set(d["script_lines"]) | set(self.script_lines(3)))
            d.pop("traceback", None)
            d["frames"] = d["frames"][-20:]
            d["message"] = d["message"][:2000]
            with self.lock:
                self.fn_errors.append(d)
        except Exception:  # pragma: no cover
            pass

    def record_caught(self, e: BaseException, api: str) -> None:
        """An exception that left a TensorFlow API called by the script (the
        script may catch it; its text is still evidence)."""
        if isinstance(e, (VerifierStop,)) or len(self.caught) >= 20:
            return
        try:
            d = describe_error(e, self, self.script)
            d["api"] = api
            d["script_lines"] = sorted(set(d["script_lines"]) | set(self.script_lines(3)))
            d.pop("traceback", None)
            d["frames"] = d["frames"][-20:]
            with self.lock:
                self.caught.append(d)
        except Exception:  # pragma: no cover
            pass

    def note(self, text: str) -> None:
        with self.lock:
            if text not in self.notes:
                self.notes.append(text)

    # -------------------------------------------------------------- stacks
    def frame_line(self, f) -> Optional[int]:
        fn = f.f_code.co_filename
        if fn == self.script:
            return f.f_lineno
        if fn in self.ag_files:
            return self.ag_map.get((fn, f.f_lineno))
        return None

    def script_lines(self, skip: int = 1, limit: int = 200) -> list[int]:
        """Script lines on the current stack, innermost first."""
        out: list[int] = []
        try:
            f = sys._getframe(skip)
        except ValueError:
            return out
        n = 0
        while f is not None and n < limit:
            ln = self.frame_line(f)
            if ln is not None and (not out or out[-1] != ln):
                out.append(ln)
            f = f.f_back
            n += 1
        return out

    def direct_caller_line(self, skip: int = 1, own_is_transparent: bool = False) -> Optional[int]:
        """Line of the script frame that called the patched API directly
        (skipping TensorFlow's dispatch/AutoGraph plumbing and our wrappers),
        or None when the caller is library code (e.g. Keras internals)."""
        try:
            f = sys._getframe(skip)
        except ValueError:
            return None
        while f is not None:
            fn = f.f_code.co_filename
            if fn.startswith(_OWN_DIR):
                if not own_is_transparent:
                    return None  # called by the verifier itself (a probe)
                f = f.f_back
                continue
            if any(p in fn for p in _TF_INTERNAL) or fn.startswith("<"):
                f = f.f_back
                continue
            return self.frame_line(f)
        return None

    def in_main_thread(self) -> bool:
        return threading.current_thread() is self.main_thread

    # ----------------------------------------------------------- strategies
    def strategy_index(self, strategy) -> Optional[int]:
        if strategy is None:
            return None
        i = self.strategy_ids.get(id(strategy))
        if i is None:
            i = self.register_strategy(strategy)
        return i

    def register_strategy(self, strategy, lines: Optional[list[int]] = None) -> Optional[int]:
        try:
            from tensorflow.python.distribute import distribute_lib

            if isinstance(strategy, distribute_lib._DefaultDistributionStrategy):  # noqa: SLF001
                return None
        except Exception:  # pragma: no cover
            pass
        with self.lock:
            if id(strategy) in self.strategy_ids:
                return self.strategy_ids[id(strategy)]
            try:
                replicas = int(strategy.num_replicas_in_sync)
            except Exception:
                replicas = 0
            try:
                devs = [str(d) for d in strategy.extended.worker_devices]
            except Exception:
                devs = []
            rec = {
                "type": type(strategy).__name__,
                "replicas": replicas,
                "devices": devs,
                "lines": lines if lines is not None else self.script_lines(2),
                "_ref": strategy,
            }
            self.strategies.append(rec)
            self.strategy_ids[id(strategy)] = len(self.strategies) - 1
            return len(self.strategies) - 1

    def current_strategy(self):
        """The non-default strategy in scope (or whose replica context we are in)."""
        from tensorflow.python.distribute import distribute_lib

        if not distribute_lib.has_strategy():
            return None
        return distribute_lib.get_strategy()

    def replica_id(self) -> int:
        """The current replica's id in its sync group, as a Python int (a constant tensor when traced)."""
        import tensorflow as tf

        return int(tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group))

    def in_replica_fn(self) -> bool:
        from tensorflow.python.distribute import distribute_lib

        ctx = distribute_lib.get_replica_context()
        if ctx is None:
            return False
        return not isinstance(ctx.strategy, distribute_lib._DefaultDistributionStrategy)  # noqa: SLF001

    # --------------------------------------------------------------- steps
    def pending(self) -> bool:
        """A flagged line has not run yet (so stopping now would lose it)."""
        return any(mid not in self.ran for mid in set(self.marks.values()))

    def before_step(self, key, name: str) -> None:
        if self.keras_loop_depth or not self.in_main_thread():
            return
        n = self.steps.get(key, 0)
        if n >= self.max_steps and self.agree(f"step-{name}-{n}", not self.pending() or n >= self.hard_cap):
            self.stop_reason = f"stopped after {n} steps of {name}"
            raise VerifierStop(self.stop_reason)

    def agree(self, tag: str, mine: bool) -> bool:
        """Whether to stop here: this process's own decision, or, in a local cluster, the
        decision of every worker at the same step (stop only when all want to; a worker that
        left counts as wanting to).  Each worker's wish depends on its own flagged lines still
        to come, which differ between workers (a chief-only branch): deciding alone, one
        worker would stop while its peer waits in the next step's collective."""
        if not self.sync_dir or self.num_workers < 2 or self.worker_index is None:
            return mine
        safe = re.sub(r"[^\w.-]", "_", tag)[:120]
        if not self._sync_write(f"{safe}.w{self.worker_index}", "1" if mine else "0"):
            return mine
        votes = [mine]
        end = time.time() + self.sync_wait
        for w in range(self.num_workers):
            if w == self.worker_index:
                continue
            while True:
                vote = self._sync_read(f"{safe}.w{w}")
                if vote is not None:
                    votes.append(vote.strip() != "0")
                    break
                gone = self._sync_read(f"left.w{w}") is not None
                if gone or time.time() >= end:
                    votes.append(True)  # the peer is gone (or never came): nothing to wait for
                    if gone and not mine and not self.peer_left:
                        self.peer_left = f"{tag} (worker {w} had left)"
                    break
                time.sleep(0.01)
        out = all(votes)
        if out != mine:
            self.note("the workers of the local cluster agreed to stop at the same step")
        return out

    def leave(self) -> None:
        """Tell the other workers this one is gone (they stop waiting for its decisions)."""
        if self.sync_dir and self.worker_index is not None:
            self._sync_write(f"left.w{self.worker_index}", "1")

    def _sync_write(self, name: str, text: str) -> bool:
        """Write ``name`` in the cluster's shared folder, atomically (inside the sandbox the folder
        is bound at ``sandbox.SYNC_DIR``; without one, the Python-level guard allows it)."""
        if not self.sync_dir:
            return False
        tmp = f".{name}.tmp"
        try:
            with open(os.path.join(self.sync_dir, tmp), "w") as f:
                f.write(text)
            os.replace(os.path.join(self.sync_dir, tmp), os.path.join(self.sync_dir, name))
            return True
        except OSError:
            return False

    def _sync_read(self, name: str) -> Optional[str]:
        try:
            with open(os.path.join(self.sync_dir or "", name)) as f:
                return f.read(64)
        except OSError:
            return None

    def after_step(self, key, name: str) -> None:
        if self.keras_loop_depth or not self.in_main_thread():
            return
        with self.lock:
            self.steps[key] = self.steps.get(key, 0) + 1
            self.step_names[key] = name
        if self.preempt_after and self.on_preempt is not None and self.total_steps() >= self.preempt_after:
            self.on_preempt()

    def total_steps(self) -> int:
        return max(self.steps.values(), default=0)


def _leaves(obj: Any, depth: int = 0) -> list:
    """The leaves of nested tuples, lists and dicts (no TensorFlow import)."""
    if depth > 6:
        return []
    if isinstance(obj, (tuple, list)):
        return [x for v in obj[:64] for x in _leaves(v, depth + 1)]
    if isinstance(obj, dict):
        return [x for v in list(obj.values())[:64] for x in _leaves(v, depth + 1)]
    return [obj]


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def describe_error(e: BaseException, R, script: str) -> dict:
    """Type, message, frames and the script lines an exception passed through
    (AutoGraph frames mapped back; lines quoted in TensorFlow's message too)."""
    frames = []
    script_lines: list[int] = []
    real = os.path.realpath(script)
    seen = set()
    exc = e
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for fs in traceback.extract_tb(exc.__traceback__):
            frames.append([fs.filename, fs.lineno, fs.name])
            ln = None
            if os.path.realpath(fs.filename) == real:
                ln = fs.lineno
            elif R is not None and fs.filename in R.ag_files:
                ln = R.ag_map.get((fs.filename, fs.lineno))
            if ln is not None:
                script_lines.append(ln)
        exc = exc.__cause__ or exc.__context__
    msg = str(e)
    for fn, ln in _FILE_LINE.findall(msg):
        if os.path.realpath(fn) == real:
            script_lines.append(int(ln))
    location = ""
    # where the exception itself left the script (as Python's last traceback shows), else its causes'
    last = [fs.lineno for fs in traceback.extract_tb(e.__traceback__) if os.path.realpath(fs.filename) == real] \
        or [ln for f, ln, _ in frames if os.path.realpath(f) == real]
    if last:
        location = f"{os.path.basename(script)}:{last[-1]}"
    elif script_lines:
        location = f"{os.path.basename(script)}:{script_lines[-1]}"
    return {
        "type": type(e).__name__,
        "message": msg[:6000],
        "frames": frames[-60:],
        "script_lines": sorted(set(script_lines)),
        "location": location,
        "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-8000:],
    }


REC: Optional[Recorder] = None


def rec() -> Recorder:
    assert REC is not None
    return REC


# ------------------------------------------------------------------ patching
_PATCHES: list[tuple[Any, str, Any]] = []


def patch(owner: Any, name: str, make: Callable[[Any], Any], tag: str = "") -> bool:
    """Replace ``owner.name`` with ``make(original)``; keeps metadata so
    AutoGraph treats the wrapper like the original (allow-listed module).
    Patches with different ``tag`` stack; the same tag is applied once."""
    if isinstance(owner, type):
        # Patch the class that defines the method: code such as Keras'
        # ``cls.compile != Trainer.compile`` must keep seeing the same function.
        for klass in owner.__mro__:
            if name in klass.__dict__:
                owner = klass
                break
    orig = getattr(owner, name, None)
    if orig is None:
        return False
    tag = tag or getattr(make, "__qualname__", repr(make))
    tags = set(getattr(orig, "__tfpar_tags__", ()) or ())
    if tag in tags:
        return True
    is_static = isinstance(owner, type) and isinstance(owner.__dict__.get(name), staticmethod)
    new = make(orig)
    try:
        functools.update_wrapper(new, orig)
    except Exception:  # pragma: no cover
        pass
    try:
        new.__tfpar_tags__ = frozenset(tags | {tag})
        new.__tfpar_wrapped__ = True
    except Exception:  # pragma: no cover
        pass
    if is_static:
        new = staticmethod(new)
    setattr(owner, name, new)
    _PATCHES.append((owner, name, orig))
    return True


def patch_variable_method(name: str, make: Callable[[Any], Any], tag: str) -> None:
    """Patch a ``tf.Variable`` method on BaseResourceVariable and on every
    subclass that re-binds it (``weak_tensor_ops`` wraps ResourceVariable's
    assign methods around the original functions at import)."""
    from tensorflow.python.ops import resource_variable_ops as rvo

    for cls in (rvo.BaseResourceVariable, rvo.ResourceVariable, getattr(rvo, "UninitializedVariable", None)):
        if cls is not None and (cls is rvo.BaseResourceVariable or name in cls.__dict__):
            patch(cls, name, make, tag=tag)


def fingerprint(arr) -> str:
    """Short content hash of a numpy array (dtype + shape + bytes)."""
    import numpy as np

    a = np.ascontiguousarray(arr)
    h = hashlib.blake2b(digest_size=8)
    h.update(str(a.dtype).encode())
    h.update(str(a.shape).encode())
    if a.dtype == object:
        h.update(repr(a.tolist()).encode())
    else:
        h.update(a.tobytes())
    return h.hexdigest()


# ------------------------------------------------------------ import hooks
class _HookLoader(importlib.abc.Loader):
    def __init__(self, inner, callbacks):
        self.inner = inner
        self.callbacks = callbacks

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        for cb in self.callbacks:
            try:
                cb(module)
            except Exception as e:  # pragma: no cover - a probe must never break an import
                sys.stderr.write(f"tfpar-verify: post-import hook for {module.__name__} failed: {e!r}\n")


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.hooks: dict[str, list[Callable]] = {}
        self._busy: set[str] = set()

    def find_spec(self, fullname, path, target=None):
        cbs = self.hooks.get(fullname)
        if not cbs or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookLoader(spec.loader, list(cbs))
        return spec


_FINDER = _PostImportFinder()


def when_imported(name: str, cb: Callable[[Any], None]) -> None:
    """Call ``cb(module)`` now if ``name`` is imported, else right after its import."""
    mod = sys.modules.get(name)
    if mod is not None:
        cb(mod)
        return
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    _FINDER.hooks.setdefault(name, []).append(cb)


def try_import(name: str):
    try:
        return importlib.import_module(name)
    except Exception:
        return None
