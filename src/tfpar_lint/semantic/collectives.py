"""Collectives of a MultiWorkerMirroredStrategy: calls every worker must make together.

A call issues collectives when it is ``strategy.run`` / ``reduce`` / ``gather`` /
``experimental_run_v2`` of a MultiWorkerMirroredStrategy (its gradient all-reduce, the reduction),
``fit`` / ``evaluate`` of a Keras model built under its scope, or a call of a local function that
makes one of these (followed a few calls deep).  Saves are TFP603's and not counted here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite
from tfpar_lint.semantic.nodes import call_method

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

STRATEGY_COLLECTIVES = frozenset({"run", "experimental_run_v2", "reduce", "gather", "experimental_run"})
MODEL_COLLECTIVES = frozenset({"fit", "evaluate"})


def _mwms(v) -> bool:
    return v.kind == api.STRATEGY and v.qname in api.MULTI_WORKER_STRATEGIES


def collective(m: "Module", cs: CallSite, _depth: int = 0) -> Optional[str]:
    """What collective ``cs`` issues (for a message), or None."""
    from tfpar_lint.semantic.lifecycle import mwms_state

    memo = m.rule_memo.setdefault("collectives", {})
    key = id(cs.node)
    if key in memo:
        return memo[key]
    memo[key] = None  # a recursive call under way
    got: Optional[str] = None
    cm = call_method(cs.node)
    if cm is not None:
        recv, meth = cm
        if meth in STRATEGY_COLLECTIVES:
            vals = m.infer_at(recv, cs)
            if vals and all(_mwms(v) for v in vals):
                got = f"`{m.code(cs.node.func)}` (a collective of the MultiWorkerMirroredStrategy)"
        elif meth in MODEL_COLLECTIVES:
            vals = m.infer_at(recv, cs)
            if vals and all(v.kind == api.MODEL for v in vals) and any(mwms_state(m, v) for v in vals):
                got = f"`{m.code(cs.node.func)}` (its steps all-reduce across the workers)"
    if got is None and _depth < 4:
        for fn in m.callees(cs):
            for inner in m.calls_within(fn):
                why = collective(m, inner, _depth + 1)
                if why:
                    got = f"`{m.code(cs.node.func)}(...)`, which calls {why}"
                    break
            if got:
                break
    memo[key] = got
    return got


def calls_in(m: "Module", node: cst.CSTNode) -> list[CallSite]:
    """The call sites lexically inside ``node`` (a loop), this function's own."""
    out: list[CallSite] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            cs = m.site_of_call.get(id(n))
            if cs is not None:
                out.append(cs)

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return False

    node.visit(V())
    return out
