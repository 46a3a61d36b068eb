"""Value inference: what an expression holds (a strategy, a Keras model, a plain or distributed
dataset, a ``tf.Variable``...), following assignments, imports, module-local functions' returns,
parameters (annotations and every local call site), ``self.attr``, ``for`` targets, containers.

Unknown stays unknown: a receiver that cannot be resolved yields ``UNKNOWN`` and rules stay
silent on it.  Inference never recurses without bound: past ``MAX_DEPTH`` nested questions the
answer is ``UNKNOWN``."""
from __future__ import annotations

import builtins
from dataclasses import replace
from typing import Callable, Optional, TYPE_CHECKING

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import (_NESTED, open_questions,  # noqa: F401  (re-exported)
                                        ClassInfo, CALLEE, CONTAINER, DEPTH_CAP, UNBOUND, ATTRIBUTE, CallSite, FunctionInfo, Scope,
                                        UNKNOWN, Value, lost)
from tfpar_lint.semantic.attributes import AttributeValues
from tfpar_lint.semantic.containers import ContainerValues, _subscript_key
from tfpar_lint.semantic.nodes import arg, keyword
from tfpar_lint.semantic.parameters import BindingValues, _drop_placeholders, _made_object
from tfpar_lint.semantic.records import NAMEDTUPLE_FACTORIES, RecordType, field_values, is_record, namedtuple_fields

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


# Nested questions (an expression's value depends on a binding's, which depends on ...) followed
# at most, counted over every module of a project together (a question about one file's value
# asks another file's); deeper chains answer UNKNOWN.  Bounds the Python stack the analysis uses.
MAX_DEPTH = 100
NONE = Value(api.NONE)
BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__builtins__", "__path__",
                                        "get_ipython", "display"}




class Inference(AttributeValues, ContainerValues, BindingValues):
    """What an expression holds: the core here (names, calls, API calls, builtins, methods); attribute
    and class values in :mod:`.attributes`, container elements in :mod:`.containers`, binding and
    parameter values in :mod:`.parameters`."""

    def __init__(self, m: "Module") -> None:
        self.m = m
        self._infer_memo: dict[int, list[Value]] = {}
        self._binding_memo: dict[int, list[Value]] = {}
        self._in_progress: set[int] = set()

    def forget(self) -> None:
        """Drop every memoised answer (the kinds from use are known now: see :mod:`.kinds`)."""
        self._infer_memo.clear()
        self._binding_memo.clear()

    def infer_at(self, expr: Optional[cst.BaseExpression], site: CallSite) -> list[Value]:
        return self.infer(expr, site.scope, site.order, site)

    def infer(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
              site: Optional[CallSite] = None) -> list[Value]:
        """Possible values of ``expr`` (never empty; [UNKNOWN] when unknown)."""
        if expr is None:
            return [UNKNOWN]
        if scope.module is not self.m and scope.module is not None:  # another file's code
            return scope.module.infer(expr, scope, order, site)
        uses = self.m.kinds
        if not uses.ready():
            uses.build()
        return uses.refine(self._guarded(id(expr), self._infer_memo,
                                         lambda: _drop_placeholders(self._infer(expr, scope, order, site))))

    def _guarded(self, key: int, memo: dict[int, list[Value]], compute: Callable[[], list[Value]]) -> list[Value]:
        """``compute()`` once per key (memoised), never while the same question is open (a cycle)
        nor deeper than MAX_DEPTH nested questions over all modules: those answer UNKNOWN, not
        memoised.  Python's own recursion limit, if some other recursion brings it closer, is a
        budget too: reaching it answers UNKNOWN (not memoised), never an exception."""
        got = memo.get(key)
        if got is not None:
            return got
        # the nesting counts across the project's modules too (each has its own Inference)
        depth = getattr(_NESTED, "n", 0)
        if key in self._in_progress:
            return [UNKNOWN]  # a cycle of questions
        if depth >= MAX_DEPTH:
            return [lost(DEPTH_CAP)]
        self._in_progress.add(key)
        _NESTED.n = depth + 1
        try:
            vals = compute() or [UNKNOWN]
        except RecursionError:
            return [lost(DEPTH_CAP)]
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
                # a name bound nowhere (a star import, a snippet's missing import): an unknown value
                # with an identity, whose kind comes from its uses
                return [UNKNOWN if expr.value in BUILTINS else self.m.kinds.free(expr.value)]
            out: list[Value] = []
            for b in bs:
                got = self.binding_values(b)
                if len(bs) > 1 and b.scope is scope:  # one of several bindings: on its own branches only
                    path = self.m.paths.binding_path(b, bs)
                    if path:
                        got = [replace(v, path=v.path + path) if v.origin is not None else v for v in got]
                out.extend(got)
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
                bs = self.live_attr_bindings(fn.cls.attrs.get(attr) or [], scope, order) \
                    or fn.cls.scope.bindings.get(attr)
                if bs:
                    out = []
                    for b in bs:
                        got = self.binding_values(b)
                        if b.kind != "param":  # stored under these branches (of any method)
                            conds = self.m.contexts.stable_conds(b.order, b.scope, b.value)
                            if conds:
                                got = [replace(v, conds=v.conds + conds) for v in got]
                        out.extend(got)
                    return out
                inherited = self._base_member(fn.cls, attr)  # a method or attribute of a base class here
                if inherited is not None:
                    return inherited
                keras_set = self.keras_attribute(fn.cls, attr)
                if keras_set is not None:
                    return keras_set
                framework = self.test_case_member(fn.cls, attr)
                if framework is not None:  # self.assertEqual in a tf.test.TestCase: the framework's method
                    return [Value(api.API, framework, raw_qname=framework)]
                # set by a base class the module cannot see, or from outside: an unknown value of
                # the class's instances (its uses may tell its kind)
                return [self.m.kinds.attribute(fn.cls, attr)]
            sup = self._super_member(expr, scope, order)
            if sup is not None:
                return sup
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
            got = self.keyword_values(expr.value, _subscript_key(expr), scope, order)
            if got is not None:  # kwargs["model"]: what every caller passes as model=
                return got
            items = self.container_items(expr.value, scope, order, _subscript_key(expr))
            if items is not None:
                out = []
                for e, s, o in items:
                    out.extend(self.infer(e, s, o))
                return out
            base = self.infer(expr.value, scope, order)
            key = _subscript_key(expr)
            if isinstance(key, int) and base and any(is_record(v) for v in base):  # settings[0]
                out = []
                for v in base:
                    got = field_values(self.m, v, key) if is_record(v) else None
                    out.extend(got if got is not None else [self.m.kinds.item(v, "[]")])
                return out
            if all(v.kind in (api.ELEMENT, api.DIST_VALUES, api.BATCH, api.PER_REPLICA) for v in base):
                return list(base)  # a part of a batch, of a per-replica value
            if all(v.kind in (api.LAYERS, api.VARIABLES) for v in base):
                return [self._element_of(v, expr, None) for v in base]
            return [self.m.kinds.item(v, "[]") for v in base]
        if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
            # `strategy or tf.distribute.get_strategy()`: either operand
            return self.infer(expr.left, scope, order) + self.infer(expr.right, scope, order)
        if isinstance(expr, cst.IfExp):  # `a if cond else b`: either branch
            return self.infer(expr.body, scope, order) + self.infer(expr.orelse, scope, order)
        if isinstance(expr, cst.Await):
            return [UNKNOWN]
        if isinstance(expr, cst.BinaryOperation):
            # arithmetic on a per-replica value (``batch / 255.0``) is per-replica too; on an array, an
            # array (``x * 2``)
            for side in (expr.left, expr.right):
                if isinstance(side, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
                    got = [v for v in self.infer(side, scope, order)
                           if v.kind in (api.PER_REPLICA, api.DIST_VALUES) or self.m.kinds.is_array(v)]
                    if got:
                        return got
            return [UNKNOWN]
        return [UNKNOWN]

    def _super_member(self, expr: cst.Attribute, scope: Scope, order: int) -> Optional[list[Value]]:
        """``super().step`` (``super(Cls, self).step``) in a method: the base class's member, when a
        base class this module defines has it (``strategy.run(super()._step)``); None otherwise."""
        call = expr.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "super") \
                or self.m.lookup("super", scope, order):
            return None
        fn = self._method_of(scope)
        if fn is None or fn.cls is None:
            return None
        return self._base_member(fn.cls, expr.attr.value)

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
        if isinstance(func, cst.Attribute) and func.attr.value == "get" and call.args:
            got = self.keyword_values(func.value, _subscript_key_of(call.args[0].value), scope, order)
            if got is not None:  # kwargs.get("model")
                return got
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
                    got = self._infer_method(rv, func.attr.value, call, scope, order, site)
                    # what an unknown method makes is still made here (its uses may tell its kind)
                    out.append(self.m.kinds.method_result(rv, func.attr.value, call, site) if got is UNKNOWN else got)
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
            elif isinstance(cv.info, RecordType) and not cv.info.instance and site is not None:  # Settings(s, h)
                out.append(Value(api.UNKNOWN, cv.qname, origin=call, site=site, raw_qname=cv.raw_qname,
                                 info=replace(cv.info, instance=True, made=site)))
            elif self.call_method_of(cv) is not None:  # an instance called: its class's __call__
                out.extend(self._returns_of(self.call_method_of(cv), call, site))
            else:  # an unknown callee: what it makes is made here (its uses may tell its kind)
                out.append(self.m.kinds.call_result(cv, call, site))
        return out

    def call_method_of(self, v: Value) -> Optional[FunctionInfo]:
        """The ``__call__`` a call of the instance ``v`` of a local class runs (``stepper(pairs)``,
        ``Trainer()(cfg)``), or None."""
        if v.kind == api.CLASS or not isinstance(v.info, ClassInfo) or v.origin is None:
            return None
        got = self._class_member(v.info, "__call__")
        return got[0].info if got and got[0].kind == api.FUNCTION and isinstance(got[0].info, FunctionInfo) else None

    def _returns_of(self, fn: FunctionInfo, call: cst.Call, site: Optional[CallSite]) -> list[Value]:
        if not fn.returns:
            return [UNKNOWN]
        out = []
        owner = fn.scope.module or self.m
        for expr, order in fn.returns:
            # the branches the `return` is on (`if strategy: return distributed` / `else: return ds`)
            branch = tuple((owner.if_nodes[i], b) for i, b in owner.if_context.get(order, ()) if i in owner.if_nodes)
            if branch and site is not None and not owner.paths.together(
                    branch, given=owner.paths.call_arguments(fn, call, site.scope, site.order)):
                continue  # a `return` this call's arguments cannot reach (`if strategy:` given a strategy)
            for v in self.infer(expr, fn.scope, order):
                if (v.kind != api.UNKNOWN or v.origin is not None) and self.created_within(v.origin, fn) \
                        and not is_record(v):  # a record keeps the call that filled its fields
                    # created by the call: the creation context is the caller's
                    # (a dataset keeps the helper's last method call in its chain: `.batch(n)`)
                    v = Value(v.kind, v.qname, origin=call, site=site, raw_qname=v.raw_qname,
                              info=v.info, source=v if v.kind == api.DATASET else v.source, path=v.path + branch)
                elif branch and v.origin is not None:
                    v = replace(v, path=v.path + branch)
                out.append(v)
        return out

    def _infer_api_call(self, q: str, raw: str, call, scope, order, site) -> list[Value]:
        if q in self.m.strategy_factories:
            return [Value(api.STRATEGY, q, origin=call, site=site, raw_qname=raw)]
        if q in self.m.dataset_distributors:
            return [Value(api.DIST_DATASET, q, origin=call, site=site, raw_qname=raw)]
        if q in api.ITERATION_WRAPPERS:  # tqdm(ds): iterated, it gives ds's elements
            wrapped = arg(call, 0, "iterable")
            return self.infer(wrapped, scope, order) if wrapped is not None else [UNKNOWN]
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
            return [lost(CALLEE)]
        if q in api.V1_ITERATOR_FACTORIES:
            # tf.compat.v1.data.make_one_shot_iterator(ds): an iterator of ds
            return [Value(api.ITERATOR, origin=call, site=site, source=v) if v.kind == api.DATASET else UNKNOWN
                    for v in self.infer(arg(call, 0, "dataset"), scope, order)]
        if q in api.STRATEGY_GETTERS and site is not None:
            # get_strategy() returns the strategy whose scope is open around the call
            known, maybe = self.m.scope_strategies(site)
            if known and not maybe:
                return list(known)
        if q in api.TFDS_LOAD:
            return [self._tfds_load(q, raw, call, site)]
        if q in NAMEDTUPLE_FACTORIES:
            names = namedtuple_fields(self.m, call, scope, order)
            if names is not None:  # a named-tuple type: its instances' fields are followed (records.py)
                return [Value(api.UNKNOWN, q, origin=call, site=site, raw_qname=raw, info=RecordType(names))]
        kind = api.kind_of_constructor(q)
        if kind is not None:
            return [Value(kind, q, origin=call, site=site, raw_qname=raw)]
        # tf.data.Dataset.from_tensor_slices(...).batch(...) handled via methods
        return [Value(api.UNKNOWN, q, origin=call, site=site, raw_qname=raw)]

    def _tfds_load(self, q: str, raw: str, call: cst.Call, site) -> Value:
        """``tfds.load(name, split=...)``: a dataset (a list of them for a list of splits: their
        items); without ``split=`` a dict of datasets, one per split; ``with_info=True`` a pair
        (that, the dataset's info)."""
        from tfpar_lint.semantic.kinds import Parts

        ds = Value(api.DATASET, q, origin=call, site=site, raw_qname=raw)
        split = keyword(call, "split") if keyword(call, "split") is not None else arg(call, 1)
        if split is None or isinstance(split, (cst.List, cst.Tuple)):
            ds = Value(api.UNKNOWN, q, origin=call, site=site, raw_qname=raw,
                       info=Parts(items=tuple(ds for _ in split.elements) if split is not None else (), each=ds))
        info = keyword(call, "with_info")
        if isinstance(info, cst.Name) and info.value == "True":
            return Value(api.UNKNOWN, q, origin=call, site=site, raw_qname=raw,
                         info=Parts(items=(ds, Value(api.UNKNOWN, q, origin=call, site=site, raw_qname=raw))))
        return ds

    def _infer_builtin(self, name: str, call, scope, order, site) -> list[Value]:
        if name == "iter":
            src = arg(call, 0)
            out = []
            for v in self.infer(src, scope, order):
                if v.kind == api.DATASET:
                    out.append(Value(api.ITERATOR, origin=call, site=site, source=v))
                elif v.kind == api.DIST_DATASET:
                    out.append(Value(api.DIST_ITERATOR, origin=call, site=site, source=v))
                elif v.kind in (api.ITERATOR, api.DIST_ITERATOR, api.PLAIN_ITERATOR):
                    out.append(v)
                elif _made_object(v):  # iter(train_generator): a Keras iterator, a generator, an array
                    out.append(Value(api.PLAIN_ITERATOR, origin=call, site=site, source=v))
                else:
                    out.append(self.m.kinds.item(v, "iter"))
            return out
        if name == "next":
            src = arg(call, 0)
            return [self._element_of(v, call, site) for v in self.infer(src, scope, order)]
        if name in ("enumerate", "zip", "list", "tuple", "reversed", "sorted"):
            return [lost(CONTAINER)]
        if name in BUILTINS:
            return [UNKNOWN]
        # a callable bound nowhere (a star import): what it makes is made here, as what an imported
        # function makes
        return [self.m.kinds.call_result(self.m.kinds.free(name), call, site)]

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
            if meth in api.DISTRIBUTE_ITERATOR_METHODS:  # TensorFlow 1 / 2.0 previews (tf.compat.v1 strategies)
                return Value(api.DIST_ITERATOR, origin=call, site=site, source=rv)
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
        if rv.qname in api.CLUSTER_COORDINATORS and meth == "create_per_worker_dataset":
            return Value(api.DIST_DATASET, origin=call, site=site, source=rv)
        if k == api.ITERATOR and meth in ("get_next", "__next__", "next"):
            return Value(api.ELEMENT, origin=call, site=site, source=rv)
        if k == api.DIST_DATASET and meth == "__iter__":
            return Value(api.DIST_ITERATOR, origin=call, site=site, source=rv)
        if k == api.DIST_ITERATOR and meth in ("get_next", "__next__"):
            return Value(api.DIST_VALUES, origin=call, site=site, source=rv)
        if k == api.GENERATOR and meth in ("split",):
            return Value(api.UNKNOWN)
        return UNKNOWN




def _subscript_key_of(expr: cst.BaseExpression) -> object:
    """A literal string key (``"model"``), else None."""
    return expr.evaluated_value if isinstance(expr, cst.SimpleString) else None
