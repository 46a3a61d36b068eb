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
# methods that rescale gradients one by one (``LossScaleOptimizer.get_unscaled_gradients``)
SCALING = frozenset({"get_unscaled_gradients"})


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
            if cm[1] in SCALING and expr.args:  # a loss-scale optimizer's unscaling keeps them local
                return local_gradients(m, expr.args[0].value, scope, order, _depth + 1)
        return False
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return False  # [g / n for g in grads]: rescaled, not followed
    if isinstance(expr, cst.Name):
        got = m.reaching_exprs(expr, scope, order)
        if got:
            return all(local_gradients(m, e, s, o, _depth + 1) for e, s, o in got)
        bs = m.lookup(expr.value, scope, order)
        if not bs:
            return False
        # a parameter handed each replica's own share of a per-replica value (the gradients an
        # earlier strategy.run returned, passed to the one that applies them), or assignments;
        # grads, vars = zip(*grads_and_vars) and other unpackings are not followed
        for b in bs:
            if b.kind == "param":
                if not _replica_share(m, b):
                    return False
            elif b.kind in ("assign", "annassign") and b.value is not None and not b.path:
                if not local_gradients(m, b.value, b.scope, b.order, _depth + 1):
                    return False
            else:
                return False
        return True
    return False


def _replica_share(m: "Module", b) -> bool:
    """The parameter ``b`` of a replica function receives, from every ``strategy.run`` that runs it,
    each replica's own share of a per-replica value (what an earlier run returned), on some path."""
    fn = b.func
    if fn is None:
        return False
    idx = next((i for i, p in enumerate(fn.params) if p is b.node), None)
    if idx is None:
        return False
    runs = [ic for ic in m.indirect_calls(fn) if ic.args is not None]
    if not runs:
        return False
    for ic in runs:
        pos = idx - (1 if fn.cls is not None and isinstance(ic.via, cst.Attribute) else 0)
        if not 0 <= pos < len(ic.args) or ic.args[pos] is None:
            return False
        vals = m.infer(ic.args[pos], ic.site.scope, ic.site.order)
        # per-replica on some path, and nothing else known (an unknown value on another path)
        if not any(v.kind == api.PER_REPLICA for v in vals) or any(v.kind not in (api.PER_REPLICA, api.UNKNOWN)
                                                                    for v in vals):
            return False
    return True
