"""Container values (part of :class:`tfpar_lint.semantic.values.Inference`): the elements of
what an expression iterates over or indexes (lists, tuples, dicts, comprehensions, ``[ds] * n``,
items appended or stored under a key, ``self.attr`` containers, a dataset's elements)."""
from __future__ import annotations

from typing import Optional, TYPE_CHECKING

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CONTAINER, Binding, ClassInfo, Scope, Value, lost
from tfpar_lint.semantic.nodes import arg, literal_str
from tfpar_lint.semantic.parameters import _made_object

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module  # noqa: F401


class ContainerValues:
    """Mixed into :class:`tfpar_lint.semantic.values.Inference` (``self.m`` is the module)."""

    def elements(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int, node, site) -> list[Value]:
        """What iterating ``expr`` yields: a container literal's items, a dataset's elements,
        the variables of ``model.trainable_variables``."""
        items = self.container_items(expr, scope, order)
        if items is not None:
            out = []
            for e, s, o in items:
                out.extend(self.infer(e, s, o))
            return out
        return [self._element_of(v, node, site) for v in self.infer(expr, scope, order)]

    def _element_of(self, v: Value, node, site) -> Value:
        if v.kind == api.VARIABLES:
            return Value(api.VARIABLE, v.qname, origin=v.origin, site=v.site, raw_qname=v.raw_qname, source=v)
        if v.kind == api.LAYERS:  # a layer of a model: its variables are the model's
            return Value(api.LAYER, v.qname, origin=v.origin, site=v.site, raw_qname=v.raw_qname, source=v)
        if v.kind in (api.DATASET, api.ITERATOR):
            return Value(api.ELEMENT, origin=node, site=site, source=v)
        if v.kind in (api.DIST_DATASET, api.DIST_ITERATOR):
            return Value(api.DIST_VALUES, origin=node, site=site, source=v)
        if v.kind in (api.ELEMENT, api.DIST_VALUES, api.BATCH):
            return v
        if v.kind == api.PLAIN_ITERATOR or _made_object(v):
            # drawn from something no distribution API made (next(iter(train_generator)))
            return Value(api.BATCH, origin=node, site=site, source=v)
        return self.m.kinds.item(v, "element")

    def container_items(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
                        key: object = None, _depth: int = 0) -> Optional[list[tuple[cst.BaseExpression, Scope, int]]]:
        """The item expressions of a container literal that ``expr`` holds, as (expr, scope,
        order): ``[a, b]``, ``(a, b)``, ``{"k": a}`` (its values; only the matching one for a
        literal ``key``), ``[a] * n``, ``[a for _ in ...]``, ``d.values()``; through local names.
        None when ``expr`` is not known to hold one."""
        if expr is None or _depth > 20:
            return None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value == "values" and not expr.args and key is None:
            return self.container_items(expr.func.value, scope, order, None, _depth + 1)
        if isinstance(expr, cst.Name):
            reaching = self.m.reaching_exprs(expr, scope, order)
            if not reaching:
                got = self._param_items(expr, scope, order, key, _depth)
                return got if got is not None else self._loop_items(expr, scope, order, key, _depth)
            out: list = []
            for e, s, o in reaching:
                if isinstance(e, cst.Name) and e.value == expr.value:
                    return None
                items = self.container_items(e, s, o, key, _depth + 1)
                if items is None:
                    return None
                out.extend(items)
            if all(isinstance(e, (cst.Dict, cst.List)) for e, _s, _o in reaching):
                out.extend(self._stored_items(expr, scope, order, key))
                if key is None and all(isinstance(e, cst.List) for e, _s, _o in reaching):
                    out.extend(self._appended_items(expr, scope, order))
            return out
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            # self.buffers = [tf.Variable(...) for ...] set in another method; g.steps of an instance
            # of a local class
            assigned = self._self_attr_bindings(expr, scope) or self._instance_attr_bindings(expr, scope, order)
            if not assigned:
                return None
            out = []
            for b in assigned:
                items = self.container_items(b.value, b.scope, b.order, key, _depth + 1)
                if items is None:
                    return None
                out.extend(items)
            if key is None and all(isinstance(b.value, cst.List) for b in assigned) and assigned[0].cls is not None:
                out.extend(self._appended_to_attr(assigned[0].cls, expr.attr.value))  # self.jobs.append(Job(self))
            return out
        if isinstance(expr, cst.Dict):
            out = []
            for el in expr.elements:
                if not isinstance(el, cst.DictElement):
                    return None  # **other
                k = _literal_key(el.key)
                if key is None or k is _NOT_LITERAL or k == key:
                    out.append((el.value, scope, order))
            return out
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            els = expr.elements
            if any(isinstance(el, cst.StarredElement) for el in els):
                return None
            if isinstance(key, int) and not isinstance(expr, cst.Set) and -len(els) <= key < len(els):
                return [(els[key].value, scope, order)]
            return [(el.value, scope, order) for el in els]
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            seq = expr.left if isinstance(expr.left, (cst.List, cst.Tuple)) else expr.right
            if isinstance(seq, (cst.List, cst.Tuple)):
                return self.container_items(seq, scope, order, None, _depth + 1)
            return None
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return [(expr.elt, scope, order)]
        if isinstance(expr, cst.DictComp):
            return [(expr.value, scope, order)]
        return None

    def _loop_items(self, name: cst.Name, scope: Scope, order: int, key: object,
                    _depth: int) -> Optional[list[tuple[cst.BaseExpression, Scope, int]]]:
        """The items of the containers a ``for`` target takes from what it iterates (``for metrics
        in all_metrics:`` / ``for t, metrics in zip(ts, all_metrics):`` where each element is a
        dict literal): None when the target or the elements cannot be told."""
        bs = self.m.lookup(name.value, scope, order)
        if len(bs) != 1 or bs[0].kind not in ("for", "comp") or bs[0].value is None:
            return None
        b = bs[0]
        it = b.value
        if b.path:
            if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "zip"
                    and not self.m.lookup("zip", b.scope, b.order) and len(b.path) == 1
                    and 0 <= b.path[0] < len(it.args) and not it.args[b.path[0]].star):
                return None
            it = it.args[b.path[0]].value
        elements = self.container_items(it, b.scope, b.order, None, _depth + 1)
        if not elements:
            return None
        out: list = []
        for e, s, o in elements:
            items = self.container_items(e, s, o, key, _depth + 1)
            if items is None:
                return None
            out.extend(items)
        return out

    def _param_items(self, name: cst.Name, scope: Scope, order: int, key: object,
                     _depth: int) -> Optional[list[tuple[cst.BaseExpression, Scope, int]]]:
        """The items of the containers every caller passes to the parameter ``name`` holds
        (``Agent(self.steps)`` with ``self.steps = [f, g]``); None when some caller cannot be seen
        or passes something else."""
        bs = self.m.lookup(name.value, scope, order)
        if len(bs) != 1 or bs[0].kind != "param":
            return None
        args = self.param_args(bs[0])
        if not args:
            return None
        out: list = []
        for e, s, o, _site in args:
            if e is None or (isinstance(e, cst.Name) and e.value == "None"):
                continue
            items = self.container_items(e, s, o, key, _depth + 1)
            if items is None:
                return None
            out.extend(items)
        return out or None

    def _self_attr_bindings(self, expr: cst.Attribute, scope: Scope) -> list[Binding]:
        """``self.<name>`` inside a method: the class's ``self.<name> = value`` bindings (with values)."""
        fn = self._method_of(scope)
        if fn is None or not fn.params or not isinstance(expr.value, cst.Name) \
                or fn.params[0].name.value != expr.value.value:
            return []
        bs = self.live_attr_bindings(fn.cls.attrs.get(expr.attr.value) or [], scope)
        return bs if bs and all(b.value is not None for b in bs) else []

    def _instance_attr_bindings(self, expr: cst.Attribute, scope: Scope, order: int) -> list[Binding]:
        """``obj.<name>`` where ``obj`` is certainly an instance of a local class: the class's
        ``self.<name> = value`` bindings (with values)."""
        recv = self.infer(expr.value, scope, order)
        if not recv or not all(isinstance(v.info, ClassInfo) and v.kind != api.CLASS and v.origin is not None
                               for v in recv):
            return []
        out: list[Binding] = []
        for v in recv:
            bs = self.live_attr_bindings(v.info.attrs.get(expr.attr.value) or [])
            if not bs or any(b.value is None for b in bs):
                return []
            out += [b for b in bs if b not in out]
        return out

    def _appended_to_attr(self, cls, attr: str) -> list:
        """``self.<attr>.append(x)`` (``insert``, ``extend`` of a literal) in the methods of ``cls``:
        the items added."""
        out = []
        for meth in cls.methods.values():
            if not meth.params:
                continue
            me = meth.params[0].name.value
            for cs in meth.calls:
                f = cs.node.func
                if not (isinstance(f, cst.Attribute) and f.attr.value in ("append", "insert", "extend")
                        and isinstance(f.value, cst.Attribute) and f.value.attr.value == attr
                        and isinstance(f.value.value, cst.Name) and f.value.value.value == me):
                    continue
                item = arg(cs.node, 1 if f.attr.value == "insert" else 0)
                if item is None:
                    continue
                if f.attr.value == "extend":
                    out.extend(self.container_items(item, cs.scope, cs.order) or ())
                else:
                    out.append((item, cs.scope, cs.order))
        return out

    def _appended_items(self, name: cst.Name, scope: Scope, order: int) -> list:
        """``workers = []; workers.append(Worker(...))`` (and ``insert``, ``extend`` of a literal)
        before ``order``, on the list ``name`` holds: the items added."""
        bound = {id(b) for b in self.m.lookup(name.value, scope, order)}
        out = []
        for cs in self.m.calls:
            f = cs.node.func
            if cs.order >= order or not isinstance(f, cst.Attribute) or not isinstance(f.value, cst.Name) \
                    or f.value.value != name.value or f.attr.value not in ("append", "insert", "extend"):
                continue
            if {id(b) for b in self.m.lookup(name.value, cs.scope, cs.order)} != bound:
                continue
            item = arg(cs.node, 1 if f.attr.value == "insert" else 0)
            if item is None:
                continue
            if f.attr.value == "extend":
                items = self.container_items(item, cs.scope, cs.order)
                out.extend(items or ())
            else:
                out.append((item, cs.scope, cs.order))
        return out

    def _stored_items(self, name: cst.Name, scope: Scope, order: int, key: object) -> list:
        """``d[k] = v`` stores into the dict / list that ``name`` holds, made before ``order``
        (``losses = {}; losses["pixel"] = ...``): their values (the matching one for a literal key)."""
        bound = {id(b) for b in self.m.lookup(name.value, scope, order)}
        out = []
        for st in self.m.stores:
            t = st.target
            if st.deleted or st.value is None or st.order >= order or not isinstance(t.value, cst.Name) \
                    or t.value.value != name.value:
                continue
            if {id(b) for b in self.m.lookup(name.value, st.scope, st.order)} != bound:
                continue
            k = _subscript_key(t)
            if key is None or k is None or k == key:
                out.append((st.value, st.scope, st.order))
        return out

    def _element_values(self, value: cst.BaseExpression, scope: Scope, order: int,
                        index: int, target: Optional[cst.Name] = None) -> Optional[list[Value]]:
        """Element ``index`` of a tuple being unpacked: ``a, b = x, y``, or ``a, b = f()`` where
        every ``return`` of the local function ``f`` is a tuple literal.  None otherwise.
        (Two elements of one call stay distinct objects: an element ``f`` creates is, like
        :meth:`_returns_of`'s values, created at the call, and takes the unpacking ``target``
        name as its origin.)"""
        def element(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
            if not isinstance(expr, (cst.Tuple, cst.List)) or index >= len(expr.elements):
                return None
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                return None
            return expr.elements[index].value

        if isinstance(value, (cst.Tuple, cst.List)):
            el = element(value)
            return None if el is None else self.infer(el, scope, order)
        if not isinstance(value, cst.Call):
            return None
        fns = self.m.resolve_function(value.func, scope, order)
        if not fns or any(not fn.returns for fn in fns):
            return None
        site = self.m.site_of_call.get(id(value))
        out: list[Value] = []
        for fn in fns:
            for expr, ret_order in fn.returns:
                el = element(expr)
                if el is None:
                    return None
                for v in self.infer(el, fn.scope, ret_order):
                    if target is not None and site is not None and v.kind != api.UNKNOWN \
                            and self.created_within(v.origin, fn):
                        v = Value(v.kind, v.qname, origin=target, site=site, raw_qname=v.raw_qname,
                                  info=v.info, source=v.source)
                    out.append(v)
        return out


_NOT_LITERAL = object()


def _literal_key(expr: Optional[cst.BaseExpression]) -> object:
    """The value of a literal dict key or index (str or int), else ``_NOT_LITERAL``."""
    if isinstance(expr, cst.SimpleString):
        v = literal_str(expr)
        return v if v is not None else _NOT_LITERAL
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) \
            and isinstance(expr.expression, cst.Integer):
        return -int(expr.expression.value, 0)
    return _NOT_LITERAL


def _subscript_key(expr: cst.Subscript) -> object:
    """``x["train"]`` -> "train"; ``x[0]`` -> 0; anything else (slices, names) -> None."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    k = _literal_key(expr.slice[0].slice.value)
    return None if k is _NOT_LITERAL else k
