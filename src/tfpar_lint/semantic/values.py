"""Value inference: what an expression holds (a strategy, a Keras model, a plain or distributed
dataset, a ``tf.Variable``...), following assignments, imports, module-local functions' returns,
parameters (annotations and every local call site), ``self.attr``, ``for`` targets, containers.

Unknown stays unknown: a receiver that cannot be resolved yields ``UNKNOWN`` and rules stay
silent on it.  Inference never recurses without bound: past ``MAX_DEPTH`` nested questions the
answer is ``UNKNOWN``."""
from __future__ import annotations

import threading
from typing import Callable, Iterable, Iterator, Optional, TYPE_CHECKING, Union

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.semantic.model import Binding, CallSite, ClassInfo, FunctionInfo, Scope, UNKNOWN, Value
from tfpar_lint.semantic.nodes import arg, dotted_name, literal_str

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


# Nested questions (an expression's value depends on a binding's, which depends on ...) followed
# at most; deeper chains answer UNKNOWN.  Bounds the Python stack the analysis uses.
MAX_DEPTH = 160
_NESTED = threading.local()  # questions open on this thread, in every module
NONE = Value(api.NONE)


class Inference:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._infer_memo: dict[int, list[Value]] = {}
        self._binding_memo: dict[int, list[Value]] = {}
        self._in_progress: set[int] = set()

    def infer_at(self, expr: Optional[cst.BaseExpression], site: CallSite) -> list[Value]:
        return self.infer(expr, site.scope, site.order, site)

    def infer(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
              site: Optional[CallSite] = None) -> list[Value]:
        """Possible values of ``expr`` (never empty; [UNKNOWN] when unknown)."""
        if expr is None:
            return [UNKNOWN]
        if scope.module is not self.m and scope.module is not None:  # another file's code
            return scope.module.infer(expr, scope, order, site)
        return self._guarded(id(expr), self._infer_memo, lambda: _drop_placeholders(self._infer(expr, scope, order, site)))

    def _guarded(self, key: int, memo: dict[int, list[Value]], compute: Callable[[], list[Value]]) -> list[Value]:
        """``compute()`` once per key (memoised), never while the same question is open (a cycle)
        nor deeper than MAX_DEPTH nested questions: those answer UNKNOWN, not memoised.  A chain that
        reaches Python's recursion limit first (questions whose paths take many frames each) answers
        UNKNOWN the same way, instead of giving up the whole file."""
        got = memo.get(key)
        if got is not None:
            return got
        # the nesting counts across the project's modules too (each has its own Inference)
        depth = getattr(_NESTED, "n", 0)
        if key in self._in_progress or len(self._in_progress) >= MAX_DEPTH or depth >= MAX_DEPTH:
            return [UNKNOWN]
        self._in_progress.add(key)
        _NESTED.n = depth + 1
        try:
            vals = compute() or [UNKNOWN]
        except RecursionError:
            return [UNKNOWN]
        finally:
            self._in_progress.discard(key)
            _NESTED.n = depth
        memo[key] = vals
        return vals

    def infer_one(self, expr, scope, order, site=None) -> Value:
        """The value when every possibility has the same kind and origin, else UNKNOWN."""
        vals = self.infer(expr, scope, order, site)
        first = vals[0]
        if all(v.kind == first.kind and v.origin is first.origin for v in vals[1:]):
            return first
        return UNKNOWN

    def kinds(self, expr, scope, order) -> set[str]:
        return {v.kind for v in self.infer(expr, scope, order)}

    def _infer(self, expr, scope: Scope, order: int, site) -> list[Value]:
        if isinstance(expr, cst.Name) and expr.value == "None" and not self.m.lookup("None", scope, order):
            return [NONE]
        if isinstance(expr, cst.Name):
            bs = self.m.lookup(expr.value, scope, order)
            if not bs:
                return [UNKNOWN]
            out: list[Value] = []
            for b in bs:
                out.extend(self.binding_values(b))
            return out
        if isinstance(expr, cst.Attribute):
            q, raw = self.m.qualified_name(expr, scope, order)
            if q:
                got = self.project_values(raw)  # models.build with `import models`
                return got if got is not None else [Value(api.API, q, raw_qname=raw)]
            # self.attr inside a method
            fn = scope.func
            if (fn is not None and fn.cls is None and isinstance(expr.value, cst.Name)):
                fn = self._method_of(scope)
            if fn is not None and fn.cls is not None and isinstance(expr.value, cst.Name) \
                    and fn.params and expr.value.value == fn.params[0].name.value:
                attr = expr.attr.value
                if attr in fn.cls.methods:
                    m = fn.cls.methods[attr]
                    return [Value(api.FUNCTION, info=m, origin=m.node)]
                # self.x = ... in a method; else a class attribute (``x = tf.Variable(0)`` in the class body)
                bs = fn.cls.attrs.get(attr) or fn.cls.scope.bindings.get(attr)
                if bs:
                    out = []
                    for b in bs:
                        out.extend(self.binding_values(b))
                    return out
                inherited = self._base_member(fn.cls, attr)  # a method or attribute of a base class here
                return inherited if inherited is not None else [UNKNOWN]
            inst = self._instance_attribute(expr, scope, order)
            if inst is not None:
                return inst
            return self._attribute_of(expr, scope, order)
        if isinstance(expr, cst.Call):
            return self._infer_call(expr, scope, order)
        if isinstance(expr, cst.Lambda):
            info = self.m.function_of_node.get(id(expr))
            return [Value(api.FUNCTION, info=info, origin=expr)] if info else [UNKNOWN]
        if isinstance(expr, cst.Subscript):
            items = self.container_items(expr.value, scope, order, _subscript_key(expr))
            if items is not None:
                out = []
                for e, s, o in items:
                    out.extend(self.infer(e, s, o))
                return out
            base = self.infer(expr.value, scope, order)
            if all(v.kind in (api.ELEMENT, api.DIST_VALUES) for v in base):
                return list(base)
            if all(v.kind in (api.LAYERS, api.VARIABLES) for v in base):
                return [self._element_of(v, expr, None) for v in base]
            return [UNKNOWN]
        if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
            # `strategy or tf.distribute.get_strategy()`: either operand
            return self.infer(expr.left, scope, order) + self.infer(expr.right, scope, order)
        if isinstance(expr, cst.IfExp):  # `a if cond else b`: either branch
            return self.infer(expr.body, scope, order) + self.infer(expr.orelse, scope, order)
        if isinstance(expr, cst.Await):
            return [UNKNOWN]
        return [UNKNOWN]

    def _local_methods(self, func: cst.Attribute, scope: Scope, order: int) -> list[FunctionInfo]:
        """The methods of local classes ``func`` (``self.step``, ``trainer.fit``) certainly denotes."""
        vals = self.infer(func, scope, order)
        if vals and all(v.kind == api.FUNCTION and isinstance(v.info, FunctionInfo) and v.info.cls is not None
                        for v in vals):
            return [v.info for v in vals]
        return []

    def _instance_attribute(self, expr: cst.Attribute, scope: Scope, order: int) -> Optional[list[Value]]:
        """``obj.name`` where ``obj`` is certainly an instance of a local class (``Trainer().fit``,
        ``trainer.step``, ``self.losses.reconstruction``): its method, or what its methods assign
        to ``self.name``.  None when the receiver is anything else or the class does not define
        ``name`` (then the API / variable-list inference applies)."""
        return self._instance_member(self.infer(expr.value, scope, order), expr.attr.value)

    def _instance_member(self, recv: list[Value], name: str) -> Optional[list[Value]]:
        """``_instance_attribute`` for receiver values already known."""
        if not recv or not all(isinstance(v.info, ClassInfo) and v.kind != api.CLASS and isinstance(v.origin, cst.Call)
                               for v in recv):
            return None
        out: list[Value] = []
        for v in recv:
            found = self._class_member(v.info, name)
            if found is None:
                return None
            out.extend(found)
        return out

    def _class_member(self, cls: ClassInfo, name: str, _depth: int = 0) -> Optional[list[Value]]:
        """Method ``name`` of a local class (or of its local bases), or the values its methods
        assign to ``self.name``."""
        if _depth > 8:
            return None
        if name in cls.methods:
            fn = cls.methods[name]
            return [Value(api.FUNCTION, info=fn, origin=fn.node)]
        bs = cls.attrs.get(name)
        if bs:
            out: list[Value] = []
            for b in bs:
                out.extend(self.binding_values(b))
            return out
        for base in cls.bases:
            for v in self.infer(base, cls.scope.parent or self.m.scope, 10**9):
                if v.kind == api.CLASS and isinstance(v.info, ClassInfo) and v.info is not cls:
                    found = self._class_member(v.info, name, _depth + 1)
                    if found is not None:
                        return found
        return None

    def _base_member(self, cls: ClassInfo, name: str, _depth: int = 0) -> Optional[list[Value]]:
        """``name`` defined by a base class of ``cls`` that this module defines (a base named by a
        plain name bound to a class statement here; other bases are not followed, so that a
        ``self.<name>`` question never walks a project's class hierarchy)."""
        if _depth > 8:
            return None
        for base in cls.bases:
            if not isinstance(base, cst.Name):
                continue
            bs = self.m.lookup(base.value, cls.scope.parent or self.m.scope, 10**9)
            if len(bs) != 1 or bs[0].kind != "class" or bs[0].cls is None or bs[0].cls is cls:
                continue
            base_cls = bs[0].cls
            if name in base_cls.methods:
                f = base_cls.methods[name]
                return [Value(api.FUNCTION, info=f, origin=f.node)]
            got = base_cls.attrs.get(name)
            if got:
                out: list[Value] = []
                for b in got:
                    out.extend(self.binding_values(b))
                return out
            deeper = self._base_member(base_cls, name, _depth + 1)
            if deeper is not None:
                return deeper
        return None

    def _method_of(self, scope: Scope) -> Optional[FunctionInfo]:
        """Innermost enclosing method (for ``self`` inside nested functions)."""
        s: Optional[Scope] = scope
        while s is not None:
            if s.func is not None and s.func.cls is not None:
                return s.func
            s = s.parent
        return None

    def created_within(self, node: Optional[cst.CSTNode], fn: FunctionInfo) -> bool:
        if fn.scope.module is not self.m and fn.scope.module is not None:
            return fn.scope.module.created_within(node, fn)
        return self._created_within(node, fn)

    def _created_within(self, node: Optional[cst.CSTNode], fn: FunctionInfo) -> bool:
        site = self.m.site_of_call.get(id(node)) if node is not None else None
        s = site.scope if site is not None else None
        while s is not None:
            if s is fn.scope:
                return True
            s = s.parent
        return False

    def _infer_call(self, call: cst.Call, scope: Scope, order: int) -> list[Value]:
        site = self.m.site_of_call.get(id(call))
        func = call.func
        q, raw = self.m.qualified_name(func, scope, order)
        got = self.project_values(raw) if q else None
        if q and got is None:
            return self._infer_api_call(q, raw, call, scope, order, site)
        if got is not None:  # a function or class of another project module
            return self._call_values(got, call, scope, order, site)
        # builtins and local callables
        if isinstance(func, cst.Name) and not self.m.lookup(func.value, scope, order):
            return self._infer_builtin(func.value, call, scope, order, site)
        if isinstance(func, cst.Attribute):
            methods = self._local_methods(func, scope, order)
            if methods:
                out = []
                for fn in methods:  # self.step(...), trainer.step(...): what the method returns
                    out.extend(self._returns_of(fn, call, site))
                return out
            recv_vals = self.infer(func.value, scope, order)
            out = []
            for rv in recv_vals:
                if rv.kind == api.MODULE:  # models.build(...) with `from . import models`
                    out.extend(self._call_values(self._module_attr(rv, func.attr.value), call, scope, order, site))
                else:
                    out.append(self._infer_method(rv, func.attr.value, call, scope, order, site))
            return out
        return self._call_values(self.infer(func, scope, order), call, scope, order, site)

    def _call_values(self, callee_vals: list[Value], call: cst.Call, scope: Scope, order: int,
                     site: Optional[CallSite]) -> list[Value]:
        """What calling a callee with these possible values gives."""
        out = []
        for cv in callee_vals:
            if cv.kind == api.FUNCTION and cv.info is not None:
                out.extend(self._returns_of(cv.info, call, site))
            elif cv.kind == api.CLASS and cv.info is not None:
                out.append(self._instance_of(cv.info, call, site))
            elif cv.kind == api.API:
                out.extend(self._infer_api_call(cv.qname, cv.raw_qname, call, scope, order, site))
            else:
                out.append(UNKNOWN)
        return out

    def _returns_of(self, fn: FunctionInfo, call: cst.Call, site: Optional[CallSite]) -> list[Value]:
        if not fn.returns:
            return [UNKNOWN]
        out = []
        for expr, order in fn.returns:
            for v in self.infer(expr, fn.scope, order):
                if v.kind != api.UNKNOWN and self.created_within(v.origin, fn):
                    # created by the call: the creation context is the caller's
                    # (a dataset keeps the helper's last method call in its chain: `.batch(n)`)
                    v = Value(v.kind, v.qname, origin=call, site=site, raw_qname=v.raw_qname,
                              info=v.info, source=v if v.kind == api.DATASET else v.source)
                out.append(v)
        return out

    def _instance_of(self, cls: ClassInfo, call: cst.Call, site) -> Value:
        kind = self.class_kind(cls)
        if kind:
            return Value(kind, cls.name, origin=call, site=site, info=cls)
        return Value(api.UNKNOWN, cls.name, origin=call, site=site, info=cls)

    def class_kind(self, cls: ClassInfo, _depth: int = 0) -> Optional[str]:
        """MODEL / LAYER / ... for a local class by its bases."""
        if cls.scope.module is not self.m and cls.scope.module is not None:
            return cls.scope.module.class_kind(cls, _depth)
        if _depth > 8:
            return None
        for base in cls.bases:
            q, _ = self.m.qualified_name(base, cls.scope.parent or self.m.scope, 10**9)
            k = api.class_kind(q) if q else None  # from the API table: every spelling, every release
            if k in (api.MODEL, api.LAYER, api.METRIC, api.OPTIMIZER):
                return k
            if not q:
                for v in self.infer(base, cls.scope.parent or self.m.scope, 10**9):
                    if v.kind == api.CLASS and v.info is not cls:
                        k = self.class_kind(v.info, _depth + 1)
                        if k:
                            return k
        return None

    def _infer_api_call(self, q: str, raw: str, call, scope, order, site) -> list[Value]:
        if q in self.m.strategy_factories:
            return [Value(api.STRATEGY, q, origin=call, site=site, raw_qname=raw)]
        if q in self.m.dataset_distributors:
            return [Value(api.DIST_DATASET, q, origin=call, site=site, raw_qname=raw)]
        if q in api.TF_FUNCTION:
            target = arg(call, 0, "func")
            if target is not None:
                return self.infer(target, scope, order)
            return [UNKNOWN]
        if q == "functools.partial":
            # builder = partial(make_model, 6): calling it runs make_model
            fns = self.m.resolve_function(call, scope, order)
            if fns:
                return [Value(api.FUNCTION, info=fn, origin=fn.node) for fn in fns]
            return [UNKNOWN]
        if q in api.V1_ITERATOR_FACTORIES:
            # tf.compat.v1.data.make_one_shot_iterator(ds): an iterator of ds
            return [Value(api.ITERATOR, origin=call, site=site, source=v) if v.kind == api.DATASET else UNKNOWN
                    for v in self.infer(arg(call, 0, "dataset"), scope, order)]
        if q in api.STRATEGY_GETTERS and site is not None:
            # get_strategy() returns the strategy whose scope is open around the call
            known, maybe = self.m.scope_strategies(site)
            if known and not maybe:
                return list(known)
        kind = api.kind_of_constructor(q)
        if kind is not None:
            return [Value(kind, q, origin=call, site=site, raw_qname=raw)]
        # tf.data.Dataset.from_tensor_slices(...).batch(...) handled via methods
        return [Value(api.UNKNOWN, q, origin=call, site=site, raw_qname=raw)]

    def _infer_builtin(self, name: str, call, scope, order, site) -> list[Value]:
        if name == "iter":
            src = arg(call, 0)
            out = []
            for v in self.infer(src, scope, order):
                if v.kind == api.DATASET:
                    out.append(Value(api.ITERATOR, origin=call, site=site, source=v))
                elif v.kind == api.DIST_DATASET:
                    out.append(Value(api.DIST_ITERATOR, origin=call, site=site, source=v))
                elif v.kind in (api.ITERATOR, api.DIST_ITERATOR):
                    out.append(v)
                else:
                    out.append(UNKNOWN)
            return out
        if name == "next":
            src = arg(call, 0)
            return [self._element_of(v, call, site) for v in self.infer(src, scope, order)]
        if name in ("enumerate", "zip", "list", "tuple", "reversed", "sorted"):
            return [UNKNOWN]
        return [UNKNOWN]

    def _attribute_of(self, expr: cst.Attribute, scope: Scope, order: int) -> list[Value]:
        """``model.trainable_variables`` (the variables of a Keras model or layer), ``layer.kernel``."""
        return self._attribute_of_values(self.infer(expr.value, scope, order), expr.attr.value)

    def _attr_values(self, recv: list[Value], attr: str) -> list[Value]:
        """What ``<recv>.attr`` holds, the receiver's values known: the answer ``_infer`` gives
        for an attribute expression (an instance's member first, then ``_attribute_of``).  Walks
        chains through another module: ``config.settings.strategy``, ``helpers.factory.build``."""
        inst = self._instance_member(recv, attr)
        return inst if inst is not None else self._attribute_of_values(recv, attr)

    def _attribute_of_values(self, recv: list[Value], attr: str) -> list[Value]:
        if attr not in api.VARIABLE_LIST_ATTRS and attr not in api.VARIABLE_ATTRS:
            # an attribute of an instance of a local class: what its methods assign to self.<attr>
            out = []
            for v in recv:
                if v.kind == api.MODULE:
                    out.extend(self._module_attr(v, attr))
                    continue
                cls = v.info if isinstance(v.info, ClassInfo) and v.kind != api.CLASS else None
                if cls is not None and attr in cls.methods:  # stats.ingest: a bound method
                    meth = cls.methods[attr]
                    out.append(Value(api.FUNCTION, info=meth, origin=meth.node))
                    continue
                if attr == "layers" and v.kind == api.MODEL:  # model.layers[0]
                    out.append(Value(api.LAYERS, v.qname, origin=v.origin, site=v.site, raw_qname=v.raw_qname,
                                     source=v))
                    continue
                bs = cls.attrs.get(attr) if cls is not None else None
                if not bs:
                    return [UNKNOWN]
                for b in bs:
                    out.extend(self.binding_values(b))
            return out or [UNKNOWN]
        out = []
        for v in recv:
            if v.kind not in (api.MODEL, api.LAYER) and not (
                    attr in api.VARIABLE_LIST_ATTRS and isinstance(v.info, ClassInfo) and v.kind != api.CLASS
                    and self._tf_module_class(v.info)):
                return [UNKNOWN]
            kind = api.VARIABLES if attr in api.VARIABLE_LIST_ATTRS else api.VARIABLE
            # the variables belong to the object: they share its origin and creation context
            out.append(Value(kind, v.qname, origin=v.origin, site=v.site, raw_qname=v.raw_qname, source=v))
        return out

    def _tf_module_class(self, cls: ClassInfo, _depth: int = 0) -> bool:
        """``cls`` derives from ``tf.Module`` (directly or through local classes): an instance's
        ``trainable_variables`` are the variables it tracks."""
        if _depth > 8:
            return False
        scope = cls.scope.parent or self.m.scope
        for base in cls.bases:
            if self.m.qualified_name(base, scope, 10**9)[0] == "tensorflow.Module":
                return True
            for bv in self.infer(base, scope, 10**9):
                if bv.kind == api.CLASS and isinstance(bv.info, ClassInfo) and bv.info is not cls \
                        and self._tf_module_class(bv.info, _depth + 1):
                    return True
        return False

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
        if v.kind in (api.ELEMENT, api.DIST_VALUES):
            return v
        return UNKNOWN

    def _infer_method(self, rv: Value, meth: str, call, scope, order, site) -> Value:
        k = rv.kind
        if k == api.API:
            # e.g. tf.data.Dataset.from_tensor_slices reached through an alias of a class
            vals = self._infer_api_call(f"{rv.qname}.{meth}", f"{rv.raw_qname}.{meth}", call, scope, order, site)
            return vals[0]
        if k == api.STRATEGY:
            if meth in api.DISTRIBUTE_DATASET_METHODS or meth in api.DISTRIBUTE_FN_METHODS:
                return Value(api.DIST_DATASET, origin=call, site=site, source=rv)
            if meth in api.DISTRIBUTE_VALUES_METHODS:
                return Value(api.DIST_VALUES, origin=call, site=site, source=rv)
            if meth in api.RUN_METHODS:
                return Value(api.PER_REPLICA, origin=call, site=site, source=rv)
            return UNKNOWN
        if k == api.DATASET:
            if meth in api.DATASET_METHODS:
                return Value(api.DATASET, origin=call, site=site, source=rv)
            if meth in ("__iter__",) or meth in api.V1_ITERATOR_METHODS:
                return Value(api.ITERATOR, origin=call, site=site, source=rv)
            if meth in ("as_numpy_iterator",):
                return Value(api.ITERATOR, origin=call, site=site, source=rv)
            if meth in ("get_single_element",):
                return Value(api.ELEMENT, origin=call, site=site, source=rv)
            return UNKNOWN
        if k == api.ITERATOR and meth in ("get_next", "__next__", "next"):
            return Value(api.ELEMENT, origin=call, site=site, source=rv)
        if k == api.DIST_DATASET and meth == "__iter__":
            return Value(api.DIST_ITERATOR, origin=call, site=site, source=rv)
        if k == api.DIST_ITERATOR and meth in ("get_next", "__next__"):
            return Value(api.DIST_VALUES, origin=call, site=site, source=rv)
        if k == api.GENERATOR and meth in ("split",):
            return Value(api.UNKNOWN)
        return UNKNOWN

    @staticmethod
    def _module_attr(v: Value, attr: str) -> list[Value]:
        """The values of ``attr`` in the project module ``v`` stands for."""
        other = v.info
        bs = other.lookup(attr, other.scope, 10**9)
        if not bs:
            return [UNKNOWN]
        out: list[Value] = []
        for b in bs:
            out.extend(other.binding_values(b))
        return out

    def project_values(self, raw: str) -> Optional[list[Value]]:
        """Values of an imported name that lives in another module of the project
        (``models.build``, ``.steps.train_step``); None when it is not the project's."""
        project = self.m.project
        if project is None or not raw:
            return None
        if project.unknown_without_parse(self.m, raw):  # its summary answers (BATCH = 64): no parse
            return [UNKNOWN]
        got = project.resolve(self.m, raw)
        if got is None:
            return None
        other, rest = got
        module = Value(api.MODULE, other.path, info=other)
        if not rest:
            return [module]
        vals = self._module_attr(module, rest[0])
        for attr in rest[1:]:  # pkg.mod.obj.attr: the chain, member by member
            if all(v.kind == api.UNKNOWN and v.info is None for v in vals):
                return [UNKNOWN]
            vals = self._attr_values(vals, attr)
        return vals

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
                return None
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
            # self.buffers = [tf.Variable(...) for ...] set in another method
            assigned = self._self_attr_bindings(expr, scope)
            if not assigned:
                return None
            out = []
            for b in assigned:
                items = self.container_items(b.value, b.scope, b.order, key, _depth + 1)
                if items is None:
                    return None
                out.extend(items)
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

    def _self_attr_bindings(self, expr: cst.Attribute, scope: Scope) -> list[Binding]:
        """``self.<name>`` inside a method: the class's ``self.<name> = value`` bindings (with values)."""
        fn = self._method_of(scope)
        if fn is None or not fn.params or not isinstance(expr.value, cst.Name) \
                or fn.params[0].name.value != expr.value.value:
            return []
        bs = fn.cls.attrs.get(expr.attr.value) or []
        return bs if bs and all(b.value is not None for b in bs) else []

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

    def binding_values(self, b: Binding) -> list[Value]:
        if b.scope.module is not self.m and b.scope.module is not None:
            return b.scope.module.binding_values(b)
        return self._guarded(id(b), self._binding_memo, lambda: self._binding_values(b))

    def _binding_values(self, b: Binding) -> list[Value]:
        k = b.kind
        if k == "import":
            got = self.project_values(b.qname)
            if got is not None:
                return got
            if not b.qname or b.qname.startswith("."):
                return [UNKNOWN]
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
                vals = [self._unpack(v, b) for v in vals]
            return vals
        if k in ("for", "comp"):
            it = b.value
            builtin = it.func.value if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) \
                and it.func.value in ("enumerate", "zip") and not self.m.lookup(it.func.value, b.scope, b.order) \
                else None
            if builtin == "enumerate":  # for i, x in enumerate(xs)
                if b.path[:1] == (1,) and len(b.path) == 1:
                    return self.elements(arg(it, 0), b.scope, b.order, b.node, None)
                return [UNKNOWN]
            if builtin == "zip":  # for g, v in zip(grads, model.trainable_variables)
                if len(b.path) == 1 and 0 <= b.path[0] < len(it.args) and not it.args[b.path[0]].star:
                    return self.elements(it.args[b.path[0]].value, b.scope, b.order, b.node, None)
                return [UNKNOWN]
            if b.path:
                return [UNKNOWN] if self.container_items(it, b.scope, b.order) is not None else \
                    [self._unpack(self._element_of(v, b.node, None), b) for v in self.infer(it, b.scope, b.order)]
            # for ds in [train_ds, eval_ds] / datasets.values() / model.trainable_variables / a dataset
            return self.elements(it, b.scope, b.order, b.node, None)
        if k == "with":
            return self.infer(b.value, b.scope, b.order)
        if k == "param":
            return self._param_values(b)
        return [UNKNOWN]

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

    def _unpack(self, v: Value, b: Binding) -> Value:
        if v.kind in (api.ELEMENT, api.DIST_VALUES):
            return v
        if v.kind == api.PER_REPLICA:
            # a, b = strategy.run(fn) where fn returns a tuple: each item is per-replica too
            return Value(api.PER_REPLICA, v.qname, origin=v.origin, site=v.site, raw_qname=v.raw_qname,
                         source=v.source)
        return UNKNOWN

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
        ann = self._from_annotation(b.annotation, fn.parent if fn else b.scope)
        if ann and ann[0].kind != api.UNKNOWN:
            return ann
        args = self.param_args(b)
        if args is None:
            return [UNKNOWN]
        out: list[Value] = []
        for e, scope, order, site in args:
            out.extend(self.infer(e, scope, order, site))
        return out or [UNKNOWN]

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

    def keras_flavor(self, v: Value) -> str:
        """Which Keras created ``v`` (an API-created object or an instance of a local subclass):
        "tf_keras" (Keras 2: ``tf_keras``, or ``tf.keras`` when this module sets
        ``TF_USE_LEGACY_KERAS=1``), "keras" (Keras 3: ``import keras``, or ``tf.keras`` when the
        targeted TensorFlow is 2.16 or later: :mod:`tfpar_lint.versions`), or "" when it is not a
        Keras object or cannot be told."""
        raw = v.raw_qname
        if not raw and isinstance(v.info, ClassInfo):
            raw = self._keras_base_raw(v.info)
        if not raw or not (api.canonical(raw) + ".").startswith("keras."):
            return ""
        return versions.flavor(self.m, api.keras_flavor(raw))  # tf.keras / keras by the targeted version

    def _keras_base_raw(self, cls: ClassInfo, _depth: int = 0) -> str:
        if _depth > 8:
            return ""
        for base in cls.bases:
            scope = cls.scope.parent or self.m.scope
            q, raw = self.m.qualified_name(base, scope, 10**9)
            if q and (q + ".").startswith("keras."):
                return raw
            if not q:
                for bv in self.infer(base, scope, 10**9):
                    if bv.kind == api.CLASS and isinstance(bv.info, ClassInfo) and bv.info is not cls:
                        r = self._keras_base_raw(bv.info, _depth + 1)
                        if r:
                            return r
        return ""


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


def _drop_placeholders(vals: list[Value]) -> list[Value]:
    """``x = None ... x = make()``: None is a placeholder until the object is made; uses see the
    object (only when some other value is known)."""
    if len(vals) > 1 and any(v.kind == api.NONE for v in vals) \
            and any(v.kind not in (api.NONE, api.UNKNOWN) for v in vals):
        return [v for v in vals if v.kind != api.NONE]
    return vals
