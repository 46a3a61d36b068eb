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
and how it reaches the thread, say so.

The parts, by job: :mod:`.threadfacts` (statuses, API facts, the records), :mod:`.threadsharing`
(statuses), :mod:`.threadwrites` (variable updates), :mod:`.threadlocks` (locks, late binding);
this module finds the starts and walks what each thread runs."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, ClassInfo, FunctionInfo, Scope
from tfpar_lint.semantic.nodes import attr_name

from tfpar_lint.semantic.threadfacts import (  # noqa: F401  (re-exported for rules)
    LOCAL, PER_THREAD, SHARED, MAX_STEPS, Ctx, Step, ThreadRun, Write, reads)
from tfpar_lint.semantic.threadlocks import ThreadLocks
from tfpar_lint.semantic.threadsharing import ThreadSharing
from tfpar_lint.semantic.threadwrites import ThreadWrites

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


class Threads(ThreadSharing, ThreadWrites, ThreadLocks):
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
                # built (and started) in the other modules: this one for an importer's class, the
                # importers for this module's class
                for other in ([self.m] if mod is not self.m else self.m.importers()):
                    sites += [cs for cs in other.calls if attr_name(cs.node.func) == cls.name and any(
                        v.kind == api.CLASS and v.info is cls
                        for v in other.infer(cs.node.func, cs.scope, cs.order))]
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
            elif mod.values.call_method_of(v) is not None:  # stepper(pairs): its __call__
                out.append(mod.values.call_method_of(v))
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
