"""What Python threads run and what they share (the TFP3xx family's analysis).

* :meth:`Threads.runs` - every start of a thread (``threading.Thread(target=...)``, ``Timer``,
  a ``Thread`` subclass built and started, a thread pool's ``submit``/``map``...), in this module
  and in the project's modules that import it, with the function the thread runs (a lambda, a
  function, a bound method, ``run()``), the status of that method's ``self`` and whether several
  threads run it at once.
* :meth:`Threads.steps` - the calls a thread makes: its target's calls, then those of every
  function, method and constructor they reach (through ``self.attr``, objects passed to
  constructors, other modules of the project), each with the ``with`` locks held on the way
  and the status of ``self`` in the method it is in.
* :meth:`Threads.status` - whether the object an expression holds is made by the thread itself
  (LOCAL), made once for each thread (PER_THREAD: a worker's own network, built in the
  constructor of a ``Thread`` subclass or in the loop that makes the workers), or one object
  every thread reaches (SHARED: a module global, one object handed to every worker's
  constructor, the ``self`` attributes pointing to it).  None when it cannot be told.
* :meth:`Threads.writes` - the variable updates a call performs: an optimizer step
  (``apply_gradients``/``minimize`` eagerly, or ``sess.run`` of such an op built once, in TF1
  graph mode), a Keras 2 training function (``K.function(..., updates=opt.get_updates(...))``),
  ``model.fit``/``train_on_batch``; with the variables written and their status.

Nothing here guesses from names: an object is SHARED or PER_THREAD only when where it is made,
and how it reaches the thread, say so."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, ClassInfo, FunctionInfo, Scope, Value
from tfpar_lint.semantic.nodes import arg, attr_name, call_method, keyword
from tfpar_lint.semantic.walk import contains

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

LOCAL = "local"  # made by the thread itself (while it runs)
PER_THREAD = "per-thread"  # made once for each thread, before it starts
SHARED = "shared"  # one object that every thread reaches

# API facts the thread analysis uses (canonical names, see tfapi.canonical)
SESSION_CLASSES = frozenset({"tensorflow.Session", "tensorflow.InteractiveSession"})
SESSION_GETTERS = frozenset({"keras.backend.get_session", "tensorflow.get_default_session"})
KERAS_FUNCTION = frozenset({"keras.backend.function"})
# TF1 optimizers: tf.compat.v1.train.<Name>Optimizer (canonical tensorflow.train.<Name>Optimizer)
TF1_OPTIMIZER_PREFIX = "tensorflow.train."
# Keras model methods that run optimizer steps on the model's variables
TRAINING_METHODS = frozenset({"fit", "fit_generator", "train_on_batch"})
OPTIMIZER_STEPS = frozenset({"apply_gradients", "minimize"})
# update ops of the graph that write a variable given as the receiver / first argument
ASSIGN_METHODS = frozenset({"assign", "assign_add", "assign_sub", "scatter_update", "scatter_add", "scatter_sub",
                            "scatter_nd_update", "scatter_nd_add", "scatter_nd_sub", "scatter_max", "scatter_min",
                            "scatter_mul", "scatter_div"})
ASSIGN_FUNCTIONS = frozenset({"tensorflow.assign", "tensorflow.assign_add", "tensorflow.assign_sub",
                              "tensorflow.scatter_update", "tensorflow.scatter_add", "tensorflow.scatter_sub",
                              "keras.backend.update", "keras.backend.update_add", "keras.backend.update_sub"})
GROUPS = frozenset({"tensorflow.group", "tensorflow.tuple"})
# context managers that are certainly not locks (a ``with`` of anything unknown may be one)
NOT_LOCKS = frozenset({"tensorflow.device", "tensorflow.name_scope", "tensorflow.variable_scope",
                       "tensorflow.GradientTape", "tensorflow.control_dependencies", "tensorflow.Session",
                       "tensorflow.Graph", "keras.backend.name_scope", "tensorflow.compat.v1.variable_scope",
                       "tensorflow.summary.record_if", "tensorflow.init_scope"})
NOT_LOCK_METHODS = frozenset({"as_default", "scope", "name_scope", "control_dependencies", "device", "record_if"})

MAX_STEPS = 400  # functions followed from one thread target
MAX_DEPTH = 40  # nested status questions


def _combine(statuses) -> Optional[str]:
    """One status for several possible objects: SHARED only when every one is shared, PER_THREAD
    (or LOCAL) when none is; None when unknown or mixed."""
    s = set(statuses)
    if not s or None in s:
        return None
    if s == {SHARED}:
        return SHARED
    if SHARED in s:
        return None
    return LOCAL if s == {LOCAL} else PER_THREAD


def reads(expr: cst.CSTNode, target: cst.BaseExpression) -> bool:
    """``expr`` mentions ``target`` (``v - lr * g`` reads ``v``); attribute names are not reads."""
    found = False

    class V(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if found:
                return False
            if isinstance(node, cst.BaseExpression) and node.deep_equals(target):
                found = True
                return False
            if isinstance(node, cst.Attribute):
                node.value.visit(self)
                return False
            return True

    expr.visit(V())
    return found


def _not_none(vals: list[Value]) -> list[Value]:
    """``None`` placeholders (a parameter's default, ``x = None`` until set) hold no variable."""
    rest = [v for v in vals if v.kind != api.NONE]
    return rest if rest else vals


@dataclass(eq=False)
class ThreadRun:
    """One place that starts threads running ``target``."""

    start: CallSite
    target: FunctionInfo
    self_status: Optional[str]  # status of ``self`` when the target is a method
    concurrent: bool  # several threads run the target at once


@dataclass(frozen=True)
class Ctx:
    """What a method's ``self`` is, on the path a thread took to reach it."""

    self_status: Optional[str] = None
    self_cls: Optional[ClassInfo] = None
    # a local function's ``return`` being followed for one call: what the function makes is made
    # at that call (status of the call site)
    made_in: Optional[FunctionInfo] = None
    made_status: Optional[str] = None


@dataclass(eq=False)
class Step:
    """A call a thread makes: ``site`` in ``fn``, reached through ``via`` (the calls leading
    there from the target, outermost first), under ``guards`` (the ``with``/``acquire`` locks held
    on the way, as (expression, its call site or with-site, status))."""

    site: CallSite
    fn: FunctionInfo
    ctx: Ctx
    via: tuple[CallSite, ...]
    guards: tuple[tuple[cst.BaseExpression, CallSite, Optional[str]], ...]


@dataclass(eq=False)
class Write:
    """A variable update a call performs."""

    site: CallSite
    what: str  # "optimizer step", "session run", "training function", "training call"
    op: Optional[cst.Call]  # the update op / optimizer call / K.function call
    targets: list[tuple[str, Optional[str]]] = field(default_factory=list)  # (code, status)

    @property
    def shared(self) -> bool:
        return any(st == SHARED for _c, st in self.targets)


class Threads:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._runs: Optional[list[ThreadRun]] = None
        self._status_memo: dict[tuple, Optional[str]] = {}
        self._open: set[tuple] = set()
        self._bodies: dict[int, list[FunctionInfo]] = {}
        self._steps: dict[int, list[Step]] = {}
        self._current: Optional[ThreadRun] = None  # the thread being analysed (LOCAL is relative to it)

    # ------------------------------------------------------------------ starts
    def runs(self) -> list[ThreadRun]:
        """Every thread start in this module and in the project's modules that import it."""
        if self._runs is not None:
            return self._runs
        out: list[ThreadRun] = []
        for mod in [self.m] + self.m.importers():
            for cs in mod.calls:
                for target, _a, _k, how in mod.handed_over(cs):
                    if how == "pool":  # only thread pools (not process pools, not other objects' map)
                        recv = mod.infer(cs.node.func.value, cs.scope, cs.order)
                        if not recv or any(v.kind != api.EXECUTOR for v in recv):
                            continue
                    elif how != "thread":
                        continue
                    for fn in mod.resolve_function(target, cs.scope, cs.order):
                        out.append(ThreadRun(cs, fn, self._target_self(mod, fn, target, cs),
                                             self._concurrent(mod, cs)))
            for cls in mod.classes:
                run = cls.methods.get("run")
                if run is None or not mod.contexts._thread_class(cls):
                    continue
                sites = [cs for cs in mod.calls if attr_name(cs.node.func) == cls.name and any(
                    v.kind == api.CLASS and v.info is cls for v in mod.infer(cs.node.func, cs.scope, cs.order))]
                if mod is not self.m:
                    sites += [cs for cs in self.m.calls if attr_name(cs.node.func) == cls.name and any(
                        v.kind == api.CLASS and v.info is cls
                        for v in self.m.infer(cs.node.func, cs.scope, cs.order))]
                conc = len(sites) > 1 or any(self._runs_many(s, 0) for s in sites)
                for cs in sites:
                    out.append(ThreadRun(cs, run, PER_THREAD, conc))
        # a class defined here, built in an importer: found from both sides once
        seen: set[tuple[int, int]] = set()
        uniq = []
        for r in out:
            key = (id(r.start), id(r.target))
            if key not in seen:
                seen.add(key)
                uniq.append(r)
        self._runs = uniq
        return uniq

    def _target_self(self, mod: "Module", fn: FunctionInfo, target: cst.BaseExpression,
                     cs: CallSite) -> Optional[str]:
        """Status of ``self`` in the target: the receiver of a bound method (``worker.work``);
        for a lambda or function nested in a method, that method's ``self``."""
        if fn.cls is not None and isinstance(target, cst.Attribute):
            return self.status(target.value, cs.scope, cs.order)
        meth = mod.enclosing_method(fn) if fn.cls is None else None
        if meth is not None and meth.cls is not None:
            return self._instances(meth.cls, 0)
        return None

    def _concurrent(self, mod: "Module", cs: CallSite) -> bool:
        """Several threads run the target: started in a loop or comprehension, by a pool's ``map``
        (which fans out over workers), or by a function that runs several times (called in a loop,
        or from more than one place: ``add_trainer()`` called while the trainers are too few)."""
        f = cs.node.func
        if isinstance(f, cst.Attribute) and f.attr.value in (
                "map", "imap", "imap_unordered", "starmap", "map_async", "starmap_async"):
            return True
        return self._runs_many(cs, 0)

    def _runs_many(self, cs: CallSite, depth: int) -> bool:
        if cs.loops:
            return True
        fn = cs.func
        if fn is None or depth > 3:
            return False
        callers = fn.scope.module.callers(fn)
        return len(callers) > 1 or any(self._runs_many(c, depth + 1) for c in callers)

    def concurrent(self, target: FunctionInfo) -> bool:
        """Several threads run ``target`` at once (by one start or several)."""
        rs = [r for r in self.runs() if r.target is target]
        return len(rs) > 1 or any(r.concurrent for r in rs)

    # ------------------------------------------------------------------ what a thread runs
    def body(self, run: ThreadRun) -> list[FunctionInfo]:
        """The target and every function it reaches (any module of the project)."""
        got = self._bodies.get(id(run))
        if got is None:
            got = [s for s in self._walk_functions(run.target)]
            self._bodies[id(run)] = got
        return got

    def _walk_functions(self, target: FunctionInfo) -> list[FunctionInfo]:
        out = [target]
        seen = {id(target)}
        work = [target]
        while work and len(out) < MAX_STEPS:
            fn = work.pop()
            mod = fn.scope.module
            for cs in mod.calls_within(fn):
                for callee in self._callees(cs):
                    if id(callee) not in seen:
                        seen.add(id(callee))
                        out.append(callee)
                        work.append(callee)
        return out

    def _callees(self, cs: CallSite) -> list[FunctionInfo]:
        """Functions (of any project module) a call may run: a function, a method, a class's
        ``__init__``."""
        mod = cs.scope.module
        out = []
        for v in mod.infer(cs.node.func, cs.scope, cs.order):
            if v.kind == api.FUNCTION and isinstance(v.info, FunctionInfo):
                out.append(v.info)
            elif v.kind == api.CLASS and isinstance(v.info, ClassInfo) and "__init__" in v.info.methods:
                out.append(v.info.methods["__init__"])
        f = cs.node.func
        if not out and isinstance(f, cst.Attribute):
            # a method of an object the values do not follow (``self`` handed to a thread's target)
            for cls, is_cls in self._receiver_classes(f.value, cs.scope, cs.order) or ():
                meth = None if is_cls else self._method(cls, f.attr.value)
                if meth is not None and meth not in out:
                    out.append(meth)
        return out

    def _method(self, cls: ClassInfo, name: str, _depth: int = 0) -> Optional[FunctionInfo]:
        if _depth > 8:
            return None
        if name in cls.methods:
            return cls.methods[name]
        mod = cls.scope.module
        for base in cls.bases:
            for v in mod.infer(base, cls.scope.parent or mod.scope, 10**9):
                if v.kind == api.CLASS and isinstance(v.info, ClassInfo) and v.info is not cls:
                    got = self._method(v.info, name, _depth + 1)
                    if got is not None:
                        return got
        return None

    def in_body(self, run: ThreadRun, scope: Scope) -> bool:
        ids = {id(f.scope) for f in self.body(run)}
        s: Optional[Scope] = scope
        while s is not None:
            if id(s) in ids:
                return True
            s = s.parent
        return False

    def steps(self, run: ThreadRun) -> list[Step]:
        """The calls the thread makes, with the path, the locks held and ``self``'s status."""
        got = self._steps.get(id(run))
        if got is not None:
            return got
        out: list[Step] = []
        self._current = run
        start = Ctx(run.self_status, run.target.cls or self._method_cls(run.target))
        work: list[tuple[FunctionInfo, Ctx, tuple, tuple]] = [(run.target, start, (), ())]
        seen: set[tuple] = set()
        while work and len(seen) < MAX_STEPS:
            fn, ctx, via, guards = work.pop()
            key = (id(fn), ctx.self_status, tuple(id(g[0]) for g in guards) if guards else ())
            if key in seen:
                continue
            seen.add(key)
            mod = fn.scope.module
            acquired = self._acquired(fn, ctx)
            for cs in mod.calls_within(fn):
                g = guards + acquired + self._with_locks(cs, ctx)
                out.append(Step(cs, fn, ctx, via, g))
                callees = self._callees(cs)
                if not callees or len(via) > 12:
                    continue
                for callee in callees:
                    out_ctx = self._callee_ctx(cs, callee, ctx)
                    work.append((callee, out_ctx, via + (cs,), g))
        self._steps[id(run)] = out
        return out

    def _method_cls(self, fn: FunctionInfo) -> Optional[ClassInfo]:
        meth = fn.scope.module.enclosing_method(fn)
        return meth.cls if meth is not None else None

    def _callee_ctx(self, cs: CallSite, callee: FunctionInfo, ctx: Ctx) -> Ctx:
        """``self`` of the callee: the receiver of ``recv.meth(...)``, a new object for ``C(...)``
        (made by the thread: LOCAL), the caller's own ``self`` for ``self.meth(...)``."""
        if callee.cls is None:
            return Ctx(ctx.self_status, ctx.self_cls) if callee.scope.module.enclosing_method(callee) else Ctx()
        f = cs.node.func
        if callee.name == "__init__" and not (isinstance(f, cst.Attribute) and f.attr.value == "__init__"):
            return Ctx(LOCAL, callee.cls)
        if isinstance(f, cst.Attribute):
            return Ctx(self.status(f.value, cs.scope, cs.order, ctx), callee.cls)
        return Ctx(None, callee.cls)

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

    # ------------------------------------------------------------------ queries for rules
    def session_rmws(self, run: ThreadRun) -> Iterator[tuple[Step, list[tuple[cst.Call, str]]]]:
        """The thread's session runs of read-modify-write ops on shared variables (see
        :meth:`session_rmw`), locked or not."""
        for st in self.steps(run):
            self._current = run
            got = self.session_rmw(st)
            if got:
                yield st, got
        self._current = None

    def shared_writes(self, run: ThreadRun) -> Iterator[tuple[Step, Write]]:
        """Updates of shared variables the thread makes (locked or not)."""
        self._current = run
        for st in self.steps(run):
            self._current = run
            w = self.writes(st)
            if w is not None and w.shared:
                yield st, w
        self._current = None
