"""Where gradients come from inside a replica function: straight from ``tape.gradient`` (each
replica's own share), or through an all-reduce across the replicas first."""
from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import Scope
from tfpar_lint.semantic.nodes import call_method

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

ALL_REDUCES = frozenset({"all_reduce", "batch_reduce_to", "reduce_to", "all_gather"})


def local_gradients(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> bool:
    """``expr`` holds a replica's own gradients: it comes from ``tape.gradient(...)`` (through names,
    list comprehensions and ``zip``-free tuple unpacking) without an all-reduce on the way."""
    if _depth > 6:
        return False
    if isinstance(expr, cst.Call):
        cm = call_method(expr)
        if cm is not None:
            if cm[1] in ALL_REDUCES:
                return False
            if cm[1] == "gradient":
                vals = m.infer(cm[0], scope, order)
                return bool(vals) and all(v.kind == api.TAPE for v in vals)
        return False
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return False  # [g / n for g in grads]: rescaled, not followed
    if isinstance(expr, cst.Name):
        got = m.reaching_exprs(expr, scope, order)
        if got:
            return all(local_gradients(m, e, s, o, _depth + 1) for e, s, o in got)
        bs = m.lookup(expr.value, scope, order)
        # grads, vars = zip(*grads_and_vars) and other unpackings are not followed
        return False if not bs else False
    return False
