"""Attribute and class values (part of :class:`tfpar_lint.semantic.values.Inference`): what
``obj.attr`` holds (instance attributes set in methods, class members and bases, module attributes,
the project's other modules), the kind a local class makes (a Keras model subclass, a
``tf.Module``), and which Keras flavour a value belongs to."""
from __future__ import annotations

from typing import Optional, TYPE_CHECKING

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import ATTRIBUTE, UNBOUND, ClassInfo, FunctionInfo, Scope, UNKNOWN, Value, lost
from tfpar_lint.semantic.nodes import arg, attr_name, keyword
from tfpar_lint.semantic.records import field_values, is_record

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module  # noqa: F401


class AttributeValues:
    """Mixed into :class:`tfpar_lint.semantic.values.Inference` (``self.m`` is the module)."""

    def live_attr_bindings(self, bs: list, scope: Optional[Scope] = None, order: int = 10**9) -> list:
        """The ``self.<attr> = value`` bindings ``bs`` that a read at (``scope``, ``order``) may see.
        A binding its own method rebinds later on every path (``self.ds = load(); self.ds =
        strategy.experimental_distribute_dataset(self.ds)``) is seen only by reads in that method
        before the rebinding; a read in that method sees its own earlier bindings, and every other
        method's."""
        if len(bs) < 2:
            return bs
        ctx = self.m.if_context
        reader = scope
        while reader is not None and reader.kind not in ("function", "lambda"):
            reader = reader.parent
        out = []
        for b in bs:
            if b.scope is reader or (reader is not None and self._inside(reader, b.scope)):
                if b.order < order:
                    out.append(b)
                continue
            ifs = ctx.get(b.order, ())
            if any(o is not b and o.scope is b.scope and o.order > b.order
                   and ifs[:len(ctx.get(o.order, ()))] == ctx.get(o.order, ()) for o in bs):
                continue  # rebound later in its own method, on every path
            out.append(b)
        return out or bs

    @staticmethod
    def _inside(scope: Scope, outer: Scope) -> bool:
        s: Optional[Scope] = scope
        while s is not None:
            if s is outer:
                return True
            s = s.parent
        return False

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

    def class_member(self, cls: ClassInfo, name: str) -> Optional[list[Value]]:
        """Method ``name`` of a local class (or of its local bases), or the values its methods
        assign to ``self.name``; None when the class does not define it."""
        return self._class_member(cls, name)

    def _class_member(self, cls: ClassInfo, name: str, _depth: int = 0) -> Optional[list[Value]]:
        """Method ``name`` of a local class (or of its local bases), or the values its methods
        assign to ``self.name``."""
        if _depth > 8:
            return None
        if name in cls.methods:
            fn = cls.methods[name]
            return [Value(api.FUNCTION, info=fn, origin=fn.node)]
        bs = self.live_attr_bindings(cls.attrs.get(name) or [])
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

    def keras_attribute(self, cls: ClassInfo, attr: str) -> Optional[list[Value]]:
        """What Keras sets on a model (an instance of ``cls``, a Keras model subclass) for ``attr``:
        ``self.optimizer`` / ``self.loss``, what ``compile(optimizer=..., loss=...)`` of its instances
        gives (in this module and its importers); ``self.distribute_strategy`` /
        ``self._distribution_strategy``, the strategy whose scope is open where it is made.  None
        when ``attr`` is none of those or nothing tells."""
        if attr not in api.KERAS_SET_ATTRIBUTES or self.class_kind(cls) != api.MODEL:
            return None
        out: list[Value] = []
        for mod in [self.m] + self.m.importers():
            for cs in mod.calls:
                f = cs.node.func
                if attr in ("optimizer", "loss") and isinstance(f, cst.Attribute) and f.attr.value == "compile":
                    if not self._instances_of(mod, f.value, cs, cls):
                        continue
                    e = keyword(cs.node, attr) or (arg(cs.node, 0) if attr == "optimizer" else arg(cs.node, 1))
                    if e is not None and not isinstance(e, (cst.SimpleString, cst.ConcatenatedString)):
                        out.extend(mod.infer(e, cs.scope, cs.order, cs))
                elif attr in ("distribute_strategy", "_distribution_strategy") and attr_name(f) == cls.name:
                    made = mod.infer(cs.node, cs.scope, cs.order, cs)
                    if any(v.info is cls and v.origin is cs.node for v in made):
                        known, maybe = mod.scope_strategies(cs)
                        if known and not maybe:
                            out.extend(known)
        return out or None

    @staticmethod
    def _instances_of(mod, expr: cst.BaseExpression, cs, cls: ClassInfo) -> bool:
        """``expr`` is ``self`` in a method of ``cls`` or an instance of it."""
        if isinstance(expr, cst.Name) and expr.value == "self":
            meth = mod.values._method_of(cs.scope)
            return meth is not None and meth.cls is cls
        vals = mod.infer(expr, cs.scope, cs.order)
        return bool(vals) and all(v.info is cls and v.kind != api.CLASS for v in vals)

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

    def _instance_of(self, cls: ClassInfo, call: cst.Call, site) -> Value:
        kind = self.class_kind(cls)
        if kind:
            return Value(kind, cls.name, origin=call, site=site, info=cls)
        return Value(api.UNKNOWN, cls.name, origin=call, site=site, info=cls)

    def test_case_member(self, cls: ClassInfo, attr: str, _depth: int = 0) -> Optional[str]:
        """``tensorflow.test.TestCase.assertAllEqual`` when ``cls`` derives (here or through local
        bases) from a test-case class of ``unittest``, ``absl`` or ``tf.test`` and ``attr`` is one of
        that framework's members (``assert*``, ``unittest.TestCase``'s own, ``tf.test.TestCase``'s
        session and evaluation helpers); None otherwise."""
        if _depth > 8 or not (attr.startswith("assert") or attr in api.TEST_CASE_MEMBERS):
            return None
        for base in cls.bases:
            q, _ = self.m.qualified_name(base, cls.scope.parent or self.m.scope, 10**9)
            if q in api.TEST_CASE_CLASSES:
                return f"{q}.{attr}"
            if not q:
                for v in self.infer(base, cls.scope.parent or self.m.scope, 10**9):
                    if v.kind == api.CLASS and isinstance(v.info, ClassInfo) and v.info is not cls:
                        got = self.test_case_member(v.info, attr, _depth + 1)
                        if got:
                            return got
        return None

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
        if any(is_record(v) for v in recv):  # settings.strategy: what the record was given for it
            out: list[Value] = []
            for v in recv:
                got = field_values(self.m, v, attr) if is_record(v) else None
                out.extend(got if got is not None else self._attribute_of_parts([v], attr))
            return out
        return self._attribute_of_parts(recv, attr)

    def _attribute_of_parts(self, recv: list[Value], attr: str) -> list[Value]:
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
                bs = self.live_attr_bindings(cls.attrs.get(attr) or []) if cls is not None else None
                if not bs:
                    # an attribute of an object of unknown class (or one its class does not set): an
                    # unknown value of that object's (its uses may tell its kind)
                    out.append(self.m.kinds.attribute(v.origin, attr, v) if _held(v) else lost(ATTRIBUTE))
                    continue
                for b in bs:
                    out.extend(self.binding_values(b))
            return out or [UNKNOWN]
        out = []
        for v in recv:
            if v.kind not in (api.MODEL, api.LAYER) and not (
                    attr in api.VARIABLE_LIST_ATTRS and isinstance(v.info, ClassInfo) and v.kind != api.CLASS
                    and self._tf_module_class(v.info)):
                out.append(self.m.kinds.attribute(v.origin, attr, v) if _held(v) else lost(ATTRIBUTE))
                continue
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

    @staticmethod
    def _module_attr(v: Value, attr: str) -> list[Value]:
        """The values of ``attr`` in the project module ``v`` stands for."""
        other = v.info
        bs = other.lookup(attr, other.scope, 10**9)
        if not bs:
            return [lost(UNBOUND)]
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
                return [lost(ATTRIBUTE)]
            vals = self._attr_values(vals, attr)
        return vals

    def keras_spelling(self, v: Value) -> str:
        """How the code spells the Keras that created ``v`` (an API-created object or an instance of
        a local subclass): "tf_keras", "tf.keras" or "keras" (``tfapi.keras_flavor`` of its import),
        or "" when it is not a Keras object or cannot be told.  Which Keras that is depends on the
        TensorFlow the code runs on: ``versions.keras_flavor``."""
        raw = v.raw_qname
        if not raw and isinstance(v.info, ClassInfo):
            raw = self._keras_base_raw(v.info)
        if not raw or not (api.canonical(raw) + ".").startswith("keras."):
            return ""
        return api.keras_flavor(raw)

    def derives_from(self, cls: ClassInfo, qnames, _depth: int = 0) -> bool:
        """``cls`` (of this module or another of the project) derives from one of the API classes
        ``qnames`` (canonical names), directly or through local and project classes."""
        if cls.scope.module is not self.m and cls.scope.module is not None:
            return cls.scope.module.values.derives_from(cls, qnames, _depth)
        if _depth > 8:
            return False
        scope = cls.scope.parent or self.m.scope
        for base in cls.bases:
            q, _ = self.m.qualified_name(base, scope, 10**9)
            if q and api.canonical(q) in qnames:
                return True
            for v in self.infer(base, scope, 10**9):
                if v.kind == api.CLASS and isinstance(v.info, ClassInfo) and v.info is not cls \
                        and (v.info.scope.module or self.m).values.derives_from(v.info, qnames, _depth + 1):
                    return True
        return False

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


def _held(v: Value) -> bool:
    """An object with an identity (an origin) that is not a function, class or module."""
    return v.origin is not None and v.kind not in (api.FUNCTION, api.CLASS, api.API, api.MODULE)
