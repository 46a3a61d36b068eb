"""Locks and late binding (part of :class:`tfpar_lint.semantic.threads.Threads`): the locks held on a
thread's way to a call, locks that cannot exclude (made per thread), and thread targets that read a loop
variable late."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, FunctionInfo, Scope
from tfpar_lint.semantic.nodes import attr_name, call_method
from tfpar_lint.semantic.walk import contains
from tfpar_lint.semantic.threadfacts import (
    SHARED, NOT_LOCKS, NOT_LOCK_METHODS, Ctx, Step, ThreadRun, Write)


class ThreadLocks:
    """Mixed into :class:`tfpar_lint.semantic.threads.Threads`."""

    # ------------------------------------------------------------------ locks
    def _is_lock(self, expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[bool]:
        """True: a lock; False: certainly not one (``tf.device``, ``tape``); None: unknown."""
        mod = scope.module
        e = expr
        if isinstance(e, cst.Call):
            q = mod.qualified_name(e.func, scope, order)[0]
            if q in NOT_LOCKS or (q and api.canonical(q).startswith(("tensorflow.", "keras."))
                                  and api.kind_of_constructor(api.canonical(q)) != api.LOCK):
                return False
            cm = call_method(e)
            if cm is not None and cm[1] in NOT_LOCK_METHODS:
                return False
            if cm is not None:  # a method of a TensorFlow object (coord.stop_on_exception())
                recv = mod.infer(cm[0], scope, order)
                if recv and all(v.kind != api.LOCK and api.canonical(v.qname or "").startswith(("tensorflow.", "keras."))
                                for v in recv):
                    return False
        kinds = {v.kind for v in mod.infer(e, scope, order)}
        if api.LOCK in kinds:
            return True
        if kinds & {api.TAPE, api.STRATEGY, api.MODEL, api.VARIABLE, api.OPTIMIZER, api.DATASET}:
            return False
        return None

    def _with_locks(self, cs: CallSite, ctx: Ctx) -> tuple:
        out = []
        for item in cs.withs:
            lock = self._is_lock(item.item, cs.scope, cs.order)
            if lock is False:
                continue
            out.append((item.item, cs, self.status(item.item, cs.scope, cs.order, ctx) if lock else None))
        return tuple(out)

    def _acquired(self, fn: FunctionInfo, ctx: Ctx) -> tuple:
        """``lock.acquire()`` anywhere in ``fn`` (pairs are not matched: the whole function
        counts as holding it), and ``tf.CriticalSection.execute``."""
        out = []
        for c in fn.scope.module.calls_within(fn):
            cm = call_method(c.node)
            if cm is not None and cm[1] in ("acquire", "execute"):
                lock = self._is_lock(cm[0], c.scope, c.order)
                if lock is False:
                    continue
                out.append((cm[0], c, self.status(cm[0], c.scope, c.order, ctx) if lock else None))
        return tuple(out)

    # ------------------------------------------------------------------ late binding
    def late_bound(self) -> list[tuple[FunctionInfo, CallSite, str, cst.CSTNode]]:
        """Thread targets that read a loop variable late: a lambda or nested function made in a
        loop (or comprehension) and handed to a thread or a pool, reading a name the loop rebinds
        (its target, or a name assigned in its body) instead of taking it as a parameter or
        default.  (function, start, name, the binding statement) each; a loop that waits for the
        thread in the same iteration (``join()``, ``result()``) binds nothing late."""
        out = []
        seen: set[tuple[int, str]] = set()
        m = self.m
        for cs in m.calls:
            for target, _a, _k, how in m.handed_over(cs):
                if how == "pool":
                    recv = m.infer(cs.node.func.value, cs.scope, cs.order)
                    if not recv or any(v.kind != api.EXECUTOR for v in recv):
                        continue
                    if attr_name(cs.node.func) not in ("submit", "apply_async"):
                        continue
                elif how != "thread":
                    continue
                for fn in m.resolve_function(target, cs.scope, cs.order):
                    if fn.scope.module is not m or fn.cls is not None or fn.parent.kind == "class":
                        continue
                    for name, kind, loop in self._rebound_names(fn):
                        if (id(fn), name) in seen:
                            continue
                        if kind == "for" and self._waits_in(loop, cs):
                            continue
                        seen.add((id(fn), name))
                        out.append((fn, cs, name, loop))
        return out

    def _rebound_names(self, fn: FunctionInfo) -> Iterator[tuple[str, str, cst.CSTNode]]:
        m = self.m
        params = {p.name.value for p in fn.params}
        names: dict[str, cst.Name] = {}
        for r in m.function_refs(fn):
            if r.scope is fn.scope or self._within(r.scope, fn):
                if r.node.value not in params:
                    names.setdefault(r.node.value, r.node)
        for name, node in names.items():
            bs = m.lookup(name, fn.scope, 10**9)
            if not bs or any(self._within(b.scope, fn) for b in bs):
                continue  # bound inside the function itself
            for b in bs:
                if b.kind == "comp" and self._within_scope(fn.scope, b.scope):
                    yield name, "comp", b.node
                    break
                if b.kind in ("for", "assign", "annassign", "aug") and b.scope is fn.parent:
                    loop = b.node if b.kind == "for" else self._loop_around(b.node, fn.parent)
                    if loop is not None and isinstance(loop, (cst.For, cst.While)) and contains(loop.body, fn.node):
                        yield name, "for", loop
                        break

    @staticmethod
    def _within_scope(scope: Scope, outer: Scope) -> bool:
        s: Optional[Scope] = scope
        while s is not None:
            if s is outer:
                return True
            s = s.parent
        return False

    def _loop_around(self, stmt: cst.CSTNode, scope: Scope) -> Optional[cst.CSTNode]:
        """The innermost ``for``/``while`` of ``scope``'s own body holding ``stmt``."""
        body = scope.node.body if hasattr(scope.node, "body") else None
        if body is None:
            return None
        found: list[cst.CSTNode] = []

        class V(cst.CSTVisitor):
            def __init__(self):
                self.stack: list[cst.CSTNode] = []

            def on_visit(self, node: cst.CSTNode) -> bool:
                if found:
                    return False
                if node is stmt:
                    loops = [n for n in self.stack if isinstance(n, (cst.For, cst.While))]
                    if loops:
                        found.append(loops[-1])
                    return False
                if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                    return False
                self.stack.append(node)
                return True

            def on_leave(self, node: cst.CSTNode) -> None:
                if self.stack and self.stack[-1] is node:
                    self.stack.pop()

        scope.node.visit(V()) if scope.kind == "module" else body.visit(V())
        return found[0] if found else None

    def _waits_in(self, loop: cst.CSTNode, start: CallSite) -> bool:
        """The loop body waits for what it started (``t.join()``, ``future.result()``)."""
        for cs in self.m.calls:
            if cs.scope is start.scope and attr_name(cs.node.func) in ("join", "result") \
                    and isinstance(cs.node.func, cst.Attribute) and contains(loop.body, cs.node):
                return True
        return False

    # ------------------------------------------------------------------ locks that cannot exclude
    def weak_locks(self, run: ThreadRun) -> Iterator[tuple[tuple, Step, Write]]:
        """Locks made for each thread (or by the thread) held around an update of shared
        variables: (guard, step, write)."""
        self._current = run
        for st in self.steps(run):
            self._current = run
            if not st.guards:
                continue
            w = self.writes(st)
            if w is None or not w.shared:
                continue
            if any(g[2] in (SHARED, None) for g in st.guards):
                continue  # one of the locks held may exclude
            yield st.guards[-1], st, w
        self._current = None

    def lock_origin(self, expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[cst.CSTNode]:
        """Where the lock ``expr`` holds was made (the ``Lock()`` call), when it can be told."""
        mod = scope.module
        for v in mod.infer(expr, scope, order):
            if v.kind == api.LOCK and isinstance(v.origin, cst.Call):
                return v.origin
        return None

    def function_of(self, node: cst.CSTNode) -> Optional[FunctionInfo]:
        """The function whose body holds the call ``node`` (None at module level)."""
        site = self._site_of(node)
        return site.func if site is not None else None

    def guarded_everywhere(self, node: cst.Call) -> bool:
        """Every thread path that reaches the call ``node`` holds a lock that may exclude (one
        shared by the threads, or one the analysis cannot place)."""
        found = False
        for run in self.runs():
            for st in self.steps(run):
                if st.site.node is node:
                    found = True
                    if not any(g[2] in (SHARED, None) for g in st.guards):
                        return False
        return found
