"""TFP5xx: loss scaling and per-replica results.

Child side:

* the first call of a training step (an outer ``tf.function`` that calls
  ``strategy.run``): the value of every trainable variable before and after
  it, so the update that step applied is known; the step's scalar outputs
  (the reported loss) for its first calls;
* ``strategy.reduce``: the script line, the reduce op and the outer step
  function it belongs to;
* ``PerReplica`` values used as one tensor (``float()``, ``int()``,
  ``format``, a missing attribute such as ``.numpy``): the line and the error;
* updates of mirrored variables inside a replica function (line, variable),
  and at the end whether the replica copies of those variables still agree.

Scripts with TFP501/503/504/505 (and TFP509-512) findings run a second time on one
replica (same data: global and numpy seeds set in both runs).  The parent compares
the first step: the update each variable got on N replicas vs on one
replica (TFP501 and TFP510 about N, TFP503 about 1/N, TFP504 N for the
regularised kernel, TFP509 larger when per-replica clipping acted, TFP511 not 1),
and the reported loss (TFP505 about 1/N with MEAN, TFP512 about N with SUM).  TFP502 is
confirmed by the tf_keras reduction error at the line.

TFP508: a ``PerReplica`` of several replicas handed to host code in
cross-replica context at the line: converted to a tensor (a conversion
function registered ahead of TensorFlow's records the line, then defers to
TensorFlow's, which raises), turned into a NumPy array (``__array__``, which
makes the same 0-d object array NumPy makes without it), or asked for
``.numpy`` (the misuse record above).
"""
from __future__ import annotations

import math
import threading
from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED

CODES = "TFP5xx"
TOLERANCE = 0.05  # |ratio - 1| below this is "the same"

_TFK_REDUCTION = (r"Please use `tf\.keras\.losses\.Reduction\.SUM` or `tf\.keras\.losses\.Reduction\.NONE`"
                  r"|reduction.*(is not supported|should be).*(distribut|strategy)")
ERRORS = {"TFP502": [_TFK_REDUCTION]}


# =================================================================== child
class _State:
    def __init__(self):
        self.first_step: dict[str, Any] = {}
        self.tries = 0
        self.outputs: dict[str, list] = {}
        self.reduces: list[dict[str, Any]] = []
        self.misuse: list[dict[str, Any]] = []
        self.host_uses: list[dict[str, Any]] = []
        self.updates: dict[int, dict[str, Any]] = {}
        self.update_refs: dict[int, Any] = {}
        self.local = threading.local()


def _trainable(R) -> list[tuple[int, str, Any]]:
    S = getattr(R, "scope", None)
    if S is None:
        return []
    out = []
    for i, (rec, v) in enumerate(zip(S.variables, S.var_refs)):
        if getattr(v, "trainable", False):
            out.append((i, rec["name"], v))
    return out


def _value(v):
    import numpy as np

    comps = getattr(v, "values", None)
    if isinstance(comps, tuple) and comps:
        v = comps[0]
    return np.array(v.numpy(), dtype="float64")


def install(R) -> None:
    import tensorflow as tf
    from tensorflow.python.distribute import distribute_lib
    from tensorflow.python.distribute import values as dv
    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

    from tfpar_lint.verify import instrument
    from tfpar_lint.verify.runtime import patch

    L = _State()
    R.loss = L

    def snapshot():
        out = {}
        for i, name, v in _trainable(R):
            try:
                out[i] = (name, _value(v))
            except Exception:
                continue
        return out

    def make_call(orig):
        def __call__(self, *args, **kwds):
            if instrument._FN.stack or R.keras_loop_depth or not R.in_main_thread():
                return orig(self, *args, **kwds)
            name = str(getattr(self, "_name", None) or "tf.function")
            before = None
            if not L.first_step and L.tries < 20:
                L.tries += 1
                before = snapshot()
            out = orig(self, *args, **kwds)
            if id(self) not in R.step_functions:
                return out
            if before is not None and not L.first_step:
                after = snapshot()
                deltas = []
                for i, (vname, b) in before.items():
                    a = after.get(i)
                    if a is None or a[1].shape != b.shape:
                        continue
                    deltas.append({"index": i, "name": vname, "delta": float(math.sqrt(((a[1] - b) ** 2).sum())),
                                   "norm": float(math.sqrt((b ** 2).sum()))})
                L.first_step = {"fn": name, "deltas": deltas[:50]}
            outs = L.outputs.setdefault(name, [])
            if len(outs) < 3:
                try:
                    flat = [t for t in tf.nest.flatten(out) if isinstance(t, tf.Tensor) and t.shape.rank == 0]
                    outs.append([float(t.numpy()) for t in flat[:4]])
                except Exception:
                    outs.append([])
            return out

        return __call__

    patch(pf.Function, "__call__", make_call, tag="loss")

    def make_reduce(orig):
        def reduce(self, reduce_op, value, axis=None):
            try:
                stack = instrument._FN.stack
                rec = {"lines": R.script_lines(2)[:4], "op": str(getattr(reduce_op, "name", reduce_op)),
                       "fn": str(getattr(stack[0], "_name", "")) if stack else ""}
                with R.lock:
                    if len(L.reduces) < 50 and rec not in L.reduces:
                        L.reduces.append(rec)
            except Exception:
                pass
            return orig(self, reduce_op, value, axis=axis)

        return reduce

    patch(distribute_lib.StrategyBase, "reduce", make_reduce, tag="loss")

    # ---- a PerReplica used as one tensor
    def misuse(kind: str, err: BaseException) -> None:
        import sys

        # only when the script itself did it (TensorFlow probes attributes with hasattr)
        line = R.frame_line(sys._getframe(2))
        if line is None or len(L.misuse) >= 20:
            return
        with R.lock:
            L.misuse.append({"line": line, "kind": kind, "error": f"{type(err).__name__}: {str(err)[:200]}"})

    cls = dv.PerReplica

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        e = AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        misuse(f".{name}", e)
        raise e

    def __format__(self, spec):
        try:
            return object.__format__(self, spec)
        except TypeError as e:
            misuse("format", e)
            raise

    def conv(kind):
        def f(self):
            e = TypeError(f"{kind}() argument must be a string or a real number, not '{type(self).__name__}'")
            misuse(f"{kind}()", e)
            raise e

        return f

    if "__getattr__" not in cls.__dict__:
        cls.__getattr__ = __getattr__
    if "__format__" not in cls.__dict__:
        cls.__format__ = __format__
    for k, fn in (("__float__", conv("float")), ("__int__", conv("int"))):
        if k not in cls.__dict__:
            setattr(cls, k, fn)

    # ---- a PerReplica handed to host code (TFP508)
    try:
        _install_host_uses(R, L)
    except Exception:  # pragma: no cover - a TensorFlow without these hooks
        pass

    # ---- mirrored variables updated in a replica function
    def make_update(kind):
        def make(orig):
            def update(self, *a, **k):
                try:
                    if isinstance(self, dv.MirroredVariable) and R.in_replica_fn():
                        line = R.direct_caller_line(2)
                        if line is not None and id(self) not in L.updates and len(L.updates) < 50:
                            with R.lock:
                                L.updates[id(self)] = {"line": line, "kind": kind, "name": str(self.name),
                                                       "aggregation": str(getattr(self, "aggregation", ""))}
                                L.update_refs[id(self)] = self
                except Exception:
                    pass
                return orig(self, *a, **k)

            return update

        return make

    for m in ("assign", "assign_add", "assign_sub"):
        patch(dv.DistributedVariable, m, make_update(m), tag="loss")


def _install_host_uses(R, L: _State) -> None:
    from tensorflow.python.distribute import distribute_lib
    from tensorflow.python.distribute import values as dv
    from tensorflow.python.framework import tensor_conversion_registry

    def record(kind: str, value) -> None:
        try:
            n = len(getattr(value, "values", ()))
            if n < 2 or R.in_replica_fn() or len(L.host_uses) >= 20:
                return
            lines = R.script_lines(3)
            if not lines:
                return
            with R.lock:
                L.host_uses.append({"line": lines[0], "lines": lines[:4], "kind": kind, "replicas": n})
        except Exception:  # pragma: no cover
            pass

    def convert(value, dtype=None, name=None, as_ref=False):
        if distribute_lib.in_cross_replica_context() or not distribute_lib.has_strategy():
            record("converted to a tensor", value)
        return NotImplemented  # TensorFlow's own conversion function decides (and raises)

    tensor_conversion_registry.register_tensor_conversion_function(dv.PerReplica, convert, priority=1)

    if "__array__" not in dv.PerReplica.__dict__:
        def __array__(self, dtype=None, copy=None):
            import numpy as np

            record("turned into a NumPy array", self)
            out = np.empty((), dtype=object)
            out[()] = self  # what NumPy makes of an object without __array__
            return out

        dv.PerReplica.__array__ = __array__


def collect(R) -> dict[str, Any]:
    L: _State = getattr(R, "loss", None)
    if L is None:
        return {}
    updates = []
    for vid, rec in L.updates.items():
        v = L.update_refs.get(vid)
        try:
            copies = [float(_value(c).sum()) for c in v.values]
        except Exception:
            copies = []
        updates.append(dict(rec, copies=copies))
    return {"first_step": L.first_step, "outputs": L.outputs, "reduces": L.reduces, "misuse": L.misuse,
            "updates": updates, "host_uses": L.host_uses}


# ================================================================== parent
def _obs(run) -> dict[str, Any]:
    obs = [o for o in run.probe("loss") if o]
    return obs[0] if obs else {}


def _ratio(a: float, b: float) -> Optional[float]:
    if b == 0:
        return None
    return a / b


def _update_ratios(run) -> tuple[Optional[dict], list[dict]]:
    """(first step record, per-variable {name, delta N, delta 1, ratio})."""
    o = _obs(run)
    fs = o.get("first_step") or {}
    if not fs or run.rerun is None:
        return (fs or None), []
    ref = (_obs(run.rerun).get("first_step") or {})
    if not ref:
        return fs, []
    by = {(d["index"], d["name"]): d for d in ref.get("deltas", [])}
    out = []
    for d in fs.get("deltas", []):
        r = by.get((d["index"], d["name"]))
        if r is None or r["delta"] < 1e-9 or d["norm"] != r["norm"]:
            continue
        out.append({"name": d["name"], "n": d["delta"], "one": r["delta"], "ratio": d["delta"] / r["delta"]})
    return fs, out


def _fmt(xs: list[dict]) -> str:
    return ", ".join(f"{x['name'].split(':')[0]} {x['n']:.4g} vs {x['one']:.4g} (ratio {x['ratio']:.2f})" for x in xs[:4])


def judge(finding, run) -> Optional[tuple[str, str]]:
    from tfpar_lint.verify.probes import error_at_line

    code, line = finding.code, finding.line
    o = _obs(run)
    if code in ERRORS:
        v = error_at_line(run, line, ERRORS[code])
        if v:
            return v
        if run.ran(line) and not run.error:
            return NOT_REPRODUCED, f"line {line} ran on {run.ctx()} without the reduction error"
        return None
    if code == "TFP506":
        ms = [m for m in o.get("misuse", []) if m["line"] == line]
        if ms:
            m = ms[0]
            return CONFIRMED, (f"line {line} used the PerReplica result of strategy.run ({run.ctx()}) as one tensor "
                               f"({m['kind']}): {m['error']}")
        if run.ran(line):
            return NOT_REPRODUCED, f"line {line} ran; no PerReplica value was used as a tensor there"
        return None
    if code == "TFP508":
        uses = [u for u in o.get("host_uses", []) if u["line"] == line]
        uses += [dict(m, kind=f"asked for {m['kind']} ({m['error']})") for m in o.get("misuse", []) if m["line"] == line]
        if uses:
            u = uses[0]
            n = u.get("replicas")
            return CONFIRMED, (f"at line {line} a PerReplica value{f' of {n} replicas' if n else ''} was {u['kind']} "
                               f"in cross-replica context ({run.ctx()})")
        if run.ran(line):
            return NOT_REPRODUCED, f"line {line} ran on {run.ctx()}; no PerReplica value reached host code there"
        return None
    if code == "TFP507":
        us = [u for u in o.get("updates", []) if u["line"] == line]
        for u in us:
            if len(set(u["copies"])) > 1:
                return CONFIRMED, (f"{u['kind']} of {u['name']} (aggregation {u['aggregation'].split('.')[-1]}) at line "
                                   f"{line} inside strategy.run: the replica copies diverged, sums {u['copies']}")
        if us:
            return NOT_REPRODUCED, f"{us[0]['name']} updated at line {line}: replica copies agree {us[0]['copies']}"
        return None
    if code in ("TFP505", "TFP512"):
        return _judge_reported(run, o, line)
    if code in ("TFP501", "TFP503", "TFP504", "TFP509", "TFP510", "TFP511"):
        return _judge_update(run, code, line)
    return INCONCLUSIVE, f"the loss probe has no observation for {code}"


def _judge_update(run, code, line):
    if run.rerun is None:
        return None
    fs, rs = _update_ratios(run)
    n = run.replicas
    if not fs:
        return INCONCLUSIVE, "no training step (tf.function calling strategy.run) was observed to measure its update"
    if not rs:
        return INCONCLUSIVE, (f"the first step ({fs.get('fn')}) could not be compared with the one-replica run "
                              f"(no variable moved there, or the runs started from different values)")
    fn = fs.get("fn")
    if code == "TFP503":
        bad = [r for r in rs if r["ratio"] < 1 - TOLERANCE]
        what = f"about 1/{n}: the gradients were scaled down twice"
    elif code == "TFP511":
        bad = [r for r in rs if abs(r["ratio"] - 1) > TOLERANCE]
        what = "not 1: the loss was scaled twice, so the update depends on the number of replicas"
    elif code == "TFP509":
        bad = [r for r in rs if abs(r["ratio"] - 1) > TOLERANCE]
        what = "not 1: each replica was clipped by its own norm and the clipped gradients were summed"
    else:
        bad = [r for r in rs if r["ratio"] > 1 + TOLERANCE]
        what = (f"about {n}: the regularisation was added on every replica and summed" if code == "TFP504"
                else f"about {n}: each replica averaged over its own batch, then the gradients were summed")
        if code == "TFP510":
            what = f"about {n}: compute_average_loss divided by the per-replica batch, then the gradients were summed"
    if bad and run.ran(line) is not False:
        return CONFIRMED, (f"first step {fn} on {run.ctx()} moved the variables {bad[0]['ratio']:.2f}x as far as the "
                           f"same step on one replica (same data and seed), {what}; update norms "
                           f"N replicas vs one: {_fmt(bad)}")
    return NOT_REPRODUCED, (f"first step {fn} on {run.ctx()} applied the same update as on one replica: {_fmt(rs)}")


def _judge_reported(run, o, line):
    reds = [r for r in o.get("reduces", []) if line in r["lines"]]
    if not reds:
        return None
    r = reds[0]
    fn = r["fn"]
    if run.rerun is None or not fn:
        return None
    mine = (o.get("outputs") or {}).get(fn) or []
    ref = (_obs(run.rerun).get("outputs") or {}).get(fn) or []
    if not mine or not ref or not mine[0] or not ref[0]:
        return INCONCLUSIVE, f"the outputs of {fn} could not be compared with the one-replica run"
    a, b = mine[0][0], ref[0][0]
    ratio = _ratio(a, b)
    if ratio is None:
        return INCONCLUSIVE, f"{fn} returned 0 on one replica"
    if abs(ratio - 1) > TOLERANCE:
        return CONFIRMED, (f"strategy.reduce({r['op']}) at line {line}: {fn} reported loss {a:.4g} on {run.ctx()}, "
                           f"{b:.4g} for the same step on one replica (same data): ratio {ratio:.2f}")
    return NOT_REPRODUCED, (f"strategy.reduce({r['op']}) at line {line}: {fn} reported {a:.4g} on {run.ctx()} "
                            f"and {b:.4g} on one replica")


def observe(run) -> tuple[str, str]:
    o = _obs(run)
    if not o:
        return INCONCLUSIVE, "no observations (the run ended before the probe reported)"
    if o.get("misuse"):
        m = o["misuse"][0]
        return CONFIRMED, f"a PerReplica result used as one tensor at line {m['line']}: {m['error']}"
    div = [u for u in o.get("updates", []) if len(set(u["copies"])) > 1]
    if div:
        u = div[0]
        return CONFIRMED, f"replica copies of {u['name']} diverged after {u['kind']} at line {u['line']}: {u['copies']}"
    from tfpar_lint.verify.probes import error_elsewhere

    err = error_elsewhere(run, ERRORS["TFP502"])
    if err:
        return CONFIRMED, f"TensorFlow raised {run.error_text(err)}"
    parts = []
    fs, rs = _update_ratios(run)
    if rs:
        off = [r for r in rs if abs(r["ratio"] - 1) > TOLERANCE]
        if off:
            return CONFIRMED, f"first step update vs one replica: {_fmt(off)}"
        parts.append(f"first step update equals the one-replica update ({_fmt(rs[:2])})")
    elif fs:
        parts.append(f"first step {fs.get('fn')} observed ({len(fs.get('deltas', []))} variables)")
    n_up = len(o.get("updates", []))
    parts.append(f"{n_up} mirrored variable(s) updated in replica functions, copies agree" if n_up
                 else "no mirrored variable updated in a replica function")
    parts.append("no PerReplica used as a tensor")
    return NOT_REPRODUCED, "; ".join(parts)


def locate(run) -> list:
    from tfpar_lint.verify.probes import Seen, located_errors

    o = _obs(run)
    out = []
    for u in o.get("host_uses", [])[:1]:
        out.append(Seen("TFP508", int(u["line"]), f"a PerReplica value of {u['replicas']} replicas was {u['kind']} "
                                                   f"in cross-replica context at line {u['line']}",
                        tuple(u.get("lines") or ())))
    for m in o.get("misuse", [])[:1]:
        if m.get("line"):
            out.append(Seen("TFP506", int(m["line"]), f"a PerReplica result of strategy.run used as one tensor at "
                                                       f"line {m['line']}: {m['error']}"))
    for u in o.get("updates", []):
        if len(set(u["copies"])) > 1 and u.get("line"):
            out.append(Seen("TFP507", int(u["line"]), f"replica copies of {u['name']} diverged after {u['kind']} at "
                                                       f"line {u['line']}: {u['copies']}"))
            break
    return out + located_errors(run, ERRORS)
