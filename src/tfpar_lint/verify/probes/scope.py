"""TFP1xx: strategy scope.

Child side records every variable the script creates (the script lines on
the stack, whether the result is distributed, the strategy in scope), every
Keras model / optimizer / metric and ``tf.train.Checkpoint`` (same facts),
their uses (``compile``, ``fit``, ``apply_gradients``, checkpoint restore) and
every read or update of a *plain* (not distributed) variable inside a replica
function of a strategy.  At the end it lists, per object, how many of its
variables are distributed, and whether the copies of mirrored variables
still agree.

A finding is confirmed when TensorFlow raised the rule's own error (mapped
to the finding's line or to an object created there), or when an object
created at the finding's line is not distributed but was used under a
strategy (compile/fit under the scope, read or updated by ``strategy.run``).
"""
from __future__ import annotations

import re
import threading
from typing import Any, Optional

from tfpar_lint.finding import INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify import symptoms
from tfpar_lint.verify.probes import Seen, error_line, error_matches, errors_seen

CODES = "TFP1xx"

# ------------------------------------------------------------------ errors
# TensorFlow / Keras error texts that are the symptom of each rule (the table: verify/symptoms.py).
# (error_matches reads the message, then the functions the error passed through)
_COLOCATE = symptoms.pattern("colocate")
_NOT_IN_SCOPE = symptoms.pattern("not-in-scope")
_MIXING = symptoms.pattern("mixing")
_SLOT = symptoms.pattern("slot")
_METRIC = symptoms.pattern("metric")
_NEED_SCOPE = symptoms.pattern("need-scope")
_UPDATE_ASSERT = symptoms.pattern("update-assert")
_SCOPE_KEYS = ("colocate", "not-in-scope", "update-assert", "mixing", "slot", "metric", "need-scope")

SYMPTOMS: dict[str, list[str]] = {code: symptoms.patterns_of(code, _SCOPE_KEYS) for code in (
    "TFP101", "TFP102", "TFP103", "TFP104", "TFP105", "TFP106", "TFP109")}
ALL_SYMPTOMS = sorted({p for ps in SYMPTOMS.values() for p in ps})

# Which recorded object kinds each rule is about.
KINDS: dict[str, tuple[str, ...]] = {
    "TFP101": ("model", "variable"),
    "TFP102": ("optimizer",),
    "TFP103": ("metric",),
    "TFP104": ("checkpoint",),
    "TFP105": ("variable",),
    "TFP106": ("optimizer",),
    "TFP109": ("model", "optimizer", "metric", "variable"),
}


# =================================================================== child
class _State:
    def __init__(self):
        self.objects: list[dict[str, Any]] = []
        self.refs: list[Any] = []
        self.obj_index: dict[int, int] = {}
        self.variables: list[dict[str, Any]] = []
        self.var_refs: list[Any] = []
        self.plain: dict[int, int] = {}  # id(plain tf variable) -> index in variables
        self.compiles: list[dict[str, Any]] = []
        self.fits: list[dict[str, Any]] = []
        self.applies: list[dict[str, Any]] = []
        self.restores: list[dict[str, Any]] = []
        self.local = threading.local()
        self.max_vars = 20000
        self.foreign: list[dict[str, Any]] = []
        self.foreign_keys: set = set()


def _is_dist(v) -> bool:
    from tensorflow.python.distribute import values as dv

    inner = getattr(v, "_value", None)  # Keras 3 KerasVariable wraps a tf.Variable
    if inner is None or not hasattr(inner, "dtype"):
        inner = v
    return isinstance(inner, (dv.DistributedValues,)) or type(inner).__name__ in (
        "MirroredVariable", "SyncOnReadVariable", "TPUMirroredVariable", "AggregatingVariable",
        "CachingVariable", "DistributedVariable")


def _var_devices(v) -> list:
    try:
        return [str(c.device).split("device:")[-1] for c in v.values]
    except Exception:
        return []


def _obj_vars(obj, kind: str) -> list:
    try:
        if kind == "checkpoint":
            return []
        v = getattr(obj, "variables", None)
        if callable(v):
            v = v()
        return list(v or [])
    except Exception:
        return []


def install(R) -> None:
    import tensorflow as tf
    from tensorflow.python.ops import resource_variable_ops, variables

    from tfpar_lint.verify.runtime import patch, patch_variable_method, when_imported

    S = _State()
    R.scope = S

    def strategy_now() -> Optional[int]:
        try:
            return R.strategy_index(R.current_strategy())
        except Exception:
            return None

    def add_object(obj, kind: str, captured=None) -> None:
        if id(obj) in S.obj_index:
            return
        lines = R.script_lines(3)
        with R.lock:
            S.obj_index[id(obj)] = len(S.objects)
            S.refs.append(obj)
            S.objects.append({
                "kind": kind,
                "cls": type(obj).__name__,
                "lines": lines,
                "strategy": strategy_now(),
                "captured": R.strategy_index(captured) if captured is not None else None,
                "replica": _safe(R.in_replica_fn),
            })

    # ---- tf.Variable creation (top-level calls only)
    def make_var_call(orig):
        def __call__(cls, *args, **kwargs):
            depth = getattr(S.local, "depth", 0)
            S.local.depth = depth + 1
            try:
                out = orig(cls, *args, **kwargs)
            finally:
                S.local.depth = depth
            if depth == 0 and cls.__name__ in ("Variable", "VariableV1") and len(S.variables) < S.max_vars:
                try:
                    dist = _is_dist(out)
                    rec = {
                        "name": str(getattr(out, "name", "?")),
                        "shape": str(getattr(out, "shape", "?")),
                        "type": type(out).__name__,
                        "dist": dist,
                        "lines": R.script_lines(2),
                        "strategy": strategy_now(),
                        "replica": _safe(R.in_replica_fn),
                        "device": str(getattr(out, "device", "")) if not dist else "",
                        "uses": [],
                    }
                    pins = [p for p in (getattr(S.pin_stack, "stack", None) or []) if p is not None]
                    with R.lock:
                        for p in pins:
                            if len(p["vars"]) < 5:
                                p["vars"].append({"name": rec["name"], "dist": dist,
                                                  "devices": _var_devices(out) if dist else [rec["device"]]})
                        S.variables.append(rec)
                        S.var_refs.append(out)
                        if not dist:
                            S.plain[id(out)] = len(S.variables) - 1
                except Exception:  # pragma: no cover
                    pass
            return out

        return __call__

    patch(variables.VariableMetaclass, "__call__", make_var_call, tag="scope")

    # ---- plain variables read/updated inside a replica function
    def use(var, kind: str) -> None:
        i = S.plain.get(id(var))
        if i is None:
            return
        rec = S.variables[i]
        if len(rec["uses"]) >= 3:
            return
        try:
            if not R.in_replica_fn():
                return
            ctx = tf.distribute.get_replica_context()
            sidx = R.strategy_index(ctx.strategy)
        except Exception:
            return
        if sidx is not None and sidx == rec["strategy"]:
            return  # created under this very strategy (e.g. OneDeviceStrategy keeps plain variables)
        with R.lock:
            if len(rec["uses"]) < 3 and not any(u["kind"] == kind and u["strategy"] == sidx for u in rec["uses"]):
                rec["uses"].append({"kind": kind, "strategy": sidx, "lines": R.script_lines(3)})

    def make_read(orig):
        def _read_variable_op(self, *a, **k):
            if id(self) in S.plain:
                use(self, "read")
            return orig(self, *a, **k)

        return _read_variable_op

    def make_assign(kind):
        def make(orig):
            def assign(self, *a, **k):
                if id(self) in S.plain:
                    use(self, kind)
                return orig(self, *a, **k)

            return assign

        return make

    # ---- tf.device pins (TFP107 in scope / replica functions, TFP108 missing devices)
    S.pins = []
    S.pin_stack = threading.local()

    def logical_names():
        try:
            return [d.name for d in tf.config.list_logical_devices()]
        except Exception:
            return []

    def device_exists(spec: str) -> bool:
        from tensorflow.python.framework import device as pydev

        try:
            want = pydev.DeviceSpec.from_string(spec)
        except Exception:
            return True
        if not want.device_type:
            return True
        for name in logical_names():
            have = pydev.DeviceSpec.from_string(name)
            if have.device_type.upper() == want.device_type.upper() and (
                    want.device_index is None or have.device_index == want.device_index):
                return True
        return False

    class _Pin:
        def __init__(self, cm, spec, line):
            self.cm, self.spec, self.line = cm, spec, line

        def __enter__(self):
            rec = None
            if self.line is not None and isinstance(self.spec, str) and len(S.pins) < 200:
                rid, rdev = None, ""
                replica = _safe(R.in_replica_fn)
                if replica:
                    try:
                        ctx = tf.distribute.get_replica_context()
                        rid = int(tf.get_static_value(ctx.replica_id_in_sync_group))
                        rdev = ",".join(re.findall(r"(?:CPU|GPU|TPU):\d+", str(ctx.devices)))
                    except Exception:
                        pass
                rec = {"line": self.line, "spec": self.spec, "replica": replica, "replica_id": rid,
                       "replica_device": rdev, "strategy": strategy_now(), "exists": device_exists(self.spec),
                       "vars": []}
                with R.lock:
                    S.pins.append(rec)
            stack = getattr(S.pin_stack, "stack", None)
            if stack is None:
                stack = S.pin_stack.stack = []
            stack.append(rec)
            return self.cm.__enter__()

        def __exit__(self, *exc):
            stack = getattr(S.pin_stack, "stack", [])
            if stack:
                stack.pop()
            return self.cm.__exit__(*exc)

    def make_device(orig):
        def device(device_name):
            cm = orig(device_name)
            line = R.direct_caller_line(2)
            if line is None:
                return cm
            return _Pin(cm, device_name, line)

        return device

    patch(tf, "device", make_device, tag="scope")

    # ---- distributed variables used under another strategy (TFP109)
    from tensorflow.python.distribute import distribute_lib
    from tensorflow.python.distribute import values as dv

    def foreign(var, kind: str) -> None:
        if len(S.foreign) >= 20:
            return
        try:
            if not distribute_lib.has_strategy():
                return
            cur = distribute_lib.get_strategy()
            own = getattr(var, "_distribute_strategy", None)
            if own is None or cur is own:
                return
            rec = {"name": str(getattr(var, "name", "?")), "own": R.strategy_index(own),
                   "current": R.strategy_index(cur), "replica": R.in_replica_fn(), "kind": kind,
                   "lines": R.script_lines(3)}
        except Exception:
            return
        with R.lock:
            key = (rec["name"], tuple(rec["lines"]))
            if key not in S.foreign_keys:
                S.foreign_keys.add(key)
                S.foreign.append(rec)

    def make_dist_read(kind):
        def make(orig):
            def read(self, *a, **k):
                foreign(self, kind)
                return orig(self, *a, **k)

            return read

        return make

    for cls in (dv.DistributedVariable, dv.MirroredVariable):
        for m in ("_dense_var_to_tensor", "value", "read_value"):
            if m in cls.__dict__:
                patch(cls, m, make_dist_read("read"), tag="scope")

    BRV = resource_variable_ops.BaseResourceVariable
    patch(BRV, "_read_variable_op", make_read, tag="scope")
    for m in ("assign", "assign_add", "assign_sub"):
        patch_variable_method(m, make_assign(m), tag="scope")

    # ---- Keras 3
    def keras3_trainer(mod):
        cls = mod.TensorFlowTrainer

        patch(cls, "__init__", lambda orig: _outer_init(S, orig, add_object, "model", "_distribute_strategy"),
              tag="scope")
        patch(cls, "compile", lambda orig: _compile_wrapper(R, S, orig, add_object), tag="scope")
        for kind in ("fit", "evaluate", "predict"):
            patch(cls, kind, lambda orig, kind=kind: _fit_wrapper(R, S, orig, kind), tag="scope")

    when_imported("keras.src.backend.tensorflow.trainer", keras3_trainer)

    def keras3_opt(mod):
        cls = mod.BaseOptimizer

        def make_init(orig):
            def __init__(self, *a, **k):
                orig(self, *a, **k)
                add_object(self, "optimizer", getattr(self, "_distribution_strategy", None))

            return __init__

        patch(cls, "__init__", make_init, tag="scope")
        patch(cls, "apply_gradients", lambda orig: _apply_wrapper(R, S, orig), tag="scope")

    when_imported("keras.src.optimizers.base_optimizer", keras3_opt)

    def keras3_tfopt(mod):
        # TFOptimizer captures the strategy after BaseOptimizer.__init__.
        cls = getattr(mod, "TFOptimizer", None)
        if cls is None:
            return

        def make_init(orig):
            def __init__(self, *a, **k):
                orig(self, *a, **k)
                i = S.obj_index.get(id(self))
                if i is not None:
                    S.objects[i]["captured"] = R.strategy_index(getattr(self, "_distribution_strategy", None))

            return __init__

        patch(cls, "__init__", make_init, tag="scope")

    when_imported("keras.src.backend.tensorflow.optimizer", keras3_tfopt)

    def keras3_metric(mod):
        def make_init(orig):
            def __init__(self, *a, **k):
                orig(self, *a, **k)
                add_object(self, "metric")

            return __init__

        patch(mod.Metric, "__init__", make_init, tag="scope")

    when_imported("keras.src.metrics.metric", keras3_metric)

    # ---- tf_keras (legacy Keras 2)
    def tfk_training(mod):
        cls = mod.Model

        patch(cls, "__init__", lambda orig: _outer_init(S, orig, add_object, "model", "_distribution_strategy"),
              tag="scope")
        patch(cls, "compile", lambda orig: _compile_wrapper(R, S, orig, add_object), tag="scope")
        for kind in ("fit", "evaluate", "predict"):
            patch(cls, kind, lambda orig, kind=kind: _fit_wrapper(R, S, orig, kind), tag="scope")

    when_imported("tf_keras.src.engine.training", tfk_training)

    def tfk_opt(modname, clsname):
        def hook(mod):
            cls = getattr(mod, clsname, None)
            if cls is None:
                return

            def make_init(orig):
                def __init__(self, *a, **k):
                    orig(self, *a, **k)
                    add_object(self, "optimizer", getattr(self, "_distribution_strategy", None))

                return __init__

            patch(cls, "__init__", make_init, tag="scope")
            patch(cls, "apply_gradients", lambda orig: _apply_wrapper(R, S, orig), tag="scope")

        when_imported(modname, hook)

    tfk_opt("tf_keras.src.optimizers.optimizer", "_BaseOptimizer")
    tfk_opt("tf_keras.src.optimizers.legacy.optimizer_v2", "OptimizerV2")

    def tfk_metric(mod):
        def make_init(orig):
            def __init__(self, *a, **k):
                orig(self, *a, **k)
                add_object(self, "metric")

            return __init__

        patch(mod.Metric, "__init__", make_init, tag="scope")

    when_imported("tf_keras.src.metrics.base_metric", tfk_metric)

    # ---- tf.train.Checkpoint
    from tensorflow.python.checkpoint import checkpoint as ckpt

    def make_ck_init(orig):
        def __init__(self, *a, **k):
            orig(self, *a, **k)
            add_object(self, "checkpoint")

        return __init__

    patch(ckpt.Checkpoint, "__init__", make_ck_init, tag="scope")

    def make_restore(kind):
        def make(orig):
            def restore(self, *a, **k):
                rec = {
                    "kind": kind,
                    "ckpt": S.obj_index.get(id(self)),
                    "strategy": strategy_now(),
                    "lines": R.script_lines(2),
                    "error": "",
                }
                with R.lock:
                    S.restores.append(rec)
                try:
                    return orig(self, *a, **k)
                except Exception as e:
                    rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                    raise

            return restore

        return make

    patch(ckpt.Checkpoint, "restore", make_restore("restore"), tag="scope")
    patch(ckpt.Checkpoint, "read", make_restore("read"), tag="scope")


def _outer_init(S, orig, add_object, kind, attr):
    """Record a model once: not the inner models Keras builds inside a model's __init__."""

    def __init__(self, *a, **k):
        depth = getattr(S.local, "model_depth", 0)
        S.local.model_depth = depth + 1
        try:
            orig(self, *a, **k)
        finally:
            S.local.model_depth = depth
        if depth == 0:
            add_object(self, kind, getattr(self, attr, None))

    return __init__


def _safe(fn, default=False):
    try:
        return fn()
    except Exception:
        return default


def _model_strategy(R, model) -> Optional[int]:
    s = getattr(model, "_distribute_strategy", None) or getattr(model, "_distribution_strategy", None)
    return R.strategy_index(s) if s is not None else None


def _compile_wrapper(R, S, orig, add_object):
    def compile(self, *args, **kwargs):
        import inspect

        try:
            ba = inspect.signature(orig).bind(self, *args, **kwargs)
            a = ba.arguments
        except TypeError:
            a = {}
        opt = a.get("optimizer")
        metrics = []
        for key in ("metrics", "weighted_metrics"):
            m = a.get(key)
            if m is None:
                continue
            seq = m.values() if isinstance(m, dict) else (m if isinstance(m, (list, tuple)) else [m])
            for x in seq:
                for y in (x if isinstance(x, (list, tuple)) else [x]):
                    if not isinstance(y, str) and id(y) in S.obj_index:
                        metrics.append(S.obj_index[id(y)])
        rec = {
            "model": S.obj_index.get(id(self)),
            "strategy": _safe(lambda: R.strategy_index(R.current_strategy()), None),
            "model_strategy": _model_strategy(R, self),
            "optimizer": S.obj_index.get(id(opt)) if opt is not None and not isinstance(opt, str) else None,
            "metrics": metrics,
            "lines": R.script_lines(2),
        }
        with R.lock:
            S.compiles.append(rec)
        return orig(self, *args, **kwargs)

    return compile


def _fit_wrapper(R, S, orig, kind):
    def fit(self, *args, **kwargs):
        rec = {
            "kind": kind,
            "model": S.obj_index.get(id(self)),
            "strategy": _safe(lambda: R.strategy_index(R.current_strategy()), None),
            "model_strategy": _model_strategy(R, self),
            "lines": R.script_lines(2),
        }
        with R.lock:
            S.fits.append(rec)
        try:
            return orig(self, *args, **kwargs)
        except Exception as e:  # the script may catch it: keep its text as evidence
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            R.record_caught(e, f"model.{kind}")
            raise

    return fit


def _apply_wrapper(R, S, orig):
    def apply_gradients(self, *args, **kwargs):
        rec = {
            "optimizer": S.obj_index.get(id(self)),
            "strategy": _safe(lambda: R.strategy_index(R.current_strategy()), None),
            "replica": _safe(R.in_replica_fn),
            "lines": R.script_lines(2),
            "error": "",
        }
        with R.lock:
            if len(S.applies) < 50:
                S.applies.append(rec)
        try:
            return orig(self, *args, **kwargs)
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            raise

    return apply_gradients


def collect(R) -> dict[str, Any]:
    S: _State = getattr(R, "scope", None)
    if S is None:
        return {}
    objects = []
    inner = {id(getattr(o, "_functional", None)) for o in S.refs if getattr(o, "_functional", None) is not None}
    for rec, obj in zip(S.objects, S.refs):
        if id(obj) in inner:  # Keras 3 Sequential's internal Functional model
            rec = dict(rec, kind="inner-model")
        vs = _obj_vars(obj, rec["kind"])
        n_dist = sum(1 for v in vs if _safe(lambda v=v: _is_dist(v)))
        objects.append(dict(rec, n_vars=len(vs), n_dist=n_dist))
    inconsistent = []
    checked = 0
    import numpy as np

    for rec, v in zip(S.variables, S.var_refs):
        if not rec["dist"] or checked >= 400:
            continue
        comps = getattr(v, "values", None)
        if not isinstance(comps, tuple) or len(comps) < 2:
            continue
        checked += 1
        try:
            vals = [np.asarray(c.numpy()) for c in comps]
            if any(not np.array_equal(vals[0], x) for x in vals[1:]):
                inconsistent.append({"name": rec["name"], "lines": rec["lines"]})
        except Exception:
            continue
    plain_used = [
        {k: r[k] for k in ("name", "shape", "lines", "strategy", "device", "uses")}
        for r in S.variables if not r["dist"] and r["uses"]
    ]
    # Variables are summarised: per creation line, counts of plain/distributed.
    by_line: dict[int, dict[str, Any]] = {}
    for r in S.variables:
        for ln in r["lines"]:
            d = by_line.setdefault(ln, {"plain": 0, "dist": 0, "in_scope": 0, "names": []})
            d["dist" if r["dist"] else "plain"] += 1
            if r["strategy"] is not None:
                d["in_scope"] += 1
            if len(d["names"]) < 4:
                d["names"].append(r["name"])
    return {
        "objects": objects,
        "var_lines": {str(k): v for k, v in by_line.items()},
        "n_vars": len(S.variables),
        "n_dist": sum(1 for r in S.variables if r["dist"]),
        "plain_used": plain_used[:200],
        "compiles": S.compiles,
        "fits": S.fits[:50],
        "applies": S.applies,
        "restores": S.restores[:50],
        "inconsistent": inconsistent[:50],
        "checked_copies": checked,
        "foreign": S.foreign,
        "pins": getattr(S, "pins", []),
    }


# ================================================================== parent
def _merged(run) -> dict[str, Any]:
    """Worker 0's view plus, from every worker, the lists (scope objects are
    the same program on every worker; one view suffices for most facts)."""
    obs = [o for o in run.probe("scope") if o]
    if not obs:
        return {}
    return obs[0]


def _strategy_name(run, idx) -> str:
    if idx is None:
        return "no strategy"
    sts = (run.workers[0] or {}).get("strategies", []) if run.workers else []
    if 0 <= idx < len(sts):
        s = sts[idx]
        n = f" #{idx + 1}" if len(sts) > 1 else ""
        return f"{s['type']}{n} ({s['replicas']} replicas)"
    return "a strategy"


def _misuses(run, o: dict[str, Any]) -> list[tuple[dict, str]]:
    """Objects created outside any strategy scope and then used under one:
    (object record, description of the use)."""
    out = []
    objs = o.get("objects", [])
    for i, ob in enumerate(objs):
        if ob["strategy"] is not None or ob.get("replica"):
            continue
        uses = []
        if ob["kind"] == "model":
            for c in o.get("compiles", []):
                if c["model"] == i and c["strategy"] is not None:
                    uses.append(f"compiled under {_strategy_name(run, c['strategy'])} (line {_u(c)})")
            for f in o.get("fits", []):
                if f["model"] == i and f["strategy"] is not None:
                    uses.append(f"{f['kind']} under {_strategy_name(run, f['strategy'])} (line {_u(f)})")
        if ob["kind"] == "optimizer":
            for c in o.get("compiles", []):
                if c["optimizer"] == i and (c["strategy"] is not None or c["model_strategy"] is not None):
                    uses.append(f"passed to compile of a model under "
                                f"{_strategy_name(run, c['strategy'] if c['strategy'] is not None else c['model_strategy'])}"
                                f" (line {_u(c)})")
            for a in o.get("applies", []):
                if a["optimizer"] == i and (a["strategy"] is not None or a["replica"]):
                    uses.append(f"apply_gradients in {'a replica function' if a['replica'] else 'the scope'}"
                                f" (line {_u(a)})")
        if ob["kind"] == "metric":
            for c in o.get("compiles", []):
                if i in c["metrics"] and c["strategy"] is not None:
                    uses.append(f"passed to compile under {_strategy_name(run, c['strategy'])} (line {_u(c)})")
        if uses:
            out.append((ob, "; ".join(dict.fromkeys(uses))))
    return out


def _l(rec) -> str:
    """Where an object was created: the outermost script line (the call of a helper that builds it)."""
    return str(rec["lines"][-1]) if rec.get("lines") else "?"


def _u(rec) -> str:
    """Where an object was used (compile, fit, apply_gradients): the innermost script line,
    the call itself, not the call of the function that contains it."""
    return str(rec["lines"][0]) if rec.get("lines") else "?"


def _describe_plain(run, vs: list[dict]) -> str:
    v = vs[0]
    u = v["uses"][0]
    where = f"line {u['lines'][0]}" if u.get("lines") else "a replica function"
    more = f" (and {len(vs) - 1} more)" if len(vs) > 1 else ""
    dev = f" on {v['device'].split('device:')[-1]}" if v.get("device") else ""
    return (f"variable {v['name']} {v['shape']} is a plain {'ResourceVariable'}{dev}, not mirrored{more}, "
            f"yet it was {'updated' if u['kind'].startswith('assign') else 'read'} inside strategy.run "
            f"of {_strategy_name(run, u['strategy'])} at {where}")


# The rule an error text points to when it is seen without a finding (a pattern several
# rules share falls back to the kind of the object created outside the scope, else TFP101).
# the rule an error names by itself (the first of its symptom); the others depend on the object it concerns
_ERROR_CODE = {symptoms.pattern(k): symptoms.BY_KEY[k].codes[0] for k in ("mixing", "need-scope", "slot", "metric")}
_KIND_CODE = {"model": "TFP101", "optimizer": "TFP102", "metric": "TFP103", "variable": "TFP105"}
# the codes about objects created outside the scope, and the kinds each is about
_OBJECT_CODES = ("TFP101", "TFP102", "TFP103", "TFP105")
WHEN_RAN = {"TFP109": "it used no variable of another strategy object and raised no mixing error"}


def _codes_for(kind: str) -> tuple[str, ...]:
    return tuple(c for c in _OBJECT_CODES if kind in KINDS[c])


def _seen_errors(run, o, mis) -> tuple[list[Seen], set[str]]:
    """The rules' own errors: for each code whose error text TensorFlow raised, at every line of the
    traceback and of the objects it concerns (created outside any scope, plain variables, a variable
    the message names); the first such error is also located as a finding of its own."""
    out: list[Seen] = []
    unlinked: set[str] = set()
    objs, var_lines = o.get("objects", []), o.get("var_lines") or {}
    for err in run.errors():
        p = error_matches(err, ALL_SYMPTOMS)
        if not p:
            continue
        line = error_line(err) or 0
        text = f"TensorFlow raised {run.error_text(err)}" + (" (the script caught it)" if err.get("caught") else "")
        names = re.findall(r"tf\.Variable '([^']+)'", str(err.get("message", "")))
        for code, pats in SYMPTOMS.items():
            if p not in pats:
                continue
            kinds = KINDS[code]
            lines = set(err.get("script_lines") or ())
            lines |= {ln for ob in objs if ob["kind"] in kinds and ob["strategy"] is None for ln in ob["lines"]}
            for ln, d in var_lines.items():
                if ("variable" in kinds and d["plain"]) or any(n.split(":")[0] in x for n in names for x in d["names"]):
                    lines.add(int(ln))
            out.append(Seen(code, line, text, tuple(sorted(lines)), runtime=False))
            if not err.get("caught") and err is run.error:
                unlinked.add(code)
        if p == _MIXING and _unscoped_compiles(o):
            continue  # a model of a strategy compiled outside its scope: TFP110 at the compile (_seen_issue19)
        if not any(s.runtime for s in out) and line:
            code = _ERROR_CODE.get(p) or (_KIND_CODE.get(mis[0][0]["kind"], "TFP101") if mis else "TFP101")
            out.append(Seen(code, line, text, tuple(err.get("script_lines") or ())))
    return out, unlinked


def _seen_objects(run, o, mis, unlinked: set[str]) -> list[Seen]:
    out: list[Seen] = []
    for ob, use in mis:
        if ob.get("lines") and ob["kind"] in _KIND_CODE:
            codes = _codes_for(ob["kind"])
            dist = f"{ob['n_dist']} of its {ob['n_vars']} variables distributed" if ob["n_vars"] else "no variables yet"
            out.append(Seen(_KIND_CODE[ob["kind"]], int(ob["lines"][-1]), (
                f"{ob['cls']} created at line {_l(ob)} outside any strategy scope ({dist}); then {use}"),
                tuple(ob["lines"]), also=codes))
    plain = o.get("plain_used", [])
    misused = {ln for ob, _use in mis for ln in ob.get("lines", ())}
    for i, v in enumerate(plain):
        if v.get("lines"):
            # a variable of an object already reported as created outside the scope is the same mistake
            out.append(Seen("TFP105", int(v["lines"][-1]), _describe_plain(run, plain[i:]), tuple(v["lines"]),
                            also=("TFP101", "TFP103"), runtime=i == 0 and not set(v["lines"]) & misused))
    for ob in o.get("objects", []):
        if not ob.get("lines") or ob["kind"] not in _KIND_CODE:
            continue
        codes = _codes_for(ob["kind"])
        if ob["strategy"] is None and ob["n_vars"] and ob["n_dist"] == 0:
            # Keras 3 metric / model objects whose plain variables were used by replicas
            used = [v for v in plain if any(ln in ob["lines"] for ln in v["lines"])]
            if used:
                out.append(Seen(codes[0], int(ob["lines"][-1]), (f"{ob['cls']} created at line {_l(ob)} outside the "
                                                                 f"scope: " + _describe_plain(run, used)),
                                tuple(ob["lines"]), also=codes, runtime=False))
                continue
        if ob["strategy"] is not None:
            text = (f"{ob['cls']} at line {_l(ob)} was created under {_strategy_name(run, ob['strategy'])}; "
                    f"{ob['n_dist']} of {ob['n_vars']} variables distributed")
        else:
            text = (f"{ob['cls']} created at line {_l(ob)} outside any scope, but not used under a strategy in this "
                    f"run; no scope error")
        out += _ok(codes, int(ob["lines"][-1]), text, tuple(ob["lines"]), unlinked)
    for ln, d in (o.get("var_lines") or {}).items():
        text = (f"{d['plain']} plain variable(s) created at line {ln} were never read or updated inside strategy.run"
                if d["plain"] else f"the {d['dist']} variable(s) created at line {ln} are distributed")
        out += _ok(("TFP101", "TFP105", "TFP109"), int(ln), text, (), unlinked)
    for f in o.get("foreign", []):
        if f.get("lines"):
            where = "in a replica function" if f["replica"] else "in the scope"
            out.append(Seen("TFP109", int(f["lines"][-1]), (
                f"variable {f['name']} created under {_strategy_name(run, f['own'])} was read {where} of another "
                f"strategy object, {_strategy_name(run, f['current'])}, at line {_l(f)}"), tuple(f["lines"])))
    return out


def _ok(codes, line: int, text: str, lines: tuple, unlinked: set[str]) -> list[Seen]:
    """NOT_REPRODUCED for each code, or INCONCLUSIVE where the code's error was raised elsewhere."""
    return [Seen(c, line, text, lines, NOT_REPRODUCED) if c not in unlinked else
            Seen(c, line, f"TensorFlow raised the rule's error, not traced to line {line}", lines, INCONCLUSIVE)
            for c in codes]


def _seen_pins(run, o) -> list[Seen]:
    """TFP107/TFP108 at each tf.device line."""
    by_line: dict[int, list[dict]] = {}
    for p in o.get("pins", []):
        by_line.setdefault(int(p["line"]), []).append(p)
    out = []
    for line, pins in by_line.items():
        spec = pins[0]["spec"]
        missing = [p for p in pins if not p["exists"]]
        out.append(Seen("TFP108", line, (
            f"tf.device({spec!r}) at line {line} names a device this machine does not have "
            f"({', '.join(d.split('device:')[-1] for d in run.devices) or 'see devices'}); TensorFlow placed the ops "
            f"elsewhere without an error (soft placement)"), runtime=False) if missing else Seen(
            "TFP108", line, f"tf.device({spec!r}) at line {line}: the device exists here", status=NOT_REPRODUCED))
        in_rep = [p for p in pins if p["replica"]]
        scoped = [p for p in pins if p["strategy"] is not None]
        ignored = [v for p in scoped for v in p["vars"] if v["dist"]]
        if in_rep:
            ids = sorted({p["replica_id"] for p in in_rep if p["replica_id"] is not None})
            specs = {p["spec"] for p in in_rep}
            if len(ids) >= 2 and len(specs) == 1:
                own = ", ".join(sorted({p["replica_device"] for p in in_rep if p["replica_device"]}))
                out.append(Seen("TFP107", line, (f"tf.device({spec!r}) at line {line} inside the replica function pins "
                                                 f"the ops of all {len(ids)} replicas (assigned {own}) to the one "
                                                 f"device {spec}"), runtime=False))
            else:
                out.append(Seen("TFP107", line, f"tf.device at line {line} ran in {len(ids)} replica(s) with devices "
                                                f"{sorted(specs)}", status=NOT_REPRODUCED))
        elif ignored:
            v = ignored[0]
            out.append(Seen("TFP107", line, (f"tf.device({spec!r}) at line {line} inside strategy.scope() was ignored "
                                             f"for variable {v['name']}: it is mirrored on {', '.join(v['devices'])}"),
                            runtime=False))
        else:
            where = "in the scope created no mirrored variable" if scoped else \
                "ran outside any strategy and replica function"
            out.append(Seen("TFP107", line, f"tf.device({spec!r}) at line {line} {where}", status=NOT_REPRODUCED))
    return out


def _seen_checkpoints(run, o) -> list[Seen]:
    """TFP104 at each checkpoint created, saved or restored."""
    out = []
    objs = o.get("objects", [])
    bad = o.get("inconsistent", [])
    done: set[int] = set()
    for r in o.get("restores", []):
        ck = objs[r["ckpt"]] if r.get("ckpt") is not None and r["ckpt"] < len(objs) else {}
        lines = tuple(r["lines"]) + tuple(ck.get("lines", ()))
        done.add(r.get("ckpt"))
        if r["error"] and re.search("|".join(SYMPTOMS["TFP104"]), r["error"]):
            out.append(Seen("TFP104", int(r["lines"][-1]), f"checkpoint {r['kind']} at line {_l(r)} raised "
                                                           f"{r['error']}", lines, runtime=False))
        elif bad:
            out.append(Seen("TFP104", int(r["lines"][-1]), (
                f"after the checkpoint {r['kind']} at line {_l(r)} outside the scope, the replica copies of {len(bad)} "
                f"mirrored variable(s) disagree (e.g. {bad[0]['name']})"), lines, runtime=False))
        else:
            where = "outside any strategy scope" if r["strategy"] is None else f"under {_strategy_name(run, r['strategy'])}"
            out.append(Seen("TFP104", int(r["lines"][-1]), (
                f"checkpoint {r['kind']} at line {_l(r)} ran {where}; no error, and the copies of "
                f"{o.get('checked_copies', 0)} mirrored variables agree"), lines, NOT_REPRODUCED))
    for i, ob in enumerate(objs):
        if ob["kind"] == "checkpoint" and i not in done and ob.get("lines"):
            where = "outside any strategy scope" if ob["strategy"] is None else "under the scope"
            out.append(Seen("TFP104", int(ob["lines"][-1]), (
                f"checkpoint created at line {_l(ob)} {where}; saving/restoring raised no error and the copies of "
                f"{o.get('checked_copies', 0)} mirrored variables agree"), tuple(ob["lines"]), NOT_REPRODUCED))
    return out


def _seen_applies(run, o) -> list[Seen]:
    """TFP106 at each apply_gradients."""
    out = []
    objs = o.get("objects", [])
    for a in o.get("applies", []):
        if not a.get("lines"):
            continue
        line, lines = int(a["lines"][0]), tuple(a["lines"])
        opt = objs[a["optimizer"]] if a.get("optimizer") is not None and a["optimizer"] < len(objs) else None
        scoped = opt is not None and (opt["strategy"] is not None or opt.get("n_dist", 0) > 0)
        if a["error"] and re.search("|".join(SYMPTOMS["TFP106"]), a["error"]):
            out.append(Seen("TFP106", line, f"apply_gradients at line {line} raised {a['error']}", lines, runtime=False))
        elif not a["replica"] and a["strategy"] is None and scoped:
            out.append(Seen("TFP106", line, (
                f"apply_gradients at line {line} ran outside strategy.scope() and outside strategy.run (cross-replica "
                f"context) on {opt['cls']} created under {_strategy_name(run, opt['strategy'])}: the step was computed "
                f"once, on one device, for the whole batch (no data parallelism); this TensorFlow raised no error"),
                lines, runtime=False))
        else:
            ctx = "a replica function" if a["replica"] else (
                "the scope" if a["strategy"] is not None else "cross-replica context outside any scope")
            what = "" if scoped else " on an optimizer not created under a strategy"
            out.append(Seen("TFP106", line, f"apply_gradients at line {line} ran in {ctx}{what} without error", lines,
                            NOT_REPRODUCED))
    return out


def seen(run) -> list[Seen]:
    o = _merged(run)
    mis = _misuses(run, o) if o else []
    errs, unlinked = _seen_errors(run, o, mis)
    errs += errors_seen(run, {"TFP112": [_SHADOW_TYPE]}, runtime=False)
    if not o:
        return errs
    if mis:  # the error is the symptom of the object created outside the scope: one finding, at the object
        for e in errs:
            if e.runtime and e.code == _KIND_CODE.get(mis[0][0]["kind"]):
                e.runtime = False
                ob, use = mis[0]
                mis[0] = (ob, f"{use}; then, at line {e.line}, {e.evidence}")
    # checkpoints, apply_gradients and pins first: they decide TFP104/106/107/108 at their own lines
    return (errs + _seen_checkpoints(run, o) + _seen_applies(run, o) + _seen_pins(run, o)
            + _seen_objects(run, o, mis, unlinked) + _seen_issue19(run, o))


# ------------------------------------------------------------ issue 19: TFP110-TFP113
_CROSS_REPLICA_STEP = [symptoms.pattern(k) for k in ("handle-outside-replica", "sync-on-read-cross-replica",
                                                     "cross-replica-call", "need-scope")]
_PLACEHOLDER = symptoms.pattern("lazy-slots-placeholder")
_SHADOW_TYPE = symptoms.pattern("shadow-variables")
WHEN_RAN.update({
    "TFP111": "no cross-replica error",
    "TFP112": "no shadow-variable error",
})


def _unscoped_compiles(o) -> list[dict]:
    """compile calls that ran outside every scope on a model that belongs to a strategy."""
    return [c for c in (o or {}).get("compiles", []) if c.get("lines") and c.get("strategy") is None
            and c.get("model_strategy") is not None]


def _block_lines(path: str, line: int, loops: bool = True) -> set[int]:
    """The lines of the innermost loop or function body holding ``line`` (the step it is part of; with
    ``loops`` False the function only), else of the innermost ``with`` body, else ``{line}``."""
    import ast

    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return {line}
    step = (ast.FunctionDef, ast.AsyncFunctionDef) + ((ast.For, ast.While) if loops else ())
    best: dict[bool, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, step + (ast.With,)) and node.body:
            lo, hi = node.body[0].lineno, max(getattr(n, "end_lineno", n.lineno) for n in node.body)
            key = isinstance(node, step)
            if lo <= line <= hi and (key not in best or hi - lo < best[key][1] - best[key][0]):
                best[key] = (lo, hi)
    b = best.get(True) or best.get(False)
    return set(range(b[0], b[1] + 1)) if b else {line}


def _seen_issue19(run, o) -> list[Seen]:
    out: list[Seen] = []
    # TFP110: the compile ran outside every scope on a model of a strategy, then the mixing error
    mixing = [e for e in run.errors() if error_matches(e, [_MIXING])]
    for c in o.get("compiles", []):
        if not c.get("lines"):
            continue
        line, lines = int(c["lines"][0]), tuple(c["lines"])
        if c.get("strategy") is not None or c.get("model_strategy") is None:
            out.append(Seen("TFP110", line, f"the compile at line {line} ran " + (
                "under a strategy scope" if c.get("strategy") is not None
                else "for a model that belongs to no strategy"), lines, NOT_REPRODUCED))
        elif mixing:
            err = mixing[0]
            caught = " (the script caught it)" if err.get("caught") else ""
            out.append(Seen("TFP110", line, (
                f"the compile at line {line} ran outside every scope for a model of "
                f"{_strategy_name(run, c['model_strategy'])}; then TensorFlow raised {run.error_text(err)}{caught}"),
                lines + tuple(err.get("script_lines") or ())))
        else:
            out.append(Seen("TFP110", line, (
                f"the compile at line {line} ran outside the scope of the model's "
                f"{_strategy_name(run, c['model_strategy'])}, and no strategy-mixing error followed"), lines,
                NOT_REPRODUCED))
    # TFP111: the step (or metric update) ran in cross-replica context: TensorFlow's cross-replica error
    # there or earlier in the same step (the tape's gradient fails before apply_gradients does)
    for err in run.errors():
        if not error_matches(err, _CROSS_REPLICA_STEP):
            continue
        at = error_line(err) or 0
        step: set[int] = set()
        for ln in err.get("script_lines") or ():
            step |= _block_lines(run.path, int(ln))
        caught = " (the script caught it)" if err.get("caught") else ""
        out.append(Seen("TFP111", at, (f"TensorFlow raised {run.error_text(err)}{caught} at line {at}, in the same "
                                       f"step, outside strategy.run"), tuple(sorted(step)), runtime=False))
    for a in o.get("applies", []):
        if not a.get("lines"):
            continue
        line = int(a["lines"][0])
        if not a.get("replica") and a.get("strategy") is not None and a.get("error"):
            out.append(Seen("TFP111", line, f"apply_gradients at line {line} ran in cross-replica context and raised "
                                            f"{a['error']}", tuple(a["lines"]), runtime=False))
        else:
            out.append(Seen("TFP111", line, f"apply_gradients at line {line} ran on {run.ctx()} without a "
                                            f"cross-replica error", tuple(a["lines"]), NOT_REPRODUCED))
    # TFP113: an optimizer not built in the scope, first applied in a traced replica function: the placeholder error
    placeholder = [e for e in run.errors() if error_matches(e, [_PLACEHOLDER])]
    for i, ob in enumerate(o.get("objects", [])):
        if ob["kind"] != "optimizer" or not ob.get("lines"):
            continue
        applies = [a for a in o.get("applies", []) if a.get("optimizer") == i]
        line, lines = int(ob["lines"][-1]), tuple(ob["lines"])
        if placeholder:
            where = " (its first apply_gradients ran in a replica function)" if any(
                a.get("replica") for a in applies) else ""
            out.append(Seen("TFP113", line, (
                f"the {ob['cls']} created at line {_l(ob)} was not built in the scope{where}; the first traced step "
                f"raised {run.error_text(placeholder[0])} on {run.ctx()}"), lines, runtime=False))
        elif applies:
            out.append(Seen("TFP113", line, f"the optimizer of line {_l(ob)} was applied on {run.ctx()} without the "
                                            f"placeholder error", lines, NOT_REPRODUCED))
    return out
