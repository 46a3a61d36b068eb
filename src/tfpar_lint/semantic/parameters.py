"""Binding and parameter values (part of :class:`tfpar_lint.semantic.values.Inference`): what a
binding holds (an assignment, an unpacked item, a ``for`` target, an import, an annotation) and what
a parameter receives (its default, the arguments of every call site, the APIs that call a function)."""
from __future__ import annotations

from typing import Optional, TYPE_CHECKING

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import (CONTAINER, PARAMETER, UNBOUND, Binding, CallSite, ClassInfo, FunctionInfo,
                                        Scope, UNKNOWN, Value, lost)
from tfpar_lint.semantic.kinds import Kinds, Parts
from tfpar_lint.semantic.nodes import arg, dotted_name
from tfpar_lint.semantic.records import field_values, is_record

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module  # noqa: F401


class BindingValues:
    """Mixed into :class:`tfpar_lint.semantic.values.Inference` (``self.m`` is the module)."""

    def binding_values(self, b: Binding) -> list[Value]:
        if b.scope.module is not self.m and b.scope.module is not None:
            return b.scope.module.binding_values(b)
        uses = self.m.kinds
        if not uses.ready():
            uses.build()
        return uses.refine(self._guarded(id(b), self._binding_memo, lambda: self._binding_values(b)))

    def _binding_values(self, b: Binding) -> list[Value]:
        k = b.kind
        if k == "import":
            got = self.project_values(b.qname)
            if got is not None:
                return got
            if not b.qname or b.qname.startswith("."):
                return [lost(UNBOUND)]  # a module of the project that was not read
            q = api.canonical(b.qname)
            return [Value(api.API, q, raw_qname=b.qname, origin=b.node)]
        if k == "def":
            return [Value(api.FUNCTION, info=b.func, origin=b.node)]
        if k == "class":
            return [Value(api.CLASS, b.cls.name if b.cls else "", info=b.cls, origin=b.node)]
        if k in ("assign", "annassign", "walrus"):
            if b.value is None:
                return self._from_annotation(b.annotation, b.scope)
            if len(b.path) == 1 and b.path[0] >= 0:
                elems = self._element_values(b.value, b.scope, b.order, b.path[0], _unpack_target(b))
                if elems is not None:
                    return elems
            vals = self.infer(b.value, b.scope, b.order)
            if b.path:
                out = []
                for v in vals:  # strategy, hosts = settings (a named tuple): its fields
                    got = field_values(self.m, v, b.path[0]) if len(b.path) == 1 and is_record(v) else None
                    out.extend(got if got is not None else [self._unpack(v, b)])
                vals = out
            return vals
        if k in ("for", "comp"):
            it = b.value
            builtin = it.func.value if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) \
                and it.func.value in ("enumerate", "zip") and not self.m.lookup(it.func.value, b.scope, b.order) \
                else None
            if builtin == "enumerate":  # for i, x in enumerate(xs); for i, (x, y) in enumerate(ds)
                if b.path[:1] == (1,):
                    els = self.elements(arg(it, 0), b.scope, b.order, b.node, None)
                    return els if len(b.path) == 1 else [self._unpack(v, b) for v in els]
                return [lost(CONTAINER)]
            if b.path and isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) \
                    and it.func.attr.value == "items" and not it.args:
                # for name, ds in datasets.items(): the dict's values (its keys are not followed)
                items = self.container_items(it.func.value, b.scope, b.order)
                if items is not None and b.path[0] == 1:
                    els = [v for e, s, o in items for v in self.infer(e, s, o)]
                    return els if len(b.path) == 1 else [self._unpack(v, b) for v in els]
            if builtin == "zip":  # for g, v in zip(grads, model.trainable_variables)
                if b.path and 0 <= b.path[0] < len(it.args) and not it.args[b.path[0]].star:
                    els = self.elements(it.args[b.path[0]].value, b.scope, b.order, b.node, None)
                    return els if len(b.path) == 1 else [self._unpack(v, b) for v in els]
                return [lost(CONTAINER)]
            if b.path:
                return [lost(CONTAINER)] if self.container_items(it, b.scope, b.order) is not None else \
                    [self._unpack(self._element_of(v, b.node, None), b) for v in self.infer(it, b.scope, b.order)]
            # for ds in [train_ds, eval_ds] / datasets.values() / model.trainable_variables / a dataset
            return self.elements(it, b.scope, b.order, b.node, None)
        if k == "with":
            return self.infer(b.value, b.scope, b.order)
        if k == "param":
            return self._param_values(b)
        return [UNKNOWN]

    def _unpack(self, v: Value, b: Binding) -> Value:
        if v.kind in (api.ELEMENT, api.DIST_VALUES, api.BATCH):
            return v
        if isinstance(v.info, Parts) and b.path:  # (train, test), info = tfds.load(..., with_info=True)
            for i in b.path:
                got = v.info.item(i) if isinstance(v.info, Parts) else None
                if got is None:
                    return self.m.kinds.item(v, b.path)
                v = got
            return v
        if v.kind == api.PER_REPLICA:
            # a, b = strategy.run(fn) where fn returns a tuple: each item is per-replica too
            return Value(api.PER_REPLICA, v.qname, origin=v.origin, site=v.site, raw_qname=v.raw_qname,
                         source=v.source)
        if v.kind == api.UNKNOWN and v.origin is not None and isinstance(v.origin, cst.Call):
            # one item of what an unknown call made (``strategy, hw = detect()``): an object of its
            # own, made at that call, named by its target (its uses may tell its kind)
            target = _target_name(b)
            if target is not None:
                return Value(api.UNKNOWN, v.qname, origin=target, site=v.site, raw_qname=v.raw_qname)
        return self.m.kinds.item(v, b.path)

    def _from_annotation(self, ann: Optional[cst.BaseExpression], scope: Scope) -> list[Value]:
        if ann is None:
            return [UNKNOWN]
        if isinstance(ann, cst.SimpleString):
            return [UNKNOWN]
        q, raw = self.m.qualified_name(ann, scope, 10**9)
        if not q:
            return [UNKNOWN]
        if q in api.STRATEGY_CLASSES:
            return [Value(api.STRATEGY, q, raw_qname=raw)]
        if q in api.MODEL_BASES:
            return [Value(api.MODEL, q, raw_qname=raw)]
        if q in ("tensorflow.data.Dataset",):
            return [Value(api.DATASET, q, raw_qname=raw)]
        if q in ("tensorflow.distribute.DistributedDataset",):
            return [Value(api.DIST_DATASET, q, raw_qname=raw)]
        if q in ("tensorflow.distribute.InputContext",):
            return [Value(api.INPUT_CONTEXT, q, raw_qname=raw)]
        if q in ("tensorflow.Variable",):
            return [Value(api.VARIABLE, q, raw_qname=raw)]
        return [UNKNOWN]

    def _param_values(self, b: Binding) -> list[Value]:
        fn = b.func
        args = self.param_args(b)
        if args is None:
            # no caller seen (or not all): the annotation tells the kind of what they pass
            # (``strategy: tf.distribute.Strategy``), an object of the parameter's own; the
            # arguments seen, when every caller is, are what it holds (``model: Model`` does not
            # replace the caller's model)
            ann = self._from_annotation(b.annotation, fn.parent if fn else b.scope)
            if ann and ann[0].kind != api.UNKNOWN:
                return [Value(v.kind, v.qname, origin=b.node, raw_qname=v.raw_qname) for v in ann]
        if args is None and fn is not None and fn.cls is not None and b.name in api.KERAS_HOST_DATA_METHODS.get(fn.name, ()) \
                and self.class_kind(fn.cls) == api.MODEL:
            # x, y of an override of a Keras model's train_on_batch...: the caller's host data, whole
            return [Value(api.BATCH, origin=b.node)]
        if args is None:
            # some caller cannot be seen: an object of its own (its uses may tell its kind), or
            # the default, made once where the function is defined, on the path where the caller
            # leaves it out
            out = [Value(api.UNKNOWN, origin=b.node)]
            if isinstance(b.node, cst.Param) and b.node.default is not None and fn is not None \
                    and not b.node.star:
                out.extend(v for v in self.infer(b.node.default, fn.parent, fn.order)
                           if v.kind not in (api.UNKNOWN, api.NONE))
            return out
        out: list[Value] = []
        for e, scope, order, site in args:
            out.extend(self.infer(e, scope, order, site))
        return out or [lost(PARAMETER)]

    def keyword_values(self, expr: cst.BaseExpression, key: object, scope: Scope, order: int) -> Optional[list[Value]]:
        """``kwargs["model"]`` / ``kwargs.get("model")`` where ``kwargs`` is a function's ``**``
        parameter: the values every caller passes as ``model=``; None when ``expr`` is not such a
        parameter, ``key`` is not a literal, or some caller cannot be seen (or hands a ``**`` dict)."""
        if not isinstance(expr, cst.Name) or not isinstance(key, str):
            return None
        bs = self.m.lookup(expr.value, scope, order)
        if len(bs) != 1 or bs[0].kind != "param" or not isinstance(bs[0].node, cst.Param) \
                or bs[0].node.star != "**" or bs[0].func is None:
            return None
        fn = bs[0].func
        callers = self.m.callers(fn)
        if not callers or self.m.is_passed_around(fn):
            return None
        out: list[Value] = []
        for cs in callers:
            if any(a.star == "**" for a in cs.node.args):
                return None
            got = next((a.value for a in cs.node.args if a.keyword is not None and a.keyword.value == key), None)
            if got is not None:
                out.extend(self.infer(got, cs.scope, cs.order, cs))
        return out or None

    def param_args(self, b: Binding) -> Optional[list[tuple[cst.BaseExpression, Scope, int, Optional[CallSite]]]]:
        """The expressions a parameter receives, as (expr, scope, order, call site): the
        arguments of every local call and of every API call that runs the function
        (``strategy.run(f, args=...)``, ``Thread(target=f, args=...)``), or the default.  None
        when some caller cannot be seen (the function is handed to unknown code, ``*args``)."""
        fn = b.func
        if fn is None or b.kind != "param":
            return None
        idx = next((i for i, p in enumerate(fn.params) if p is b.node), None)
        if idx is None or b.node.star:  # *args / **kwargs
            return None
        bound = fn.cls is not None and not self._is_static(fn)
        offset = 1 if bound else 0
        callers = self.m.callers(fn)
        indirect = self.m.indirect_calls(fn)
        if not callers and not indirect:
            return None
        # every place the function is handed on must be a call whose arguments we see
        handed = {id(ic.via) for ic in indirect}
        if any(id(r) not in handed for r in self.m.passing_refs(fn)):
            return None
        default = (b.node.default, fn.parent, fn.order, None)
        out: list = []
        for cs in callers:
            pos = idx - offset
            a = arg(cs.node, pos if pos >= 0 else None, b.name)
            if a is None:
                if any(x.star for x in cs.node.args) or b.node.default is None:
                    return None
                out.append(default)
            else:
                out.append((a, cs.scope, cs.order, cs))
        for ic in indirect:
            if ic.args is None or ic.kwargs is None:
                return None
            # a bound method (``self.step``) gets ``self`` from the reference
            pos = idx - (1 if bound and isinstance(ic.via, cst.Attribute) else 0)
            if 0 <= pos < len(ic.args):
                if ic.args[pos] is None:
                    return None  # the item map() passes
                out.append((ic.args[pos], ic.site.scope, ic.site.order, ic.site))
            elif b.name in ic.kwargs:
                out.append((ic.kwargs[b.name], ic.site.scope, ic.site.order, ic.site))
            elif b.node.default is not None:
                out.append(default)
            else:
                return None
        return out

    @staticmethod
    def _is_static(fn: FunctionInfo) -> bool:
        for d in fn.decorators:
            if dotted_name(d) in ("staticmethod",):
                return True
        return False


def _unpack_target(b: Binding) -> Optional[cst.Name]:
    """The name ``b`` binds in ``a, b = ...`` (a one-level unpacking of an assignment)."""
    if not isinstance(b.node, cst.Assign) or len(b.path) != 1:
        return None
    for t in b.node.targets:
        tgt = t.target
        if isinstance(tgt, (cst.Tuple, cst.List)) and b.path[0] < len(tgt.elements):
            el = tgt.elements[b.path[0]].value
            if isinstance(el, cst.Name) and el.value == b.name:
                return el
    return None


def _made_object(v: Value) -> bool:
    """``v`` is an object of unknown kind that a call made (see ``Kinds.made_object``)."""
    return Kinds.made_object(v)


def _target_name(b: Binding) -> Optional[cst.Name]:
    """The Name node ``b`` binds inside an unpacking target (``a, (b, c) = ...``), by its path."""
    node = b.node
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.For, cst.CompFor)):
        targets = [node.target]
    for t in targets:
        for i in b.path:
            if isinstance(t, cst.StarredElement):
                t = t.value
            if not isinstance(t, (cst.Tuple, cst.List)) or i < 0 or i >= len(t.elements):
                t = None
                break
            t = t.elements[i].value
        if isinstance(t, cst.StarredElement):
            t = t.value
        if isinstance(t, cst.Name) and t.value == b.name:
            return t
    return None


def _drop_placeholders(vals: list[Value]) -> list[Value]:
    """``x = None ... x = make()``: None is a placeholder until the object is made; uses see the
    object (only when some other value is known)."""
    if len(vals) > 1 and any(v.kind == api.NONE for v in vals) \
            and any(v.kind not in (api.NONE, api.UNKNOWN) for v in vals):
        return [v for v in vals if v.kind != api.NONE]
    return vals
