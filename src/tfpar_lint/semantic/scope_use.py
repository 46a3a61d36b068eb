"""Scope use: where an object of one kind is created relative to a strategy's scope, and where it is
then used with the strategy (the TFP1xx "created outside the scope, then used with the strategy" questions)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, FunctionInfo, Module, Value, arg, keyword, replicated
from tfpar_lint.semantic.kinds import _pairs_owner, _variables_owner, builds_at_construction, part_of_owner
from tfpar_lint.semantic.model import ClassInfo
from tfpar_lint.semantic.walk import syntax_children


@dataclass
class Use:
    """Evidence that an object is used with a strategy."""

    node: cst.CSTNode
    how: str  # e.g. "compiled under `strategy.scope()`"
    strategy: str  # source text of the strategy expression
    subject: str = ""  # how the code names the object there (e.g. "model")
    site: Optional[CallSite] = None  # the call that uses it, when the use is a call


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
    if isinstance(v.origin, cst.Call):
        # made by a local function whose body runs in a scope whatever the call site (a decorator
        # that opens strategy.scope() around it)
        fns = m.resolve_function(v.origin.func, site.scope, site.order)
        if fns and all(m.function_scope(fn)[0] for fn in fns):
            return False
    return True


def outside_scope_uses(m: Module, kind: str,
                       keep: Callable[[Value], bool] = lambda v: True) -> Iterator[tuple[Value, Use]]:
    """Objects of ``kind`` created outside every strategy scope (and kept by ``keep``), each with its
    first use with a strategy (a use made in one arm of ``if t:`` is skipped when the object was made
    in the other arm of a later ``if t:``)."""
    for v in values_of_kind(m, kind):
        if not created_outside_scope(m, v) or not keep(v):
            continue
        if v.kind in (api.MODEL, api.LAYER) and built_under_scope(m, v):
            continue  # no variable until its first call, made under the scope: its variables are mirrored
        for use in uses_with_strategy(m, v):
            if use.site is not None and v.site is not None and m.exclusive(v.site, use.site):
                continue  # made in one arm of `if t:`, used in the other arm of a later `if t:`
            yield v, use
            break


# Keras' own training and inference methods: they build an unbuilt model through Keras' machinery
# (a Keras 3 Sequential without an input shape, made outside the scope and first built by ``fit``
# under it, still fails: fixtures/TFP101/bad_unbuilt.py)
_KERAS_RUNS = frozenset({"fit", "fit_generator", "evaluate", "evaluate_generator", "predict", "predict_generator",
                         "train_on_batch", "test_on_batch", "predict_on_batch"})
# Keras methods that create no variable
_KERAS_NO_BUILD = frozenset({"compile", "summary", "save", "save_weights", "get_config", "to_json", "get_layer",
                             "count_params", "get_weights", "reset_metrics", "reset_states", "add_loss",
                             "add_metric", "get_initial_state"})


def built_under_scope(m: Module, v: Value) -> bool:
    """``v`` (a Keras model or layer, a ``tf.Module``) holds no variable when it is made (the kinds
    module cannot say it does: :func:`kinds.builds_at_construction`), and the code builds it under
    a strategy's scope: calls it, its ``build``, or a method of its own (not Keras' ``fit`` /
    ``evaluate`` / ``predict`` machinery) under a known scope (lexically, or in a function every
    caller runs there, a ``tf.function`` made for it), before anything calls or runs it outside a
    scope.  Then every variable is made under the scope: mirrored."""
    site = v.site
    if site is None or v.origin is None or builds_at_construction(m, v) is True:
        return False
    local_class = isinstance(v.info, ClassInfo)
    api_made = bool(v.qname) and not local_class
    inside: list[CallSite] = []
    outside: list[CallSite] = []
    for cs in m.calls:
        f = cs.node.func
        if isinstance(f, cst.Attribute):
            meth = f.attr.value
            if meth in _KERAS_NO_BUILD or not any_from(m, f.value, cs, v.origin):
                continue
            if meth == "build" or meth == "__call__":
                how = "call"
            elif meth in _KERAS_RUNS:
                how = "run"
            elif local_class and meth in v.info.methods or not api_made:
                how = "method"  # a method of its own (``agent.get_action(...)``)
            else:
                continue
        elif any_from(m, f, cs, v.origin):
            how = "call"
        else:
            continue
        if m.in_replica_fn(cs.scope):
            continue  # on every replica: after the cross-replica build, under the strategy
        known, maybe = m.scope_strategies(cs)
        if known and how != "run":
            inside.append(cs)
        elif not known and not maybe and how != "method" and _nested_in(cs.scope, site.scope):
            outside.append(cs)
    if not inside:
        return False
    first = min(cs.order for cs in inside)
    return not any(site.order < cs.order < first for cs in outside)


def _nested_in(scope, outer) -> bool:
    s = scope
    while s is not None:
        if s is outer:
            return True
        s = s.parent
    return False


@dataclass
class Wrapped:
    """An object that a function receives (made before it ran) built into a new model under the
    scope of a strategy that function makes itself: its variables stay outside that strategy."""

    arg: cst.BaseExpression  # the argument of the constructor (the parameter's name)
    fn: FunctionInfo  # the function that makes the strategy
    param: str
    build: CallSite  # the model constructor called under the scope
    strategy: str  # how the code names the strategy


def wrapped_params(m: Module, kind: str) -> list[Wrapped]:
    """Parameters of ``kind`` (what every caller passes, or its use) that a function hands to a model
    constructor (a Keras API or a model class of the project) under the scope of a strategy the
    function itself makes."""
    memo = m.rule_memo.setdefault("wrapped_params", {})
    if kind in memo:
        return memo[kind]
    out: list[Wrapped] = []
    for cs in m.calls:
        fn = cs.func
        if fn is None or not cs.withs or not m.strategies_made_in(fn):
            continue
        known, _ = m.scope_items(cs)
        made = {id(v.origin) for _site, v in m.strategies_made_in(fn)}
        if not known or not all(id(v.origin) in made for v in known):
            continue
        if not any(v.kind == api.MODEL and v.origin is cs.node for v in m.infer_at(cs.node, cs)):
            continue  # not a model built here
        for a in _arg_items(cs.node):
            if not isinstance(a, cst.Name):
                continue
            bs = m.lookup(a.value, cs.scope, cs.order)
            if len(bs) != 1 or bs[0].kind != "param" or bs[0].func is not fn:
                continue
            if any(v.kind == kind for v in m.binding_values(bs[0])):
                out.append(Wrapped(a, fn, a.value, cs, strategy_text(m, cs)))
    memo[kind] = out
    return out


def wrapped_by_callee(m: Module, v: Value) -> Optional[tuple[CallSite, Wrapped, cst.BaseExpression]]:
    """The call that hands ``v`` to a function (of this module or another of the project) which
    wraps that parameter under a strategy it makes itself (:func:`wrapped_params`)."""
    for cs in m.calls:
        for i, a in enumerate(cs.node.args):
            if a.star or not any_from(m, a.value, cs, v.origin):
                continue
            for fn in m.resolve_function(cs.node.func, cs.scope, cs.order):
                owner = fn.scope.module or m
                params = [p for p in fn.params if not p.star]
                name = a.keyword.value if a.keyword is not None else (
                    params[i].name.value if i < len(params) else None)
                for w in wrapped_params(owner, v.kind):
                    if w.fn is fn and w.param == name:
                        return cs, w, a.value
    return None


def created_in_scope(m: Module, v: Value) -> bool:
    site = v.site
    if site is None:
        return False
    known, _ = m.scope_strategies(site)
    return bool(known)


def all_from(m: Module, expr: Optional[cst.BaseExpression], site: CallSite, origin: cst.CSTNode) -> bool:
    return origin is not None and single_origin(m, expr, site) is origin


def any_from(m: Module, expr: Optional[cst.BaseExpression], site: CallSite, origin: cst.CSTNode) -> bool:
    """``expr`` holds the object created at ``origin`` on some path (every path counts: a
    mistake on one branch is a mistake)."""
    return origin is not None and expr is not None and any(v.origin is origin for v in m.infer_at(expr, site))


def origins(m: Module, expr: Optional[cst.BaseExpression], site: CallSite) -> list[cst.CSTNode]:
    """The nodes the possible values of ``expr`` were created at (one per path)."""
    if expr is None:
        return []
    out: list[cst.CSTNode] = []
    for v in m.infer_at(expr, site):
        if v.origin is not None and all(o is not v.origin for o in out):
            out.append(v.origin)
    return out


def single_origin(m: Module, expr: Optional[cst.BaseExpression], site: CallSite) -> Optional[cst.CSTNode]:
    """The node every possible value of ``expr`` was created at, when there is one."""
    if expr is None:
        return None
    vals = m.infer_at(expr, site)
    if not vals:
        return None
    o = vals[0].origin
    for v in vals:
        if v.origin is not o:
            return None
    return o


def scope_text(m: Module, site: CallSite) -> str:
    """The ``with`` item that opens the strategy's scope at ``site``, as written
    (``strategy.scope()``, ``self.strategy_scope()``)."""
    for item in site.withs:
        e = item.item
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "scope":
            return m.code(e)
    for item in reversed(site.withs):
        if isinstance(item.item, cst.Call):
            known, _ = m.scope_items(CallSite(site.node, site.scope, site.func, site.order, (item,), (), (), 0))
            if known:
                return m.code(item.item)
    return "strategy.scope()"


def strategy_text(m: Module, site: CallSite) -> str:
    for item in site.withs:
        e = item.item
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "scope":
            return m.code(e.func.value)
    return "strategy"


def values_of_kind(m: Module, kind: str) -> list[Value]:
    """Each distinct object of ``kind`` created by a call in this module: bound to a name or an
    attribute, or created inline as an argument (``compile(optimizer=SGD())``).  Computed once
    per module and kind (several rules ask)."""
    memo = m.rule_memo.setdefault("values_of_kind", {})
    if kind not in memo:
        memo[kind] = list(_values_of_kind(m, kind))
    return memo[kind]


def _bound_by_kind(m: Module) -> dict[str, list[Value]]:
    """kind -> the distinct objects of that kind bound to names or attributes, in binding order
    (one pass over the module's bindings serves every kind)."""
    memo = m.rule_memo.setdefault("values_by_kind", {})
    got = memo.get(None)
    if got is None:
        got = {}
        seen: set[tuple[str, int]] = set()
        for b_list in _all_binding_lists(m):
            for b in b_list:
                for v in m.binding_values(b):
                    if part_of_owner(v):
                        continue  # a variable of a model (``for w in net.trainable_variables``): the model was made there
                    if v.origin is not None and (v.kind, id(v.origin)) not in seen:
                        seen.add((v.kind, id(v.origin)))
                        got.setdefault(v.kind, []).append(v)
        memo[None] = got
    return got


def _constructor_kinds(m: Module) -> list[tuple[CallSite, str]]:
    """Each call of the module with the kind its callee constructs (computed once)."""
    memo = m.rule_memo.setdefault("values_by_kind", {})
    got = memo.get("calls")
    if got is None:
        got = memo["calls"] = [(cs, api.kind_of_constructor(m.qualified_name(cs.node.func, cs.scope, cs.order)[0]))
                               for cs in m.calls]
    return got


def _values_of_kind(m: Module, kind: str) -> Iterator[Value]:
    seen: set[int] = set()
    for v in _bound_by_kind(m).get(kind, ()):
        seen.add(id(v.origin))
        yield v
    for cs, made in _constructor_kinds(m):
        if made != kind or id(cs.node) in seen:
            continue
        for v in m.infer_at(cs.node, cs):
            if v.kind == kind and v.origin is cs.node:
                seen.add(id(cs.node))
                yield v
    if kind == api.METRIC:
        # compile(metrics=make_metrics()): the metrics a local helper returns in a list
        for cs in m.calls:
            f = cs.node.func
            if not (isinstance(f, cst.Attribute) and f.attr.value == "compile"):
                continue
            for kw in ("metrics", "weighted_metrics"):
                e = keyword(cs.node, kw)
                for v in returned_items(m, e, cs) if e is not None else ():
                    if v.kind == kind and id(v.origin) not in seen:
                        seen.add(id(v.origin))
                        yield v


def returned_items(m: Module, expr: Optional[cst.BaseExpression], cs: CallSite) -> list[Value]:
    """The items of the list a local helper returns, for ``expr`` = ``helper()`` or a name bound
    (once) to it: every ``return`` of the helper must be a list or tuple literal.  Items the helper
    creates are created at the call (the caller's scope context), like its plain return values."""
    call, site = expr, cs
    if isinstance(expr, cst.Name):
        reaching = m.reaching_exprs(expr, cs.scope, cs.order)
        if not reaching or len(reaching) != 1 or not isinstance(reaching[0][0], cst.Call):
            return []
        call = reaching[0][0]
        site = m.site_of_call.get(id(call))
    if not isinstance(call, cst.Call) or site is None:
        return []
    fns = m.resolve_function(call.func, site.scope, site.order)
    out: list[Value] = []
    for fn in fns:
        if not fn.returns:
            return []
        for ret, order in fn.returns:
            if not isinstance(ret, (cst.List, cst.Tuple)) or any(isinstance(el, cst.StarredElement)
                                                                  for el in ret.elements):
                return []
            for el in ret.elements:
                for v in m.infer(el.value, fn.scope, order):
                    if v.kind != api.UNKNOWN and m.created_within(v.origin, fn):
                        v = Value(v.kind, v.qname, origin=call, site=site, raw_qname=v.raw_qname,
                                  info=v.info, source=v.source)
                    out.append(v)
    return out


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
    for cs in calls_using(m).get(id(origin), ()):
        f = cs.node.func
        meth = f.attr.value
        if meth in methods and any_from(m, f.value, cs, origin):
            known, _ = m.scope_items(cs)
            if known:
                yield Use(cs.node, f"`{meth}` is called under `{scope_text(m, cs)}` "
                                   f"({{line}})", strategy_text(m, cs), m.code(f.value), cs)
            elif cs.func is not None:
                # in a function whose whole body runs under a scope (every caller is in one, or a
                # local decorator runs it in one)
                fk, fmaybe = m.function_scope(cs.func)
                if fk and not fmaybe:
                    yield Use(cs.node, f"`{meth}` is called in `{cs.func.name}`, which runs under a strategy's "
                                       f"scope ({{line}})", "strategy", m.code(f.value), cs)
        elif meth == "compile" and v.kind in (api.OPTIMIZER, api.METRIC):
            if v.kind == api.OPTIMIZER and not compiled_to_train(m, cs):
                continue  # compiled only so that evaluate / predict run: the optimizer never steps
            known, _ = m.scope_items(cs)
            where = f"under `{scope_text(m, cs)}` ({{line}})"
            if not known:
                # compile outside the scope, of a model built in one: the model's strategy owns it
                model = _scoped_model(m, f.value, cs, v)
                if model is None:
                    continue
                where = (f"to `compile` of `{m.code(f.value)}`, a model built under a strategy's scope"
                         f"{_path_of(m, model, f.value, cs)} ({{line}})")
            hit = None
            if v.kind == api.OPTIMIZER:
                e = keyword(cs.node, "optimizer") or arg(cs.node, 0)
                hit = e if any_from(m, e, cs, origin) else None
            else:
                for kw in ("metrics", "weighted_metrics"):
                    lst = keyword(cs.node, kw)
                    items = [el.value for el in lst.elements] if isinstance(lst, (cst.List, cst.Tuple)) else [lst]
                    for e in items:
                        if hit is None and (any_from(m, e, cs, origin)
                                            or any(x.origin is origin for x in returned_items(m, e, cs))):
                            hit = e
            if hit is not None:
                how = (f"it is passed to `compile` {where}" if known else f"it is passed {where}")
                yield Use(cs.node, how, strategy_text(m, cs), m.code(hit), cs)
        elif meth in _APPLY and v.kind == api.OPTIMIZER and any_from(m, f.value, cs, origin):
            # applied to the variables of a model built under a strategy's scope (mirrored variables)
            for recv in _variables_owners(cs.node):
                model = _scoped_model(m, recv, cs, v)
                if model is not None:
                    yield Use(cs.node, f"`{meth}` applies it to the variables of `{m.code(recv)}`, a model built "
                                       f"under a strategy's scope{_path_of(m, model, recv, cs)} ({{line}})",
                              "strategy", m.code(f.value), cs)
                    break
        elif v.kind in (api.MODEL, api.LAYER) and meth in ("Sequential", "Model", "Functional"):
            known, _ = m.scope_items(cs)
            if known and api.kind_of_constructor(m.qualified_name(f, cs.scope, cs.order)[0]) == api.MODEL \
                    and any(any_from(m, e, cs, origin) for e in _arg_items(cs.node)):
                yield Use(cs.node, f"it is built into `{meth}(...)` under `{scope_text(m, cs)}` "
                                   f"({{line}}): its variables stay outside the strategy",
                          strategy_text(m, cs), "", cs)
    if v.kind == api.MODEL:
        yield from _trained_beside_unused_strategy(m, v)
        got = wrapped_by_callee(m, v)
        if got is not None:
            cs, w, handed = got
            owner = w.fn.scope.module or m
            yield Use(cs.node, f"`{m.code(cs.node.func)}` ({{line}}) builds it into `{owner.code(w.build.node.func)}(...)` "
                               f"under the scope of a strategy it makes itself: its variables stay outside that "
                               f"strategy", w.strategy, m.code(handed), cs)
    # used inside a replica function: of this module, or of another module of the project the
    # object is handed to (``Trainer(optimizer=opt)`` whose replica step applies ``self.optimizer``)
    for mod in [m] + _handed_to_modules(m):
        table = mod.replica_functions()
        for fid, strategies in table.items():
            fn = mod.replica_fn_infos[fid]
            if _ambient_where_made(v, strategies):
                continue
            refs = mod.refs_to(origin, fn) if mod is m else mod.refs_to(origin, fn, from_module=m)
            if refs and v.kind == api.MODEL and not _trained_in(mod, fn, {mod.code(r.node) for r in refs}):
                continue  # inference only (a teacher or eval model): its plain variables are read correctly
            if refs:
                yield Use(refs[0].node, f"it is used in `{fn.name}`, which runs on every replica through "
                                        f"`strategy.run` ({{line}})", "strategy", mod.code(refs[0].node))


def _ambient_where_made(v: Value, strategies) -> bool:
    """Every strategy that runs the replica function is the one ``tf.distribute.get_strategy()``
    returned in the function that made ``v`` (``self.strategy = tf.distribute.get_strategy()`` in the
    ``__init__`` that makes the metrics): whatever scope was open around that call was open around
    ``v``'s making too, so ``v`` is under the strategy's scope, or there is no strategy but the
    default one (nothing replicated)."""
    made_in = v.site.func if v.site is not None else None
    if made_in is None or not strategies:
        return False
    return all(s.qname in api.STRATEGY_GETTERS and s.site is not None and s.site.func is made_in
               for s in strategies)


def _handed_to_modules(m: Module) -> list[Module]:
    """The project's other modules whose answers this module's read (the classes and functions it
    hands its objects to), already parsed: their replica functions may use those objects."""
    project = m.project
    if project is None:
        return []
    out = []
    for path in sorted(m.project_deps):
        other = project.modules.get(path)
        if other is not None and other is not m:
            out.append(other)
    return out


def _trained_beside_unused_strategy(m: Module, v: Value) -> Iterator[Use]:
    """``fit`` (or ``compile``) of the model, outside any scope, in the function (or module code)
    that creates a strategy of several replicas on the same path and never enters its scope: the
    strategy is unused, the model trains on one device.  Not when any ``with`` may enter that
    scope (a stored scope, an unresolved one): then one path may be the single-device one."""
    origin = v.origin
    trained = False
    for cs in calls_using(m).get(id(origin), ()):
        f = cs.node.func
        if f.attr.value not in ("fit", "compile") or not any_from(m, f.value, cs, origin):
            continue
        trained = True
        known, maybe = m.scope_strategies(cs)
        if known or maybe or m.in_replica_fn(cs.scope):
            continue
        for made, s in m.strategies_made_in(cs.func):
            if made.order > cs.order or not replicated([s]) or _exclusive(m, made.ifs, cs.ifs) \
                    or (v.site is not None and _exclusive(m, made.ifs, v.site.ifs)):
                continue
            if m.scope_entered(s) is not False:
                continue
            name = m.code(made.stmt.body[0].targets[0].target) if isinstance(made.stmt, cst.SimpleStatementLine) \
                and isinstance(made.stmt.body[0], cst.Assign) else "the strategy"
            yield Use(cs.node, f"`{f.attr.value}` ({{line}}) runs beside `{name}`, a strategy created on the same path "
                               f"whose scope is never entered: the model trains on one device and the strategy is "
                               f"unused", name, m.code(f.value))
            return
    if trained or v.site is None or _inference_only(m, v):
        return
    # not trained here: only beside a strategy made on the same path and never used at all (no
    # reference to it): nothing can bring the model under it.  Not a strategy made after the name
    # that held the model was bound again: the model was gone by then (a model reloaded to show its
    # weights, then reloaded under a scope, before a later notebook cell makes another strategy).
    for made, s in m.strategies_made_in(v.site.func):
        if not replicated([s]) or _exclusive(m, made.ifs, v.site.ifs) or m.scope_entered(s) is not False \
                or _gone_before(m, v.site, made):
            continue
        target = _assigned_name(made)
        if target is None or _referenced_after(m, target, made):
            continue
        model_name = _assigned_name(v.site)
        yield Use(made.node, f"`{target.value}` ({{line}}), a strategy created on the same path, is never used: the "
                             f"model is under no strategy", target.value, model_name.value if model_name else "")
        return


_TRAINS = frozenset({"fit", "fit_generator", "train_on_batch"})
# what a compiled model may be asked without stepping its optimizer
_NO_STEP = frozenset({"evaluate", "evaluate_generator", "predict", "predict_generator", "predict_on_batch",
                      "test_on_batch", "summary", "save", "save_weights", "load_weights", "get_weights",
                      "count_params", "to_json", "get_config", "get_layer", "reset_metrics"})


def compiled_to_train(m: Module, cs: CallSite) -> bool:
    """The model compiled at ``cs`` (``model.compile(optimizer=...)``) may train with that
    optimizer: False only when the function (or module code) that compiles it reads the model
    afterwards only to evaluate, predict or inspect it (or compiles it again before any of its
    training calls), and the model never leaves it (not returned, stored, handed to a call, read in
    a nested function) -- an optimizer given to ``compile`` so that ``evaluate`` runs never steps."""
    recv = cs.node.func.value if isinstance(cs.node.func, cst.Attribute) else None
    if not isinstance(recv, cst.Name) or cs.loops:
        return True
    name = recv.value
    methods: dict[int, str] = {}
    for c in m.calls:
        f = c.node.func
        if c.scope is cs.scope and c.order > cs.order and isinstance(f, cst.Attribute) \
                and isinstance(f.value, cst.Name) and f.value.value == name:
            methods[id(f.value)] = f.attr.value
    later = sorted((r for r in m.refs if r.node.value == name and r.order > cs.order and r.node is not recv),
                   key=lambda r: r.order)
    ran = False
    for r in later:
        if r.scope is not cs.scope:
            if _nested_in(r.scope, cs.scope) or cs.scope is m.scope:
                return True  # read by a function that may run later (a closure, a function of the module)
            continue
        meth = methods.get(id(r.node))
        if meth in _TRAINS:
            return True
        if meth == "compile":
            break  # compiled again before any training: the later steps are the new optimizer's
        if meth not in _NO_STEP:
            return True  # returned, stored, handed on, or a method that may train it
        ran = ran or meth in _INFERENCE
    return not ran  # evaluated or predicted, never trained: the optimizer never steps


_INFERENCE = frozenset({"predict", "evaluate", "predict_on_batch", "test_on_batch", "predict_generator",
                        "evaluate_generator"})


def _inference_only(m: Module, v: Value) -> bool:
    """The model is run for inference (``predict``, ``evaluate``) in this module and nothing takes
    or applies gradients of its variables: a model reloaded to predict on one device after
    training, which no strategy needs."""
    origin = v.origin
    run = False
    for cs in m.calls:
        f = cs.node.func
        if not isinstance(f, cst.Attribute):
            continue
        meth = f.attr.value
        if meth in _INFERENCE and any_from(m, f.value, cs, origin):
            run = True
        elif meth in ("gradient", "apply_gradients", "minimize"):
            owners = [o for o in (_variables_owner(arg(cs.node, 1, "sources"), m, cs),
                                  _pairs_owner(cs.node, m, cs)) if o is not None]
            owners += list(_variables_owners(cs.node))
            if any(any_from(m, o, cs, origin) for o in owners):
                return False
    return run


def _gone_before(m: Module, site: CallSite, later: CallSite) -> bool:
    """The name the object made at ``site`` was assigned to is bound again before ``later``: the
    object is no longer held there."""
    target = _assigned_name(site)
    if target is None or later.order <= site.order:
        return False
    own = site.stmt.body[0]
    return any(site.order < b.order < later.order and b.node is not own
               for b in site.scope.bindings.get(target.value, ()))


def _assigned_name(site: CallSite) -> Optional[cst.Name]:
    """``x`` of ``x = <the call of site>``."""
    stmt = site.stmt
    if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign) \
            and stmt.body[0].value is site.node and len(stmt.body[0].targets) == 1 \
            and isinstance(stmt.body[0].targets[0].target, cst.Name):
        return stmt.body[0].targets[0].target
    return None


def _referenced_after(m: Module, target: cst.Name, made: CallSite) -> bool:
    """Some reference of the module may read the name ``target`` binds at ``made``."""
    for r in m.refs:
        if r.node.value == target.value and any(b.node is made.stmt.body[0] for b in m.lookup(r.node.value, r.scope, r.order)):
            return True
    return False


def _exclusive(m: Module, a: tuple, b: tuple) -> bool:
    """Two sites under these if branches never run in one pass (they take different branches of
    one ``if``, or their tests cannot hold together: :mod:`.paths`)."""
    return not m.together(a, b)


_APPLY = ("apply_gradients", "minimize")
_USE_METHODS = frozenset(meth for ms in SCOPED_METHODS.values() for meth in ms) | {"compile"} | frozenset(_APPLY)


def _variables_owners(call: cst.Call) -> Iterator[cst.BaseExpression]:
    """``X`` of each ``X.trainable_variables`` (``trainable_weights``) in ``call``'s arguments
    (``zip(grads, model.trainable_variables)``, ``var_list=model.trainable_weights``)."""
    work: list[cst.CSTNode] = [a.value for a in call.args]
    while work:
        n = work.pop()
        if isinstance(n, cst.Attribute) and n.attr.value in TRAINABLE:
            yield n.value
        elif isinstance(n, (cst.Lambda, cst.FunctionDef)):
            continue
        else:
            work.extend(syntax_children(n))
_BUILDERS = ("Sequential", "Model", "Functional")


def calls_using(m: Module) -> dict[int, list[CallSite]]:
    """id(origin) -> the ``x.meth(...)`` call sites (in source order) where :func:`uses_with_strategy`
    may find a use of the object created at ``origin``: the receiver of a scoped method, an
    argument of ``compile``, an item built into ``Sequential(...)``, each holding that object
    only.  Built once per module, so that asking for every object costs one pass over the calls,
    not one pass per object (10,000 models were quadratic)."""
    memo = m.rule_memo.setdefault("calls_using", {})
    got = memo.get(0)
    if got is not None:
        return got
    table: dict[int, list[CallSite]] = {}
    for cs in m.calls:
        f = cs.node.func
        if not isinstance(f, cst.Attribute):
            continue
        meth = f.attr.value
        exprs: list[cst.BaseExpression] = []
        extra: list[cst.CSTNode] = []
        if meth in _USE_METHODS:
            exprs.append(f.value)
        if meth == "compile":
            e = keyword(cs.node, "optimizer") or arg(cs.node, 0)
            if e is not None:
                exprs.append(e)
            for kw in ("metrics", "weighted_metrics"):
                lst = keyword(cs.node, kw)
                items = [el.value for el in lst.elements] if isinstance(lst, (cst.List, cst.Tuple)) else [lst]
                for e in items:
                    if e is not None:
                        exprs.append(e)
                        extra.extend(x.origin for x in returned_items(m, e, cs) if x.origin is not None)
        elif meth in _BUILDERS:
            exprs.extend(_arg_items(cs.node))
        seen: set[int] = set()
        for o in [o for e in exprs for o in origins(m, e, cs)] + extra:
            if o is not None and id(o) not in seen:
                seen.add(id(o))
                table.setdefault(id(o), []).append(cs)
    memo[0] = table
    return table


def _scoped_model(m: Module, expr: cst.BaseExpression, cs: CallSite, along: Optional[Value] = None) -> Optional[Value]:
    """The model ``expr`` holds when it was created under a strategy's scope, on some path (the
    model built in the scope when ``n_gpus > 1``, and plainly otherwise) that the object
    ``along`` can be on too (not the other branch of an ``if`` that made ``along``)."""
    for v in m.infer_at(expr, cs):
        if v.kind == api.MODEL and created_in_scope(m, v) and not (
                along is not None and along.site is not None and v.site is not None
                and _exclusive(m, v.site.ifs, along.site.ifs)):
            return v
    return None


def _path_of(m: Module, v: Value, expr: cst.BaseExpression, cs: CallSite) -> str:
    """" on the path where `cond`" when ``expr`` holds ``v`` only on some paths (its values
    disagree), from the branches ``v`` was created on; "" otherwise."""
    if v.site is None or len(origins(m, expr, cs)) < 2:
        return ""
    text = m.path_text(v.site.ifs)
    return f" on the path where {text}" if text else ""


def _arg_items(call: cst.Call) -> Iterator[cst.BaseExpression]:
    """A call's arguments, and the items of list/tuple arguments (``Sequential([a, b])``)."""
    for a in call.args:
        if isinstance(a.value, (cst.List, cst.Tuple)):
            yield from (el.value for el in a.value.elements)
        else:
            yield a.value


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
