"""Per-replica values: which expressions hold a ``PerReplica`` (the result of ``strategy.run``, an
element of a distributed dataset), and where the code itself says a value may be one.

Two ways to know:

* by origin (:func:`per_replica_value`): value inference says every value of the expression is a
  ``strategy.run`` result or a distributed-dataset element, of a strategy that may run several
  replicas (``tf.distribute.get_strategy()`` counts: in a Keras callback or under a scope it is the
  training strategy; a ``OneDeviceStrategy``, a parameter-server strategy or
  ``MirroredStrategy(devices=[one])`` does not);
* by use (:func:`hedged_roots`): where the origin is unknown (a parameter filled by a base class of
  another package), the code's own handling tells the kind: ``try: x.values[0] ... except: x``
  says "``x`` is a PerReplica when there are several replicas, a tensor otherwise".  ``x`` and the
  container it was read from (``x = batch["mel"]``: ``batch``) are then per-replica, and so are the
  container's other items (``batch["ids"]``).

Nothing here guesses from a name.  Rules ask :func:`per_replica_kind`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, FunctionInfo, Scope, Value
from tfpar_lint.semantic.nodes import call_method, keyword
from tfpar_lint.semantic.walk import contains

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

_SINGLE = frozenset({"tensorflow.distribute.OneDeviceStrategy"}) | api.PARAMETER_SERVER_STRATEGIES


def strategy_of(v: Value) -> Optional[Value]:
    """The strategy a per-replica value, distributed dataset or iterator comes from (None: unknown,
    e.g. a configured dataset distributor)."""
    seen = 0
    s: Optional[Value] = v.source
    while s is not None and seen < 10:
        if s.kind == api.STRATEGY:
            return s
        s = s.source
        seen += 1
    return None


def may_replicate(strategy: Optional[Value]) -> bool:
    """The strategy may run several replicas: not a one-device or parameter-server strategy, not
    ``MirroredStrategy(devices=[one])`` (``get_strategy()`` and unknown distributors count)."""
    if strategy is None:
        return True
    if strategy.qname in _SINGLE:
        return False
    o = strategy.origin
    if isinstance(o, cst.Call):
        devs = keyword(o, "devices")
        if devs is None and o.args and o.args[0].keyword is None and not o.args[0].star:
            devs = o.args[0].value
        if isinstance(devs, (cst.List, cst.Tuple)) and len(devs.elements) <= 1:
            return False
    return True


def per_replica_value(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[str]:
    """"run" (every value is a ``strategy.run`` result), "batch" (an element of a distributed
    dataset or distributed values), or None; only for strategies that may replicate."""
    vals = m.infer(expr, scope, order)
    if not vals or not all(v.kind in (api.PER_REPLICA, api.DIST_VALUES) for v in vals):
        return None
    if not all(may_replicate(strategy_of(v)) for v in vals):
        return None
    return "run" if all(v.kind == api.PER_REPLICA for v in vals) else "batch"


# ------------------------------------------------------------------ kind told by use


def in_handler(m: "Module", t: cst.Try, node: cst.CSTNode) -> bool:
    """``node`` lies in one of the ``except`` handlers of ``t``."""
    memo = m.rule_memo.setdefault("perreplica_in_handler", {})
    key = (id(t), id(node))
    got = memo.get(key)
    if got is None:
        got = memo[key] = any(contains(h, node) for h in t.handlers)
    return got


def _values_item(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``x.values[i]`` -> ``x`` (the PerReplica interface: its per-replica components)."""
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) \
            and expr.value.attr.value == "values":
        return expr.value.value
    return None


def root_of(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> Optional[tuple]:
    """Which container an expression reads, as a key: ``batch["ids"]`` and ``x`` with
    ``x = batch["mel"]`` both read the binding of ``batch``; ``a`` of ``a, b = outputs`` reads
    ``outputs``.  None when it is anything else (a call's result, an attribute)."""
    if _depth > 8:
        return None
    if isinstance(expr, cst.Subscript):
        if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) \
                and isinstance(expr.slice[0].slice.value, (cst.SimpleString, cst.Integer)) \
                and _values_item(expr) is None:
            return root_of(m, expr.value, scope, order, _depth + 1)
        return None
    if not isinstance(expr, cst.Name):
        return None
    bs = m.lookup(expr.value, scope, order)
    if len(bs) != 1:
        return None
    b = bs[0]
    if b.kind in ("assign", "annassign") and b.value is not None:
        if isinstance(b.value, (cst.Subscript, cst.Name)) or b.path:
            inner = root_of(m, b.value, b.scope, b.order, _depth + 1)
            if inner is not None:
                return inner
    return ("binding", id(b))


def hedged_roots(m: "Module", fn: FunctionInfo) -> dict[tuple, cst.Try]:
    """Containers of ``fn`` that the code itself treats as maybe per-replica: ``try:`` bodies that
    read ``x.values[i]`` with an ``except`` that falls back to ``x`` itself (root of ``x`` -> the
    try)."""
    memo = m.rule_memo.setdefault("perreplica_hedged", {})
    if id(fn) in memo:
        return memo[id(fn)]
    out: dict[tuple, cst.Try] = {}
    for cs in m.calls_within(fn):
        if not cs.trys:
            continue
        cm = call_method(cs.node)
        if cm is None:
            continue
        x = _values_item(cm[0])
        if x is None:
            continue
        for t in cs.trys:  # the tries whose body holds the call
            if not t.handlers:
                continue
            if not any(_mentions(h, x) for h in t.handlers):
                continue
            r = root_of(m, x, cs.scope, cs.order)
            if r is not None:
                out.setdefault(r, t)
    memo[id(fn)] = out
    return out


_EMPTY = cst.Module(body=[])


def _mentions(root: cst.CSTNode, expr: cst.BaseExpression) -> bool:
    """``root`` reads ``expr`` again: the same name, or a subscript with the same text
    (``batch["ids"]``)."""
    if isinstance(expr, cst.Name):
        want, kind = expr.value, cst.Name
    elif isinstance(expr, cst.Subscript):
        want, kind = _EMPTY.code_for_node(expr), cst.Subscript
    else:
        return False

    class V(cst.CSTVisitor):
        found = False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind) and (node.value if kind is cst.Name else _EMPTY.code_for_node(node)) == want:
                V.found = True
            return not V.found

    root.visit(V())
    return V.found


def _hedge_of(m: "Module", expr: cst.BaseExpression, site: CallSite) -> Optional[cst.Try]:
    """The hedging ``try`` of the container ``expr`` reads (in an enclosing function), if any."""
    root = root_of(m, expr, site.scope, site.order) if site.func is not None else None
    if root is None:
        return None
    for fn in m.enclosing_functions(site.scope):
        hedge = hedged_roots(m, fn).get(root)
        if hedge is not None:
            return hedge
    return None


def in_hedge(m: "Module", expr: cst.BaseExpression, site: CallSite) -> bool:
    """``site`` is part of the code's own PerReplica-or-tensor hedge for ``expr``: inside the
    ``try`` that reads ``expr.values[i]``, or in its fallback handler (the one-replica path)."""
    hedge = _hedge_of(m, expr, site)
    return hedge is not None and (any(t is hedge for t in site.trys) or in_handler(m, hedge, site.node))


def per_replica_kind(m: "Module", expr: cst.BaseExpression, site: CallSite) -> Optional[str]:
    """"run" / "batch" (by origin, :func:`per_replica_value`), "hedged" (by use: the code reads
    the same container's items as PerReplica elsewhere in the function, :func:`hedged_roots`), or
    None.  ``site`` is the call that uses ``expr``; a use inside a hedging ``try`` of the same
    container (its body, or its fallback handler: the one-replica path) is not per-replica."""
    hedge = _hedge_of(m, expr, site)
    if hedge is not None and (any(t is hedge for t in site.trys) or in_handler(m, hedge, site.node)):
        return None
    got = per_replica_value(m, expr, site.scope, site.order)
    if got is not None:
        return got
    return "hedged" if hedge is not None else None
