"""Cross-replica context: where code certainly runs outside every replica function while a
strategy's objects are in use.

A call is in cross-replica context when it is not in a function run by ``strategy.run`` (nor in a
function that may be: one this module never calls) and

* a ``with strategy.scope():`` is open around it (lexically, or around every caller of its
  function): ``scope()`` cannot be entered inside ``strategy.run``;
* or it is in the code that drives the strategy: module-level code, or a function that itself
  creates a strategy or opens a strategy's scope (a ``main``), which ``strategy.run`` never runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, FunctionInfo, Value

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


def _drives_strategy(m: "Module", fn: FunctionInfo) -> bool:
    """``fn`` creates a strategy or opens a strategy's scope in its own body."""
    memo = m.rule_memo.setdefault("crossreplica_drives", {})
    if id(fn) in memo:
        return memo[id(fn)]
    got = False
    for cs in fn.calls:
        if cs.func is not fn:
            continue
        vals = m.infer_at(cs.node, cs)
        if vals and all(v.kind == api.STRATEGY for v in vals) and any(v.origin is cs.node for v in vals):
            got = True
            break
        known, _ = m.scope_items(cs)
        if known:
            got = True
            break
    memo[id(fn)] = got
    return got


def cross_replica_context(m: "Module", site: CallSite) -> Optional[str]:
    """Why ``site`` certainly runs in cross-replica context ("in the scope", "in the code that
    drives the strategy"), or None when it may run in a replica function or cannot be told."""
    if m.in_replica_fn(site.scope):
        return None
    known, _maybe = m.scope_items(site)
    if known:
        return "in the scope"
    if site.func is None:
        return "in the code that drives the strategy"
    fns = list(m.enclosing_functions(site.scope))
    if fns and _drives_strategy(m, fns[0]) and not any(m.is_passed_around(f) and _handed_to_run(m, f) for f in fns):
        return "in the code that drives the strategy"
    scoped, maybe = m.function_scope(site.func)
    if scoped and not maybe and all(m.callers(f) for f in fns):
        return "in the scope"
    return None


def _handed_to_run(m: "Module", fn: FunctionInfo) -> bool:
    """``fn`` is given to some ``strategy.run``-like call of this module."""
    return id(fn) in m.replica_functions()


def created_under(m: "Module", v: Value) -> list[Value]:
    """The strategies whose scope was open where ``v`` was created (lexically or through every
    caller); empty when none or unknown."""
    if v.site is None:
        return []
    known, _ = m.scope_strategies(v.site)
    return known


def replica_fn_traced(m: "Module", fn: FunctionInfo) -> Optional[bool]:
    """Whether the replica function ``fn`` (or the replica function whose callee it is) runs inside a
    ``tf.function`` trace: True when ``fn`` is traced itself (decorated, wrapped) or every
    ``strategy.run``-like call that runs it sits in traced code; False when every such call runs
    eagerly; None when it cannot be told."""
    if m.runs_traced(fn):
        return True
    memo = m.rule_memo.setdefault("crossreplica_traced_runs", {})
    if "table" not in memo:
        table: dict[int, set] = {}
        for cs, _recv, _meth, _strat in m.replica_runs():
            from tfpar_lint.semantic.nodes import arg

            if cs.func is None:
                traced: Optional[bool] = False
            elif m.in_tf_function(cs.scope):
                traced = True
            else:
                traced = m.runs_traced(cs.func)
            for target in m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order):
                table.setdefault(id(target), set()).add(traced)
        memo["table"] = table
    table = memo["table"]
    kinds = table.get(id(fn))
    if kinds is None:
        # a callee of a replica function: traced when every replica function calling it is
        callers = m.callers(fn)
        ks = set()
        for cs in callers:
            if cs.func is None:
                return None
            ks.add(replica_fn_traced(m, cs.func) if id(cs.func) != id(fn) else None)
        kinds = ks
    if len(kinds) == 1:
        return next(iter(kinds))
    return None
