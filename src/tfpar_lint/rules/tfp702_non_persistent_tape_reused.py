from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic import CallSite, Value, keyword

GRADIENT_METHODS = ("gradient", "jacobian", "batch_jacobian")


def _persistent(v: Value) -> Optional[bool]:
    """Whether the tape was made with ``persistent=True`` (None: cannot be told)."""
    call = v.origin
    if not isinstance(call, cst.Call):
        return None
    if any(a.star for a in call.args):
        return None
    p = keyword(call, "persistent")
    if p is None:
        p = call.args[0].value if call.args and call.args[0].keyword is None else None
    if p is None:
        return False
    if isinstance(p, cst.Name) and p.value in ("True", "False"):
        return p.value == "True"
    return None


def _exclusive(m, a: CallSite, b: CallSite) -> bool:
    """``a`` and ``b`` cannot both run in one execution of their function."""
    if not m.together(a.ifs, b.ifs):
        return True  # their branches cannot be taken in one run
    # `return tape.gradient(...)` ends the function unless `b` is in the same statement
    if a.stmt is not None and a.stmt is not b.stmt and isinstance(a.stmt, cst.SimpleStatementLine) \
            and any(isinstance(s, cst.Return) for s in a.stmt.body):
        return True
    return False


class NonPersistentTapeReused(Rule):
    CODE = "TFP702"
    NAME = "non-persistent-tape-reused"
    SUMMARY = "a non-persistent `tf.GradientTape` asked for gradients twice (second call raises RuntimeError)"
    FIX_HINT = ("Ask once for all targets (`tape.gradient(loss, [vars_a, vars_b])`), record a second tape, or "
                "create the tape with `persistent=True` (and `del` it afterwards).")
    DEFAULT_ENABLED = True
    SEVERITY = "error"
    PROBE = "execution"
    MARKERS = (("GradientTape",), ("gradient", "jacobian"))
    NEEDS = (("tape",), ("tape_reuse",))  # the relevance stage (tfpar_lint.relevance)

    def check(self) -> Iterator[Report]:
        m = self.module
        by_tape: dict[int, tuple[Value, list[CallSite]]] = {}
        for cs, recv, meth in m.method_calls(GRADIENT_METHODS):
            vals = m.infer_at(recv, cs)
            if not vals or any(v.kind != api.TAPE or v.origin is not vals[0].origin or v.origin is None
                               for v in vals):
                continue
            by_tape.setdefault(id(vals[0].origin), (vals[0], []))[1].append(cs)
        for tape, sites in by_tape.values():
            if _persistent(tape) is not False or tape.site is None:
                continue
            sites.sort(key=lambda c: c.order)
            reported = False
            for i, b in enumerate(sites):
                first = next((a for a in sites[:i] if a.func is b.func and not _exclusive(m, a, b)), None)
                if first is not None and m.caught(b, ("RuntimeError",)):
                    reported = True  # the error is caught around the call on purpose (a demonstration)
                    continue
                if first is not None:
                    reported = True
                    yield Report(
                        b.node,
                        f"second `{m.code(b.node.func)}(...)` on the non-persistent tape `{m.code(tape.origin)}` "
                        f"(first use on line {{line}}): TensorFlow raises `RuntimeError: A non-persistent "
                        f"GradientTape can only be used to compute one set of gradients (or jacobians)`; ask "
                        f"for all gradients in one call or use `persistent=True`",
                        {"tape": m.code(tape.origin)},
                        related=first.node,
                    )
            if reported:
                continue
            for b in sites:
                if b.func is tape.site.func and b.loops > tape.site.loops and not m.caught(b, ("RuntimeError",)):
                    yield Report(
                        b.node,
                        f"`{m.code(b.node.func)}(...)` runs in a loop on the non-persistent tape "
                        f"`{m.code(tape.origin)}` created outside that loop (line {{line}}): the second iteration "
                        f"raises `RuntimeError: A non-persistent GradientTape can only be used to compute one set "
                        f"of gradients (or jacobians)`",
                        {"tape": m.code(tape.origin)},
                        related=tape.origin,
                    )
                    break

    # -- fix (unsafe: the tape then keeps its resources until it is deleted): tf.GradientTape(persistent=True).
    #    Not offered for a tape reused across loop iterations (a tape per iteration is the likely intent).
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        from tfpar_lint.fix import UNSAFE, Fix, add_keyword

        m = self.module
        call = report.node
        site = m.site_of_call.get(id(call))
        if site is None or not isinstance(call.func, cst.Attribute):
            return None
        vals = m.infer_at(call.func.value, site)
        if len(vals) != 1 or not isinstance(vals[0].origin, cst.Call) or report.related is vals[0].origin:
            return None
        tape = vals[0].origin
        if any(a.keyword and a.keyword.value == "persistent" for a in tape.args):
            return None
        return Fix("Make the tape persistent", UNSAFE).replace(tape, add_keyword(tape, "persistent", "True"))
