from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic import CallSite, FunctionInfo, Module, Value, arg, dotted_name
from tfpar_lint.semantic.threadfacts import SESSION_CLASSES  # compat.v1
from tfpar_lint.semantic.threads import reads

READS = ("read_value", "numpy", "value", "__float__")
# Keras 3's Variable implements these as ``self.assign(self + value)``: a read, then a write
# (keras/src/backend/common/variables.py); on a tf.Variable they are one atomic update op.
KERAS3_NON_ATOMIC = ("assign_add", "assign_sub")
# Keras optimizer methods that apply one step (and advance ``iterations``)
OPTIMIZER_STEPS = ("apply_gradients", "apply", "minimize")


def _is_none(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


class ThreadUnlockedReadModifyWrite(Rule):
    CODE = "TFP301"
    NAME = "thread-unlocked-read-modify-write"
    SUMMARY = "Python thread does read-modify-write on a shared `tf.Variable` without a lock"
    FIX_HINT = "Use `v.assign_add(x)` (atomic), or hold a `threading.Lock` / `tf.CriticalSection` around the update."
    PROBE = "threads"
    MARKERS = (("Thread", "submit", "Pool", "Executor", "Timer"),
               ("assign", "set_weights", "apply_gradients", "minimize", "update_state"))
    # the relevance stage (tfpar_lint.relevance): a thread, and TensorFlow state it writes
    NEEDS = (("thread",), ("variable", "optimizer", "model", "layer", "metric", "session"))

    def check(self) -> Iterator[Report]:
        seen: set[int] = set()
        T = self.module.threads
        for rep in self._check():
            if isinstance(rep.node, cst.Call) and T.guarded_everywhere(rep.node):
                continue  # every thread reaches it holding a lock (taken by a caller)
            if id(rep.node) not in seen:
                seen.add(id(rep.node))
                yield rep
        for rep in self._graph_rmw():
            if id(rep.node) not in seen:
                seen.add(id(rep.node))
                yield rep

    def _graph_rmw(self) -> Iterator[Report]:
        """TF1 graph mode, through the thread analysis (update ops kept in ``self`` attributes,
        lists and comprehensions of ops, ``tf.assign``/``K.update``): ``sess.run(ops)`` from
        several threads where an op reads and then writes a variable every thread shares."""
        m = self.module
        T = m.threads
        for run in T.runs():
            if not T.concurrent(run.target):
                continue
            for step, found in T.session_rmws(run):
                cs = step.site
                if step.guards or cs.scope.module is not m:
                    continue
                op, var = found[0]
                fn = step.fn.name
                yield Report(
                    cs.node,
                    f"`{m.code(cs.node)}` in `{fn}` (run by a Python thread) runs the op `{m.code(op)}` (line "
                    f"{{line}}), which reads and then writes `{var}`, a variable every thread shares, without a "
                    f"lock: concurrent session runs interleave the read and the write and lose updates; hold "
                    f"one lock shared by every thread around the run, or build an atomic update "
                    f"(`{var}.assign_sub(...)`/`assign_add(...)`)",
                    {"variable": var, "function": fn},
                    related=op,
                )

    def _check(self) -> Iterator[Report]:
        m = self.module
        targets = m.thread_targets()
        for fid, starts in targets.items():
            fn = m.thread_fn_infos[fid]
            if not self._concurrent(m, starts) or not self._started(m, fn, starts):
                continue  # a function a thread target calls is checked inside its caller's thread body
            body = self._thread_functions(m, fn)
            if any(self._acquires(m, g) for g in body):
                continue
            for g in body:
                for cs in m.calls_within(g):
                    rep = self._check_write(m, cs, fn, body)
                    if rep is not None:
                        yield rep

    def _check_write(self, m: Module, cs: CallSite, fn: FunctionInfo, body: list[FunctionInfo]) -> Optional[Report]:
        f = cs.node.func
        if isinstance(f, cst.Attribute) and f.attr.value in ("set_weights", "update_state") + OPTIMIZER_STEPS:
            return self._check_object_write(m, cs, fn, body)
        if isinstance(f, cst.Attribute) and f.attr.value == "run":
            return self._check_session_run(m, cs, fn, body)
        if not (isinstance(f, cst.Attribute) and f.attr.value in ("assign",) + KERAS3_NON_ATOMIC):
            return None
        recv = f.value
        var = dotted_name(recv) or m.code(recv)
        vals = self._variable_values(m, recv, cs)
        if not vals:
            return None
        if any(m.created_within(v.origin, g) or (v.source is not None and m.created_within(v.source.origin, g))
               for v in vals for g in body):
            return None  # a thread-local variable (or a variable of a thread-local model)
        if self._locked(m, cs):
            return None
        if f.attr.value in KERAS3_NON_ATOMIC:
            flavors = {versions.keras_flavor(m, v) for v in vals}
            if not flavors <= {"keras", "unknown"}:
                return None  # tf.Variable / tf_keras: one atomic update op
            if "unknown" in flavors:  # Keras 3 only, and no version stated
                versions.withhold(m, self.CODE)
                return None
            return Report(
                cs.node,
                f"`{m.code(cs.node)}` in `{fn.name}` (run by a Python thread) updates the shared Keras 3 "
                f"variable `{var}` without a lock: Keras 3's `{f.attr.value}` is `assign` of a value read "
                f"just before (not atomic), so concurrent threads lose updates; hold a lock",
                {"variable": var, "function": fn.name},
            )
        value = arg(cs.node, 0, "value")
        if value is None or not self._rmw(m, cs, body, value, recv):
            return None
        keras3 = all(versions.keras_flavor(m, v) == "keras" for v in vals)
        advice = "hold a lock (Keras 3's `assign_add` is not atomic either)" if keras3 else \
            f"use `{var}.assign_add(...)` or hold a lock"
        return Report(
            cs.node,
            f"`{m.code(cs.node)}` in `{fn.name}` (run by a Python thread) reads and then writes the shared "
            f"`tf.Variable` `{var}` without a lock: concurrent threads lose updates; {advice}",
            {"variable": var, "function": fn.name, "write": "assign", "keras3": keras3},
        )

    def _check_object_write(self, m: Module, cs: CallSite, fn: FunctionInfo,
                            body: list[FunctionInfo]) -> Optional[Report]:
        """``model.set_weights(w)`` with ``w`` computed from ``model.get_weights()`` in the thread, and
        a shared Keras 3 optimizer stepped from the thread, on objects created outside it."""
        f = cs.node.func
        recv = f.value
        meth = f.attr.value
        vals = m.infer_at(recv, cs)
        kinds = {"set_weights": (api.MODEL, api.LAYER), "update_state": (api.METRIC,)}.get(meth, (api.OPTIMIZER,))
        if not vals or not all(v.kind in kinds for v in vals):
            return None
        if any(m.created_within(v.origin, g) for v in vals for g in body) or self._locked(m, cs):
            return None
        name = m.code(recv)
        if meth == "set_weights":
            value = arg(cs.node, 0, "weights")
            if value is None or not self._rmw(m, cs, body, value, recv):
                return None
            return Report(
                cs.node,
                f"`{m.code(cs.node)}` in `{fn.name}` (run by a Python thread) writes back weights computed from "
                f"`{name}.get_weights()` without a lock: another thread's update in between is overwritten; "
                f"hold a lock around the read and the write",
                {"variable": name, "function": fn.name},
            )
        flavors = {versions.keras_flavor(m, v) for v in vals}
        if not flavors <= {"keras", "unknown"}:
            return None  # tf_keras optimizers and metrics update with an atomic tf.Variable.assign_add
        if "unknown" in flavors:  # Keras 3 only, and no version stated
            versions.withhold(m, self.CODE)
            return None
        if meth == "update_state":
            return Report(
                cs.node,
                f"`{m.code(cs.node)}` in `{fn.name}` (run by a Python thread) updates the shared Keras 3 metric "
                f"`{name}` without a lock: its accumulators use `assign_add`, not atomic in Keras 3, so "
                f"concurrent threads lose updates; hold a lock around `update_state`",
                {"variable": name, "function": fn.name},
            )
        return Report(
            cs.node,
            f"`{m.code(cs.node)}` in `{fn.name}` (run by a Python thread) steps the shared Keras 3 optimizer "
            f"`{name}` without a lock: its step counter (`iterations.assign_add`, not atomic in Keras 3) and "
            f"slot updates race, so concurrent threads lose steps; hold a lock around the step",
            {"variable": name, "function": fn.name},
        )

    def _check_session_run(self, m: Module, cs: CallSite, fn: FunctionInfo,
                           body: list[FunctionInfo]) -> Optional[Report]:
        """TF1: ``sess.run(op)`` from a thread where ``op`` is ``v.assign(...)`` built outside it and
        either the op's value reads ``v`` (``v.assign(v + 1)``) or the value fed to it
        (``feed_dict={ph: x}``) was computed in the thread from a read of ``v``."""
        f = cs.node.func
        sess = m.infer_at(f.value, cs)
        if not sess or not all(v.qname in SESSION_CLASSES for v in sess) or self._locked(m, cs):
            return None
        fetch = arg(cs.node, 0, "fetches")
        if isinstance(fetch, cst.Call):
            ops = [(fetch, cs.scope, cs.order)]
        elif isinstance(fetch, cst.Name):
            ops = m.reaching_exprs(fetch, cs.scope, cs.order) or []
        else:
            return None
        if not ops:
            return None
        feed = arg(cs.node, 1, "feed_dict")
        var = ""
        for op, s, o in ops:
            if not (isinstance(op, cst.Call) and isinstance(op.func, cst.Attribute) and op.func.attr.value == "assign"):
                return None
            recv = op.func.value
            vals = m.infer(recv, s, o)
            if not vals or not all(v.kind == api.VARIABLE for v in vals) \
                    or any(m.created_within(v.origin, g) for v in vals for g in body):
                return None
            value = arg(op, 0, "value")
            if value is None:
                return None
            rmw = any(reads(e, recv) for e, _s, _o in m.feeding_exprs(value, s, o))
            if not rmw and isinstance(feed, cst.Dict):
                rmw = any(isinstance(el, cst.DictElement) and reads(value, el.key)
                          and self._rmw(m, cs, body, el.value, recv) for el in feed.elements)
            if not rmw:
                return None
            var = dotted_name(recv) or m.code(recv)
        return Report(
            cs.node,
            f"`{m.code(cs.node)}` in `{fn.name}` (run by a Python thread) runs an assign op that writes the "
            f"shared variable `{var}` from a value read before it, without a lock: concurrent session runs lose "
            f"updates; build the op with `{var}.assign_add(...)` or hold a lock",
            {"variable": var, "function": fn.name},
        )

    @staticmethod
    def _variable_values(m: Module, recv: cst.BaseExpression, cs: CallSite) -> list[Value]:
        """The values of the written receiver when every one is a variable ([] otherwise).  A
        name that is also bound to ``None`` (``total = None`` until ``setup()`` creates the
        variable) counts by its other bindings: ``None`` has no ``assign``."""
        vals = m.infer_at(recv, cs)
        if vals and all(v.kind == api.VARIABLE for v in vals):
            return vals
        if isinstance(recv, cst.Name):
            bs = m.lookup(recv.value, cs.scope, cs.order)
            rest = [b for b in bs if not (b.kind in ("assign", "annassign") and _is_none(b.value) and not b.path)]
            if rest and len(rest) < len(bs):
                vals = [v for b in rest for v in m.binding_values(b)]
                if vals and all(v.kind == api.VARIABLE for v in vals):
                    return vals
        return []

    @staticmethod
    def _started(m: Module, fn: FunctionInfo, starts: list[CallSite]) -> bool:
        """``fn`` itself is started by one of ``starts`` (a Thread subclass's ``run``, or the
        callable handed to a thread / pool), not merely called by a function that is."""
        if fn.name == "run" and fn.cls is not None and any(
                v.kind == api.CLASS and v.info is fn.cls
                for cs in starts for v in m.infer(cs.node.func, cs.scope, cs.order)):
            return True  # Worker(...) of a threading.Thread subclass (the class the call resolves to)
        for cs in starts:
            for target, _a, _k, _how in m.handed_over(cs):
                if any(f is fn for f in m.resolve_function(target, cs.scope, cs.order)):
                    return True
        return False

    @staticmethod
    def _thread_functions(m: Module, fn: FunctionInfo) -> list[FunctionInfo]:
        """The thread target and the local functions it calls (transitively): they all run in the
        thread (``target=lambda: increment(250)``, a worker that calls a helper)."""
        out = [fn]
        seen = {id(fn)}
        work = [fn]
        while work and len(out) < 50:
            g = work.pop()
            for cs in m.calls_within(g):
                for callee in m.callees(cs):
                    if id(callee) not in seen:
                        seen.add(id(callee))
                        out.append(callee)
                        work.append(callee)
        return out

    @staticmethod
    def _concurrent(m: Module, starts: list[CallSite]) -> bool:
        """Several threads run the target: started more than once, in a loop or
        comprehension, or by a pool's ``map`` (which fans out over workers)."""
        if len(starts) > 1:
            return True
        cs = starts[0]
        if cs.loops:
            return True
        f = cs.node.func
        return isinstance(f, cst.Attribute) and f.attr.value in (
            "map", "imap", "imap_unordered", "starmap", "map_async", "starmap_async")

    @staticmethod
    def _locked(m: Module, cs: CallSite) -> bool:
        for item in cs.withs:
            kinds = {v.kind for v in m.infer_at(item.item, cs)}
            if api.LOCK in kinds or api.UNKNOWN in kinds:
                return True  # a lock, or something we cannot rule out as one
        return False

    @staticmethod
    def _acquires(m: Module, fn: FunctionInfo) -> bool:
        return any(isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value in ("acquire", "execute")
                   for c in m.calls_within(fn))

    @staticmethod
    def _rmw(m: Module, cs: CallSite, body: list[FunctionInfo], value: cst.BaseExpression,
             recv: cst.BaseExpression) -> bool:
        """The written value was computed from a read of the variable inside the thread's functions:
        ``v.assign(v + 1)``, or through local names (``x = v.numpy(); x += 1.0; v.assign(x)``)."""
        scopes = {id(g.scope) for g in body}

        def in_fn(b) -> bool:
            s = b.scope
            while s is not None:
                if id(s) in scopes:
                    return True
                s = s.parent
            return False

        return any(reads(e, recv) for e, _s, _o in m.feeding_exprs(value, cs.scope, cs.order, within=in_fn))

    # -- fix (safe): v.assign(v + x) -> v.assign_add(x); v.assign(v - x) -> v.assign_sub(x)
    FIXABLE = "safe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix

        m = self.module
        call = report.node
        var = report.data.get("variable")
        if report.data.get("write") != "assign" or report.data.get("keras3"):
            return None  # set_weights / optimizer / metric / session findings; Keras 3's assign_add is not atomic
        value = arg(call, 0, "value")
        if not isinstance(call, cst.Call) or not isinstance(value, cst.BinaryOperation) or value.lpar \
                or not isinstance(call.func, cst.Attribute):
            return None

        def is_var(e: cst.BaseExpression) -> bool:
            if dotted_name(e) == var:
                return True  # v
            return (isinstance(e, cst.Call) and not e.args and isinstance(e.func, cst.Attribute)
                    and e.func.attr.value in ("read_value", "value") and dotted_name(e.func.value) == var)

        op = value.operator
        if isinstance(op, cst.Add) and is_var(value.left):
            meth, delta = "assign_add", value.right
        elif isinstance(op, cst.Add) and is_var(value.right):
            meth, delta = "assign_add", value.left
        elif isinstance(op, cst.Subtract) and is_var(value.left):
            meth, delta = "assign_sub", value.right
        else:
            return None
        if reads(delta, call.func.value):
            return None  # v.assign(v + v * 2): not a plain increment
        new_args = [a.with_changes(value=delta) if a.value is value else a for a in call.args]
        new = call.with_changes(func=call.func.with_changes(attr=cst.Name(meth)), args=new_args)
        return Fix(f"Use `{var}.{meth}(...)` (one atomic update)").replace(call, new)
