"""Writes (part of :class:`tfpar_lint.semantic.threads.Threads`): the variable updates a call a thread
makes performs (optimizer steps, session runs of update ops, Keras training functions and calls), with
the variables written and their status."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, ClassInfo, Scope, Value
from tfpar_lint.semantic.nodes import arg, call_method, keyword
from tfpar_lint.semantic.threadfacts import (
    LOCAL, PER_THREAD, SHARED, SESSION_CLASSES, SESSION_GETTERS, KERAS_FUNCTION, TF1_OPTIMIZER_PREFIX,
    TRAINING_METHODS, OPTIMIZER_STEPS, ASSIGN_METHODS, ASSIGN_FUNCTIONS, GROUPS, Ctx, Step, Write, reads)


class ThreadWrites:
    """Mixed into :class:`tfpar_lint.semantic.threads.Threads`."""

    # ------------------------------------------------------------------ writes
    def writes(self, step: Step) -> Optional[Write]:
        """The variable update ``step``'s call performs, if any."""
        cs, ctx = step.site, step.ctx
        mod = cs.scope.module
        f = cs.node.func
        cm = call_method(cs.node)
        if cm is not None:
            recv, meth = cm
            if meth in OPTIMIZER_STEPS:
                w = self._optimizer_write(cs.node, cs, ctx, "optimizer step")
                if w is not None:
                    return w
            if meth in TRAINING_METHODS:
                vals = mod.infer(recv, cs.scope, cs.order)
                if vals and all(v.kind == api.MODEL for v in vals):
                    return Write(cs, "training call", cs.node, [(mod.code(recv), self.status(recv, cs.scope, cs.order, ctx))])
            if meth == "run":
                w = self._session_write(cs, ctx)
                if w is not None:
                    return w
            if meth == "assign":  # v.assign(f(v)): a read, then a write (assign_add is atomic)
                value = arg(cs.node, 0, "value")
                if value is not None and reads(value, recv):
                    st = self.status(recv, cs.scope, cs.order, ctx)
                    if st is not None:
                        return Write(cs, "read-modify-write", cs.node, [(mod.code(recv), st)])
                pushed = self._push_targets(cs.node, cs.scope, cs.order, ctx)
                if pushed:
                    return Write(cs, "push", cs.node, pushed)
        # a Keras 2 training function: f = K.function(inputs, outputs, updates=...); f(...), also
        # kept in a container (self.steps[0](...))
        if isinstance(f, (cst.Name, cst.Attribute, cst.Subscript)):
            for v in mod.infer(f, cs.scope, cs.order):
                o = v.origin
                if not (isinstance(o, cst.Call) and v.qname in KERAS_FUNCTION):
                    continue
                osite = self._site_of(o)
                if osite is None:
                    continue
                octx = self._owner_ctx(f, cs, ctx)
                # made here, or by a function that returns it (``self.a_opt = self.actor.optimizer()``)
                for kf, ks, ko, kc in self._op_creations(o, osite.scope, osite.order, octx):
                    q = ks.module.qualified_name(kf.func, ks, ko)[0]
                    if not q or api.canonical(q) not in KERAS_FUNCTION:
                        continue
                    updates = keyword(kf, "updates") or arg(kf, 2)
                    if updates is None:
                        continue
                    targets = []
                    for op, s, oo, c in self._op_creations(updates, ks, ko, kc):
                        targets.extend(self._op_targets(op, s, oo, c))
                    if targets:
                        return Write(cs, "training function", kf, targets)
        return None

    def _site_of(self, node: cst.CSTNode) -> Optional[CallSite]:
        for mod in self._modules():
            s = mod.site_of_call.get(id(node))
            if s is not None:
                return s
        return None

    def _owner_ctx(self, expr: cst.BaseExpression, cs: CallSite, ctx: Ctx) -> Ctx:
        """``self`` of the code that made what ``expr`` reaches: for ``recv.attr``, ``recv``."""
        if isinstance(expr, cst.Attribute):
            recv = self._receiver_classes(expr.value, cs.scope, cs.order) or []
            cls = next((c for c, is_cls in recv if not is_cls), None)
            return Ctx(self.status(expr.value, cs.scope, cs.order, ctx), cls)
        return ctx

    def _is_session(self, expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
        vals = self._values(expr, scope, order)
        if not vals:
            return False
        for v in vals:
            q = api.canonical(v.qname) if v.qname else ""
            if q in SESSION_CLASSES or q in SESSION_GETTERS:
                continue
            return False
        return True

    def _session_write(self, cs: CallSite, ctx: Ctx) -> Optional[Write]:
        """``sess.run(fetches)`` of update ops built outside the call (TF1 graph mode)."""
        recv = cs.node.func.value
        if not self._is_session(recv, cs.scope, cs.order):
            return None
        sst = self.status(recv, cs.scope, cs.order, ctx)
        if sst in (LOCAL, PER_THREAD):
            return None  # a session of its own: its variables are its own
        fetches = arg(cs.node, 0, "fetches")
        if fetches is None:
            return None
        targets = []
        first = None
        for op, s, o, c in self._op_creations(fetches, cs.scope, cs.order, ctx):
            t = self._op_targets(op, s, o, c)
            if t and first is None:
                first = op
            targets.extend(t)
        if not targets:
            return None
        return Write(cs, "session run", first, targets)

    def _op_creations(self, expr: cst.BaseExpression, scope: Scope, order: int, ctx: Ctx,
                      _depth: int = 0) -> list[tuple[cst.Call, Scope, int, Ctx]]:
        """The calls that made the graph ops (or update lists) ``expr`` holds: through names,
        lists and tuples (and their unpacking), ``self`` attributes, ``tf.group``, local functions'
        returns; each with the context of the code that made it."""
        if _depth > 12:
            return []
        mod = scope.module
        if isinstance(expr, (cst.List, cst.Tuple)):
            out = []
            for el in expr.elements:
                out += self._op_creations(el.value, scope, order, ctx, _depth + 1)
            return out
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            return self._op_creations(expr.left, scope, order, ctx, _depth + 1) + \
                self._op_creations(expr.right, scope, order, ctx, _depth + 1)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            elt = expr.elt
            if isinstance(elt, cst.Call):
                s = mod.site_of_call.get(id(elt))
                if s is not None:
                    return [(elt, s.scope, s.order, ctx)]
            return []
        if isinstance(expr, cst.Call):
            q = mod.qualified_name(expr.func, scope, order)[0]
            if q in GROUPS:
                out = []
                for a in expr.args:
                    out += self._op_creations(a.value, scope, order, ctx, _depth + 1)
                return out
            fns = [fn for fn in mod.resolve_function(expr.func, scope, order) if fn.returns]
            if fns and not self._is_op(expr, scope, order):
                out = []
                cctx = self._owner_ctx(expr.func, mod.site_of_call.get(id(expr)), ctx) \
                    if isinstance(expr.func, cst.Attribute) and mod.site_of_call.get(id(expr)) else ctx
                for fn in fns:
                    for r, ro in fn.returns:
                        out += self._op_creations(r, fn.scope, ro, cctx, _depth + 1)
                return out
            return [(expr, scope, order, ctx)]
        if isinstance(expr, cst.Name):
            if self._is_self(expr, scope):
                return []
            out = []
            for b in mod.lookup(expr.value, scope, order):
                if b.kind in ("assign", "annassign") and b.value is not None:
                    c = ctx if b.scope is scope else Ctx()
                    if b.path:
                        for el, s, o, cc in self._elements(b.value, b.path, b.scope, b.order, c, _depth + 1):
                            out += self._op_creations(el, s, o, cc, _depth + 1)
                    else:
                        out += self._op_creations(b.value, b.scope, b.order, c, _depth + 1)
                elif b.kind == "param":
                    args = mod.values.param_args(b)
                    for a, s, o, _site in args or ():
                        if a is not None:
                            out += self._op_creations(a, s, o, Ctx(), _depth + 1)
            return out
        if isinstance(expr, cst.Attribute):
            recv = self._receiver_classes(expr.value, scope, order)
            if not recv:
                return []
            base = self.status(expr.value, scope, order, ctx)
            out = []
            for cls, _is_cls in recv:
                bs, owner = self._attr_bindings(cls, expr.attr.value)
                for b in bs or ():
                    if b.value is None:
                        continue
                    c = Ctx(base, owner)
                    if b.path:
                        for el, s, o, cc in self._elements(b.value, b.path, b.scope, b.order, c, _depth + 1):
                            out += self._op_creations(el, s, o, cc, _depth + 1)
                    else:
                        out += self._op_creations(b.value, b.scope, b.order, c, _depth + 1)
            return out
        return []

    def _elements(self, value: cst.BaseExpression, path: tuple[int, ...], scope: Scope, order: int, ctx: Ctx,
                  _depth: int) -> list[tuple[cst.BaseExpression, Scope, int, Ctx]]:
        """Item ``path[0]`` of the tuple ``value`` holds (``a, b = x`` with ``x`` a tuple literal,
        a local function returning one, a name or ``self`` attribute bound to one)."""
        if _depth > 12 or not path or path[0] < 0:
            return []
        i = path[0]
        mod = scope.module
        if isinstance(value, (cst.Tuple, cst.List)):
            els = value.elements
            if i < len(els) and not any(isinstance(e, cst.StarredElement) for e in els):
                return [(els[i].value, scope, order, ctx)]
            return []
        if isinstance(value, cst.Call):
            out = []
            site = mod.site_of_call.get(id(value))
            cctx = self._owner_ctx(value.func, site, ctx) if isinstance(value.func, cst.Attribute) and site else ctx
            for fn in mod.resolve_function(value.func, scope, order):
                for r, ro in fn.returns:
                    out += self._elements(r, path, fn.scope, ro, cctx, _depth + 1)
            return out
        if isinstance(value, cst.Name):
            out = []
            for b in mod.lookup(value.value, scope, order):
                if b.kind in ("assign", "annassign") and b.value is not None and not b.path:
                    out += self._elements(b.value, path, b.scope, b.order, ctx if b.scope is scope else Ctx(),
                                          _depth + 1)
            return out
        if isinstance(value, cst.Attribute):
            recv = self._receiver_classes(value.value, scope, order)
            if not recv:
                return []
            base = self.status(value.value, scope, order, ctx)
            out = []
            for cls, _is_cls in recv:
                bs, owner = self._attr_bindings(cls, value.attr.value)
                for b in bs or ():
                    if b.value is not None and not b.path:
                        out += self._elements(b.value, path, b.scope, b.order, Ctx(base, owner), _depth + 1)
            return out
        return []

    def _is_op(self, call: cst.Call, scope: Scope, order: int) -> bool:
        cm = call_method(call)
        if cm is not None and (cm[1] in OPTIMIZER_STEPS or cm[1] in ASSIGN_METHODS or cm[1] == "get_updates"):
            return True
        q = scope.module.qualified_name(call.func, scope, order)[0]
        return bool(q) and api.canonical(q) in ASSIGN_FUNCTIONS

    def _op_targets(self, op: cst.Call, scope: Scope, order: int, ctx: Ctx) -> list[tuple[str, Optional[str]]]:
        """The variables the update op ``op`` writes, with their status: an optimizer step's
        variables (every trainable variable for ``minimize`` without ``var_list``), the ``params``
        of ``get_updates``, the shared variable a thread's own value is pushed to; [] otherwise
        (a read-modify-write ``assign`` is TFP301's, a pull writes the thread's own variable)."""
        cm = call_method(op)
        if cm is None:
            return []
        recv, meth = cm
        if meth in OPTIMIZER_STEPS:
            w = self._optimizer_write(op, None, ctx, "", scope, order)
            return w.targets if w is not None else []
        if meth == "get_updates":
            if not self._is_optimizer(recv, scope, order):
                return []
            params = keyword(op, "params")
            cands = [params] if params is not None else [a for a in (arg(op, 1), arg(op, 0)) if a is not None]
            for p in cands:
                st = self.status(p, scope, order, ctx)
                if st is not None:
                    return [(scope.module.code(p), st)]
            return []
        return self._push_targets(op, scope, order, ctx)

    def _push_targets(self, op: cst.Call, scope: Scope, order: int, ctx: Ctx) -> list[tuple[str, Optional[str]]]:
        """``g.assign(l)`` (``tf.assign(g, l)``): a thread's own value copied over a variable every
        thread shares (A3C pushing weights instead of gradients): each push overwrites the pushes
        other threads made since this one pulled.  A read-modify-write (``g.assign(g - d)``) is
        TFP301's; a pull (``l.assign(g)``) writes the thread's own variable."""
        target, value = self._assign_parts(op, scope, order)
        if target is None or value is None or reads(value, target):
            return []
        if self.status(target, scope, order, ctx) != SHARED:
            return []
        if self.status(value, scope, order, ctx) not in (PER_THREAD, LOCAL):
            return []
        return [(scope.module.code(target), SHARED)]

    def _values(self, expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> list[Value]:
        """``infer``, and where it answers UNKNOWN (``self.attr`` set in a base class's method,
        which it does not look up; a parameter asked about while a question on it is open), the
        values of the attribute's bindings or of what every caller passes."""
        mod = scope.module
        vals = mod.infer(expr, scope, order)
        if _depth > 4 or not all(v.kind == api.UNKNOWN and v.origin is None for v in vals):
            return vals
        out: list[Value] = []
        if isinstance(expr, cst.Attribute):
            for cls, is_cls in self._receiver_classes(expr.value, scope, order) or ():
                bs, _owner = self._attr_bindings(cls, expr.attr.value)
                for b in bs or ():
                    if b.value is not None and not b.path:
                        out.extend(self._values(b.value, b.scope, b.order, _depth + 1))
                    else:
                        out.extend(b.scope.module.binding_values(b))
        elif isinstance(expr, cst.Name):
            bs = mod.lookup(expr.value, scope, order)
            if len(bs) == 1 and bs[0].kind == "param":
                for a, s, o, _site in mod.values.param_args(bs[0]) or ():
                    if a is not None:
                        out.extend(self._values(a, s, o, _depth + 1))
            elif len(bs) == 1 and bs[0].kind in ("assign", "with") and bs[0].value is not None and not bs[0].path:
                out.extend(self._values(bs[0].value, bs[0].scope, bs[0].order, _depth + 1))
        return out or vals

    def _is_optimizer(self, expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
        mod = scope.module
        vals = self._values(expr, scope, order)
        if not vals:
            return False
        for v in vals:
            if v.kind == api.OPTIMIZER:
                continue
            q = api.canonical(v.qname) if v.qname else ""
            if q.startswith(TF1_OPTIMIZER_PREFIX) and q.endswith("Optimizer"):
                continue
            if q.startswith("tensorflow.optimizers.") and q[len("tensorflow.optimizers."):][:1].isupper():
                continue  # tf.optimizers.Adam: TensorFlow 2's alias of the Keras optimizers
            if isinstance(v.info, ClassInfo) and mod.class_kind(v.info) == api.OPTIMIZER:
                continue
            return False
        return True

    def tf1_optimizer(self, expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
        vals = self._values(expr, scope, order)
        return bool(vals) and all((api.canonical(v.qname) if v.qname else "").startswith(TF1_OPTIMIZER_PREFIX)
                                  for v in vals)

    def _optimizer_write(self, call: cst.Call, cs: Optional[CallSite], ctx: Ctx, what: str,
                         scope: Optional[Scope] = None, order: int = 0) -> Optional[Write]:
        """``opt.apply_gradients(zip(grads, VARS))`` / ``opt.minimize(loss, var_list=VARS)``."""
        if cs is not None:
            scope, order = cs.scope, cs.order
        mod = scope.module
        recv, meth = call_method(call)
        if not self._is_optimizer(recv, scope, order):
            return None
        tf1 = self.tf1_optimizer(recv, scope, order)
        if meth == "apply_gradients":
            gv = arg(call, 0, "grads_and_vars")
            vars_expr = self._vars_of_pairs(gv, scope, order)
            if vars_expr is None:
                return None
            st = self.status(vars_expr[0], vars_expr[1], vars_expr[2], ctx)
            return Write(cs, what, call, [(mod.code(vars_expr[0]), st)])
        var_list = keyword(call, "var_list") or arg(call, 2 if tf1 else 1)
        if var_list is None:
            if not tf1:
                return None
            # TF1 minimize(loss) without var_list: every trainable variable of the graph
            if self._created_in_thread(call, scope):
                return None  # built by the thread (maybe in a graph of its own)
            return Write(cs, what, call, [("every trainable variable", SHARED)])
        return Write(cs, what, call, [(mod.code(var_list), self.status(var_list, scope, order, ctx))])

    def _vars_of_pairs(self, gv: Optional[cst.BaseExpression], scope: Scope, order: int,
                       _depth: int = 0) -> Optional[tuple[cst.BaseExpression, Scope, int]]:
        """The variables of a (gradient, variable) list: ``zip(grads, VARS)``, ``list(zip(...))``,
        a name bound to one, ``[(g, v) for g, v in zip(grads, VARS)]``,
        ``opt.compute_gradients(loss, VARS)``."""
        if gv is None or _depth > 8:
            return None
        mod = scope.module
        if isinstance(gv, cst.Call):
            f = gv.func
            if isinstance(f, cst.Name) and not mod.lookup(f.value, scope, order):
                if f.value == "zip" and len(gv.args) == 2 and not any(a.star for a in gv.args):
                    return gv.args[1].value, scope, order
                if f.value in ("list", "tuple") and gv.args:
                    return self._vars_of_pairs(gv.args[0].value, scope, order, _depth + 1)
            cm = call_method(gv)
            if cm is not None and cm[1] == "compute_gradients":
                vl = keyword(gv, "var_list") or arg(gv, 1)
                return (vl, scope, order) if vl is not None else None
            return None
        if isinstance(gv, (cst.ListComp, cst.GeneratorExp)) and len(gv.for_in.target.elements
                                                                    if isinstance(gv.for_in.target, cst.Tuple) else ()) == 2:
            it = gv.for_in.iter
            if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "zip" \
                    and len(it.args) == 2 and isinstance(gv.elt, cst.Tuple) and len(gv.elt.elements) == 2:
                tgt = gv.for_in.target.elements
                second = gv.elt.elements[1].value
                for i, t in enumerate(tgt):
                    if isinstance(t.value, cst.Name) and isinstance(second, cst.Name) and t.value.value == second.value:
                        return it.args[i].value, scope, order
            return None
        if isinstance(gv, cst.Name):
            bs = mod.lookup(gv.value, scope, order)
            if len(bs) == 1 and bs[0].kind in ("assign", "annassign") and bs[0].value is not None and not bs[0].path:
                return self._vars_of_pairs(bs[0].value, bs[0].scope, bs[0].order, _depth + 1)
        return None

    def session_rmw(self, step: Step) -> list[tuple[cst.Call, str]]:
        """TF1: ``sess.run(ops)`` where an op is ``v.assign(f(v))`` (or ``tf.assign(v, f(v))``,
        ``K.update(v, f(v))``) built outside the call, ``v`` shared by every thread: a read and a
        write of ``v`` in one run, which concurrent runs interleave.  (op, code of ``v``) each."""
        cs, ctx = step.site, step.ctx
        cm = call_method(cs.node)
        if cm is None or cm[1] != "run" or not self._is_session(cm[0], cs.scope, cs.order):
            return []
        if self.status(cm[0], cs.scope, cs.order, ctx) in (LOCAL, PER_THREAD):
            return []
        fetches = arg(cs.node, 0, "fetches")
        if fetches is None:
            return []
        out = []
        for op, s, o, c in self._op_creations(fetches, cs.scope, cs.order, ctx):
            target, value = self._assign_parts(op, s, o)
            if target is None or value is None or not reads(value, target):
                continue
            if self.status(target, s, o, c) == SHARED:
                out.append((op, s.module.code(target)))
        return out

    def _assign_parts(self, op: cst.Call, scope: Scope, order: int):
        """(variable, new value) of an ``assign`` op (method or function form), else (None, None)."""
        cm = call_method(op)
        if cm is not None and cm[1] == "assign":
            return cm[0], arg(op, 0, "value")
        q = scope.module.qualified_name(op.func, scope, order)[0]
        if q and api.canonical(q) in ("tensorflow.assign", "keras.backend.update"):
            return arg(op, 0, "ref") or arg(op, 0, "x"), arg(op, 1, "value") or arg(op, 1, "new_x")
        return None, None
