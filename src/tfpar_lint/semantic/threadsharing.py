"""Sharing (part of :class:`tfpar_lint.semantic.threads.Threads`): whether the object an expression
holds is made by the thread itself, once for each thread, or one object every thread reaches."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, ClassInfo, FunctionInfo, Scope, Value
from tfpar_lint.semantic.nodes import attr_name, call_method
from tfpar_lint.semantic.threadfacts import (
    LOCAL, PER_THREAD, SHARED, MAX_DEPTH, Ctx, _combine, _not_none)

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


class ThreadSharing:
    """Mixed into :class:`tfpar_lint.semantic.threads.Threads`."""

    # ------------------------------------------------------------------ sharing
    def status(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
               ctx: Ctx = Ctx(), _depth: int = 0) -> Optional[str]:
        """LOCAL, PER_THREAD, SHARED or None for the object ``expr`` holds, in the thread
        being analysed (``runs``/``steps`` set it) or, outside one, relative to all threads."""
        if expr is None or _depth > MAX_DEPTH:
            return None
        key = (id(expr), order, ctx.self_status, id(ctx.self_cls), id(ctx.made_in), ctx.made_status,
               id(self._current))
        if key in self._status_memo:
            return self._status_memo[key]
        if key in self._open:
            return None
        self._open.add(key)
        try:
            res = self._status(expr, scope, order, ctx, _depth + 1)
        finally:
            self._open.discard(key)
        self._status_memo[key] = res
        return res

    def _status(self, expr: cst.BaseExpression, scope: Scope, order: int, ctx: Ctx, d: int) -> Optional[str]:
        mod = scope.module
        if isinstance(expr, cst.Name):
            if self._is_self(expr, scope):
                meth = mod.values._method_of(scope)
                cls = meth.cls if meth is not None else None
                if ctx.self_status is not None and (ctx.self_cls is None or cls is None
                                                    or self._related(cls, ctx.self_cls)):
                    return ctx.self_status
                if cls is not None:
                    return self._instances(cls, d)  # every instance of the class alike
            bs = mod.lookup(expr.value, scope, order)
            if not bs:
                return None
            out = []
            for b in bs:
                if b.kind in ("assign", "annassign", "walrus", "with") and b.value is not None:
                    out.append(self.status(b.value, b.scope, b.order, ctx if b.scope is scope else Ctx(), d))
                elif b.kind in ("for", "comp"):
                    st = self._values_status(mod.binding_values(b), ctx, d)
                    if st is None:
                        st = self._iterated_status(b, ctx, d)
                    out.append(st)
                elif b.kind == "param":
                    args = mod.values.param_args(b)
                    if args:  # what every caller passes (a None placeholder holds no variable)
                        args = [x for x in args if not (isinstance(x[0], cst.Name) and x[0].value == "None")] \
                            or args
                        out.append(_combine(self.status(a, s, o, Ctx(), d) if a is not None else None
                                            for a, s, o, _site in args))
                    else:
                        out.append(self._values_status(mod.binding_values(b), ctx, d))
                elif b.kind == "import":
                    out.append(self._values_status(mod.binding_values(b), Ctx(), d))
                else:
                    out.append(None)
            return _combine(out)
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            recv = self._receiver_classes(expr.value, scope, order)
            if recv:
                base = None if all(c for _k, c in recv) else self.status(expr.value, scope, order, ctx, d)
                out = []
                for cls, _is_cls in recv:
                    bs, owner = self._attr_bindings(cls, attr)
                    if bs is None:
                        return self._values_status(mod.infer(expr, scope, order), ctx, d)
                    for b in bs:
                        inner = Ctx(base, owner) if b.scope.kind != "class" else Ctx()
                        out.append(self.status(b.value, b.scope, b.order, inner, d) if b.value is not None else None)
                return _combine(out)
            base_vals = mod.infer(expr.value, scope, order)
            if base_vals and all(v.kind in (api.MODEL, api.LAYER) for v in base_vals) and (
                    attr in api.VARIABLE_LIST_ATTRS or attr in api.VARIABLE_ATTRS or attr in ("layers", "optimizer")):
                return self.status(expr.value, scope, order, ctx, d)
            return self._values_status(mod.infer(expr, scope, order), ctx, d)
        if isinstance(expr, cst.Subscript):
            return self.status(expr.value, scope, order, ctx, d)
        if isinstance(expr, (cst.List, cst.Tuple)):
            return _combine(self.status(el.value, scope, order, ctx, d) for el in expr.elements) \
                if expr.elements else None
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            return _combine([self.status(expr.left, scope, order, ctx, d),
                             self.status(expr.right, scope, order, ctx, d)])
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") \
                    and not mod.lookup(expr.func.value, scope, order) and expr.args:
                return self.status(expr.args[0].value, scope, order, ctx, d)
            if isinstance(expr.func, cst.Name) and expr.func.value == "zip" and len(expr.args) == 1 \
                    and expr.args[0].star == "*" and not mod.lookup("zip", scope, order):
                # _, gvars = zip(*grads_and_vars): the variables of those pairs
                return self.status(expr.args[0].value, scope, order, ctx, d)
            cm = call_method(expr)
            if cm is not None and cm[1] == "compute_gradients":
                # the (gradient, variable) pairs of the variables the optimizer's owner trains
                return self.status(cm[0], scope, order, ctx, d)
            fns = mod.resolve_function(expr.func, scope, order)
            site = mod.site_of_call.get(id(expr))
            if fns and site is not None and all(fn.returns and not fn.is_lambda for fn in fns) \
                    and not self._is_op(expr, scope, order):
                # what a local function returns; what it makes is made at this call
                here = LOCAL if self._created_in_thread_site(site) else self._site_status(site, ctx, d)
                out = []
                for fn in fns:
                    inner = self._owner_ctx(expr.func, site, ctx) if fn.cls is not None else Ctx()
                    inner = Ctx(inner.self_status, inner.self_cls, fn, here)
                    for r, ro in fn.returns:
                        out.append(self.status(r, fn.scope, ro, inner, d))
                got = _combine(out)
                if got is not None:
                    return got
            cm = call_method(expr)
            if cm is not None and isinstance(cm[0], cst.Name) and self._is_self(cm[0], scope):
                vals = _not_none(mod.infer(expr, scope, order))
                if all(v.kind == api.UNKNOWN and v.origin is None for v in vals):
                    # what a method of this object builds and returns (its network's variables,
                    # collected with tf.get_collection): the object's own
                    return ctx.self_status
        return self._values_status(mod.infer(expr, scope, order), ctx, d)

    def _iterated_status(self, b, ctx: Ctx, d: int) -> Optional[str]:
        """``for x in xs`` / ``for g, v in zip(gs, vs)``: the status of what is iterated (the
        matching ``zip`` argument), when the items' own values cannot be followed."""
        it = b.value
        mod = b.scope.module
        if it is None:
            return None
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("zip", "enumerate") \
                and not mod.lookup(it.func.value, b.scope, b.order):
            if len(b.path) != 1 or any(a.star for a in it.args):
                return None
            i = b.path[0] - (1 if it.func.value == "enumerate" else 0)
            if it.func.value == "enumerate":
                return self.status(it.args[0].value, b.scope, b.order, ctx, d) if i == 0 and it.args else None
            return self.status(it.args[i].value, b.scope, b.order, ctx, d) if 0 <= i < len(it.args) else None
        if b.path:
            return None
        return self.status(it, b.scope, b.order, ctx, d)

    @staticmethod
    def _is_self(name: cst.Name, scope: Scope) -> bool:
        s: Optional[Scope] = scope
        while s is not None:
            f = s.func
            if f is not None and f.cls is not None:
                return bool(f.params) and f.params[0].name.value == name.value and \
                    not any(d for d in f.decorators if attr_name(d) == "staticmethod")
            s = s.parent
        return False

    def _receiver_classes(self, expr: cst.BaseExpression, scope: Scope, order: int,
                          _depth: int = 0) -> Optional[list[tuple[ClassInfo, bool]]]:
        """The local classes ``expr`` is an instance of (or, flag True, the class itself), when it
        certainly is one: ``self`` in a method, an instance of a local class, a local class, a
        parameter every caller passes one of those (``Thread(target=work, args=(self,))``)."""
        mod = scope.module
        if isinstance(expr, cst.Name) and self._is_self(expr, scope):
            meth = mod.values._method_of(scope)
            if meth is not None and meth.cls is not None:
                return [(meth.cls, False)]
        vals = _not_none(mod.infer(expr, scope, order))
        if vals and all(isinstance(v.info, ClassInfo) and (v.kind == api.CLASS or v.origin is not None)
                        for v in vals):
            return [(v.info, v.kind == api.CLASS) for v in vals]
        if isinstance(expr, cst.Attribute) and _depth < 4:
            # self.shared, set from a parameter in the constructor (values may answer UNKNOWN on a
            # cycle of questions): follow the attribute's bindings
            out_a: list[tuple[ClassInfo, bool]] = []
            for cls, is_cls in self._receiver_classes(expr.value, scope, order, _depth + 1) or ():
                bs, _owner = self._attr_bindings(cls, expr.attr.value)
                if not bs or is_cls:
                    return None
                for b in bs:
                    if b.value is None or b.path:
                        return None
                    got = self._receiver_classes(b.value, b.scope, b.order, _depth + 1)
                    if not got:
                        return None
                    out_a += [g for g in got if g not in out_a]
            return out_a or None
        if isinstance(expr, cst.Name) and _depth < 4:
            bs = mod.lookup(expr.value, scope, order)
            if len(bs) == 1 and bs[0].kind == "param":
                args = mod.values.param_args(bs[0])
                if args:
                    out: list[tuple[ClassInfo, bool]] = []
                    for a, s, o, _site in args:
                        got = self._receiver_classes(a, s, o, _depth + 1) if a is not None else None
                        if not got:
                            return None
                        out += [g for g in got if g not in out]
                    return out
        return None

    def _attr_bindings(self, cls: ClassInfo, attr: str, _depth: int = 0):
        """(bindings, owning class) of ``attr`` on instances of ``cls``: ``self.attr = ...`` in its
        methods, else a class attribute, looked up through local base classes; (None, None) when
        the class does not define it (or it is a method)."""
        if _depth > 8:
            return None, None
        if attr in cls.methods:
            return None, None
        bs = cls.attrs.get(attr)
        if bs:
            return bs, cls
        bs = cls.scope.bindings.get(attr)
        if bs:
            return bs, cls
        mod = cls.scope.module
        for base in cls.bases:
            for v in mod.infer(base, cls.scope.parent or mod.scope, 10**9):
                if v.kind == api.CLASS and isinstance(v.info, ClassInfo) and v.info is not cls:
                    got = self._attr_bindings(v.info, attr, _depth + 1)
                    if got[0] is not None:
                        return got
        return None, None

    def _values_status(self, vals: list[Value], ctx: Ctx, d: int) -> Optional[str]:
        vals = _not_none(vals)
        if not vals:
            return None
        return _combine(self._origin_status(v, ctx, d) for v in vals)

    def _origin_status(self, v: Value, ctx: Ctx, d: int) -> Optional[str]:
        """Where the object was made says how many there are: in the thread (LOCAL); in a loop or
        in the constructor of a per-thread object (PER_THREAD); once (SHARED)."""
        if v.kind in (api.UNKNOWN, api.NONE, api.API, api.FUNCTION, api.CLASS, api.MODULE):
            if v.kind == api.UNKNOWN and isinstance(v.info, ClassInfo) and v.origin is not None:
                pass  # an instance of a local class: judged by where it was made
            elif not (v.kind == api.UNKNOWN and v.origin is not None and v.qname):
                return None
        o = v.origin
        if o is None:
            return None
        if v.source is not None and v.kind in (api.VARIABLE, api.VARIABLES, api.LAYER, api.LAYERS):
            src = v.source
            while src.source is not None and src.kind in (api.VARIABLE, api.VARIABLES, api.LAYER, api.LAYERS):
                src = src.source
            o = src.origin or o
        site = v.site
        if site is None:
            for cand in self._modules():
                site = cand.site_of_call.get(id(o))
                if site is not None:
                    break
        if site is None:
            return None
        if ctx.made_in is not None and self._within(site.scope, ctx.made_in):
            return ctx.made_status
        if self._created_in_thread_site(site):
            return LOCAL
        return self._site_status(site, ctx, d)

    @staticmethod
    def _within(scope: Scope, fn: FunctionInfo) -> bool:
        s: Optional[Scope] = scope
        while s is not None:
            if s is fn.scope:
                return True
            s = s.parent
        return False

    def _modules(self) -> list["Module"]:
        out = [self.m] + self.m.importers()
        if self.m.project is not None:
            out += [x for x in self.m.project.modules.values() if x is not None and x not in out]
        return out

    def _created_in_thread_site(self, site: CallSite) -> bool:
        run = self._current
        return run is not None and self.in_body(run, site.scope)

    def _created_in_thread(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        run = self._current
        return run is not None and self.in_body(run, scope)

    def _site_status(self, site: CallSite, ctx: Ctx, d: int) -> Optional[str]:
        """How many times the code at ``site`` runs for the threads: once (SHARED), once per
        thread (PER_THREAD)."""
        if site.loops:
            return PER_THREAD
        fn = site.func
        if fn is None:
            return SHARED  # module level, or a class body
        mod = site.scope.module
        meth = mod.enclosing_method(fn)
        if meth is not None and meth.cls is not None:
            if ctx.self_cls is not None and ctx.self_status is not None and self._related(meth.cls, ctx.self_cls):
                return ctx.self_status  # made by the method of the object the thread reached
            return self._instances(meth.cls, d)
        return self._invocations(fn, d)

    def _related(self, a: ClassInfo, b: ClassInfo) -> bool:
        return a is b or self._derives(a, b) or self._derives(b, a)

    def _derives(self, cls: ClassInfo, base: ClassInfo, _depth: int = 0) -> bool:
        if _depth > 8:
            return False
        mod = cls.scope.module
        for bx in cls.bases:
            for v in mod.infer(bx, cls.scope.parent or mod.scope, 10**9):
                if v.kind == api.CLASS and isinstance(v.info, ClassInfo) and v.info is not cls:
                    if v.info is base or self._derives(v.info, base, _depth + 1):
                        return True
        return False

    def _invocations(self, fn: FunctionInfo, d: int) -> Optional[str]:
        """Status of what ``fn`` makes: from how often its callers run it."""
        if d > MAX_DEPTH:
            return None
        mod = fn.scope.module
        run = self._current
        if run is not None and self.in_body(run, fn.scope):
            return LOCAL
        callers = mod.callers(fn)
        if not callers:
            if mod.is_passed_around(fn):
                return None
            return SHARED  # an entry point (main handed to app.run, called once)
        return _combine(self._site_status(cs, Ctx(), d + 1) for cs in callers)

    def _instances(self, cls: ClassInfo, d: int) -> Optional[str]:
        """Status of the instances of ``cls``: each ``Thread`` subclass object belongs to its
        thread; otherwise from where the class is instantiated."""
        if d > MAX_DEPTH:
            return None
        mod = cls.scope.module
        if mod.contexts._thread_class(cls):
            return PER_THREAD
        sites = []
        for other in [mod] + mod.importers():
            for cs in other.calls:
                if attr_name(cs.node.func) == cls.name and any(
                        v.kind == api.CLASS and v.info is cls for v in other.infer(cs.node.func, cs.scope, cs.order)):
                    sites.append(cs)
        if not sites:
            return None
        out = []
        for cs in sites:
            if self._created_in_thread_site(cs):
                out.append(LOCAL)
            else:
                out.append(self._site_status(cs, Ctx(), d + 1))
        return _combine(out)
