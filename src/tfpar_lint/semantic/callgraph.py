"""The module's call graph: which local functions an expression denotes, who calls a function,
whether it is passed around as a callback, the names it references, and run-order traces."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Union

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, FunctionInfo, NameRef, Scope, StoreSite, TraceEvent
from tfpar_lint.semantic.nodes import arg, attr_name, call_method

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


class CallGraph:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._callers: Optional[dict[int, list[CallSite]]] = None
        self._fn_refs: Optional[dict[int, list[NameRef]]] = None
        self._fn_attr_refs: Optional[dict[int, list[NameRef]]] = None
        self._traces: Optional[list[list[TraceEvent]]] = None
        self._names: Optional[frozenset[str]] = None
        self._refs_by_name: Optional[dict[str, list[NameRef]]] = None
        self._attr_args: frozenset[str] = frozenset()
        self._nested: Optional[dict[int, list[FunctionInfo]]] = None

    def resolve_function(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int) -> list[FunctionInfo]:
        """Local functions an expression may denote (through tf.function, partial, lambdas)."""
        if expr is None:
            return []
        if isinstance(expr, cst.Call):
            q, _ = self.m.qualified_name(expr.func, scope, order)
            if q in api.TF_FUNCTION or q == "functools.partial":
                return self.resolve_function(arg(expr, 0, "func"), scope, order)
        out = []
        for v in self.m.infer(expr, scope, order):
            if v.kind == api.FUNCTION and v.info is not None:
                out.append(v.info)
        return out

    def callers(self, fn: FunctionInfo) -> list[CallSite]:
        """Call sites in this module whose callee resolves to ``fn``."""
        if self._callers is None:
            table: dict[int, list[CallSite]] = {}
            for cs in self.m.calls:
                f = cs.node.func
                if isinstance(f, (cst.Name, cst.Attribute)):
                    for target in self.callees(cs):
                        table.setdefault(id(target), []).append(cs)
            self._callers = table
        return self._callers.get(id(fn), [])

    def _function_names(self) -> frozenset[str]:
        if self._names is None:
            self._names = frozenset([fi.name for fi in self.m.functions] + [c.name for c in self.m.classes])
        return self._names

    def callees(self, cs: CallSite) -> list[FunctionInfo]:
        """Local functions the call site ``cs`` may call (``C(...)`` of a local class calls
        ``C.__init__``)."""
        f = cs.node.func
        names = self._function_names()
        if isinstance(f, cst.Name):
            if f.value not in names:
                return []
        elif isinstance(f, cst.Attribute):
            if f.attr.value not in names:
                return []
        out = []
        for v in self.m.infer(f, cs.scope, cs.order):
            if v.kind == api.FUNCTION and v.info is not None:
                out.append(v.info)
            elif v.kind == api.CLASS and v.info is not None and "__init__" in v.info.methods:
                out.append(v.info.methods["__init__"])
        return out

    def function_refs(self, fn: FunctionInfo) -> list[NameRef]:
        """Name references inside ``fn`` (including nested functions and lambdas)."""
        if self._fn_refs is None:
            self._fn_refs = self._by_function(self.m.refs)
        return self._fn_refs.get(id(fn), [])

    def function_attr_refs(self, fn: FunctionInfo) -> list[NameRef]:
        """``name.attr`` references inside ``fn`` (``self.model``), nested functions included."""
        if self._fn_attr_refs is None:
            self._fn_attr_refs = self._by_function(self.m.attr_refs)
        return self._fn_attr_refs.get(id(fn), [])

    @staticmethod
    def _by_function(refs: list[NameRef]) -> dict[int, list[NameRef]]:
        table: dict[int, list[NameRef]] = {}
        for r in refs:
            s: Optional[Scope] = r.scope
            while s is not None:
                if s.func is not None:
                    table.setdefault(id(s.func), []).append(r)
                s = s.parent
        return table

    def is_passed_around(self, fn: FunctionInfo) -> bool:
        """True when ``fn`` is referenced other than by a direct call (a callback)."""
        if isinstance(fn.node, cst.Lambda):
            return True
        name = fn.name
        direct = {id(cs.node.func) for cs in self.callers(fn)}
        if self._refs_by_name is None:
            self._refs_by_name = {}
            for r in self.m.refs:
                self._refs_by_name.setdefault(r.node.value, []).append(r)
            # obj.method handed to a call without being called (e.g. strategy.run(self.step))
            self._attr_args = frozenset(a.value.attr.value for cs in self.m.calls for a in cs.node.args
                                        if isinstance(a.value, cst.Attribute))
        for r in self._refs_by_name.get(name, ()):
            if id(r.node) not in direct:
                for v in self.m.infer(r.node, r.scope, r.order):
                    if v.info is fn:
                        return True
        return fn.cls is not None and name in self._attr_args

    def handoffs(self, fn: FunctionInfo) -> Optional[list[tuple[CallSite, list, Optional[dict], bool]]]:
        """Calls that hand ``fn`` over to be called later with arguments written at the hand-off,
        as (site, positional argument expressions, keyword argument expressions or None when
        they cannot be read, open: the callee gets further arguments nobody here writes):
        ``threading.Thread(target=fn, args=(...), kwargs={...})`` / ``Timer``,
        ``functools.partial(fn, *a, **k)`` (open), ``executor.submit(fn, *a, **k)``,
        ``pool.apply_async(fn, args, kwds)``, ``pool.map(fn, items)`` (open).  None when ``fn``
        is handed to anything else or referenced other than by a direct call."""
        direct = {id(cs.node.func) for cs in self.callers(fn)}
        out: list = []
        seen_refs: set[int] = set()
        for cs in self.m.calls:
            for i, a in enumerate(cs.node.args):
                v = a.value
                if not ((isinstance(v, cst.Name) and v.value == fn.name)
                        or (fn.cls is not None and isinstance(v, cst.Attribute) and v.attr.value == fn.name)):
                    continue
                if id(v) in direct or not any(x.info is fn for x in self.m.infer(v, cs.scope, cs.order)):
                    continue
                h = self._handoff(cs, a)
                if h is None:
                    return None
                seen_refs.add(id(v))
                out.append(h)
        # any other reference (``jobs = {"a": fn}``, ``f = fn``) may call it with anything
        for r in self.m.refs:
            if r.node.value == fn.name and id(r.node) not in direct and id(r.node) not in seen_refs \
                    and any(x.info is fn for x in self.m.infer(r.node, r.scope, r.order)):
                return None
        return out

    def _handoff(self, cs: CallSite, a: cst.Arg) -> Optional[tuple[CallSite, list, Optional[dict], bool]]:
        call = cs.node
        positional = [x for x in call.args if x.keyword is None and not x.star]
        first = bool(positional) and positional[0] is a
        q, _ = self.m.qualified_name(call.func, cs.scope, cs.order)
        if q == "functools.partial" and first:
            return cs, [x.value for x in positional[1:]], self._keywords(call, skip=()), True
        if q in api.THREAD_CLASSES:
            kw, pos = api.THREAD_TARGET_ARG.get(q, ("target", 1))
            if arg(call, pos, kw) is not a.value:
                return None
            (akw, apos), (kkw, kpos) = api.THREAD_ARGS_ARG.get(q, (("args", 3), ("kwargs", 4)))
            return cs, *self._packed(cs, arg(call, apos, akw), arg(call, kpos, kkw)), False
        cm = call_method(call)
        if cm is None or not first:
            return None
        if not all(v.kind == api.EXECUTOR for v in self.m.infer(cm[0], cs.scope, cs.order)):
            return None
        meth = cm[1]
        if meth == "submit":
            return cs, [x.value for x in positional[1:]], self._keywords(call, skip=()), False
        if meth in ("apply", "apply_async"):
            return cs, *self._packed(cs, arg(call, 1, "args"), arg(call, 2, "kwds")), False
        if meth in ("map", "imap", "imap_unordered", "starmap", "map_async", "starmap_async"):
            return cs, [], {}, True
        return None

    @staticmethod
    def _keywords(call: cst.Call, skip: Iterable[str]) -> Optional[dict]:
        if any(x.star == "**" for x in call.args):
            return None
        return {x.keyword.value: x.value for x in call.args if x.keyword is not None and x.keyword.value not in skip}

    def _packed(self, cs: CallSite, args: Optional[cst.BaseExpression],
                kwargs: Optional[cst.BaseExpression]) -> tuple[list, Optional[dict], ]:
        """The ``args=`` tuple and ``kwargs=`` dict literals of a thread start / ``apply_async``."""
        pos: list = []
        if args is not None:
            items = self.m.container_items(args, cs.scope, cs.order)
            pos = [e for e, _s, _o in items] if items is not None else None
        kws: Optional[dict] = {}
        if kwargs is not None:
            kws = None
            if isinstance(kwargs, cst.Dict) and all(isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
                                                    for el in kwargs.elements):
                kws = {el.key.evaluated_value: el.value for el in kwargs.elements}
        if pos is None:
            return [], None  # positional arguments unknown: every parameter unknown
        return pos, kws

    def enclosing_method(self, fn: FunctionInfo) -> Optional[FunctionInfo]:
        """``fn`` itself if it is a method, else the innermost method it is nested in."""
        for f in self.enclosing_functions(fn.scope):
            if f.cls is not None:
                return f
        return None

    def enclosing_functions(self, scope: Scope) -> Iterator[FunctionInfo]:
        s: Optional[Scope] = scope
        while s is not None:
            if s.func is not None:
                yield s.func
            s = s.parent

    def calls_within(self, fn: FunctionInfo) -> Iterator[CallSite]:
        """Call sites in ``fn`` and in functions nested in it."""
        if self._nested is None:
            self._nested = {}
            for other in self.m.functions:
                for f in self.enclosing_functions(other.parent):
                    self._nested.setdefault(id(f), []).append(other)
        yield from fn.calls
        for other in self._nested.get(id(fn), ()):
            yield from other.calls

    def calls_to(self, qnames: Iterable[str]) -> Iterator[tuple[CallSite, str]]:
        """Call sites whose callee is one of the canonical API names."""
        wanted = frozenset(qnames)
        lasts = {q.rsplit(".", 1)[-1] for q in wanted}
        for cs in self.m.calls:
            last = attr_name(cs.node.func)
            if last not in lasts:
                continue
            q, _ = self.m.qualified_name(cs.node.func, cs.scope, cs.order)
            if q in wanted:
                yield cs, q

    def method_calls(self, names: Iterable[str]) -> Iterator[tuple[CallSite, cst.BaseExpression, str]]:
        wanted = frozenset(names)
        for cs in self.m.calls:
            cm = call_method(cs.node)
            if cm is not None and cm[1] in wanted:
                yield cs, cm[0], cm[1]

    def param_used(self, fn: FunctionInfo, index: int = 0) -> Optional[bool]:
        """Whether ``fn``'s parameter ``index`` is referenced in its body (None: no such param)."""
        if len(fn.params) <= index:
            return None
        pname = fn.params[index].name.value
        return any(r.node.value == pname for r in self.function_refs(fn))

    def refs_to(self, value_origin: cst.CSTNode, within: FunctionInfo) -> list[NameRef]:
        """References inside ``within`` (names, and ``self.attr``-style attributes) whose every
        possible value was created at ``value_origin``."""
        out = []
        for r in itertools.chain(self.function_refs(within), self.function_attr_refs(within)):
            vals = self.m.infer(r.node, r.scope, r.order)
            if vals and all(v.origin is value_origin for v in vals):
                out.append(r)
        return out

    def reaching_exprs(self, name: cst.Name, scope: Scope, order: int,
                       _depth: int = 0) -> Optional[list[tuple[cst.BaseExpression, Scope, int]]]:
        """Right-hand sides whose value may reach ``name`` here, as (expr, scope, order):
        ``x = e`` -> e; ``x += e`` -> e plus what reached ``x`` before.  None when a
        binding is anything else (parameter, import, unpacking, loop target, ``x /= e``, ...)."""
        if _depth > 20:
            return None
        bs = self.m.lookup(name.value, scope, order)
        if not bs:
            return None
        out: list[tuple[cst.BaseExpression, Scope, int]] = []
        for b in bs:
            if b.kind in ("assign", "annassign", "walrus") and b.value is not None and not b.path:
                out.append((b.value, b.scope, b.order))
            elif b.kind == "aug" and isinstance(b.node, cst.AugAssign) \
                    and isinstance(b.node.operator, cst.AddAssign):
                out.append((b.node.value, b.scope, b.order))
                prev = self.reaching_exprs(name, b.scope, b.order, _depth + 1)
                if prev is None:
                    return None
                out.extend(prev)
            else:
                return None
        return out

    def traces(self, max_events: int = 50000) -> list[list[TraceEvent]]:
        """Calls and subscript stores in the order a run executes them.  A call of a module-local
        function is followed by the callee's body (``C()`` of a local class by ``C.__init__``);
        loops count once; every ``if`` branch is included, its condition recorded in
        ``TraceEvent.conds``.  The first trace starts at module level; every function that no
        local code calls (``main`` handed to ``app.run``, callbacks, methods called from
        elsewhere) starts a trace of its own.  Events of different traces are not ordered."""
        if self._traces is not None:
            return self._traces
        by_fn: dict[Optional[int], list[Union[CallSite, StoreSite]]] = {}
        for site in itertools.chain(self.m.calls, self.m.stores):
            by_fn.setdefault(id(site.func) if site.func is not None else None, []).append(site)
        for sites in by_fn.values():
            sites.sort(key=lambda e: e.order)
        names = {f.name for f in self.m.functions} | {c.name for c in self.m.classes}
        reached: set[int] = set()
        budget = [max_events]

        def callees(cs: CallSite) -> list[FunctionInfo]:
            if attr_name(cs.node.func) not in names:
                return []
            out = []
            for v in self.m.infer(cs.node.func, cs.scope, cs.order):
                if v.kind == api.FUNCTION and v.info is not None:
                    out.append(v.info)
                elif v.kind == api.CLASS and v.info is not None and "__init__" in v.info.methods:
                    out.append(v.info.methods["__init__"])
            return out

        def walk(key: Optional[int], conds, via, stack: frozenset, out: list[TraceEvent]) -> None:
            for site in by_fn.get(key, ()):
                if budget[0] <= 0:
                    return
                budget[0] -= 1
                c = conds + site.ifs
                out.append(TraceEvent(site, c, via))
                if isinstance(site, CallSite) and len(stack) < 10:
                    for callee in callees(site):
                        if id(callee) not in stack:
                            reached.add(id(callee))
                            walk(id(callee), c, via + (site,), stack | {id(callee)}, out)

        traces: list[list[TraceEvent]] = [[]]
        walk(None, (), (), frozenset(), traces[0])
        for fn in self.m.functions:
            if id(fn) not in reached and not self.callers(fn):
                t: list[TraceEvent] = []
                reached.add(id(fn))
                walk(id(fn), (), (), frozenset({id(fn)}), t)
                traces.append(t)
        for fn in self.m.functions:  # only reached through a cycle of calls
            if id(fn) not in reached:
                t = []
                reached.add(id(fn))
                walk(id(fn), (), (), frozenset({id(fn)}), t)
                traces.append(t)
        self._traces = traces
        return traces
