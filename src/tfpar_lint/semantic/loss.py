"""Loss analysis (the TFP5xx rules ask it): what a loss is made of, how it is scaled, which
losses a replica function's applied gradients come from, per-replica batch sizes, Keras loss
objects.

:func:`loss_terms` follows a loss expression back through local assignments
(``loss = a + b``, ``loss += c``), sums (``+``, ``tf.add_n``, ``sum``,
``tf.reduce_sum``), casts and module-local helper functions, and yields the
leaves it is made of with the divisors applied on the way.  Name resolution is
the semantic model's (``Module.reaching_exprs``, ``resolve_function``,
``qualified_name``, ``infer``); this module only does the arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, FunctionInfo, Module, Scope, Value, arg, call_method, keyword, names_read

SUMS = frozenset({"tensorflow.add_n", "tensorflow.math.add_n", "tensorflow.reduce_sum",
                  "tensorflow.math.reduce_sum", "keras.ops.sum"})
PASS_THROUGH = frozenset({"tensorflow.cast", "tensorflow.identity", "tensorflow.convert_to_tensor",
                          "tensorflow.squeeze", "keras.ops.cast", "keras.ops.convert_to_tensor"})
PASS_THROUGH_METHODS = frozenset({"get_scaled_loss", "scale_loss"})  # mixed-precision loss scaling
MEANS = frozenset({"tensorflow.reduce_mean", "tensorflow.math.reduce_mean", "keras.ops.mean", "keras.backend.mean"})
AVERAGE_LOSS = frozenset({"tensorflow.nn.compute_average_loss"})
# tf.compat.v1.losses.*: reduced with Reduction.SUM_BY_NONZERO_WEIGHTS (a mean over the batch) by default
V1_LOSSES = frozenset("tensorflow.compat.v1.losses." + n for n in (
    "absolute_difference", "compute_weighted_loss", "cosine_distance", "hinge_loss", "huber_loss", "log_loss",
    "mean_pairwise_squared_error", "mean_squared_error", "sigmoid_cross_entropy", "softmax_cross_entropy",
    "sparse_softmax_cross_entropy"))
V1_MEAN_REDUCTIONS = frozenset({"SUM_BY_NONZERO_WEIGHTS", "MEAN", "SUM_OVER_BATCH_SIZE", "SUM_OVER_NONZERO_WEIGHTS"})


def v1_mean_loss(call: cst.Call) -> bool:
    """A ``tf.compat.v1.losses`` call (already matched by name) that averages: ``reduction=``
    not given, or one of the mean reductions spelled ``...Reduction.<NAME>``."""
    if any(a.star for a in call.args):
        return False
    red = keyword(call, "reduction")
    if red is None:
        return True
    return isinstance(red, cst.Attribute) and red.attr.value in V1_MEAN_REDUCTIONS


SCALE_REG = frozenset({"tensorflow.nn.scale_regularization_loss"})
L2_LOSS = frozenset({"tensorflow.nn.l2_loss"})


@dataclass
class Term:
    node: cst.BaseExpression  # the leaf expression
    scope: Scope
    order: int
    divisors: tuple[tuple[cst.BaseExpression, Scope, int], ...]  # applied on the way up
    summed: bool  # went through a reduce_sum / add_n / sum
    via: Optional[cst.BaseExpression] = None  # the first local-helper call it was reached through
    # the ``tf.grad_pass_through(f)(...)`` call it was reached through: ``f`` (a division...) changed
    # the forward value only, not the gradient
    forward_only: Optional[cst.Call] = None


def _builtin(m: Module, call: cst.Call, scope: Scope, order: int, *names: str) -> bool:
    f = call.func
    return isinstance(f, cst.Name) and f.value in names and not m.lookup(f.value, scope, order)


def loss_terms(m: Module, expr: cst.BaseExpression, scope: Scope, order: int,
               divisors: tuple = (), summed: bool = False, _depth: int = 0,
               _seen: Optional[set] = None, via: Optional[cst.BaseExpression] = None) -> Iterator[Term]:
    _seen = set() if _seen is None else _seen
    key = (id(expr), order)
    if _depth > 25 or key in _seen:
        return
    _seen.add(key)
    rec = lambda e, sc=scope, od=order, dv=divisors, sm=summed, vi=via: loss_terms(  # noqa: E731
        m, e, sc, od, dv, sm, _depth + 1, _seen, vi)
    if isinstance(expr, cst.Name):
        bs = m.lookup(expr.value, scope, order)
        unpacked = {id(b): unpacked_items(m, b) for b in bs if b.path}
        ok = bool(bs) and all(
            (b.kind in ("assign", "annassign", "walrus") and b.value is not None
             and (not b.path or unpacked.get(id(b)) is not None))
            or (b.kind == "aug" and isinstance(b.node, cst.AugAssign)) for b in bs)
        if not ok:
            yield Term(expr, scope, order, divisors, summed, via)
            return
        for b in bs:
            if b.path:  # loss, acc = compute_loss(...): the item the helper returns in that place
                for e, sc, od, vi in unpacked[id(b)]:
                    yield from rec(e, sc, od, vi=via if via is not None else vi)
                continue
            if b.kind != "aug":
                yield from rec(b.value, b.scope, b.order)
                continue
            op, value = b.node.operator, b.node.value
            if isinstance(op, (cst.AddAssign, cst.SubtractAssign)):
                yield from rec(value, b.scope, b.order)
                yield from rec(expr, b.scope, b.order)
            elif isinstance(op, (cst.DivideAssign, cst.FloorDivideAssign)):
                yield from rec(expr, b.scope, b.order, divisors + ((value, b.scope, b.order),))
            elif isinstance(op, cst.MultiplyAssign) and isinstance(value, cst.BinaryOperation) \
                    and isinstance(value.operator, cst.Divide) and isinstance(value.left, (cst.Integer, cst.Float)):
                yield from rec(expr, b.scope, b.order, divisors + ((value.right, b.scope, b.order),))
            elif isinstance(op, cst.MultiplyAssign) and mentions_replicas(m, value, b.scope, b.order):
                yield from rec(expr, b.scope, b.order, divisors + ((value, b.scope, b.order),))
            else:
                yield from rec(expr, b.scope, b.order)
        return
    if isinstance(expr, cst.BinaryOperation):
        op = expr.operator
        if isinstance(op, (cst.Add, cst.Subtract)):
            yield from rec(expr.left)
            yield from rec(expr.right)
        elif isinstance(op, cst.Multiply):
            # x * (1 / n) is a division by n; x * scale where scale involves num_replicas_in_sync
            # (e.g. scale = 1 / strategy.num_replicas_in_sync) is a rescaling by the replicas
            for side, other in ((expr.left, expr.right), (expr.right, expr.left)):
                if isinstance(other, cst.BinaryOperation) and isinstance(other.operator, cst.Divide) \
                        and isinstance(other.left, (cst.Integer, cst.Float)):
                    yield from rec(side, dv=divisors + ((other.right, scope, order),))
                    return
                if not isinstance(other, (cst.Integer, cst.Float)) and mentions_replicas(m, other, scope, order):
                    yield from rec(side, dv=divisors + ((other, scope, order),))
                    return
            yield from rec(expr.left)
            yield from rec(expr.right)
        elif isinstance(op, (cst.Divide, cst.FloorDivide)):
            yield from rec(expr.left, dv=divisors + ((expr.right, scope, order),))
        else:
            yield Term(expr, scope, order, divisors, summed, via)
        return
    if isinstance(expr, cst.UnaryOperation):
        yield from rec(expr.expression)
        return
    if isinstance(expr, (cst.List, cst.Tuple)):
        for el in expr.elements:
            yield from rec(el.value)
        return
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        # tf.add_n([tf.nn.l2_loss(v) for v in variables]): the element, read after the loop binds
        comp_orders = [b.order for bs in scope.bindings.values() for b in bs
                       if b.kind == "comp" and b.node is expr.for_in]
        yield from rec(expr.elt, od=max(comp_orders) if comp_orders else order)
        return
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Call) and expr.args and not expr.args[0].star and \
                m.qualified_name(expr.func.func, scope, order)[0] in api.GRAD_PASS_THROUGH:
            # tf.grad_pass_through(lambda x: x / n)(loss): the gradient is the undivided loss's
            for t in rec(expr.args[0].value):
                yield replace(t, forward_only=t.forward_only or expr)
            return
        q, _ = m.qualified_name(expr.func, scope, order)
        if q in SUMS or _builtin(m, expr, scope, order, "sum"):
            a = arg(expr, 0, "input_tensor") or arg(expr, 0, "inputs") or arg(expr, 0, "x")
            if a is not None:
                yield from rec(a, sm=True)
                return
        if q in PASS_THROUGH or _builtin(m, expr, scope, order, "float"):
            a = arg(expr, 0, "x") or arg(expr, 0, "value")
            if a is not None:
                yield from rec(a)
                return
        if _builtin(m, expr, scope, order, "list", "tuple") and len(expr.args) == 1 and not expr.args[0].star:
            yield from rec(expr.args[0].value)  # tf.add_n(list(losses.values()))
            return
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "values" and not expr.args:
            items = m.container_items(expr, scope, order)  # the dict's values (literal and d[k] = v)
            if items is not None:
                for e, sc, od in items:
                    yield from rec(e, sc, od)
                return
        cm = call_method(expr)
        if cm is not None and cm[1] in PASS_THROUGH_METHODS and arg(expr, 0) is not None:
            yield from rec(arg(expr, 0))
            return
        if not q or not api.canonical(q).startswith(("tensorflow.", "keras.")):
            # a helper of this module, or of another module of the project (from losses import my_loss)
            fns = m.resolve_function(expr.func, scope, order)
            if fns and all(f.returns for f in fns):
                for f in fns:
                    for e, od in f.returns:
                        yield from rec(e, f.scope, od, vi=via if via is not None else expr)
                return
        yield Term(expr, scope, order, divisors, summed, via)
        return
    yield Term(expr, scope, order, divisors, summed, via)


def unpacked_items(m: Module, b) -> Optional[list]:
    """For ``a, b = <value>`` (one level): the expressions bound to ``b.path`` - the item of a
    tuple literal, or that item of every tuple a local function returns, as (expr, scope, order,
    the call that returned it or None); None when unknown.  (Also the chief tests' helper.)"""
    if len(b.path) != 1 or b.value is None:
        return None
    i = b.path[0]

    def item(e):
        if isinstance(e, (cst.Tuple, cst.List)) and i < len(e.elements) \
                and not any(isinstance(el, cst.StarredElement) for el in e.elements):
            return e.elements[i].value
        return None

    direct = item(b.value)
    if direct is not None:
        return [(direct, b.scope, b.order, None)]
    if not isinstance(b.value, cst.Call):
        return None
    fns = m.resolve_function(b.value.func, b.scope, b.order)
    out = []
    for f in fns:
        for e, od in f.returns:
            it = item(e)
            if it is None:
                return None
            out.append((it, f.scope, od, b.value))
    return out or None


def _self_attr_exprs(m: Module, expr: cst.Attribute, scope: Scope) -> list:
    """``self.<name>`` inside a method: the values the class's methods assign to it."""
    if not isinstance(expr.value, cst.Name):
        return []
    fn = next(iter(m.enclosing_functions(scope)), None)
    method = m.enclosing_method(fn) if fn is not None else None
    if method is None or not method.params or method.params[0].name.value != expr.value.value:
        return []
    return [(b.value, b.scope, b.order) for b in method.cls.attrs.get(expr.attr.value, ()) if b.value is not None]


def mentions_replicas(m: Module, expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> bool:
    """Does ``expr`` involve ``<x>.num_replicas_in_sync`` (directly or through a local name)?"""
    if _depth > 10:
        return False
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "num_replicas_in_sync":
            return True
        for e, sc, od in _self_attr_exprs(m, expr, scope):  # self.loss_scale = 1 / strategy.num_replicas_in_sync
            if mentions_replicas(m, e, sc, od, _depth + 1):
                return True
        return mentions_replicas(m, expr.value, scope, order, _depth + 1)
    if isinstance(expr, cst.Name):
        exprs = m.reaching_exprs(expr, scope, order)
        return any(mentions_replicas(m, e, sc, od, _depth + 1) for e, sc, od in exprs or ())
    if isinstance(expr, cst.BinaryOperation):
        return mentions_replicas(m, expr.left, scope, order, _depth + 1) or \
            mentions_replicas(m, expr.right, scope, order, _depth + 1)
    if isinstance(expr, cst.Call):
        return any(mentions_replicas(m, a.value, scope, order, _depth + 1) for a in expr.args)
    return False


def is_per_replica_batch(m: Module, expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> bool:
    """``tf.shape(x)[0]``, ``x.shape[0]``, ``len(x)``, ``tf.size(labels)``, or a value that is a
    per-replica batch size by its story (:func:`per_replica_size`)."""
    if _depth > 10:
        return False
    if isinstance(expr, cst.Call):
        q, _ = m.qualified_name(expr.func, scope, order)
        if q in PASS_THROUGH or _builtin(m, expr, scope, order, "float", "int"):
            a = arg(expr, 0, "x")
            return a is not None and is_per_replica_batch(m, a, scope, order, _depth + 1)
        if _builtin(m, expr, scope, order, "len"):
            return True
        if q in ("tensorflow.size",):
            return True
    if isinstance(expr, cst.Subscript):
        base = expr.value
        idx = expr.slice[0].slice if len(expr.slice) == 1 else None
        if not (isinstance(idx, cst.Index) and isinstance(idx.value, cst.Integer) and idx.value.value == "0"):
            return False
        if isinstance(base, cst.Attribute) and base.attr.value == "shape":
            return True
        if isinstance(base, cst.Call):
            q, _ = m.qualified_name(base.func, scope, order)
            return q == "tensorflow.shape"
        return False
    if isinstance(expr, cst.Name):
        exprs = m.reaching_exprs(expr, scope, order)
        if exprs and all(is_per_replica_batch(m, e, sc, od, _depth + 1) for e, sc, od in exprs):
            return True
    return per_replica_size(m, expr, scope, order) is not None


# ------------------------------------------------------------------ per-replica batch sizes
# What makes a value a per-replica batch size is its story, never its name: it comes from
# ``input_context.get_per_replica_batch_size(...)``, it is ``<global> // num_replicas_in_sync``,
# or the module multiplies that same value by ``<strategy>.num_replicas_in_sync`` to make the
# global batch (``GLOBAL = BATCH * strategy.num_replicas_in_sync``).

def _unwrap(m: Module, e: cst.BaseExpression, scope: Scope, order: int) -> cst.BaseExpression:
    """``int(x)`` / ``float(x)`` / ``tf.cast(x, ...)`` -> ``x``."""
    for _ in range(5):
        if not isinstance(e, cst.Call) or not e.args or e.args[0].star or e.args[0].keyword is not None:
            return e
        q, _ = m.qualified_name(e.func, scope, order)
        if not (q in PASS_THROUGH or _builtin(m, e, scope, order, "float", "int")):
            return e
        e = e.args[0].value
    return e


def value_identity(m: Module, expr: cst.BaseExpression, scope: Scope, order: int,
                   _depth: int = 0) -> Optional[frozenset]:
    """Which value ``expr`` holds, as the set of places that make it (``Module.origin_exprs``):
    two expressions with the same identity read the same value (``BATCH`` read twice, ``args.bs``
    of the same ``args``).  None when the value cannot be followed."""
    if _depth > 6:
        return None
    origins = m.origin_exprs(_unwrap(m, expr, scope, order), scope, order)
    if origins is None:
        origins = _origins_to_parameters(m, _unwrap(m, expr, scope, order), scope, order)
    if not origins:
        return None
    keys: set = set()
    for e, sc, od in origins:
        if sc is None:  # a parameter whose arguments cannot be seen: the parameter is the origin
            keys.add(e)
            continue
        inner = _unwrap(m, e, sc, od)
        if inner is not e:
            sub = value_identity(m, inner, sc, od, _depth + 1)
            if sub is None:
                return None
            keys |= sub
        elif isinstance(e, cst.Attribute):
            base = value_identity(m, e.value, sc, od, _depth + 1)
            if base is None:
                return None
            keys.add((base, e.attr.value))
        elif isinstance(e, cst.Subscript) and _literal_key(e) is not None:
            # conf["batch_size"]: the same entry of the same dict read twice is one value
            base = value_identity(m, e.value, sc, od, _depth + 1)
            if base is None:
                return None
            keys.add((base, "[]", _literal_key(e)))
        else:
            keys.add(id(e))
    return frozenset(keys)


def _literal_key(e: cst.Subscript) -> Optional[object]:
    """The literal string or integer of ``x["k"]`` / ``x[0]``, else None."""
    if len(e.slice) != 1 or not isinstance(e.slice[0].slice, cst.Index):
        return None
    k = e.slice[0].slice.value
    if isinstance(k, cst.SimpleString):
        return k.evaluated_value
    if isinstance(k, cst.Integer):
        return int(k.value, 0)
    return None


def _origins_to_parameters(m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[list]:
    """``Module.origin_exprs`` that stops at a parameter whose callers cannot be seen (a function
    handed to unknown code, called from another program): that parameter is an origin, as
    (("param", id(binding)), None, 0); its reads are one value."""
    out: list = []
    work = [(expr, scope, order, 0)]
    while work:
        e, s, o, depth = work.pop()
        if depth > 12 or len(out) > 50:
            return None
        if isinstance(e, cst.Name) and e.value not in ("None", "True", "False"):
            bs = m.lookup(e.value, s, o)
            if not bs:
                return None
            for b in bs:
                if b.kind == "param":
                    args = m.values.param_args(b)
                    if args is None:
                        out.append((("param", id(b)), None, 0))
                    else:
                        work.extend((x, xs, xo, depth + 1) for x, xs, xo, _site in args)
                elif b.kind in ("assign", "annassign", "walrus") and b.value is not None and not b.path:
                    work.append((b.value, b.scope, b.order, depth + 1))
                else:
                    return None
            continue
        if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name):
            bs = m.self_attr_bindings(e, s)  # self.batch_size set from a parameter in __init__
            if bs and all(b.value is not None and not b.path for b in bs):
                work.extend((b.value, b.scope, b.order, depth + 1) for b in bs)
                continue
        out.append((e, s, o))
    return out


def _replica_products(m: Module) -> list[tuple[frozenset, cst.BaseExpression, Optional[str]]]:
    """Every ``a * <x>.num_replicas_in_sync`` of the module (in assignments, returns and call
    arguments): (identity of ``a``, the product, the name it is assigned to)."""
    memo = m.rule_memo.setdefault("replica_products", {})
    if "all" in memo:
        return memo["all"]
    if "num_replicas_in_sync" not in m.source:  # mentions_replicas follows this module's names only
        memo["all"] = []
        return []
    places: list[tuple[cst.BaseExpression, Scope, int, Optional[str]]] = []
    for s in [m.scope] + [f.scope for f in m.functions] + [c.scope for c in m.classes]:
        for bs in s.bindings.values():
            for b in bs:
                if b.value is not None and b.kind in ("assign", "annassign", "walrus"):
                    places.append((b.value, b.scope, b.order, None if b.path else b.name))
                elif b.kind == "aug" and isinstance(b.node, cst.AugAssign):
                    places.append((b.node.value, b.scope, b.order, None))
    for target, value, sc, od in m.attr_assigns:
        places.append((value, sc, od, m.code(target)))
    for f in m.functions:
        for e, od in f.returns:
            places.append((e, f.scope, od, None))
    for cs in m.calls:
        for a in cs.node.args:
            places.append((a.value, cs.scope, cs.order, None))
    out: list = []
    seen: set[int] = set()
    visited: set[int] = set()  # a subtree is walked once, from the first place that holds it
    # places whose whole value is a product first, so that the product keeps the name it is assigned to
    places.sort(key=lambda p: not (isinstance(p[0], cst.BinaryOperation) and isinstance(p[0].operator, cst.Multiply)))
    for root, sc, od, name in places:
        work: list[cst.CSTNode] = [root]
        while work:
            n = work.pop()
            if isinstance(n, (cst.Lambda, cst.FunctionDef)) or id(n) in visited:
                continue
            visited.add(id(n))
            work.extend(syntax_children(n))
            if not (isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Multiply)) or id(n) in seen:
                continue
            seen.add(id(n))
            for side, other in ((n.left, n.right), (n.right, n.left)):
                if isinstance(side, (cst.Integer, cst.Float)) or not mentions_replicas(m, other, sc, od):
                    continue
                ident = value_identity(m, side, sc, od)
                if ident:
                    out.append((ident, n, name if n is root else None))
    memo["all"] = out
    return out


def per_replica_size(m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[str]:
    """Why ``expr`` holds a per-replica batch size (for a message), or None when its story does
    not say so."""
    origins = m.origin_exprs(_unwrap(m, expr, scope, order), scope, order)
    if origins:
        why = [_per_replica_origin(m, _unwrap(m, e, sc, od), sc, od) for e, sc, od in origins]
        if all(why):
            return why[0]
    ident = value_identity(m, expr, scope, order)
    if ident:
        for other, product, name in _replica_products(m):
            if ident <= other:
                return f"the global batch is `{name} = {m.code(product)}`" if name else \
                    f"the module multiplies it by the replicas: `{m.code(product)}`"
    return None


def _per_replica_origin(m: Module, e: cst.BaseExpression, scope: Scope, order: int) -> Optional[str]:
    if isinstance(e, cst.Call):
        cm = call_method(e)
        if cm is not None and cm[1] == "get_per_replica_batch_size":
            return "`get_per_replica_batch_size`"
        return None
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.Divide, cst.FloorDivide)) \
            and mentions_replicas(m, e.right, scope, order):
        return f"`{m.code(e)}` divides by the replicas"
    return None


def applies_in_replica(m: Module, fn: FunctionInfo) -> bool:
    """``fn`` applies its gradients itself (``optimizer.apply_gradients`` / ``minimize`` with the
    strategy's default SUM aggregation), rather than returning them for a reduction of its own."""
    applied = False
    for cs in m.calls_within(fn):
        cm = call_method(cs.node)
        if cm is None or cm[1] not in ("apply_gradients", "minimize"):
            continue
        for kw in ("experimental_aggregate_gradients", "skip_gradients_aggregation"):
            v = keyword(cs.node, kw)
            if v is not None and not (isinstance(v, cst.Name) and v.value == ("True" if kw[0] == "e" else "False")):
                return False  # the caller aggregates by hand
        applied = True
    return applied


# ------------------------------------------------------------------ where applied gradients come from
GRADIENT_FUNCTIONS = frozenset({"tensorflow.gradients", "tensorflow.compat.v1.gradients"})
# optimizer methods that compute gradients of their first argument (Keras 2 / tf.compat.v1)
GRADIENT_METHODS = frozenset({"compute_gradients", "get_gradients"})


@dataclass
class Applied:
    """What ``apply_gradients`` gets, traced back: the losses differentiated (``targets``: (gradient
    call site, the loss expression)) and the terms added to the gradients on the way
    (``added``: (expression, scope, order), e.g. ``g + wd * v``)."""

    targets: list
    added: list


def applied_gradients(m: Module, fn: FunctionInfo) -> Optional[Applied]:
    """Follow the gradients that ``fn`` (or a function nested in it) applies with
    ``optimizer.apply_gradients(...)`` back to where they are computed: ``tape.gradient(loss, ...)``,
    ``tf.gradients(loss, ...)`` (TF 1 graph code), ``optimizer.compute_gradients`` /
    ``get_gradients``, through names, tuple unpacking of local helpers' returns (``logits, loss,
    grads = grad(model, x, y)``), ``zip``/``list``, comprehensions over the gradients
    (``[g + wd * v for g, v in zip(grads, variables)]``), arithmetic (``grads * 2``) and
    TensorFlow's own transformations (``tf.clip_by_global_norm(grads, 5.0)``).  Also
    ``optimizer.minimize(loss, ...)``.  None when ``fn`` does not apply gradients itself (see
    :func:`applies_in_replica`)."""
    if not applies_in_replica(m, fn):
        return None
    out = Applied([], [])
    seen: set = set()
    for cs in m.calls_within(fn):
        cm = call_method(cs.node)
        if cm is None:
            continue
        recv, meth = cm
        if meth == "minimize":
            target = arg(cs.node, 0, "loss")
            if target is not None and {v.kind for v in m.infer_at(recv, cs)} == {api.OPTIMIZER}:
                out.targets.append((cs, target))
        elif meth == "apply_gradients":
            gv = arg(cs.node, 0, "grads_and_vars")
            if gv is not None:
                _trace_gradients(m, gv, cs.scope, cs.order, out, seen, 0)
    return out


def _pairs_first(e: cst.BaseExpression) -> cst.BaseExpression:
    """``(g, v)`` -> ``g``: the gradient of a (gradient, variable) pair."""
    if isinstance(e, (cst.Tuple, cst.List)) and len(e.elements) == 2 \
            and not any(isinstance(el, cst.StarredElement) for el in e.elements):
        return e.elements[0].value
    return e


def _trace_gradients(m: Module, e: Optional[cst.BaseExpression], scope: Scope, order: int, out: Applied,
                     seen: set, depth: int) -> bool:
    """Record the gradient computations ``e`` is made of (see :func:`applied_gradients`); True when
    ``e`` holds gradients."""
    if e is None or depth > 25 or (id(e), order) in seen or len(seen) > 400:
        return False
    seen.add((id(e), order))
    rec = lambda x, sc=scope, od=order: _trace_gradients(m, x, sc, od, out, seen, depth + 1)  # noqa: E731
    if isinstance(e, cst.Call):
        if _builtin(m, e, scope, order, "zip", "list", "tuple") and e.args and not e.args[0].star:
            return rec(_pairs_first(e.args[0].value))
        site = (scope.module or m).site_of_call.get(id(e))  # the call may be in another project module
        cm = call_method(e)
        if cm is not None and cm[1] == "gradient" and site is not None:
            if {v.kind for v in m.infer_at(cm[0], site)} <= {api.TAPE} and arg(e, 0, "target") is not None:
                out.targets.append((site, arg(e, 0, "target")))
                return True
            return False
        if cm is not None and cm[1] in GRADIENT_METHODS and arg(e, 0, "loss") is not None and site is not None:
            out.targets.append((site, arg(e, 0, "loss")))
            return True
        q, _ = m.qualified_name(e.func, scope, order)
        if q in GRADIENT_FUNCTIONS and arg(e, 0, "ys") is not None and site is not None:
            out.targets.append((site, arg(e, 0, "ys")))
            return True
        if q.startswith("tensorflow.") and e.args and not e.args[0].star:
            return rec(e.args[0].value)  # tf.clip_by_global_norm(grads, n), tf.identity(g), ...
        fns = m.resolve_function(e.func, scope, order) if not q else []
        if fns:
            found = False
            for f in fns:
                for r, od in f.returns:
                    found = _trace_gradients(m, r, f.scope, od, out, seen, depth + 1) or found
            return found
        # anything else that is handed the gradients passes them on
        # (`replica_ctx.all_reduce("mean", grads)`, a project helper)
        found = False
        for a in e.args:
            if not a.star:
                found = rec(a.value) or found
        return found
    if isinstance(e, cst.Name):
        found = False
        for b in m.lookup(e.value, scope, order):
            if b.path and b.kind in ("assign", "annassign"):
                items = unpacked_items(m, b)
                if items is not None:
                    for x, sc, od, _via in items:
                        found = rec(x, sc, od) or found
                elif isinstance(b.value, cst.Call):  # grads, norm = tf.clip_by_global_norm(grads, 5.0)
                    found = rec(b.value, b.scope, b.order) or found
            elif b.kind in ("assign", "annassign", "walrus") and b.value is not None:
                found = rec(b.value, b.scope, b.order) or found
            elif b.kind in ("for", "comp") and b.value is not None and b.path[:1] in ((), (0,)):
                it = b.value  # for g, v in zip(grads, variables): g is a gradient
                if isinstance(it, cst.Call) and _builtin(m, it, b.scope, b.order, "zip") and it.args:
                    it = it.args[0].value
                found = rec(it, b.scope, b.order) or found
            elif b.kind == "aug" and isinstance(b.node, cst.AugAssign):
                found = rec(b.node.value, b.scope, b.order) or found
        return found
    if isinstance(e, (cst.ListComp, cst.GeneratorExp)):
        comp_orders = [b.order for bs in scope.bindings.values() for b in bs
                       if b.kind == "comp" and b.node is e.for_in]
        return rec(_pairs_first(e.elt), scope, max(comp_orders) if comp_orders else order)
    if isinstance(e, cst.BinaryOperation):
        left, right = rec(e.left), rec(e.right)
        if isinstance(e.operator, (cst.Add, cst.Subtract)) and left != right:
            out.added.append((e.right if left else e.left, scope, order))
        return left or right
    if isinstance(e, (cst.List, cst.Tuple)):
        found = False
        for el in e.elements:
            found = rec(el.value) or found
        return found
    if isinstance(e, cst.Subscript):
        return rec(e.value)
    if isinstance(e, cst.Attribute):
        found = False
        for x, sc, od in _self_attr_exprs(m, e, scope):
            found = rec(x, sc, od) or found
        return found
    return False


def model_variable_terms(m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> list[cst.Name]:
    """Names in ``expr`` that hold a variable of a model or layer: bound by a loop or comprehension
    over ``<x>.trainable_variables`` (also ``weights``, ``variables``...) or over ``zip(grads,
    <x>.trainable_variables)`` in the variable's place (``[g + wd * v for g, v in zip(...)]``)."""
    out = []
    for name in names_read(expr):
        for b in m.lookup(name.value, scope, order):
            if b.kind not in ("for", "comp") or b.value is None:
                continue
            it, path = b.value, b.path
            if isinstance(it, cst.Call) and _builtin(m, it, b.scope, b.order, "zip") and len(path) == 1 \
                    and 0 <= path[0] < len(it.args):
                it, path = it.args[path[0]].value, ()
            if not path and isinstance(it, cst.Attribute) and it.attr.value in api.VARIABLE_LIST_ATTRS:
                out.append(name)
                break
    return out


def differentiated_owner_keys(m: Module, cs: CallSite) -> set:
    """For ``tape.gradient(loss, <x>.trainable_variables)``: the receiver key of ``<x>`` (the model
    whose variables get the gradients), so that ``<x>.losses`` is known to be its regularization."""
    src = arg(cs.node, 1, "sources")
    if isinstance(src, cst.Attribute) and src.attr.value in api.VARIABLE_LIST_ATTRS:
        key = m.receiver_key(src.value, cs.scope, cs.order)
        return {key} if key is not None else set()
    return set()


def gradient_targets(m: Module, fn: FunctionInfo) -> Iterator[tuple[CallSite, cst.BaseExpression]]:
    """The losses whose gradients ``fn`` applies (see :func:`applied_gradients`): (the gradient
    call site, the loss expression)."""
    got = applied_gradients(m, fn)
    if got is not None:
        yield from got.targets


def replica_fns(m: Module) -> list[FunctionInfo]:
    table = m.replica_functions()
    return [m.replica_fn_infos[k] for k in table]


# ------------------------------------------------------------------ Keras loss objects
def loss_object(m: Module, call: cst.Call, scope: Scope, order: int) -> Optional[Value]:
    """The Keras loss object a call like ``loss_fn(y, p)`` invokes, when certain."""
    if not isinstance(call.func, (cst.Name, cst.Attribute)):
        return None
    vals = m.infer(call.func, scope, order)
    if len(vals) != 1 or vals[0].kind != api.LOSS or not isinstance(vals[0].origin, cst.Call):
        return None
    return vals[0]


DEFAULT_REDUCTIONS = frozenset({"auto", "sum_over_batch_size"})


def reduction_of(m: Module, v: Value) -> Optional[str]:
    """The reduction a loss object was built with: "default" when not given,
    the lower-cased member/string when literal, None when it cannot be told."""
    call = v.origin
    assert isinstance(call, cst.Call)
    if any(a.star for a in call.args):
        return None
    red = keyword(call, "reduction")
    if red is None:
        for a in call.args:
            if a.keyword is not None:
                continue
            e = a.value
            if isinstance(e, cst.SimpleString) or (isinstance(e, cst.Attribute) and "Reduction" in m.code(e)):
                red = e
                break
            if not (isinstance(e, (cst.Integer, cst.Float)) or
                    (isinstance(e, cst.Name) and e.value in ("True", "False", "None"))):
                return None  # an unknown positional argument may be the reduction
        if red is None:
            return "default"
    if isinstance(red, cst.SimpleString):
        return red.evaluated_value.lower() if isinstance(red.evaluated_value, str) else None
    if isinstance(red, cst.Name) and red.value == "None":
        return "none"
    if isinstance(red, cst.Attribute):
        return red.attr.value.lower()
    return None


def default_reduction(m: Module, v: Value) -> bool:
    r = reduction_of(m, v)
    return r == "default" or r in DEFAULT_REDUCTIONS


# ------------------------------------------------------------------ strategies
from tfpar_lint.semantic import SINGLE_REPLICA, replicated  # noqa: E402,F401  (shared fact)
from tfpar_lint.semantic.walk import syntax_children


def replica_fn_strategies(m: Module, fn: FunctionInfo) -> list[Value]:
    return m.replica_functions().get(id(fn), [])


def run_calls(m: Module, call, _depth: int = 0) -> list:
    """The ``strategy.run(...)`` calls (with their call sites) a PerReplica value comes from: the
    call itself, or the ``strategy.run`` calls returned by the local function (a ``tf.function``
    step) it calls."""
    site = m.site_of_call.get(id(call)) if isinstance(call, cst.Call) else None
    if site is None or _depth > 3:
        return []
    cm = call_method(call)
    if cm is not None and cm[1] in api.RUN_METHODS:
        return [(call, site)]
    out = []
    for fn in m.resolve_function(call.func, site.scope, site.order):
        for expr, _order in fn.returns:
            if isinstance(expr, cst.Call):
                out.extend(run_calls(m, expr, _depth + 1))
    return out
