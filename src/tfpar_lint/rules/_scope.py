"""Shared logic of the TFP1xx "created outside the scope, then used with the strategy" rules."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, Module, Value, arg, keyword


@dataclass
class Use:
    """Evidence that an object is used with a strategy."""

    node: cst.CSTNode
    how: str  # e.g. "compiled under `strategy.scope()`"
    strategy: str  # source text of the strategy expression
    subject: str = ""  # how the code names the object there (e.g. "model")


def created_outside_scope(m: Module, v: Value) -> bool:
    """True only when ``v`` was certainly created outside every strategy scope
    (and outside any replica function)."""
    site = v.site
    if site is None or v.origin is None:
        return False
    known, maybe = m.scope_strategies(site)
    if known or maybe:
        return False
    if m.in_replica_fn(site.scope):
        return False
    return True


def created_in_scope(m: Module, v: Value) -> bool:
    site = v.site
    if site is None:
        return False
    known, _ = m.scope_strategies(site)
    return bool(known)


def all_from(m: Module, expr: Optional[cst.BaseExpression], site: CallSite, origin: cst.CSTNode) -> bool:
    if expr is None:
        return False
    vals = m.infer_at(expr, site)
    return bool(vals) and all(v.origin is origin for v in vals)


def strategy_text(m: Module, site: CallSite) -> str:
    for item in site.withs:
        e = item.item
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "scope":
            return m.code(e.func.value)
    return "strategy"


def values_of_kind(m: Module, kind: str) -> Iterator[Value]:
    """Each distinct object of ``kind`` created by a call in this module: bound to a name, or
    created inline as an argument of ``compile`` (``compile(optimizer=keras.optimizers.SGD())``)."""
    seen: set[int] = set()
    for b_list in _all_binding_lists(m):
        for b in b_list:
            for v in m.binding_values(b):
                if v.kind == kind and v.origin is not None and id(v.origin) not in seen:
                    seen.add(id(v.origin))
                    yield v
    if kind not in (api.OPTIMIZER, api.METRIC):
        return
    for cs in m.calls:
        f = cs.node.func
        if not (isinstance(f, cst.Attribute) and f.attr.value == "compile"):
            continue
        for e in _compile_args(cs.node, kind):
            if isinstance(e, cst.Call) and id(e) not in seen:
                for v in m.infer_at(e, cs):
                    if v.kind == kind and v.origin is e:
                        seen.add(id(e))
                        yield v


def _compile_args(call: cst.Call, kind: str) -> list[cst.BaseExpression]:
    """The expressions a ``compile`` call passes as its optimizer, or as its metrics."""
    if kind == api.OPTIMIZER:
        e = keyword(call, "optimizer") or arg(call, 0)
        return [e] if e is not None else []
    out: list[cst.BaseExpression] = []
    for kw in ("metrics", "weighted_metrics"):
        lst = keyword(call, kw)
        if isinstance(lst, (cst.List, cst.Tuple)):
            out.extend(el.value for el in lst.elements if not isinstance(el, cst.StarredElement))
        elif lst is not None:
            out.append(lst)
    return out


def _model_scope(m: Module, recv: cst.BaseExpression, cs: CallSite) -> Optional[str]:
    """The strategy text of the scope the model ``recv`` was certainly created in (every value a
    Keras model made under a known strategy scope), else None."""
    vals = m.infer_at(recv, cs)
    if not vals or not all(v.kind == api.MODEL and v.site is not None for v in vals):
        return None
    texts = set()
    for v in vals:
        known, maybe = m.scope_strategies(v.site)
        if not known or maybe:
            return None
        texts.add(strategy_text(m, v.site))
    return texts.pop() if len(texts) == 1 else None


def _all_binding_lists(m: Module):
    scopes = [m.scope] + [f.scope for f in m.functions] + [c.scope for c in m.classes]
    for s in scopes:
        yield from s.bindings.values()
    for c in m.classes:
        yield from c.attrs.values()


SCOPED_METHODS = {
    api.MODEL: ("compile", "fit", "train_on_batch"),
}


def uses_with_strategy(m: Module, v: Value) -> Iterator[Use]:
    """Where ``v`` is used with a strategy: a method or ``compile`` argument under
    a known ``strategy.scope()``, or a reference inside a function run by
    ``strategy.run``."""
    origin = v.origin
    methods = SCOPED_METHODS.get(v.kind, ())
    for cs in m.calls:
        f = cs.node.func
        if not isinstance(f, cst.Attribute):
            continue
        meth = f.attr.value
        if meth in methods and all_from(m, f.value, cs, origin):
            known, _ = m.scope_items(cs)
            if known:
                yield Use(cs.node, f"`{meth}` is called under `{strategy_text(m, cs)}.scope()` "
                                   f"({{line}})", strategy_text(m, cs), m.code(f.value))
        elif meth == "compile" and v.kind in (api.OPTIMIZER, api.METRIC):
            hit = next((e for e in _compile_args(cs.node, v.kind) if all_from(m, e, cs, origin)), None)
            if hit is None:
                continue
            known, _ = m.scope_items(cs)
            if known:
                yield Use(cs.node, f"it is passed to `compile` under `{strategy_text(m, cs)}.scope()` "
                                   f"({{line}})", strategy_text(m, cs), m.code(hit))
                continue
            # compile outside the scope, of a model built in a scope: the model's variables are the
            # strategy's, the optimizer's / metric's are not (Keras 3 fit raises "Mixing different
            # tf.distribute.Strategy objects"; tf_keras compile rejects such a metric)
            text = _model_scope(m, f.value, cs)
            if text is not None:
                yield Use(cs.node, f"it is passed to `compile` of `{m.code(f.value)}`, a model built under "
                                   f"`{text}.scope()` ({{line}})", text, m.code(hit))
    # used inside a replica function
    table = m.replica_functions()
    for fid, strategies in table.items():
        fn = m.replica_fn_infos[fid]
        refs = m.refs_to(origin, fn)
        if refs and v.kind == api.MODEL and not _trained_in(m, fn, {m.code(r.node) for r in refs}):
            continue  # inference only (a teacher or eval model): its plain variables are read correctly
        if refs:
            yield Use(refs[0].node, f"it is used in `{fn.name}`, which runs on every replica through "
                                    f"`strategy.run` ({{line}})", "strategy", m.code(refs[0].node))


TRAINABLE = ("trainable_variables", "trainable_weights")


def _trained_in(m: Module, fn, names: set[str]) -> bool:
    """A call in ``fn`` (or what it calls) takes gradients of, or applies them to, one of ``names``'
    trainable variables (``tape.gradient(loss, model.trainable_variables)``)."""
    wanted = {f"{n}.{attr}" for n in names for attr in TRAINABLE}
    for cs in m.calls_within(fn):
        f = cs.node.func
        if isinstance(f, cst.Attribute) and f.attr.value in ("gradient", "apply_gradients", "minimize"):
            text = m.tree.code_for_node(cs.node)
            if any(w in text for w in wanted):
                return True
    return False
