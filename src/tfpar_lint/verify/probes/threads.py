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
threads, to encourage interleaving.

A finding is confirmed when the variable assigned at the finding's line from
two or more threads lost updates (final value short of the expected one, or
stale writes observed).
"""
from __future__ import annotations

import threading
import weakref
from typing import Any

from tfpar_lint.finding import INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify.probes import Seen

CODES = "TFP3xx"
MAX_ELEMENTS = 64


class _State:
    def __init__(self):
        self.vars: dict[int, dict[str, Any]] = {}
        self.refs: dict[int, Any] = {}
        self.local = threading.local()
        self.graph_writes: set[int] = set()
        # id(variable) -> (weak reference to it, script lines that read it from a thread)
        self.read_lines: dict[int, tuple[Any, set[int]]] = {}


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
            except Exception:  # pragma: no cover
                pass

        return __init__

    patch(threading.Thread, "__init__", make_init, tag="threads")
    for m in ("assign", "assign_add", "assign_sub"):
        patch_variable_method(m, make_write(m), tag="threads")


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
    return {"variables": out}


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
    return (f"variable {v['name']}: {v['writes']} updates from {v['threads']} threads should give "
            f"{v['expected']:g}, the final value is {v['final']:g} ({n_lost} updates lost; "
            f"{v['stale']} writes overwrote a concurrent update)")


def seen(run) -> list[Seen]:
    """TFP301, per variable updated from several Python threads: updates lost (at the write the threads
    raced on), or none; a variable written from one thread only cannot show it."""
    out = []
    for o in run.probe("threads"):
        for v in (o or {}).get("variables", []):
            if not v["sites"]:
                continue
            # Sites are script lines on the writer's stack, innermost first: the write itself.
            most = max(s["writes"] for s in v["sites"].values())
            line = next(int(k) for k, s in v["sites"].items() if s["writes"] == most)
            lines = tuple(int(k) for k in v["sites"]) + tuple(v.get("reads", [])) + tuple(v.get("starts", []))
            if v["threads"] < 2:
                out.append(Seen("TFP301", line, f"the variable assigned at line {line} was updated from one thread only",
                                lines, INCONCLUSIVE))
                continue
            _missing, n = _lost(v)
            if n > 0 or v["stale"] > 0:
                out.append(Seen("TFP301", line, _describe(v, n), lines))
            else:
                out.append(Seen("TFP301", line, (f"variable {v['name']}: {v['writes']} updates from {v['threads']} "
                                                 f"threads, final value {v['final']:g} as expected; no lost update"),
                                lines, NOT_REPRODUCED))
    return out
