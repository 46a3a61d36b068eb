"""The module's call graph: which local functions an expression denotes, who calls a function,
whether it is passed around as a callback, the names it references, and run-order traces."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Union

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, FunctionInfo, IndirectCall, NameRef, Scope, StoreSite, TraceEvent
from tfpar_lint.semantic.nodes import arg, attr_name, call_method, keyword

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
        self._attr_args: dict[str, list[cst.Attribute]] = {}
        self._indirect: Optional[dict[int, list[IndirectCall]]] = None
        self._nested: Optional[dict[int, list[FunctionInfo]]] = None
        self._refs_by_origin: dict[tuple, dict[int, list[NameRef]]] = {}
        # name -> (id(function) -> [(index, ref)], refs not yet filed): see _refs_to_function
        self._name_refs_state: dict[str, tuple[dict[int, list], list]] = {}

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
        if not out and isinstance(expr, cst.Name):
            out = self.decorated_by_param(expr, scope, order)
        return out

    def decorated_by_param(self, expr: cst.Name, scope: Scope, order: int) -> list[FunctionInfo]:
        """The functions ``expr`` holds when it is the first parameter of a local decorator
        (``def on_replicas(fn): def wrapper(*a): return strategy.run(fn, args=a)``): every function
        of the module decorated with it, directly (``@on_replicas``) or through a decorator factory
        that defines it (``@distributed(strategy)``, ``def distributed(s): def decorator(fn): ...``)."""
        bs = self.m.lookup(expr.value, scope, order)
        if len(bs) != 1 or bs[0].kind != "param" or bs[0].func is None:
            return []
        deco = bs[0].func
        if not deco.params or bs[0].node is not deco.params[0] or deco.is_lambda:
            return []
        out: list[FunctionInfo] = []
        for fn in self.m.functions:
            for d in fn.decorators:
                target = d.func if isinstance(d, cst.Call) else d
                for v in self.m.infer(target, fn.parent, fn.order):
                    f = v.info if v.kind == api.FUNCTION and isinstance(v.info, FunctionInfo) else None
                    if f is None:
                        continue
                    if f is deco and not isinstance(d, cst.Call):
                        out.append(fn)
                    elif isinstance(d, cst.Call) and deco.parent is f.scope:
                        out.append(fn)  # the factory defines the decorator and returns it
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
            # calls of this module's functions in the project's modules that import it
            names = {fi.name for fi in self.m.functions} | {c.name for c in self.m.classes}
            for other in self.m.importers():
                for cs in other.calls:
                    if attr_name(cs.node.func) in names:
                        # their callees named after this module's functions (``other.callees``
                        # keeps only names ``other`` defines itself)
                        for target in other.callgraph.targets(cs, names):
                            if target.scope.module is self.m:
                                table.setdefault(id(target), []).append(cs)
            self._callers = table
        return self._callers.get(id(fn), [])

    def _function_names(self) -> frozenset[str]:
        if self._names is None:
            self._names = frozenset([fi.name for fi in self.m.functions] + [c.name for c in self.m.classes]
                                    + list(self._wrapper_names().values()))
        return self._names

    def callees(self, cs: CallSite) -> list[FunctionInfo]:
        """Local functions the call site ``cs`` may call (``C(...)`` of a local class calls
        ``C.__init__``)."""
        return self.targets(cs, self._function_names())

    def targets(self, cs: CallSite, names: frozenset[str] | set[str]) -> list[FunctionInfo]:
        """The functions (of any project module) the call site ``cs`` of this module may call,
        when the called name is one of ``names``."""
        f = cs.node.func
        callable_instances = self._call_classes()
        if isinstance(f, cst.Name):
            if f.value not in names and not callable_instances:
                return []
        elif isinstance(f, cst.Attribute):
            if f.attr.value not in names and not callable_instances:
                return []
        out = []
        for v in self.m.infer(f, cs.scope, cs.order):
            if v.kind == api.FUNCTION and v.info is not None:
                out.append(v.info)
            elif v.kind == api.CLASS and v.info is not None and "__init__" in v.info.methods:
                out.append(v.info.methods["__init__"])
            elif callable_instances:
                meth = self.m.values.call_method_of(v)  # an instance called: its class's __call__
                if meth is not None and (meth.scope.module is self.m or meth.name in names):
                    out.append(meth)
        return out

    def _call_classes(self) -> bool:
        """Some class of this module defines ``__call__`` (its instances may be called)."""
        memo = getattr(self, "_call_classes_memo", None)
        if memo is None:
            memo = self._call_classes_memo = any("__call__" in c.methods for c in self.m.classes)
        return memo

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

    def passing_refs(self, fn: FunctionInfo) -> list[cst.CSTNode]:
        """References to ``fn`` other than the callee of a direct call: the places it is handed
        on as a callback (``strategy.run(step)``, ``Thread(target=work)``, ``self.step`` as an
        argument).  A lambda is its own reference."""
        name = fn.name
        if isinstance(fn.node, cst.Lambda):
            # a lambda is its own reference, unless it is bound to a name (``fn = lambda w=w: ...``
            # then ``Thread(target=fn)``): the references to that name
            holder = self._lambda_name(fn)
            if holder is None:
                return [fn.node]
            name = holder
        direct = {id(cs.node.func) for cs in self.callers(fn)}
        if self._refs_by_name is None:
            self._refs_by_name = {}
            for r in self.m.refs:
                self._refs_by_name.setdefault(r.node.value, []).append(r)
            # obj.method handed to a call without being called (e.g. strategy.run(self.step))
            self._attr_args = {}
            for cs in self.m.calls:
                for a in cs.node.args:
                    if isinstance(a.value, cst.Attribute):
                        self._attr_args.setdefault(a.value.attr.value, []).append(a.value)
        wrapped = self._wrapped_refs()
        out = [r.node for r in self._refs_to_function(name, fn, direct) if id(r.node) not in wrapped]
        if fn.cls is not None:
            out.extend(self._attr_args.get(name, ()))
        return out

    def _wrapper_names(self) -> dict[int, str]:
        """``g = tf.function(f)`` (or ``f = tf.function(f)``): id of the reference ``f`` handed to
        ``tf.function`` -> the name ``g`` the wrapper is bound to, when every other reference to
        that name is the callee of a call.  ``tf.function`` passes its arguments on unchanged, so
        calling ``g`` calls ``f``: its calls are ``f``'s callers, and the wrapping hands ``f`` to no
        unseen code."""
        memo = getattr(self, "_wrapper_memo", None)
        if memo is not None:
            return memo
        memo = self._wrapper_memo = {}
        found: list[tuple[int, str]] = []
        for cs, _q in self.m.calls_to(api.TF_FUNCTION):
            target = arg(cs.node, 0, "func")
            if not isinstance(target, cst.Name) or len(cs.node.args) < 1 or cs.node.args[0].keyword is not None:
                continue
            holder = next((b.name for bs in cs.scope.bindings.values() for b in bs
                           if b.kind == "assign" and b.value is cs.node and not b.path), None)
            if holder is not None:
                found.append((id(target), holder))
        if not found:
            return memo
        called = {id(c.node.func) for c in self.m.calls}
        by_name: dict[str, list] = {}
        for r in self.m.refs:
            by_name.setdefault(r.node.value, []).append(r)
        handed = {ref for ref, _ in found}
        for ref, holder in found:
            if all(id(r.node) in called or id(r.node) in handed for r in by_name.get(holder, ())):
                memo[ref] = holder
        return memo

    def _wrapped_refs(self) -> set[int]:
        got = getattr(self, "_wrapped_memo", None)
        if got is None:
            got = self._wrapped_memo = set(self._wrapper_names())
        return got

    def _lambda_name(self, fn: FunctionInfo) -> Optional[str]:
        """The name a lambda is assigned to (``fn = lambda: ...``), or None."""
        for bs in fn.parent.bindings.values():
            for b in bs:
                if b.kind == "assign" and b.value is fn.node and not b.path:
                    return b.name
        return None

    def _refs_to_function(self, name: str, fn: FunctionInfo, direct: set[int]) -> list[NameRef]:
        """The references named ``name`` (not in ``direct``) that may denote ``fn``, in source order.

        Many functions may share a name (a nested ``step_fn`` in each of 2,000 builders): asking
        each of them about every reference of the name was quadratic.  A reference's inferred
        values are final once memoised, so it is filed under the functions it denotes the first
        time it is inferred; one whose inference was cut short (a question already open, see
        ``Inference._guarded``) is not memoised and is inferred again at the next question, and
        one in ``direct`` is not inferred until a question about another function needs it, as
        before."""
        state = self._name_refs_state.get(name)
        if state is None:
            refs = self._refs_by_name.get(name, [])
            state = self._name_refs_state[name] = ({}, list(enumerate(refs)))
        filed, pending = state
        memo = self.m.values._infer_memo
        fresh: list[tuple[int, NameRef]] = []
        still: list[tuple[int, NameRef]] = []
        for k, r in pending:
            if id(r.node) in direct:
                still.append((k, r))
                continue
            vals = self.m.infer(r.node, r.scope, r.order)
            if id(r.node) in memo:
                for fid in {id(v.info) for v in vals if isinstance(v.info, FunctionInfo)}:
                    filed.setdefault(fid, []).append((k, r))
            else:
                still.append((k, r))
                if any(v.info is fn for v in vals):
                    fresh.append((k, r))
        state[1][:] = still
        hits = [kr for kr in filed.get(id(fn), ()) if id(kr[1].node) not in direct] + fresh
        hits.sort(key=lambda kr: kr[0])
        return [r for _, r in hits]

    def is_passed_around(self, fn: FunctionInfo) -> bool:
        """True when ``fn`` is referenced other than by a direct call (a callback)."""
        return bool(self.passing_refs(fn))

    def indirect_calls(self, fn: FunctionInfo) -> list[IndirectCall]:
        """Calls of ``fn`` made by an API it is handed to, with the arguments it receives:
        ``strategy.run(fn, args=(a,), kwargs={...})`` (and ``experimental_run_v2``,
        ``extended.call_for_each_replica``), ``threading.Thread(target=fn, args=(a,))``,
        ``executor.submit(fn, a)``, ``pool.apply_async(fn, args=(a,))``; ``functools.partial(fn, a)``
        handed to one of them prepends its arguments.  ``map``-style calls are recorded with
        unknown arguments."""
        if self._indirect is None:
            self._indirect = {}
            # calls here, and in the project's modules that import this one
            for mod in [self.m] + self.m.importers():
                for f, call in _indirect_in(mod):
                    if mod is self.m or f.scope.module is self.m:
                        self._indirect.setdefault(id(f), []).append(call)
        return self._indirect.get(id(fn), [])

    def handed_over(self, cs: CallSite) -> Iterator[tuple[cst.BaseExpression, Optional[list], Optional[dict], str]]:
        """(callable, positional argument expressions, keyword expressions, how) for each callable
        this call hands to an API that calls it; how is "replica" (``strategy.run`` and friends;
        the receiver is not checked here), "thread" (``Thread``, ``Timer``) or "pool" (``submit``,
        ``map``, ``apply_async``... of any receiver) or "worker" (a parameter-server coordinator's
        ``schedule``: a worker runs it).  Argument lists are None when they cannot be
        told; an item None is one argument that cannot be told (the element ``map`` passes)."""
        node = cs.node
        cm = call_method(node)
        meth = cm[1] if cm is not None else None
        if meth in api.RUN_METHODS or meth == "call_for_each_replica":
            fn = arg(node, 0, "fn")
            if fn is not None and meth == "experimental_run":  # fn(next element of the iterator)
                yield fn, ([None] if arg(node, 1, "input_iterator") is not None else []), {}, "replica"
            elif fn is not None:
                yield fn, _seq(arg(node, 1, "args"), empty=True), _mapping(arg(node, 2, "kwargs")), "replica"
            return
        if meth == "schedule" and cm is not None and any(
                v.qname in api.CLUSTER_COORDINATORS for v in self.m.infer(cm[0], cs.scope, cs.order)):
            # coordinator.schedule(step_fn, args=(per_worker_iterator,)): run on a worker with those arguments
            fn = arg(node, 0, "fn")
            if fn is not None:
                yield fn, _seq(arg(node, 1, "args"), empty=True), _mapping(arg(node, 2, "kwargs")), "worker"
            return
        if meth in ("submit", "apply", "apply_async", "map", "imap", "imap_unordered", "starmap", "map_async",
                    "starmap_async"):
            fn = arg(node, 0, "fn") or arg(node, 0, "func")
            if fn is None:
                return
            if meth == "submit":
                if any(a.star for a in node.args):
                    yield fn, None, None, "pool"
                else:
                    yield fn, [a.value for a in node.args[1:] if a.keyword is None], \
                        {a.keyword.value: a.value for a in node.args[1:] if a.keyword is not None}, "pool"
            elif meth in ("apply", "apply_async"):
                yield fn, _seq(arg(node, 1, "args"), empty=True), _mapping(arg(node, 2, "kwds")), "pool"
            elif meth in ("starmap", "starmap_async"):
                yield fn, None, None, "pool"
            else:  # map(fn, items): one argument, an item
                yield fn, [None], {}, "pool"
            return
        if isinstance(node.func, (cst.Name, cst.Attribute)) and attr_name(node.func) in ("Thread", "Timer"):
            q = self.m.qualified_name(node.func, cs.scope, cs.order)[0]
            if q in api.THREAD_CLASSES:
                fn = keyword(node, "target") or arg(node, 1)
                if fn is not None:
                    yield fn, _seq(keyword(node, "args") or arg(node, 3), empty=True), \
                        _mapping(keyword(node, "kwargs") or arg(node, 4)), "thread"
            elif q == "threading.Timer":
                fn = arg(node, 1, "function")
                if fn is not None:
                    yield fn, _seq(arg(node, 2, "args"), empty=True), _mapping(arg(node, 3, "kwargs")), "thread"

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

    def refs_to(self, value_origin: cst.CSTNode, within: FunctionInfo, *, from_module=None) -> list[NameRef]:
        """References inside ``within`` (names, and ``self.attr``-style attributes) whose every
        possible value was created at ``value_origin`` (or, values of one kind made on several
        branches, at it among others).  With ``from_module`` (another module of
        the project), those whose values made in that module were all made there: the values this
        module's other importers make are the objects of other programs."""
        key = (id(within), id(from_module))
        table = self._refs_by_origin.get(key)
        if table is None:
            # every reference of ``within`` sorted by its one origin, once per function: asked for
            # each object of a module, the answer costs a look-up, not a pass over the function
            table = self._refs_by_origin[key] = {}
            for r in itertools.chain(self.function_refs(within), self.function_attr_refs(within)):
                vals = self.m.infer(r.node, r.scope, r.order)
                if from_module is not None:
                    vals = [v for v in vals if v.site is not None and v.site.scope.module is from_module]
                if not vals:
                    continue
                o = vals[0].origin
                if o is not None and all(v.origin is o for v in vals):
                    table.setdefault(id(o), []).append(r)
                elif all(v.origin is not None and v.kind == vals[0].kind and v.kind != api.UNKNOWN for v in vals) \
                        and _alternatives(vals):
                    # made on two branches (``Adam() if a else SGD()``, if/else), the same kind on
                    # both: the reference uses each of them (what holds on every branch holds)
                    for oid in {id(v.origin) for v in vals}:
                        table.setdefault(oid, []).append(r)
        return list(table.get(id(value_origin), ()))

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
        for key, sites in by_fn.items():
            sites.sort(key=lambda e: e.order)
            by_fn[key] = _evaluation_order(sites)
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


class _PostOrderCalls(cst.CSTVisitor):
    """Calls of one statement in the order Python evaluates them (a call after the calls in its
    callee expression and arguments: ``Trainer().fit()`` runs ``Trainer()`` first)."""

    def __init__(self) -> None:
        super().__init__()
        self.rank: dict[int, int] = {}

    def leave_Call(self, original_node: cst.Call) -> None:
        self.rank[id(original_node)] = len(self.rank)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _evaluation_order(sites: list) -> list:
    """``sites`` (sorted by ``order``, i.e. source pre-order) with the calls of each statement
    that holds nested calls put in evaluation order."""
    out: list = []
    i = 0
    while i < len(sites):
        site = sites[i]
        stmt = site.stmt if isinstance(site, CallSite) else None
        j = i + 1
        if stmt is not None:
            while j < len(sites) and isinstance(sites[j], CallSite) and sites[j].stmt is stmt:
                j += 1
        group = sites[i:j]
        if len(group) > 1:
            v = _PostOrderCalls()
            stmt.visit(v)
            if all(id(g.node) in v.rank for g in group):
                group = sorted(group, key=lambda g: v.rank[id(g.node)])
        out.extend(group)
        i = j
    return out


def _seq(expr: Optional[cst.BaseExpression], empty: bool = False) -> Optional[list]:
    """The items of a tuple/list literal (``args=(a, b)``); ``[]`` for a missing argument when
    ``empty``; None when they cannot be told."""
    if expr is None:
        return [] if empty else None
    if isinstance(expr, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in expr.elements):
        return [e.value for e in expr.elements]
    return None


def _mapping(expr: Optional[cst.BaseExpression]) -> Optional[dict]:
    """The entries of a dict literal with string keys (``kwargs={"x": a}``); ``{}`` when missing."""
    if expr is None:
        return {}
    if isinstance(expr, cst.Name) and expr.value == "None":
        return {}
    if isinstance(expr, cst.Dict):
        out = {}
        for el in expr.elements:
            if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
                return None
            key = el.key.evaluated_value
            if not isinstance(key, str):
                return None
            out[key] = el.value
        return out
    return None


def _indirect_in(mod: "Module") -> Iterator[tuple[FunctionInfo, IndirectCall]]:
    """(function, the API call that runs it) for each callable ``mod``'s calls hand over."""
    for cs in mod.calls:
        for target, pos, kw, _how in mod.handed_over(cs):
            pre: list = []
            prekw: dict = {}
            via = target
            for _ in range(4):  # partial(partial(f, a), b)
                if isinstance(via, cst.Call) and mod.qualified_name(via.func, cs.scope, cs.order)[0] \
                        == "functools.partial" and via.args and not via.args[0].keyword:
                    pre = [a.value for a in via.args[1:] if a.keyword is None and not a.star] + pre
                    prekw.update({a.keyword.value: a.value for a in via.args[1:] if a.keyword is not None})
                    if any(a.star for a in via.args[1:]):
                        pos = None
                    via = via.args[0].value
                else:
                    break
            args = None if pos is None else pre + pos
            kws = None if kw is None else {**prekw, **kw}
            for f in mod.resolve_function(via, cs.scope, cs.order):
                yield f, IndirectCall(cs, via, args, kws)


def _alternatives(vals) -> bool:
    """The values were made on alternative paths: in one statement (``a() if c else b()``) or in
    opposite arms of one ``if`` (not one rebinding another later, which a function reading the
    name may see either of)."""
    sites = [v.site for v in vals]
    if any(s is None for s in sites):
        return False
    for i, a in enumerate(sites):
        for b in sites[i + 1:]:
            if a.stmt is not None and a.stmt is b.stmt:
                continue
            arms = {id(node): arm for node, arm in a.ifs}
            if not any(id(node) in arms and arms[id(node)] != arm for node, arm in b.ifs):
                return False
    return True
