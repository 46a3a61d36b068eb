"""Contexts a piece of code runs in: inside ``strategy.scope()`` (lexically or through every
caller), in a replica function (run by ``strategy.run`` and friends), in a Python thread, in a
``tf.function`` trace."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Union

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, ClassInfo, FunctionInfo, Scope, Value
from tfpar_lint.semantic.nodes import arg, attr_name, call_method, keyword
from tfpar_lint.semantic.walk import syntax_children

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


# Callers followed up a chain (f called only from g, called only from h, ...) at most.
MAX_CALL_DEPTH = 50


class Contexts:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._replica: Optional[dict[int, list[Value]]] = None
        self._runs: Optional[list[tuple[CallSite, cst.BaseExpression, str, list[Value]]]] = None
        self._threads: Optional[dict[int, list[CallSite]]] = None
        self._traced_memo: dict[int, Optional[bool]] = {}
        self._fn_scope_memo: dict[int, tuple[list[Value], bool]] = {}
        self._owns_memo: dict[int, bool] = {}
        self._made_memo: dict[int, list] = {}
        self.replica_fn_infos: dict[int, FunctionInfo] = {}
        self.thread_fn_infos: dict[int, FunctionInfo] = {}

    def scope_items(self, site: CallSite) -> tuple[list[Value], bool]:
        """Strategies whose ``scope()`` is lexically open at ``site`` and whether an
        unresolved ``X.scope()`` is open too (then the site may be in a scope)."""
        known: list[Value] = []
        maybe = False
        for item in site.withs:
            e = item.item
            if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "scope":
                vals = self.m.infer(e.func.value, site.scope, site.order)
                strat = [v for v in vals if v.kind == api.STRATEGY]
                if strat and len(strat) == len(vals):
                    known.extend(strat)
                else:
                    maybe = True
            elif isinstance(e, cst.Call):
                k, mb = self._scope_helper(e, site)
                known.extend(k)
                maybe = maybe or mb
        return known, maybe

    def _scope_helper(self, call: cst.Call, site: CallSite) -> tuple[list[Value], bool]:
        """A ``with`` item that calls a helper for the scope: a local function or method that
        returns ``strategy.scope()`` (on some path: ``s.scope() if s else nullcontext()``) gives
        that strategy; an unknown helper handed a strategy (``get_strategy_scope(strategy)``)
        may open its scope."""
        q, _ = self.m.qualified_name(call.func, site.scope, site.order)
        if q.split(".", 1)[0] in ("tensorflow", "keras", "contextlib", "threading"):
            return [], False  # tf.device, tf.GradientTape, nullcontext, a lock: not a strategy's scope
        fns = self.m.resolve_function(call.func, site.scope, site.order)
        if fns:
            known: list[Value] = []
            for fn in fns:
                for ret, order in fn.returns:
                    for e in (ret.body, ret.orelse) if isinstance(ret, cst.IfExp) else (ret,):
                        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) \
                                and e.func.attr.value == "scope" and not e.args:
                            known.extend(v for v in self.m.infer(e.func.value, fn.scope, order)
                                         if v.kind == api.STRATEGY)
            return known, False
        for a in call.args:
            if not a.star and any(v.kind == api.STRATEGY for v in self.m.infer(a.value, site.scope, site.order)):
                return [], True
        return [], False

    def scope_strategies(self, site: CallSite) -> tuple[list[Value], bool]:
        """Strategies in scope at ``site``: lexical ones plus, when the enclosing
        function is only ever called from inside a scope, that scope's.
        Second item: True when it cannot be decided (unknown scope / callers)."""
        known, maybe = self.scope_items(site)
        if site.func is not None:
            fk, fmaybe = self.function_scope(site.func)
            known = known + fk
            maybe = maybe or fmaybe
        if not known and self.default_strategy_set():
            maybe = True  # the strategy may be the global default by then: in its scope everywhere
        return known, maybe

    def stable_conds(self, order: int, scope: Scope, value: Optional[cst.BaseExpression] = None) -> tuple:
        """The enclosing ``if`` branches at ``order`` (in ``scope``'s method) whose tests hold the
        same in every method of the class once it is built: pure tests reading only attributes of
        ``self`` that no method but the constructor binds.  ((test text, in the body?), ...).  With
        the ``value`` stored there: in the ``else`` of ``if A and x is not None:``, what ``x = ...``
        stores is not None only where ``A`` is false (A's else branch)."""
        ctx = self.m.if_context.get(order)
        if not ctx:
            return ()
        meth = self.m.values._method_of(scope)
        if meth is None or meth.cls is None or not meth.params:
            return ()
        me = meth.params[0].name.value
        out = []
        for iid, in_body in ctx:
            node = self.m.if_nodes.get(iid)
            if node is None:
                continue
            if self._stable_test(node.test, me, meth.cls):
                out.append((self._text(node.test), in_body))
            elif not in_body and isinstance(value, cst.Name) and isinstance(node.test, cst.BooleanOperation) \
                    and isinstance(node.test.operator, cst.And) and _not_none_test(node.test.right, value.value) \
                    and self._stable_test(node.test.left, me, meth.cls):
                out.append((self._text(node.test.left), False))
        return tuple(out)

    def _text(self, e: cst.BaseExpression) -> str:
        return " ".join(self.m.tree.code_for_node(e).split())

    def _stable_test(self, test: cst.BaseExpression, me: str, cls: ClassInfo) -> bool:
        if not _pure(test):
            return False
        stack: list[cst.CSTNode] = [test]
        seen_attr = False
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == me:
                bs = cls.attrs.get(n.attr.value) or []
                if not bs or any(b.scope.func is None or b.scope.func.name != "__init__" for b in bs):
                    return False
                seen_attr = True
                continue
            if isinstance(n, cst.Name) and n.value not in ("None", "True", "False"):
                return False
            stack.extend(syntax_children(n))
        return seen_attr

    def contradicts(self, v: Value, site: CallSite) -> bool:
        """``v`` (or what it was drawn from) was made or carried on branches that cannot be taken
        with the site's (:meth:`.paths.Paths.reaches_with`), or stored under a branch of a stable
        test (see :meth:`stable_conds`) that the code at ``site`` runs only on the other branch of."""
        if not self.m.paths.reaches_with(v, site):
            return True  # made or carried on branches that cannot run with the site's
        here = dict(self.stable_conds(site.order, site.scope)) if site.ifs else {}
        if not here:
            return False
        seen = 0
        while v is not None and seen < 30:
            for text, branch in v.conds:
                if text in here and here[text] != branch:
                    return True
            v, seen = v.source, seen + 1
        return False

    def default_strategy_set(self) -> bool:
        """The module makes a strategy the global default
        (``tf.distribute.experimental_set_strategy(strategy)``): from then on, every object is
        created in its scope, wherever the code stands."""
        memo = getattr(self, "_set_strategy_memo", None)
        if memo is None:
            memo = self._set_strategy_memo = any(
                not (isinstance(arg(cs.node, 0, "strategy"), cst.Name) and arg(cs.node, 0, "strategy").value == "None")
                for cs, _q in self.m.calls_to(api.SET_STRATEGY))
        return memo

    def function_scope(self, fn: FunctionInfo, _seen: Optional[set] = None) -> tuple[list[Value], bool]:
        """Strategies in scope for the whole body of ``fn`` (from its callers)."""
        key = id(fn)
        if key in self._fn_scope_memo:
            return self._fn_scope_memo[key]
        _seen = _seen or set()
        if key in _seen or len(_seen) > MAX_CALL_DEPTH:  # a cycle, or a caller chain too long to follow
            return [], True
        _seen.add(key)
        decorated = self._decorator_scope(fn)
        if decorated:
            res: tuple[list[Value], bool] = (decorated, False)
        elif self.owns_scope(fn):
            # it makes its strategy, or enters a strategy's scope itself: no caller runs it under
            # that scope (the strategy does not exist yet, or its scope would be entered twice)
            res = ([], False)
        elif not self.m.callers(fn) and fn.name == "__init__" and fn.cls is not None and self._class_owns_scope(fn.cls):
            # the constructor of a class that enters its strategy's scope itself (``with
            # self.strategy.scope():`` in a method): it is built before that scope is entered
            res = ([], False)
        else:
            callers = self.m.callers(fn)
            if not callers and self.m.enclosing_method(fn) is not None:
                # a method (or a function in one) that no code here calls: its object is built and
                # driven from elsewhere, maybe under a scope (a trainer built in `with strategy.scope()`)
                res = ([], True)
            elif not callers and self.m.kinds.takes_strategy(fn):
                # a function called from elsewhere with the strategy as an argument
                # (`build(args, model, strategy)`): its caller may well hold the scope
                res = ([], True)
            elif not callers:
                # a function defined but never called here (main() handed to app.run): judge the
                # body as written
                res = ([], False)
            else:
                per_caller = []
                maybe = False
                for cs in callers:
                    k, m = self.scope_items(cs)
                    if cs.func is not None:
                        fk, fm = self.function_scope(cs.func, _seen)
                        k, m = k + fk, m or fm
                    per_caller.append(k)
                    maybe = maybe or m
                if all(per_caller):
                    res = (per_caller[0], maybe)
                else:
                    # some callers are outside every scope
                    res = ([], maybe or any(per_caller))
        self._fn_scope_memo[key] = res
        return res

    def owns_scope(self, fn: FunctionInfo) -> bool:
        """``fn``'s own body creates a strategy (a constructor, or a local factory that makes one)
        or takes a strategy's ``scope()`` (of a strategy or of an object whose kind is unknown)."""
        memo = self._owns_memo
        if id(fn) in memo:
            return memo[id(fn)]
        memo[id(fn)] = False
        found = False
        for cs in fn.calls:
            if cs.func is not fn:
                continue
            cm = call_method(cs.node)
            if cm is not None and cm[1] == "scope" and not cs.node.args:
                recv = self.m.infer(cm[0], cs.scope, cs.order)
                if all(v.kind in (api.STRATEGY, api.UNKNOWN) for v in recv):
                    found = True
                    break
                continue
            vals = self.m.infer_at(cs.node, cs)
            if vals and all(v.kind == api.STRATEGY and v.origin is cs.node and v.qname not in api.STRATEGY_GETTERS
                            for v in vals):
                found = True
                break
        memo[id(fn)] = found
        return found

    def _class_owns_scope(self, cls: ClassInfo) -> bool:
        """A method of ``cls`` (not its constructor) enters the scope of a strategy the object holds
        (``with self.distribute_strategy.scope():``)."""
        methods = {id(meth): meth for name, meth in cls.methods.items() if name != "__init__" and meth.params}
        for item, scope, order, func, _ifs in self.m.with_items:
            meth = methods.get(id(func))
            e = item.item
            if meth is None or not isinstance(e, cst.Call) or e.args:
                continue
            cm = call_method(e)
            if cm is None or cm[1] != "scope" or not isinstance(cm[0], cst.Attribute) \
                    or not isinstance(cm[0].value, cst.Name) or cm[0].value.value != meth.params[0].name.value:
                continue
            recv = self.m.infer(cm[0], scope, order)
            if recv and all(v.kind == api.STRATEGY for v in recv):
                return True
        return False

    def strategies_made_in(self, fn: Optional[FunctionInfo]) -> list[tuple[CallSite, Value]]:
        """The strategies the body of ``fn`` (None: module-level code) creates, with the call that
        creates each (constructors, and local factories that make one; not ``get_strategy()``)."""
        memo = self._made_memo
        key = id(fn) if fn is not None else 0
        if key not in memo:
            memo[key] = []
            calls = fn.calls if fn is not None else [cs for cs in self.m.calls if cs.func is None]
            for cs in calls:
                if cs.func is not fn:
                    continue
                vals = self.m.infer_at(cs.node, cs)
                memo[key].extend((cs, v) for v in vals if v.kind == api.STRATEGY and v.origin is cs.node
                                 and v.qname not in api.STRATEGY_GETTERS)
        return memo[key]

    def scope_entered(self, strategy: Value) -> Optional[bool]:
        """Whether some ``with`` of the module enters ``strategy``'s scope: True (a with item gives
        that strategy's scope), None (a with item might: an unresolved scope, a stored scope or
        context entered by name), False (none does)."""
        maybe = False
        for item, scope, order, func, ifs in self.m.with_items:
            e = item.item
            if not isinstance(e, cst.Call):
                maybe = True  # `with strategy_scope:` (a scope made earlier), `with lock:`
                continue
            site = CallSite(e, scope, func, order, (item,), ifs, (), 0)
            known, mb = self.scope_items(site)
            if any(v.origin is strategy.origin for v in known):
                return True
            maybe = maybe or mb
        return None if maybe else False

    def _decorator_scope(self, fn: FunctionInfo) -> list[Value]:
        """Strategies a local decorator of ``fn`` opens around every call of it: the decorator's
        wrapper calls the decorated function (its first parameter) under ``with strategy.scope():``."""
        for d in fn.decorators:
            if isinstance(d, cst.Call):
                continue  # a decorator factory: not followed
            for deco in self.m.resolve_function(d, fn.parent, fn.order):
                if not deco.params or deco.is_lambda:
                    continue
                param = deco.params[0]
                for cs in self.m.calls_within(deco):
                    f = cs.node.func
                    if not isinstance(f, cst.Name) or f.value != param.name.value:
                        continue
                    bs = self.m.lookup(f.value, cs.scope, cs.order)
                    if len(bs) != 1 or bs[0].node is not param:
                        continue
                    known, maybe = self.scope_items(cs)
                    if known and not maybe:
                        return known
        return []

    def caught(self, site: CallSite, errors: Iterable[str]) -> bool:
        """Is ``site`` in the body of a ``try`` (of its own function) with a handler naming one of
        the built-in exceptions ``errors`` (``except RuntimeError:``, ``except (ValueError,
        RuntimeError) as e:``)?  The error is caught on purpose there (a demonstration, a probe of
        what the runtime supports); a bare or ``Exception`` handler is not counted."""
        wanted = frozenset(errors)
        for t in site.trys:
            for h in t.handlers:
                types = h.type.elements if isinstance(h.type, cst.Tuple) else ([h.type] if h.type else [])
                for e in types:
                    e = e.value if isinstance(e, cst.Element) else e
                    if isinstance(e, cst.Name) and e.value in wanted and not self.m.lookup(e.value, site.scope,
                                                                                          site.order):
                        return True
        return False

    def exclusive(self, a: CallSite, b: CallSite) -> bool:
        """Can ``a`` and ``b`` never both run?  They sit in opposite arms of two ``if`` statements of
        one function whose tests are the same pure expression (names, attributes, constant
        subscripts, comparisons, ``and``/``or``/``not``; no call), with nothing that the test reads
        rebound between them: the two tests always agree (``if args.gpus > 1:`` builds the
        strategy, a later ``if args.gpus > 1:`` uses it).  Or their branches cannot all be taken in
        one run (:mod:`.paths`: ``if strategy is None:`` and ``if strategy:``, in one function or,
        on an attribute only the constructor sets, in two methods)."""
        if not a.ifs or not b.ifs:
            return False
        if not self.m.paths.together(a.ifs, b.ifs):
            return True
        if a.func is not b.func:
            return False
        for ia, arm_a in a.ifs:
            for ib, arm_b in b.ifs:
                if arm_a == arm_b or ia is ib:
                    continue
                if self._same_pure_test(ia.test, ib.test, a, b):
                    return True
        return False

    def _same_pure_test(self, x: cst.BaseExpression, y: cst.BaseExpression, a: CallSite, b: CallSite) -> bool:
        code = self.m.tree.code_for_node
        tx, ty = " ".join(code(x).split()), " ".join(code(y).split())
        if tx != ty or not _pure(x):
            return False
        lo, hi = min(a.order, b.order), max(a.order, b.order)
        roots = set()
        stack: list[cst.CSTNode] = [x]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                roots.add(n.value)
            elif isinstance(n, cst.Attribute):
                stack.append(n.value)
            else:
                stack.extend(syntax_children(n))
        scope = a.scope
        for name in roots:
            s = scope
            while s is not None:
                if any(lo < bnd.order < hi for bnd in s.bindings.get(name, ())):
                    return False  # rebound between the two tests
                s = s.parent
        for target, _value, _scope, order in self.m.attr_assigns:
            if lo < order < hi:
                root = target
                while isinstance(root, cst.Attribute):
                    root = root.value
                if isinstance(root, cst.Name) and root.value in roots:
                    return False  # args.gpus = ... between them
        return True

    def replica_runs(self) -> list[tuple[CallSite, cst.BaseExpression, str, list[Value]]]:
        """Calls that run a function on every replica: ``strategy.run(fn, args=...)`` (and
        ``experimental_run_v2``), ``strategy.extended.call_for_each_replica(fn, args=...)``; as
        (call site, strategy expression, method, the strategies it may be)."""
        if self._runs is None:
            self._runs = []
            for cs in self.m.calls:
                cm = call_method(cs.node)
                if cm is None:
                    continue
                recv, meth = cm
                if meth == "call_for_each_replica" and isinstance(recv, cst.Attribute) \
                        and recv.attr.value == "extended":
                    recv = recv.value
                elif meth not in api.RUN_METHODS:
                    continue
                strat = [v for v in self.m.infer(recv, cs.scope, cs.order) if v.kind == api.STRATEGY]
                if not strat and self.m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order):
                    strat = self.m.kinds.strategy_by_use(recv, cs)
                if strat:
                    self._runs.append((cs, recv, meth, strat))
        return self._runs

    def replica_functions(self) -> dict[int, list[Value]]:
        """id(FunctionInfo) -> strategies whose ``run`` executes it (transitively
        including local functions called from a replica function)."""
        if self._replica is not None:
            return self._replica
        table: dict[int, list[Value]] = {}
        self.replica_fn_infos: dict[int, FunctionInfo] = {}
        work: list[FunctionInfo] = []
        runs = [(self.m, r) for r in self.replica_runs()]
        # this module's functions run by the project's modules that import it (steps.train_step)
        runs += [(other, r) for other in self.m.importers() for r in other.replica_runs()]
        for mod, (cs, _recv, _meth, strat) in runs:
            fn_expr = arg(cs.node, 0, "fn")
            fns = mod.resolve_function(fn_expr, cs.scope, cs.order)
            if not fns:  # the decorated function, run by a local decorator's wrapper
                fns = mod.contexts.decorated_by_param(fn_expr, cs)
            for fn in fns:
                if fn.scope.module is not self.m and mod is not self.m:
                    continue
                table.setdefault(id(fn), []).extend(strat)
                self.replica_fn_infos[id(fn)] = fn
                work.append(fn)
        self._add_callees(table, self.replica_fn_infos, work)
        self._replica = table
        return table

    def decorated_by_param(self, expr: Optional[cst.BaseExpression], site: CallSite) -> list[FunctionInfo]:
        """See ``CallGraph.decorated_by_param``."""
        if not isinstance(expr, cst.Name):
            return []
        return self.m.callgraph.decorated_by_param(expr, site.scope, site.order)

    def replica_run_sites(self, fn: FunctionInfo) -> list[CallSite]:
        """The ``strategy.run``-like call sites (of this module or of the project's modules that
        import it) that run ``fn`` on every replica: directly, or by running a local function
        that calls it."""
        out: list[CallSite] = []
        seen: set[int] = set()
        work = [fn]
        runs = [(self.m, r) for r in self.replica_runs()] + \
            [(other, r) for other in self.m.importers() for r in other.replica_runs()]
        table = self.replica_functions()
        while work and len(seen) <= MAX_CALL_DEPTH:
            f = work.pop()
            if id(f) in seen or id(f) not in table:
                continue
            seen.add(id(f))
            for mod, (cs, _recv, _meth, _strat) in runs:
                if any(g is f for g in mod.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order)):
                    out.append(cs)
            for cs in self.m.callers(f):
                if cs.func is not None:
                    work.extend(self.m.enclosing_functions(cs.scope))
        return out

    def replica_strategies(self, scope: Scope) -> list[Value]:
        """Strategies whose replica function contains ``scope`` (empty if none)."""
        table = self.replica_functions()
        for f in self.m.enclosing_functions(scope):
            if id(f) in table:
                return table[id(f)]
        return []

    def in_replica_fn(self, scope: Scope) -> bool:
        return bool(self.replica_strategies(scope))

    def thread_targets(self) -> dict[int, list[CallSite]]:
        """id(FunctionInfo) -> call sites that start it in a Python thread."""
        if self._threads is not None:
            return self._threads
        table: dict[int, list[CallSite]] = {}
        self.thread_fn_infos: dict[int, FunctionInfo] = {}
        # calls here, and in the project's modules that import this one (Thread(target=workers.loop))
        for mod in [self.m] + self.m.importers():
            for cs in mod.calls:
                for target, _args, _kwargs, how in mod.handed_over(cs):
                    if how == "pool":  # only thread pools (not process pools, not other objects' map)
                        recv_vals = mod.infer(cs.node.func.value, cs.scope, cs.order)
                        if not recv_vals or any(v.kind != api.EXECUTOR for v in recv_vals):
                            continue
                    elif how != "thread":
                        continue
                    for fn in mod.resolve_function(target, cs.scope, cs.order):
                        if mod is not self.m and fn.scope.module is not self.m:
                            continue
                        table.setdefault(id(fn), []).append(cs)
                        self.thread_fn_infos[id(fn)] = fn
        # class Worker(threading.Thread): def run(self): ...  -- started by Worker(...).start()
        for cls in self.m.classes:
            run = cls.methods.get("run")
            if run is None or not self._thread_class(cls):
                continue
            for cs in self.m.calls:
                if attr_name(cs.node.func) == cls.name and any(
                        v.kind == api.CLASS and v.info is cls for v in self.m.infer(cs.node.func, cs.scope, cs.order)):
                    table.setdefault(id(run), []).append(cs)
                    self.thread_fn_infos[id(run)] = run
        # what a thread target calls runs in that thread too (Thread(target=lambda: work(n)))
        self._add_callees(table, self.thread_fn_infos, list(self.thread_fn_infos.values()))
        self._threads = table
        return table

    def _add_callees(self, table: dict[int, list], infos: dict[int, FunctionInfo], work: list[FunctionInfo]) -> None:
        """Give the local functions that ``work``'s functions call (transitively) the table entry
        of their caller, unless they have one already."""
        seen: set[int] = set()
        while work:
            fn = work.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            for cs in self.m.calls_within(fn):
                for callee in self.m.callees(cs):
                    if id(callee) not in table:
                        table[id(callee)] = list(table[id(fn)])
                        infos[id(callee)] = callee
                        work.append(callee)

    def _thread_class(self, cls: ClassInfo, _depth: int = 0) -> bool:
        """``cls`` derives from ``threading.Thread`` (directly or through local classes)."""
        if _depth > 8:
            return False
        scope = cls.scope.parent or self.m.scope
        for base in cls.bases:
            if self.m.qualified_name(base, scope, 10**9)[0] in api.THREAD_CLASSES:
                return True
            for v in self.m.infer(base, scope, 10**9):
                if v.kind == api.CLASS and isinstance(v.info, ClassInfo) and v.info is not cls \
                        and self._thread_class(v.info, _depth + 1):
                    return True
        return False

    def in_tf_function(self, scope: Scope) -> bool:
        for f in self.m.enclosing_functions(scope):
            for d in f.decorators:
                target = d.func if isinstance(d, cst.Call) else d
                q, _ = self.m.qualified_name(target, f.parent, f.order)
                if q in api.TF_FUNCTION:
                    return True
        return False

    def runs_traced(self, fn: FunctionInfo, _seen: Optional[set] = None) -> Optional[bool]:
        """Whether the body of ``fn`` runs inside a ``tf.function`` trace.  True: ``fn`` or an
        enclosing function is decorated with ``tf.function``, wrapped by ``tf.function(f)`` in
        this module, or is a ``train_step``/``test_step``/``predict_step``/``call`` method of a
        Keras model or layer class; or every local caller runs traced.  False: every local
        caller runs eagerly (module-level code or eager functions).  None: cannot be told
        (no local caller, passed around as a callback, or mixed)."""
        key = id(fn)
        if key in self._traced_memo:
            return self._traced_memo[key]
        _seen = _seen or set()
        if key in _seen or len(_seen) > MAX_CALL_DEPTH:
            return None
        _seen.add(key)
        wrapped = self._tf_function_wrapped()
        res: Optional[bool] = None
        for f in self.m.enclosing_functions(fn.scope):
            if id(f) in wrapped or self.in_tf_function(f.scope):
                res = True
                break
            if f.cls is not None and f.name in api.KERAS_TRACED_METHODS \
                    and self.m.class_kind(f.cls) in (api.MODEL, api.LAYER):
                res = True
                break
            if f.cls is not None and f.name in api.KERAS_HOST_DATA_METHODS and f is fn \
                    and not self.m.callers(fn) and self.m.class_kind(f.cls) == api.MODEL:
                res = False  # an override of train_on_batch...: Keras never traces it, the user calls it
                break
        else:
            callers = self.m.callers(fn)
            if callers and not self.m.is_passed_around(fn):
                kinds = set()
                for cs in callers:
                    kinds.add(False if cs.func is None else self.runs_traced(cs.func, _seen))
                res = kinds.pop() if len(kinds) == 1 else None
        self._traced_memo[key] = res
        return res

    def _tf_function_wrapped(self) -> set[int]:
        """ids of local functions passed to ``tf.function(...)`` as a call (not as a decorator)."""
        memo = getattr(self, "_tf_wrapped_memo", None)
        if memo is None:
            memo = set()
            for cs, _q in self.m.calls_to(api.TF_FUNCTION):
                for f in self.m.resolve_function(arg(cs.node, 0, "func"), cs.scope, cs.order):
                    memo.add(id(f))
            self._tf_wrapped_memo = memo
        return memo

    def path_text(self, ifs: Iterable[tuple[cst.If, bool]]) -> str:
        """The ``if`` branches ``ifs`` as words: "`n_gpus > 1`", "`args.mosaic` is false"."""
        parts = []
        for node, in_body in ifs:
            cond = self.m.code(node.test)
            parts.append(f"`{cond}`" if in_body else f"`{cond}` is false")
        return " and ".join(parts)

    @staticmethod
    def single_replica_path(ifs: Iterable[tuple[cst.If, bool]]) -> bool:
        """The ``if`` branches ``ifs`` (as a site records them) run only with one replica: the
        ``else`` of ``if strategy.num_replicas_in_sync > 1:``, the body of ``... == 1:``."""
        for node, in_body in ifs:
            test = node.test
            if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
                continue
            left, comp = test.left, test.comparisons[0]
            if not (isinstance(left, cst.Attribute) and left.attr.value == "num_replicas_in_sync") \
                    or not isinstance(comp.comparator, cst.Integer):
                continue
            n = int(comp.comparator.value, 0)
            op = {cst.GreaterThan: lambda k: k > n, cst.GreaterThanEqual: lambda k: k >= n,
                  cst.LessThan: lambda k: k < n, cst.LessThanEqual: lambda k: k <= n,
                  cst.Equal: lambda k: k == n, cst.NotEqual: lambda k: k != n}.get(type(comp.operator))
            if op is None:
                continue
            taken = (lambda k: op(k)) if in_body else (lambda k: not op(k))
            if taken(1) and not any(taken(k) for k in (2, 3, 4, 8, 64)):
                return True
        return False

    def strategies(self, expr: Optional[cst.BaseExpression], site: CallSite) -> list[Value]:
        """The strategy values ``expr`` holds at ``site``; [] unless every possibility is a strategy
        (or the module cannot resolve it and uses it as a strategy: ``Kinds.strategy_by_use``)."""
        vals = self.m.infer_at(expr, site)
        if vals and all(v.kind == api.STRATEGY for v in vals):
            return vals
        return self.m.kinds.strategy_by_use(expr, site)

    def strategy_method_calls(self, names: Iterable[str]) -> Iterator[tuple[CallSite, cst.BaseExpression, str, list[Value]]]:
        """``strategy.<name>(...)`` calls whose receiver is certainly a strategy, with its values."""
        for cs, recv, meth in self.m.method_calls(names):
            strat = self.strategies(recv, cs)
            if strat:
                yield cs, recv, meth, strat


def _pure(expr: cst.CSTNode) -> bool:
    """An expression without calls, await, yield, walrus or lambdas (reading it twice gives the same
    answer when no name it reads is rebound)."""
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Call, cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda, cst.ListComp, cst.SetComp,
                          cst.DictComp, cst.GeneratorExp)):
            return False
        stack.extend(syntax_children(n))
    return True


def _not_none_test(e: cst.BaseExpression, name: str) -> bool:
    """``e`` is ``<name> is not None``."""
    return isinstance(e, cst.Comparison) and len(e.comparisons) == 1 and isinstance(e.left, cst.Name) \
        and e.left.value == name and isinstance(e.comparisons[0].operator, cst.IsNot) \
        and isinstance(e.comparisons[0].comparator, cst.Name) and e.comparisons[0].comparator.value == "None"
