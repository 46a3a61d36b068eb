from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.scope_use import all_from, calls_using, values_of_kind
from tfpar_lint.semantic import Module, Value, arg, keyword

OBJECT_KINDS = (api.MODEL, api.OPTIMIZER, api.VARIABLE, api.METRIC)
WHAT = {api.MODEL: "model", api.OPTIMIZER: "optimizer", api.VARIABLE: "variable", api.METRIC: "metric"}


def identity(m: Module, v: Value) -> Optional[cst.CSTNode]:
    """The call that certainly creates a new strategy object for ``v`` (a strategy
    constructor, or a call of a local helper that constructs and returns a fresh one);
    None when the object may be shared (``get_strategy()``, factories, caches, parameters)."""
    o = v.origin
    if v.kind != api.STRATEGY or v.qname not in api.STRATEGY_CLASSES or not isinstance(o, cst.Call):
        return None
    site = v.site or m.site_of_call.get(id(o))
    if site is None:
        return None
    q, _ = m.qualified_name(o.func, site.scope, site.order)
    if q in api.STRATEGY_CLASSES:
        return o
    fns = m.resolve_function(o.func, site.scope, site.order)
    if len(fns) != 1:
        return None
    fn = fns[0]
    if fn.decorators or fn.is_lambda or not fn.returns:
        return None
    for expr, order in fn.returns:
        if not _fresh_in(m, expr, fn, order):
            return None
    return o


def _fresh_in(m: Module, expr: cst.BaseExpression, fn, order: int) -> bool:
    if isinstance(expr, cst.Call):
        q, _ = m.qualified_name(expr.func, fn.scope, order)
        return q in api.STRATEGY_CLASSES
    if isinstance(expr, cst.Name):
        exprs = m.reaching_exprs(expr, fn.scope, order)
        return bool(exprs) and all(sc is fn.scope and _fresh_in(m, e, fn, od) for e, sc, od in exprs)
    return False


def one_identity(m: Module, vals: list[Value]) -> Optional[cst.CSTNode]:
    ids = {id(i): i for i in (identity(m, v) for v in vals)}
    if len(ids) != 1 or None in ids.values():
        return None
    return next(iter(ids.values()))


def tpu_device_set(m: Module, ident: cst.CSTNode) -> Optional[str]:
    """The device assignment a TPU strategy constructor names (``TPUStrategy(resolver,
    device_assignment=da)``), as source text; "" for the whole TPU system; None when ``ident`` is
    not a TPU strategy constructor."""
    if not isinstance(ident, cst.Call):
        return None
    site = m.site_of_call.get(id(ident))
    q = m.qualified_name(ident.func, site.scope, site.order)[0] if site is not None else ""
    if q not in api.TPU_STRATEGIES:
        return None
    expr = keyword(ident, "device_assignment") or arg(ident, 1)
    return " ".join(m.code(expr).split()) if expr is not None else ""


def separate_tpu_systems(m: Module, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Two TPU strategies over different device assignments (an actor's and a learner's cores):
    variables made under one are run by the other on purpose.  Not MirroredStrategy: measured on
    TF 2.21 with 3 logical CPUs, a variable made under ``MirroredStrategy(all)`` and read in
    ``MirroredStrategy(devices=[two]).run`` raises the Mixing error."""
    da, db = tpu_device_set(m, a), tpu_device_set(m, b)
    return da is not None and db is not None and da != db


class MixedStrategies(Rule):
    CODE = "TFP109"
    NAME = "mixed-strategies"
    SUMMARY = "two different strategy objects mixed: nested scopes, or an object built under one used with another"
    FIX_HINT = "Create the strategy once (at start-up) and pass that one object everywhere."
    SEVERITY = "error"
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("scope(",))
    # the relevance stage (tfpar_lint.relevance): scopes of strategies
    NEEDS = (("strategy",), ("scope",))

    def check(self) -> Iterator[Report]:
        m = self.module
        # 1. nested scopes of different strategies
        for cs, recv, meth in m.method_calls(("scope",)):
            inner = one_identity(m, m.infer_at(recv, cs))
            if inner is None:
                continue
            known, _ = m.scope_strategies(cs)
            outer = one_identity(m, known) if known else None
            if outer is not None and outer is not inner:
                yield Report(
                    cs.node,
                    f"`{m.code(cs.node)}` is entered inside the scope of a different strategy object (created at "
                    f"line {{line}}): TensorFlow raises `RuntimeError: Mixing different tf.distribute.Strategy "
                    f"objects`; use one strategy object",
                    related=outer,
                )
        # 2. an object created under one strategy's scope, used with another
        table = m.replica_functions()
        for kind in OBJECT_KINDS:
            for v in values_of_kind(m, kind):
                if v.site is None:
                    continue
                known, _ = m.scope_strategies(v.site)
                made_in = one_identity(m, known) if known else None
                if made_in is None:
                    continue
                if kind == api.MODEL:
                    for cs in calls_using(m).get(id(v.origin), ()):
                        recv, meth = cs.node.func.value, cs.node.func.attr.value
                        if meth not in ("compile", "fit") or not all_from(m, recv, cs, v.origin):
                            continue
                        k, _ = m.scope_items(cs)
                        used = one_identity(m, k) if k else None
                        if used is not None and used is not made_in:
                            yield self._report(cs.node, v, f"`{meth}` is called under another strategy's scope",
                                               made_in)
                for fid, strategies in table.items():
                    used = one_identity(m, strategies)
                    if used is None or used is made_in:
                        continue
                    if separate_tpu_systems(m, used, made_in):
                        continue  # a learner's TPU cores and the whole system's: shared on purpose
                    fn = m.replica_fn_infos[fid]
                    refs = m.refs_to(v.origin, fn)
                    if refs:
                        yield self._report(refs[0].node, v, f"it is used in `{fn.name}`, which is run by a "
                                                            f"different strategy object", made_in)

    def _report(self, node: cst.CSTNode, v: Value, how: str, made_in: cst.CSTNode) -> Report:
        m = self.module
        return Report(
            node,
            f"the {WHAT[v.kind]} `{m.code(v.origin)}` was created under the scope of the strategy made at line "
            f"{{line}}, but {how}: TensorFlow raises `RuntimeError: Mixing different tf.distribute.Strategy "
            f"objects`; create the strategy once and use that object everywhere",
            {"object": m.code(v.origin)},
            related=made_in,
        )
