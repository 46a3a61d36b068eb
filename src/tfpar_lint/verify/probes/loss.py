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

Scripts with TFP501/503/504/505 (and TFP509-514) findings run a second time on one
replica (same data: global and numpy seeds set in both runs).  The parent compares
the first step: the update each variable got on N replicas vs on one
replica (TFP501, TFP510, TFP513 and TFP514 about N, TFP503 about 1/N, TFP504 N for the
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
from dataclasses import replace
from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify.probes import Seen, errors_seen

CODES = "TFP5xx"
TOLERANCE = 0.05  # |ratio - 1| below this is "the same"

_TFK_REDUCTION = (r"Please use `tf\.keras\.losses\.Reduction\.SUM` or `tf\.keras\.losses\.Reduction\.NONE`"
                  r"|reduction.*(is not supported|should be).*(distribut|strategy)")
ERRORS = {"TFP502": [_TFK_REDUCTION],
          # tf.reduce_mean (or another op) of a PerReplica value outside strategy.run
          "TFP506": [r"using a PerReplica object while not inside a replica context"],
          # one gradient tensor shared by every replica, all-reduced by the optimizer (measured, TF 2.21:
          # Keras 3 inside a tf.function; tf_keras in its all-reduce)
          "TFP513": [r"destinations can not be empty", r"IndexError: tuple index out of range.*_all_reduce_sum_fn"]}


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
        self.average_loss: list[dict[str, Any]] = []  # compute_average_loss calls: line, global_batch_size
        self.scaled: dict[int, tuple[Any, int]] = {}  # id(its result) -> (the result, line): by identity
        self.metric_fed: list[dict[str, Any]] = []  # a Mean metric updated with such a result


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
    from tfpar_lint.verify.runtime import patch, when_imported

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

    # ---- compute_average_loss: its global batch size, and where its result goes (by identity)
    from tensorflow.python.ops import nn_impl_distribute

    def make_average(orig):
        def compute_average_loss(*a, **k):
            out = orig(*a, **k)
            try:
                if R.in_replica_fn():
                    line = R.direct_caller_line(2)
                    g = k.get("global_batch_size", a[2] if len(a) > 2 else None)
                    try:
                        g = int(g) if g is not None else None
                    except (TypeError, ValueError):
                        g = None  # a tensor while traced
                    with R.lock:
                        if line is not None and len(L.average_loss) < 20 and not any(
                                c["line"] == line for c in L.average_loss):
                            L.average_loss.append({"line": line, "global_batch_size": g})
                        if line is not None and len(L.scaled) < 200:
                            L.scaled[id(out)] = (out, line)
            except Exception:  # pragma: no cover - never break the script
                pass
            return out

        return compute_average_loss

    patch(tf.nn, "compute_average_loss", make_average, tag="loss")
    patch(nn_impl_distribute, "compute_average_loss", make_average, tag="loss")

    def make_metric_update(api):
        def make(orig):
            def update_state(self, *a, **k):
                try:
                    values = a[0] if a else k.get("values")
                    hit = L.scaled.get(id(values))
                    if hit is not None and hit[0] is values and R.in_replica_fn() and len(L.metric_fed) < 10:
                        line = R.direct_caller_line(2)
                        if line is not None and not any(m["line"] == line for m in L.metric_fed):
                            with R.lock:
                                L.metric_fed.append({"line": line, "metric": f"{api} {type(self).__name__}",
                                                     "loss_line": hit[1]})
                except Exception:  # pragma: no cover - never break the script
                    pass
                return orig(self, *a, **k)

            return update_state

        return make

    when_imported("keras.src.metrics.reduction_metrics",
                  lambda m: patch(m.Mean, "update_state", make_metric_update("keras"), tag="loss"))
    when_imported("tf_keras.src.metrics.base_metric",
                  lambda m: patch(m.Mean, "update_state", make_metric_update("tf_keras"), tag="loss"))

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
            "updates": updates, "host_uses": L.host_uses, "average_loss": L.average_loss,
            "metric_fed": L.metric_fed}


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


WHEN_RAN = {"TFP506": "no PerReplica value was used as a tensor there",
            "TFP508": "no PerReplica value reached host code there"}


def _fed_text(m: dict, run) -> str:
    n = run.replicas or 2
    return (f"{m['metric']} metric updated at line {m['line']} inside strategy.run with the result of "
            f"compute_average_loss at line {m['loss_line']} (the same tensor): each replica's value is its share of "
            f"the global-batch average, already divided by the global batch size, so the metric's mean over the "
            f"{n} replicas reports 1/{n} of the loss ({run.ctx()})")


def _seen_update(run) -> list[Seen]:
    """TFP501/503/504: the first step's update on N replicas against the same step on one replica."""
    if run.rerun is None:
        return []
    fs, rs = _update_ratios(run)
    codes = ("TFP501", "TFP503", "TFP504", "TFP513", "TFP514")
    if not fs:
        return [Seen("TFP501", 0, "no training step (tf.function calling strategy.run) was observed to measure its "
                                  "update", status=INCONCLUSIVE, also=codes, anywhere=True)]
    if not rs:
        return [Seen("TFP501", 0, (f"the first step ({fs.get('fn')}) could not be compared with the one-replica run "
                                   f"(no variable moved there, or the runs started from different values)"),
                     status=INCONCLUSIVE, also=codes, anywhere=True)]
    fn, n = fs.get("fn"), run.replicas
    out = []
    for code, bad, what in (
            ("TFP503", [r for r in rs if r["ratio"] < 1 - TOLERANCE], f"about 1/{n}: the gradients were scaled down twice"),
            ("TFP504", [r for r in rs if r["ratio"] > 1 + TOLERANCE],
             f"about {n}: the regularisation was added on every replica and summed"),
            ("TFP501", [r for r in rs if r["ratio"] > 1 + TOLERANCE],
             f"about {n}: each replica averaged over its own batch, then the gradients were summed"),
            ("TFP513", [r for r in rs if r["ratio"] > 1 + TOLERANCE],
             f"about {n}: every replica applied the same gradients, computed once outside strategy.run, and the "
             f"optimizer summed the copies"),
            ("TFP514", [r for r in rs if r["ratio"] > 1 + TOLERANCE],
             f"about {n}: every replica computed the same loss over the gathered batch, and the gradients were summed"),
            ("TFP510", [r for r in rs if r["ratio"] > 1 + TOLERANCE],
             f"about {n}: compute_average_loss divided by the per-replica batch, then the gradients were summed"),
            ("TFP511", [r for r in rs if abs(r["ratio"] - 1) > TOLERANCE],
             "not 1: the loss was scaled twice, so the update depends on the number of replicas"),
            ("TFP509", [r for r in rs if abs(r["ratio"] - 1) > TOLERANCE],
             "not 1: each replica was clipped by its own norm and the clipped gradients were summed")):
        out.append(Seen(code, 0, (f"first step {fn} on {run.ctx()} moved the variables {bad[0]['ratio']:.2f}x as far as "
                                  f"the same step on one replica (same data and seed), {what}; update norms N replicas "
                                  f"vs one: {_fmt(bad)}"), anywhere=True, runtime=False) if bad else
                   Seen(code, 0, f"first step {fn} on {run.ctx()} applied the same update as on one replica: "
                                 f"{_fmt(rs)}", status=NOT_REPRODUCED, anywhere=True))
    return out


def _seen_reported(run, o) -> list[Seen]:
    """TFP505: the loss a strategy.reduce reported against the same step on one replica."""
    out = []
    for r in o.get("reduces", []):
        fn, lines = r["fn"], tuple(r["lines"])
        if run.rerun is None or not fn or not lines:
            continue
        mine = (o.get("outputs") or {}).get(fn) or []
        ref = (_obs(run.rerun).get("outputs") or {}).get(fn) or []
        if not mine or not ref or not mine[0] or not ref[0]:
            out.append(Seen("TFP505", lines[0], f"the outputs of {fn} could not be compared with the one-replica run",
                            lines, INCONCLUSIVE, also=("TFP512",)))
            continue
        a, b = mine[0][0], ref[0][0]
        ratio = _ratio(a, b)
        if ratio is None:
            out.append(Seen("TFP505", lines[0], f"{fn} returned 0 on one replica", lines, INCONCLUSIVE, also=("TFP512",)))
        elif abs(ratio - 1) > TOLERANCE:
            out.append(Seen("TFP505", lines[0], (f"strategy.reduce({r['op']}) at line {lines[0]}: {fn} reported loss "
                                                 f"{a:.4g} on {run.ctx()}, {b:.4g} for the same step on one replica "
                                                 f"(same data): ratio {ratio:.2f}"), lines, runtime=False, also=("TFP512",)))
        else:
            out.append(Seen("TFP505", lines[0], (f"strategy.reduce({r['op']}) at line {lines[0]}: {fn} reported {a:.4g} "
                                                 f"on {run.ctx()} and {b:.4g} on one replica"), lines, NOT_REPRODUCED, also=("TFP512",)))
    return out


def seen(run) -> list[Seen]:
    o = _obs(run)
    out = [Seen("TFP506", int(m["line"]), (f"line {m['line']} used the PerReplica result of strategy.run "
                                           f"({run.ctx()}) as one tensor ({m['kind']}): {m['error']}"))
           for m in o.get("misuse", [])]
    # TFP513's error is raised in the replica threads' merge, whose frames the traceback loses: its text
    # decides a TFP513 finding wherever it is
    out += [replace(s, anywhere=True) if s.code == "TFP513" else s for s in errors_seen(run, ERRORS)]
    for u in o.get("host_uses", []):
        n = u.get("replicas")
        out.append(Seen("TFP508", int(u["line"]), (f"at line {u['line']} a PerReplica value{f' of {n} replicas' if n else ''} "
                                                   f"was {u['kind']} in cross-replica context ({run.ctx()})"),
                        tuple(u.get("lines") or ())))
    out += [Seen("TFP508", int(m["line"]), (f"at line {m['line']} a PerReplica value was asked for {m['kind']} "
                                            f"({m['error']}) in cross-replica context ({run.ctx()})"), runtime=False)
            for m in o.get("misuse", []) if m.get("line")]
    if run.replicas >= 2:
        out += [Seen("TFP505", int(m["line"]), _fed_text(m, run), (int(m["loss_line"]),))
                for m in o.get("metric_fed", [])]
    for u in o.get("updates", []):
        diverged = len(set(u["copies"])) > 1
        out.append(Seen("TFP507", int(u["line"]), (
            f"{u['kind']} of {u['name']} (aggregation {u['aggregation'].split('.')[-1]}) at line {u['line']} inside "
            f"strategy.run: the replica copies diverged, sums {u['copies']}") if diverged else (
            f"{u['name']} updated at line {u['line']}: replica copies agree {u['copies']}"),
            status=CONFIRMED if diverged else NOT_REPRODUCED))
    return out + _seen_reported(run, o) + _seen_update(run)
