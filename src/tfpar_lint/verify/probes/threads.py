"""TFP3xx: Python threads and shared variables.

Child side (eager only): for small variables, every read remembers, per
thread, the value that thread last read; every ``assign``/``assign_add``/
``assign_sub`` records the writing thread, the call site, the increment it
meant to apply (``new - value this thread last read`` for ``assign``, the
argument for ``assign_add``/``assign_sub``) and whether the variable had been
changed by another thread since this thread read it (a stale write: the
other thread's update is overwritten).  At the end the expected value
(first value + sum of increments) is compared with the actual value.
``sys.setswitchinterval(1e-6)`` is set by the child when the script uses
threads, to encourage interleaving, and a script thread sleeps 2 ms after
each read of a tracked variable (at most 200 times a run): another thread's
unsynchronised read-modify-write then runs between its read and its write,
while a lock held across both keeps it out.

Child side (TF1 graph mode): ``Session.run`` called from a script thread is
looked at before it runs.  Among the ops the fetches run (their inputs and
control inputs, followed back through the graph), an ``Assign`` /
``AssignVariableOp`` whose new value is computed from a read of the same
variable in the same run is a read-modify-write: the run also fetches that
read and the value written.  Two writes computed from the same read value
(and that changed it) mean one of them overwrote the other: a lost update,
counted per variable.  Runs of racy update ops (optimizer kernels
``Apply*``/``ResourceApply*``, ``Assign``s: read-modify-writes and copies over
a variable; not the atomic ``AssignAdd``) are also timed: a run that starts while another thread's run
updating the same variable is in progress is an overlap (no lock serialised
them).  The same overlap is counted for optimizer steps (``apply_gradients``
of TF1, tf_keras and Keras 3 optimizers) and Keras ``train_on_batch``/``fit``
calls made from script threads in eager mode.

A finding is confirmed when the variable assigned at the finding's line from
two or more threads lost updates (final value short of the expected one, or
stale writes observed), or, for the unsynchronised-update rules (TFP302,
TFP304), when update runs of two threads overlapped on the same variables.
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify.probes import Seen

CODES = "TFP3xx"
MAX_ELEMENTS = 64
# After a script thread reads a tracked variable it sleeps this long (at most READ_YIELDS times a
# run, 0.4 s in all), so that the other threads' reads of the same value happen before its write.
READ_YIELD_S = 0.002
READ_YIELDS = 200


class _State:
    def __init__(self):
        self.vars: dict[int, dict[str, Any]] = {}
        self.refs: dict[int, Any] = {}
        self.local = threading.local()
        self.yields = 0  # sleeps after a thread's read (yield_after_read)
        self.graph_writes: set[int] = set()
        # id(variable) -> (weak reference to it, script lines that read it from a thread)
        self.read_lines: dict[int, tuple[Any, set[int]]] = {}
        # graph mode: variable (op name) -> read-modify-write record; key -> update-run record
        self.graph_vars: dict[str, dict[str, Any]] = {}
        self.updates: dict[Any, dict[str, Any]] = {}
        self.in_flight: dict[Any, set[int]] = {}  # key -> threads inside an update of it
        self.plans: dict[tuple, Any] = {}
        # (line of the target's code, line that made the thread) -> threads, how many saw a name
        # of the target rebound between Thread(...) and the thread running it
        self.late: dict[tuple, dict[str, Any]] = {}


_PRIMITIVE = (int, float, complex, str, bytes, bool, type(None))


def _binds(fn) -> dict[str, int]:
    """What a thread target reads from outside when it runs: its closure cells (any value) and
    the module globals it names that hold objects (not numbers or strings, which other threads
    may rebind as counters; not modules, functions or classes), as name -> id of the value."""
    import types

    out: dict[str, int] = {}
    code = getattr(fn, "__code__", None)
    if code is None:
        return out
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            out[name] = id(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    g = getattr(fn, "__globals__", None) or {}
    for name in code.co_names:
        if name in g and name not in out:
            v = g[name]
            if isinstance(v, _PRIMITIVE) or isinstance(v, (types.ModuleType, types.FunctionType, type)):
                continue
            out[name] = id(v)
    return out


def _same(entry, v) -> bool:
    """An entry keyed by ``id(v)`` is about ``v``, not about a dead variable whose id ``v`` reuses."""
    return entry is not None and entry[0] is not None and entry[0]() is v


def _ref(v):
    try:
        return weakref.ref(v)
    except TypeError:  # pragma: no cover - tf variables take weak references
        return None


def install(R) -> None:
    import numpy as np
    from tensorflow.python.eager import context
    from tensorflow.python.ops import resource_variable_ops

    from tfpar_lint.verify.runtime import patch, patch_variable_method, script_threads_running

    S = _State()
    R.threads = S
    BRV = resource_variable_ops.BaseResourceVariable

    def small(v) -> bool:
        try:
            n = v.shape.num_elements()
            return n is not None and n <= MAX_ELEMENTS and v.dtype.is_numpy_compatible and (
                v.dtype.is_floating or v.dtype.is_integer)
        except Exception:
            return False

    def tracking(v) -> bool:
        # Only while the script has threads (the verifier's own watchdog does not count), or for a
        # variable already written from one: a script without threads is not slowed down, and its
        # variables' reads and writes (restores included) are left alone.
        return context.executing_eagerly() and (id(v) in S.vars or script_threads_running())

    def last_reads() -> dict:
        """id(variable) -> (weak reference to it, the value this thread last read)."""
        d = getattr(S.local, "reads", None)
        if d is None:
            d = S.local.reads = {}
        return d

    def last_read(v):
        e = last_reads().get(id(v))
        return e[1] if _same(e, v) else None

    def busy() -> bool:
        return getattr(S.local, "busy", False)

    def yield_after_read() -> None:
        """Widen the window between a thread's read and its write: the thread sleeps a moment after
        the read (at most READ_YIELDS times a run), so that another thread's read-modify-write of the
        same variable runs in between where nothing serialises them.  A lock held across the read
        and the write keeps the others out during the sleep, so a serialised update loses nothing."""
        if S.yields >= READ_YIELDS:
            return
        S.yields += 1
        time.sleep(READ_YIELD_S)

    def make_read(orig):
        def _read_variable_op(self, *a, **k):
            out = orig(self, *a, **k)
            if not busy() and tracking(self) and small(self):
                try:
                    last_reads()[id(self)] = (_ref(self), np.asarray(out.numpy(), dtype=np.float64))
                    if threading.current_thread() is not R.main_thread:
                        e = S.read_lines.get(id(self))
                        if not _same(e, self):
                            e = S.read_lines[id(self)] = (_ref(self), set())
                        if len(e[1]) < 20:
                            e[1].update(R.script_lines(2)[:1])
                        yield_after_read()
                except Exception:
                    pass
            return out

        return _read_variable_op

    def current(self):
        S.local.busy = True
        try:
            return np.asarray(self.read_value().numpy(), dtype=np.float64)
        finally:
            S.local.busy = False

    def make_write(kind):
        def make(orig):
            def write(self, value, *a, **k):
                if not context.executing_eagerly():
                    S.graph_writes.add(id(self))
                    return orig(self, value, *a, **k)
                if busy() or not tracking(self) or not small(self):
                    return orig(self, value, *a, **k)
                # The bookkeeping never changes what the script sees: whatever it cannot measure
                # (a value it cannot read, shapes that do not match) is left out, and the write
                # goes ahead as it would without the verifier.
                try:
                    before = current(self)
                    val = np.asarray(value.numpy() if hasattr(value, "numpy") else value, dtype=np.float64)
                    mine = last_read(self)
                    if mine is not None and mine.shape != before.shape:
                        mine = None
                    if kind == "assign":
                        if val.shape != before.shape:
                            # Not an update of a value the variable had: e.g. the restore of a variable
                            # tf.saved_model.load creates uninitialized (it reads as an empty array).
                            return orig(self, value, *a, **k)
                        base = mine if mine is not None else before
                        delta = float(np.sum(val - base))
                        stale = mine is not None and not np.array_equal(mine, before)
                    else:
                        delta = float(np.sum(val)) * (1 if kind == "assign_add" else -1)
                        stale = False
                except Exception:
                    return orig(self, value, *a, **k)
                lines = R.script_lines(2)
                tid = threading.get_ident()
                with R.lock:
                    rec = S.vars.get(id(self))
                    if rec is None:
                        rec = S.vars[id(self)] = {
                            "name": str(getattr(self, "name", "?")), "first": float(np.sum(before)),
                            "delta": 0.0, "writes": 0, "stale": 0, "threads": set(), "sites": {},
                            "kinds": set(), "starts": set(),
                        }
                        S.refs[id(self)] = self
                    rec["delta"] += delta
                    rec["writes"] += 1
                    rec["stale"] += int(stale)
                    rec["threads"].add(tid)
                    rec["kinds"].add(kind)
                    me = threading.current_thread()
                    rec["starts"].update({getattr(me, "_tfpar_start_line", None),
                                          getattr(me, "_tfpar_made_line", None)})
                    for ln in lines[:3]:
                        site = rec["sites"].setdefault(str(ln), {"writes": 0, "stale": 0, "kind": kind})
                        site["writes"] += 1
                        site["stale"] += int(stale)
                out = orig(self, value, *a, **k)
                last_reads().pop(id(self), None)
                return out

            return write

        return make

    patch(BRV, "_read_variable_op", make_read, tag="threads")

    def make_start(orig):
        def start(self, *a, **k):
            try:  # where the script started this thread (a finding may point there)
                self._tfpar_start_line = R.direct_caller_line(2)
            except Exception:  # pragma: no cover
                pass
            return orig(self, *a, **k)

        return start

    patch(threading.Thread, "start", make_start, tag="threads")

    def make_init(orig):
        def __init__(self, *a, **k):
            orig(self, *a, **k)
            try:  # where the script created this thread (threading.Thread(target=...))
                self._tfpar_made_line = R.direct_caller_line(2)
                target = getattr(self, "_target", None)
                code = getattr(target, "__code__", None)
                if code is not None and code.co_filename == R.script:  # the script's own function
                    self._tfpar_binds = _binds(target)
            except Exception:  # pragma: no cover
                pass

        return __init__

    patch(threading.Thread, "__init__", make_init, tag="threads")

    def make_run(orig):
        def run(self, *a, **k):
            binds = getattr(self, "_tfpar_binds", None)
            if binds:
                try:
                    target = self._target
                    now = _binds(target)
                    changed = sorted(n for n, v in binds.items() if n in now and now[n] != v)
                    code = target.__code__
                    key = (code.co_firstlineno, getattr(self, "_tfpar_made_line", None))
                    with R.lock:
                        rec = S.late.setdefault(key, {"threads": 0, "changed": 0, "names": set()})
                        rec["threads"] += 1
                        rec["changed"] += int(bool(changed))
                        rec["names"].update(changed)
                except Exception:  # pragma: no cover
                    pass
            return orig(self, *a, **k)

        return run

    patch(threading.Thread, "run", make_run, tag="threads")
    for m in ("assign", "assign_add", "assign_sub"):
        patch_variable_method(m, make_write(m), tag="threads")
    _install_updates(R, S, busy, small)


# ------------------------------------------------------------------ graph mode and optimizer steps
RACY_PREFIXES = ("Apply", "ResourceApply", "ResourceSparseApply", "SparseApply")
ASSIGN_OPS = ("Assign", "AssignVariableOp")
MAX_GRAPH_OPS = 20000  # ops followed back from one set of fetches
MAX_RMW_ELEMENTS = 1 << 16  # variables whose reads and writes are fetched for the count


class _Plan:
    """What one set of fetches does to variables: the racy updates (variable names) and, for the
    read-modify-writes, the tensors to fetch (the read of the variable, the value written)."""

    def __init__(self):
        self.racy: set[str] = set()
        self.rmw: list[tuple[str, Any, Any]] = []  # (variable name, read tensor, value tensor)


def _var_of(t) -> Optional[str]:
    """The variable a resource handle / ref tensor stands for (its op name)."""
    op = t.op
    for _ in range(8):
        if op.type in ("VarHandleOp", "VariableV2", "Variable"):
            return op.name
        if op.type in ("Identity", "RefIdentity", "Enter") and op.inputs:
            op = op.inputs[0].op
            continue
        return None
    return None


def _read_of(value, var: str):
    """A read of ``var`` that ``value`` is computed from (in the same run), or None."""
    seen = set()
    work = [value.op]
    while work and len(seen) < 2000:
        op = work.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type == "ReadVariableOp" and op.inputs and _var_of(op.inputs[0]) == var:
            return op.outputs[0]
        if op.type in ("Identity", "RefIdentity") and op.inputs and op.inputs[0].op.type in ("VariableV2", "Variable") \
                and op.inputs[0].op.name == var:
            return op.outputs[0]
        if op.type in ("VarHandleOp", "VariableV2", "Variable", "Placeholder", "Const"):
            continue
        work.extend(i.op for i in op.inputs)
    return None


def _plan(graph, fetches) -> Optional[_Plan]:
    """The plan for ``fetches`` (None when they update no variable the probe follows)."""
    import tensorflow as tf

    from tensorflow.python.framework import ops as tf_ops

    ops = []
    for leaf in tf.nest.flatten(fetches):
        try:
            el = graph.as_graph_element(leaf, allow_tensor=True, allow_operation=True)
        except Exception:
            continue
        ops.append(el if isinstance(el, tf_ops.Operation) else el.op)
    plan = _Plan()
    seen = set()
    work = list(ops)
    while work and len(seen) < MAX_GRAPH_OPS:
        op = work.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        t = op.type
        if t in ASSIGN_OPS and len(op.inputs) >= 2:
            var = _var_of(op.inputs[0])
            if var is not None:
                # a write of the variable: a read-modify-write (counted) or a copy over it (a push)
                plan.racy.add(var)
                read = _read_of(op.inputs[1], var)
                if read is not None:
                    n = op.inputs[1].shape.num_elements()
                    if n is not None and n <= MAX_RMW_ELEMENTS:
                        plan.rmw.append((var, read, op.inputs[1]))
        elif t.startswith(RACY_PREFIXES) and op.inputs:
            var = _var_of(op.inputs[0])
            if var is not None:
                plan.racy.add(var)
        work.extend(i.op for i in op.inputs)
        work.extend(op.control_inputs)
    return plan if plan.racy else None


def _install_updates(R, S: _State, busy, small) -> None:
    import numpy as np

    from tfpar_lint.verify.runtime import patch, script_threads_running, when_imported

    def scripted() -> bool:
        """A thread of the script's (or of its thread pool's), not the main thread and not one
        TensorFlow runs for itself (MirroredStrategy runs each replica in a thread of its own)."""
        me = threading.current_thread()
        if me is R.main_thread or busy() or not script_threads_running():
            return False
        return not type(me).__module__.startswith(("tensorflow", "keras", "tf_keras"))

    def enter(keys, kind: str, name: str, lines) -> None:
        tid = threading.get_ident()
        with R.lock:
            for k in keys:
                rec = S.updates.get(k)
                if rec is None:
                    rec = S.updates[k] = {"name": name, "kind": kind, "runs": 0, "overlaps": 0, "threads": set(),
                                          "sites": {}}
                rec["runs"] += 1
                rec["threads"].add(tid)
                others = S.in_flight.setdefault(k, set())
                if others - {tid}:
                    rec["overlaps"] += 1
                others.add(tid)
                for ln in lines[:3]:
                    rec["sites"][str(ln)] = rec["sites"].get(str(ln), 0) + 1

    def leave(keys) -> None:
        tid = threading.get_ident()
        with R.lock:
            for k in keys:
                S.in_flight.get(k, set()).discard(tid)

    def record_rmw(plan: _Plan, vals, lines) -> None:
        tid = threading.get_ident()
        with R.lock:
            for (var, _r, _v), (read, value) in zip(plan.rmw, vals):
                try:
                    read = np.asarray(read, dtype=np.float64)
                    value = np.asarray(value, dtype=np.float64)
                    if read.shape != value.shape or np.array_equal(read, value):
                        continue  # not an update of the value it read
                    fp = read.tobytes()
                except Exception:
                    continue
                rec = S.graph_vars.get(var)
                if rec is None:
                    rec = S.graph_vars[var] = {"writes": 0, "stale": 0, "threads": set(), "sites": {},
                                               "reads": set()}
                stale = fp in rec["reads"]  # another write started from this very value: one is lost
                rec["writes"] += 1
                rec["threads"].add(tid)
                rec["stale"] += int(stale)
                rec["reads"].add(fp)
                for ln in lines[:3]:
                    site = rec["sites"].setdefault(str(ln), {"writes": 0, "stale": 0, "kind": "graph"})
                    site["writes"] += 1
                    site["stale"] += int(stale)

    def make_run(orig):
        def run(self, fetches, *a, **k):
            if not scripted():
                return orig(self, fetches, *a, **k)
            try:
                key = (id(self.graph), _fetch_key(fetches))
                plan = S.plans.get(key, False)
                if plan is False:
                    plan = S.plans[key] = _plan(self.graph, fetches)
            except Exception:
                plan = None
            if plan is None:
                return orig(self, fetches, *a, **k)
            lines = R.script_lines(2)
            keys = [("graph", id(self.graph), v) for v in sorted(plan.racy)]
            enter(keys, "session run", ", ".join(sorted(plan.racy)[:3]), lines)
            try:
                if plan.rmw:
                    extra = [[r, v] for _n, r, v in plan.rmw]
                    out = orig(self, [fetches, extra], *a, **k)
                    try:
                        record_rmw(plan, out[1], lines)
                    except Exception:
                        pass
                    return out[0]
                return orig(self, fetches, *a, **k)
            finally:
                leave(keys)

        return run

    try:
        from tensorflow.python.client import session as tf_session

        patch(tf_session.BaseSession, "run", make_run, tag="threads")
    except Exception:  # pragma: no cover - a TensorFlow without the TF1 session
        pass

    def var_keys(grads_and_vars) -> tuple[list, list]:
        gv = list(grads_and_vars)
        keys = []
        for pair in gv:
            try:
                keys.append(("var", id(pair[1])))
            except Exception:
                pass
        return gv, keys

    def make_apply(orig):
        def apply_gradients(self, grads_and_vars, *a, **k):
            if not scripted():
                return orig(self, grads_and_vars, *a, **k)
            gv, keys = var_keys(grads_and_vars)
            names = [str(getattr(p[1], "name", "?")) for p in gv[:3] if isinstance(p, (tuple, list)) and len(p) == 2]
            enter(keys, "optimizer step", ", ".join(names), R.script_lines(2))
            try:
                return orig(self, gv, *a, **k)
            finally:
                leave(keys)

        return apply_gradients

    def make_train(kind):
        def make(orig):
            def train(self, *a, **k):
                if not scripted():
                    return orig(self, *a, **k)
                keys = [("model", id(self))]
                enter(keys, kind, str(getattr(self, "name", "model")), R.script_lines(2))
                try:
                    return orig(self, *a, **k)
                finally:
                    leave(keys)

            return train

        return make

    def optimizer_module(attr: str):
        def cb(mod):
            cls = getattr(mod, attr, None)
            if cls is not None:
                patch(cls, "apply_gradients", make_apply, tag="threads")

        return cb

    when_imported("tensorflow.python.training.optimizer", optimizer_module("Optimizer"))
    when_imported("tf_keras.src.optimizers.optimizer", optimizer_module("Optimizer"))
    when_imported("tf_keras.src.optimizers.legacy.optimizer_v2", optimizer_module("OptimizerV2"))
    when_imported("keras.src.optimizers.base_optimizer", optimizer_module("BaseOptimizer"))

    def model_module(attr: str):
        def cb(mod):
            cls = getattr(mod, attr, None)
            if cls is not None:
                for meth in ("train_on_batch", "fit"):
                    if hasattr(cls, meth):
                        patch(cls, meth, make_train(meth), tag="threads")

        return cb

    when_imported("tf_keras.src.engine.training", model_module("Model"))
    when_imported("keras.src.backend.tensorflow.trainer", model_module("TensorFlowTrainer"))


def _fetch_key(fetches) -> tuple:
    import tensorflow as tf

    out = []
    for leaf in tf.nest.flatten(fetches):
        name = getattr(leaf, "name", None)
        out.append(name if isinstance(name, str) else repr(leaf)[:80])
    return tuple(out)


def collect(R) -> dict[str, Any]:
    S: _State = getattr(R, "threads", None)
    if S is None:
        return {}
    import numpy as np

    out = []
    for vid, rec in S.vars.items():
        v = S.refs.get(vid)
        try:
            final = float(np.sum(np.asarray(v.read_value().numpy(), dtype=np.float64)))
        except Exception:
            final = None
        out.append({
            "name": rec["name"], "first": rec["first"], "expected": rec["first"] + rec["delta"],
            "final": final, "writes": rec["writes"], "stale": rec["stale"], "threads": len(rec["threads"]),
            "sites": rec["sites"], "kinds": sorted(rec["kinds"]),
            "unit": abs(rec["delta"]) / rec["writes"] if rec["writes"] else 0.0,
            "graph_writes": vid in S.graph_writes,
            "reads": sorted(S.read_lines[vid][1] if _same(S.read_lines.get(vid), v) else ()),
            "starts": sorted(x for x in rec["starts"] if x is not None),
        })
    for var, rec in S.graph_vars.items():
        out.append({
            "name": var, "first": None, "expected": None, "final": None, "writes": rec["writes"],
            "stale": rec["stale"], "threads": len(rec["threads"]), "sites": rec["sites"], "kinds": ["graph assign"],
            "unit": 0.0, "graph_writes": True, "graph": True, "reads": [], "starts": [],
        })
    updates = []
    for rec in S.updates.values():
        updates.append({"name": rec["name"], "kind": rec["kind"], "runs": rec["runs"], "overlaps": rec["overlaps"],
                        "threads": len(rec["threads"]), "sites": rec["sites"]})
    late = [{"line": k[0], "made": k[1], "threads": r["threads"], "changed": r["changed"], "names": sorted(r["names"])}
            for k, r in S.late.items()]
    return {"variables": out, "updates": updates, "late": late}


# ================================================================== parent
def _lost(v) -> tuple[float, int]:
    """(lost amount, lost updates) for one variable record."""
    if v["final"] is None or v.get("graph_writes"):
        return 0.0, v["stale"]
    missing = abs(v["expected"] - v["final"])
    unit = v["unit"] or 1.0
    n = int(round(missing / unit)) if missing > 1e-6 * max(1.0, abs(v["expected"])) else 0
    return missing, max(n, 0)


def _describe(v, n_lost: int) -> str:
    if v.get("graph"):
        return (f"variable {v['name']}: {v['writes']} read-modify-write updates by session runs from {v['threads']} "
                f"threads; {v['stale']} were computed from a value another update had already started from "
                f"({n_lost} updates lost)")
    return (f"variable {v['name']}: {v['writes']} updates from {v['threads']} threads should give "
            f"{v['expected']:g}, the final value is {v['final']:g} ({n_lost} updates lost; "
            f"{v['stale']} writes overwrote a concurrent update)")


def _describe_update(u) -> str:
    what = {"session run": "session runs of update ops on", "optimizer step": "optimizer steps on",
            "train_on_batch": "train_on_batch calls on", "fit": "fit calls on"}.get(u["kind"], "updates of")
    return (f"{u['runs']} {what} {u['name']} from {u['threads']} threads: {u['overlaps']} started while another "
            f"thread's update of the same variables was still running (nothing serialised them)")


# TFP304's finding is on the lock (``with self.lock:``); the update it fails to serialise runs in the
# block under it: a write within this many lines below the lock decides it.
LOCK_REACH = 15


def _under_lock(lines) -> tuple[int, ...]:
    return tuple(sorted({k - d for k in lines for d in range(1, LOCK_REACH + 1)} | set(lines)))


def seen(run) -> list[Seen]:
    """Per variable updated from Python threads: updates lost (TFP301, also deciding TFP302 at the same
    places and TFP304 on a lock above them), or none, or written from one thread only (cannot show it);
    per update op or optimizer step run from several threads (TFP302, TFP304): whether two ran at
    once; per thread made in a loop (TFP303): whether it ran with the loop variable already rebound.
    Only lost updates become findings of their own (RUNTIME): an overlap or a rebound name is
    evidence for the static finding it judges, not a claim of lost updates."""
    out: list[Seen] = []
    for o in run.probe("threads"):
        o = o or {}
        for v in o.get("variables", []):
            if not v["sites"]:
                continue
            # Sites are script lines on the writer's stack, innermost first: the write itself.
            most = max(s["writes"] for s in v["sites"].values())
            line = next(int(k) for k, s in v["sites"].items() if s["writes"] == most)
            lines = tuple(int(k) for k in v["sites"]) + tuple(v.get("reads", [])) + tuple(v.get("starts", []))
            if v["threads"] < 2:
                status, evidence = INCONCLUSIVE, f"the variable assigned at line {line} was updated from one thread only"
            else:
                _missing, n = _lost(v)
                if n > 0 or v["stale"] > 0:
                    status, evidence = CONFIRMED, _describe(v, n)
                elif v.get("graph"):
                    status, evidence = NOT_REPRODUCED, (
                        f"variable {v['name']}: {v['writes']} read-modify-write updates by session runs from "
                        f"{v['threads']} threads; no lost update")
                else:
                    status, evidence = NOT_REPRODUCED, (
                        f"variable {v['name']}: {v['writes']} updates from {v['threads']} threads, final value "
                        f"{v['final']:g} as expected; no lost update")
            out.append(Seen("TFP301", line, evidence, lines, status, also=("TFP302",)))
            out.append(Seen("TFP304", line, evidence, _under_lock(lines), status, runtime=False))
        for u in o.get("updates", []):
            sites = tuple(int(k) for k in u["sites"])
            if not sites or u["threads"] < 2:
                continue
            status = CONFIRMED if u["overlaps"] > 0 else NOT_REPRODUCED
            evidence = _describe_update(u)
            if status == NOT_REPRODUCED:
                evidence = evidence.replace(": 0 started while", ": none started while")
            out.append(Seen("TFP302", sites[0], evidence, sites, status, runtime=False))
            out.append(Seen("TFP304", sites[0], evidence, _under_lock(sites), status, runtime=False))
        for r in o.get("late", []):
            if r["changed"]:
                out.append(Seen("TFP303", r["line"], (
                    f"{r['changed']} of {r['threads']} threads ran their target with "
                    f"{', '.join(f'`{x}`' for x in r['names'])} rebound after the thread was made (the loop had moved "
                    f"on)"), (r["made"],), CONFIRMED, runtime=False))
            else:
                out.append(Seen("TFP303", r["line"], f"{r['threads']} threads: each ran its target with the values it "
                                                     f"was made with", (r["made"],), NOT_REPRODUCED, runtime=False))
    return out
