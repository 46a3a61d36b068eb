"""Gradients and losses that are the same on every replica (the TFP513 and TFP514 rules ask it).

* :func:`outside_gradients`: an ``optimizer.apply_gradients`` run on every replica (in a function
  handed to ``strategy.run``) whose gradients were computed once, outside ``strategy.run``
  (``tape.gradient`` in the outer step, or at module level) and handed in through ``args=`` or a
  closure; also ``strategy.run(optimizer.apply_gradients, args=(zip(grads, vars),))``.
* :func:`gathered_losses`: a loss term whose gradients a replica function applies and that is made
  only of values every replica gathered from all replicas (``get_replica_context().all_gather``,
  a ``merge_call`` that gathers): every replica computes the same global-batch loss.

Names are resolved only through :class:`tfpar_lint.semantic.Module` (``lookup``, ``infer``,
``resolve_function``, ``param_args``); what is here is the walk over the expressions that feed a
value, with its stops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, Module, Scope, Value, arg, call_method, keyword, replicated
from tfpar_lint.semantic.loss import (GRADIENT_FUNCTIONS, GRADIENT_METHODS, gradient_targets, loss_terms,
                                      mentions_replicas)
from tfpar_lint.semantic.walk import syntax_children

LIMIT = 400  # expressions visited per question
_FOLLOWED = frozenset({"assign", "annassign", "walrus", "for", "comp", "with"})
_NO_AGGREGATION = {"experimental_aggregate_gradients": "True", "skip_gradients_aggregation": "False"}


def _site(m: Module, call: cst.Call, scope: Scope) -> Optional[CallSite]:
    return (scope.module or m).site_of_call.get(id(call))


def gradient_call(m: Module, call: cst.Call, site: CallSite) -> bool:
    """``tape.gradient(loss, ...)`` (a ``tf.GradientTape``), ``tf.gradients(ys, ...)``, or an
    optimizer's ``compute_gradients`` / ``get_gradients``."""
    cm = call_method(call)
    if cm is not None and cm[1] == "gradient":
        kinds = {v.kind for v in m.infer_at(cm[0], site)}
        return bool(kinds) and kinds <= {api.TAPE} and arg(call, 0, "target") is not None
    if cm is not None and cm[1] in GRADIENT_METHODS:
        kinds = {v.kind for v in m.infer_at(cm[0], site)}
        return bool(kinds) and kinds <= {api.OPTIMIZER} and arg(call, 0, "loss") is not None
    q, _ = m.qualified_name(call.func, site.scope, site.order)
    return q in GRADIENT_FUNCTIONS and arg(call, 0, "ys") is not None


def _bound_self(b) -> bool:
    """``self`` / ``cls``: the first parameter of a method."""
    fn = b.func
    return fn is not None and fn.cls is not None and bool(fn.params) and b.node is fn.params[0]


def _aggregates(call: cst.Call) -> bool:
    """``apply_gradients`` with the strategy's default aggregation (a sum over the replicas)."""
    for kw, keep in _NO_AGGREGATION.items():
        v = keyword(call, kw)
        if v is not None and not (isinstance(v, cst.Name) and v.value == keep):
            return False
    return True


def _gradients_of(gv: cst.BaseExpression) -> cst.BaseExpression:
    """``zip(grads, variables)`` -> ``grads``; a list of ``(g, v)`` pairs stays as it is."""
    if isinstance(gv, cst.Call) and isinstance(gv.func, cst.Name) and gv.func.value == "zip" and gv.args \
            and not gv.args[0].star:
        return gv.args[0].value
    return gv


class _Walk:
    """The expressions that feed a value, backwards through local names, ``self`` attributes,
    local helpers' returns and parameters (the arguments a parameter gets; which call sites count
    is ``follow_param``'s choice), with a stop: ``stop(call, site)`` True records the call and does
    not look into its arguments."""

    def __init__(self, m: Module, stop: Callable[[cst.Call, CallSite], bool],
                 follow_param: Callable[[object, Optional[CallSite], bool], Optional[bool]],
                 binding_ok: Callable[[object], bool] = lambda b: True) -> None:
        self.m = m
        self.stop = stop
        # (binding, the argument's call site, crossed) -> crossed after it, or None: not followed
        self.follow_param = follow_param
        self.binding_ok = binding_ok
        self.hits: list[tuple[CallSite, bool]] = []  # (the stopping call, whether strategy.run was crossed)
        self.params: list[tuple[object, bool]] = []  # parameters met and not followed

    def run(self, expr: cst.BaseExpression, scope: Scope, order: int, crossed: bool = False) -> "_Walk":
        m = self.m
        work = [(expr, scope, order, crossed, 0)]
        seen: set = set()
        while work and len(seen) < LIMIT:
            e, s, o, cr, depth = work.pop()
            if e is None or depth > 16 or (id(e), o, cr) in seen:
                continue
            seen.add((id(e), o, cr))
            nodes: list[cst.CSTNode] = [e]
            while nodes:
                n = nodes.pop()
                if isinstance(n, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                    continue
                if isinstance(n, cst.Call):
                    site = _site(m, n, s)
                    if site is not None and self.stop(n, site):
                        self.hits.append((site, cr))
                        continue
                    if site is not None:
                        for f in m.resolve_function(n.func, s, o):
                            for r, ro in f.returns:
                                work.append((r, f.scope, ro, cr, depth + 1))
                    nodes.extend(a.value for a in n.args)  # the callee itself is not data
                    continue
                if isinstance(n, cst.Attribute):
                    if isinstance(n.value, cst.Name):
                        for b in m.self_attr_bindings(n, s) or ():
                            if b.value is not None and self.binding_ok(b):
                                work.append((b.value, b.scope, b.order, cr, depth + 1))
                    continue  # another object's attribute: not followed
                if isinstance(n, cst.Name):
                    for b in m.lookup(n.value, s, o):
                        if not self.binding_ok(b):
                            continue
                        if b.kind in _FOLLOWED and b.value is not None:
                            work.append((b.value, b.scope, b.order, cr, depth + 1))
                        elif b.kind == "aug" and isinstance(b.node, cst.AugAssign):
                            work.append((b.node.value, b.scope, b.order, cr, depth + 1))
                        elif b.kind == "param" and not _bound_self(b):
                            args = (b.scope.module or m).values.param_args(b)
                            followed = False
                            for a, a_scope, a_order, a_site in args or ():
                                nxt = self.follow_param(b, a_site, cr)
                                if nxt is not None and a_site is not None:
                                    followed = True
                                    work.append((a, a_scope, a_order, nxt, depth + 1))
                            if not followed:
                                self.params.append((b, cr))
                    continue
                if isinstance(n, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
                    nodes.append(n.elt)
                    nodes.extend(syntax_children(n.for_in))
                    continue
                nodes.extend(syntax_children(n))
        return self


# ------------------------------------------------------------------ TFP513

@dataclass
class OutsideGradient:
    apply: CallSite  # the apply_gradients call run on every replica (or the strategy.run that runs it)
    gradient: CallSite  # where the gradients are computed, outside strategy.run
    grads: cst.BaseExpression  # what is applied
    strategies: list[Value]


def _run_sites(m: Module) -> set[int]:
    return {id(cs.node) for cs, _recv, _meth, _strat in m.replica_runs()}


def outside_gradients(m: Module) -> Iterator[OutsideGradient]:
    """Gradients computed once in cross-replica code and applied with the default (SUM) aggregation
    by every replica of a strategy that may run several (see the module's docstring)."""
    runs = _run_sites(m)

    def follow(b, a_site: Optional[CallSite], crossed: bool) -> Optional[bool]:
        if a_site is None:
            return None
        if id(a_site.node) in runs:
            return True  # strategy.run(fn, args=(grads,)): cross-replica code hands them in
        in_replica = m.in_replica_fn(a_site.scope)
        if not crossed:
            return False if in_replica else None  # a helper of the replica function: still inside
        return True if not in_replica else None

    def found(apply: CallSite, grads: cst.BaseExpression, scope: Scope, order: int, crossed: bool,
              strat: list[Value]) -> Iterator[OutsideGradient]:
        walk = _Walk(m, lambda c, s: gradient_call(m, c, s), follow).run(grads, scope, order, crossed)
        for site, _cr in walk.hits:
            if not m.in_replica_fn(site.scope):
                yield OutsideGradient(apply, site, grads, strat)
                return

    table = m.replica_functions()
    for key, strat in table.items():
        fn = m.replica_fn_infos[key]
        if fn.scope.module is not m and fn.scope.module is not None or not replicated(strat):
            continue
        for cs in fn.calls:
            cm = call_method(cs.node)
            if cm is None or cm[1] != "apply_gradients" or not _aggregates(cs.node):
                continue
            if not {v.kind for v in m.infer_at(cm[0], cs)} <= {api.OPTIMIZER, api.UNKNOWN}:
                continue
            gv = arg(cs.node, 0, "grads_and_vars")
            if gv is not None:
                yield from found(cs, _gradients_of(gv), cs.scope, cs.order, False, strat)
    for cs, _recv, _meth, strat in m.replica_runs():
        fn_expr = arg(cs.node, 0, "fn")
        if not replicated(strat) or not isinstance(fn_expr, cst.Attribute) or fn_expr.attr.value != "apply_gradients":
            continue
        if {v.kind for v in m.infer_at(fn_expr.value, cs)} != {api.OPTIMIZER}:
            continue
        args = keyword(cs.node, "args") or arg(cs.node, 1, "args")
        if isinstance(args, (cst.Tuple, cst.List)) and args.elements:
            yield from found(cs, _gradients_of(args.elements[0].value), cs.scope, cs.order, True, strat)


# ------------------------------------------------------------------ TFP514

def gather_call(m: Module, call: cst.Call, site: CallSite) -> bool:
    """A replica-context call that returns every replica's values: ``<replica context>.all_gather``,
    or ``merge_call(fn, ...)`` whose function gathers (``strategy.gather``, ``experimental_local_results``)."""
    cm = call_method(call)
    if cm is None:
        return False
    if cm[1] == "all_gather":
        return arg(call, 0, "value") is not None
    if cm[1] != "merge_call":
        return False
    for fn in m.resolve_function(arg(call, 0, "merge_fn"), site.scope, site.order):
        for inner in m.calls_within(fn):
            im = call_method(inner.node)
            if im is not None and im[1] in ("gather", "experimental_local_results", "all_gather"):
                return True
    return False


@dataclass
class GatheredLoss:
    term: cst.BaseExpression  # the loss term every replica computes alike
    gather: CallSite  # the gather it is made from
    gradient: CallSite  # the gradient computation that differentiates it
    strategies: list[Value]


def gathered_only(m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[CallSite]:
    """The gather ``expr`` (a loss term in a replica function) is made from, when it is made only of
    gathered values: no parameter of the replica function (its own shard) reaches it except through
    a gather; None otherwise."""
    table = m.replica_functions()

    def in_replica(b) -> bool:
        return m.in_replica_fn(b.scope)

    def follow(b, a_site: Optional[CallSite], crossed: bool) -> Optional[bool]:
        if a_site is None or id(b.func) in table and not m.in_replica_fn(a_site.scope):
            return None  # the replica function's own input: a shard
        return False if m.in_replica_fn(a_site.scope) else None

    walk = _Walk(m, lambda c, s: gather_call(m, c, s), follow, in_replica).run(expr, scope, order)
    return walk.hits[0][0] if walk.hits and not walk.params else None


def gathered_losses(m: Module) -> Iterator[GatheredLoss]:
    """Loss terms, differentiated and applied (default SUM aggregation) in a replica function of a
    strategy that may run several replicas, made only of gathered values (:func:`gathered_only`)
    and not divided by ``num_replicas_in_sync``."""
    table = m.replica_functions()
    for key, strat in table.items():
        fn = m.replica_fn_infos[key]
        if fn.scope.module is not m and fn.scope.module is not None or not replicated(strat):
            continue
        if not any(call_method(cs.node) is not None and call_method(cs.node)[1] == "apply_gradients"
                   and _aggregates(cs.node) for cs in m.calls_within(fn)):
            continue
        for gsite, target in gradient_targets(m, fn):
            for t in loss_terms(m, target, gsite.scope, gsite.order):
                if any(mentions_replicas(m, d, sc, od) for d, sc, od in t.divisors):
                    continue
                gather = gathered_only(m, t.node, t.scope, t.order)
                if gather is not None:
                    yield GatheredLoss(t.node, gather, gsite, strat)
