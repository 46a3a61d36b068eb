from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic import CallSite, FunctionInfo, Module, arg, dotted_name

READS = ("read_value", "numpy", "value", "__float__")


def _reads_of(m: Module, expr: cst.CSTNode, var: str) -> bool:
    """Does ``expr`` read the variable whose dotted name is ``var``?"""
    found = False

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            nonlocal found
            if n.value == var:
                found = True

        def visit_Attribute(self, n: cst.Attribute) -> Optional[bool]:
            nonlocal found
            if dotted_name(n) == var:
                found = True
                return False
            n.value.visit(self)  # ``cfg.v`` does not read ``v``: skip the attribute name
            return False

    expr.visit(V())
    return found


class ThreadUnlockedReadModifyWrite(Rule):
    CODE = "TFP301"
    NAME = "thread-unlocked-read-modify-write"
    SUMMARY = "Python thread does read-modify-write on a shared `tf.Variable` without a lock"
    FIX_HINT = "Use `v.assign_add(x)` (atomic), or hold a `threading.Lock` / `tf.CriticalSection` around the update."
    PROBE = "threads"
    MARKERS = (("Thread", "submit", "Pool", "Executor"), ("assign",))

    def check(self) -> Iterator[Report]:
        m = self.module
        targets = m.thread_targets()
        for fid, starts in targets.items():
            fn = m.thread_fn_infos[fid]
            if not self._concurrent(m, starts) or self._acquires(m, fn):
                continue
            for cs in m.calls_within(fn):
                f = cs.node.func
                if not (isinstance(f, cst.Attribute) and f.attr.value == "assign"):
                    continue
                var = dotted_name(f.value)
                if var is None:
                    continue
                vals = m.infer_at(f.value, cs)
                if not vals or not all(v.kind == api.VARIABLE for v in vals):
                    continue
                if any(m.created_within(v.origin, fn) for v in vals):
                    continue  # a thread-local variable
                if self._locked(m, cs):
                    continue
                value = arg(cs.node, 0, "value")
                if value is None or not self._rmw(m, cs, fn, value, var):
                    continue
                yield Report(
                    cs.node,
                    f"`{m.code(cs.node)}` in `{fn.name}` (run by a Python thread) reads and then writes the shared "
                    f"`tf.Variable` `{var}` without a lock: concurrent threads lose updates; use "
                    f"`{var}.assign_add(...)` or hold a lock",
                    {"variable": var, "function": fn.name},
                )

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
    def _rmw(m: Module, cs: CallSite, fn: FunctionInfo, value: cst.BaseExpression, var: str) -> bool:
        """The written value was computed from a read of ``var`` inside the thread's function:
        ``v.assign(v + 1)``, or through local names (``x = v.numpy(); x += 1.0; v.assign(x)``)."""
        def in_fn(b) -> bool:
            s = b.scope
            while s is not None:
                if s is fn.scope:
                    return True
                s = s.parent
            return False

        return any(_reads_of(m, e, var) for e, _s, _o in m.feeding_exprs(value, cs.scope, cs.order, within=in_fn))

    # -- fix (safe): v.assign(v + x) -> v.assign_add(x); v.assign(v - x) -> v.assign_sub(x)
    FIXABLE = "safe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix

        m = self.module
        call = report.node
        var = report.data.get("variable")
        value = arg(call, 0, "value")
        if not isinstance(call, cst.Call) or not isinstance(value, cst.BinaryOperation) or value.lpar:
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
        if _reads_of(m, delta, var):
            return None  # v.assign(v + v * 2): not a plain increment
        new_args = [a.with_changes(value=delta) if a.value is value else a for a in call.args]
        new = call.with_changes(func=call.func.with_changes(attr=cst.Name(meth)), args=new_args)
        return Fix(f"Use `{var}.{meth}(...)` (one atomic update)").replace(call, new)
