from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import CallSite, FunctionInfo, Module, arg, attr_name, call_method


def _eager_python_fn(m: Module, cs: CallSite) -> bool:
    """The function handed to ``strategy.run`` is a local Python function (or lambda) that is not
    a ``tf.function``: every replica executes it op by op.  (A ``tf.function`` is traced by
    TensorFlow for the replicated call; a loaded or concrete function is already a graph;
    an unknown callable is left alone.)"""
    fn = arg(cs.node, 0, "fn")
    if fn is None:
        return False
    if isinstance(fn, cst.Call):
        return False  # tf.function(f), functools.partial(...), a factory: not judged
    targets = m.resolve_function(fn, cs.scope, cs.order)
    return bool(targets) and not any(m.runs_traced(f) is True for f in targets)


def _trains(m: Module, cs: CallSite) -> bool:
    """The replica function (or a local function it calls) computes gradients or applies an
    optimizer: a training step, whose eager per-step cost is what matters."""
    work = list(m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order))
    seen: set[int] = set()
    while work and len(seen) < 20:
        fn = work.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        for c in m.calls_within(fn):
            name = attr_name(c.node.func)
            if name in ("apply_gradients", "minimize"):
                return True
            if name == "gradient" and isinstance(c.node.func, cst.Attribute):
                if any(v.kind == api.TAPE for v in m.infer_at(c.node.func.value, c)):
                    return True
            work.extend(m.resolve_function(c.node.func, c.scope, c.order))
    return False


def _eager_loop(m: Module, cs: CallSite) -> Optional[CallSite]:
    """The call site (``cs`` or a caller of its function) that repeats it eagerly in a
    Python loop, when every way to reach ``cs`` is eager; else None."""
    if cs.func is None:
        return cs if cs.loops > 0 else None
    if m.runs_traced(cs.func) is not False:
        return None
    if cs.loops > 0:
        return cs
    return _caller_in_loop(m, cs.func, set())


def _caller_in_loop(m: Module, fn: FunctionInfo, seen: set) -> Optional[CallSite]:
    if id(fn) in seen or len(seen) > 8:
        return None
    seen.add(id(fn))
    for c in m.callers(fn):
        if c.loops > 0:
            return c
        if c.func is not None:
            hit = _caller_in_loop(m, c.func, seen)
            if hit is not None:
                return hit
    return None


RUN_EAGERLY = frozenset({"tensorflow.config.run_functions_eagerly",
                         "tensorflow.config.experimental_run_functions_eagerly"})


def _literal_bool(expr: Optional[cst.BaseExpression]) -> Optional[bool]:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def _repeated(m: Module, cs: CallSite) -> Optional[CallSite]:
    """``cs`` sits in a loop, or some chain of local callers reaches it from one (whether
    those functions are ``tf.function``s or not)."""
    if cs.loops > 0:
        return cs
    return _caller_in_loop(m, cs.func, set()) if cs.func is not None else None


def _mirrored_run(m: Module, recv: cst.BaseExpression, site: CallSite) -> list:
    vals = m.infer_at(recv, site)
    if not vals or any(v.kind != api.STRATEGY or v.qname not in api.MIRRORED_RUN_STRATEGIES for v in vals):
        return []
    return vals


class RunOutsideTfFunction(Rule):
    CODE = "TFP701"
    NAME = "run-outside-tf-function"
    SUMMARY = "training step run eagerly with `strategy.run`, step after step, from a Python loop (no `tf.function`)"
    FIX_HINT = "Wrap the step that calls `strategy.run` in `@tf.function` (and loop over that step)."
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "execution"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run", ".run,"))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        yield from self._run_calls()
        yield from self._partials()
        yield from self._run_eagerly()

    def _run_calls(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, meth in m.method_calls(api.RUN_METHODS):
            vals = _mirrored_run(m, recv, cs)
            if not vals:
                continue
            loop = _eager_loop(m, cs)
            if loop is None or not _eager_python_fn(m, cs) or not _trains(m, cs):
                continue
            name = vals[0].qname.rsplit(".", 1)[-1]
            where = "in a Python loop" if loop is cs else "from a Python loop (line {line})"
            yield Report(
                cs.node,
                f"`{m.code(recv)}.{meth}(...)` runs eagerly {where}, outside any `tf.function`: TensorFlow warns "
                f"\"Using {name} eagerly has significant overhead\" and runs the replicas one after another in "
                f"Python on every step; wrap the step in `@tf.function`",
                {"strategy": name},
                related=None if loop is cs else loop.node,
            )

    def _partials(self) -> Iterator[Report]:
        """``step = functools.partial(strategy.run, step_fn)`` called eagerly, step after step."""
        m = self.module
        traced_args = {id(arg(cs.node, 0, "func")) for cs, _q in m.calls_to(api.TF_FUNCTION)}
        for pcs, _q in m.calls_to(("functools.partial",)):
            target = arg(pcs.node, 0, "func")
            if not isinstance(target, cst.Attribute) or target.attr.value not in api.RUN_METHODS:
                continue
            if id(pcs.node) in traced_args:
                continue  # tf.function(functools.partial(strategy.run, fn))
            vals = _mirrored_run(m, target.value, pcs)
            fn = arg(pcs.node, 1)
            if not vals or fn is None:
                continue
            fns = m.resolve_function(fn, pcs.scope, pcs.order)
            if not fns or any(m.runs_traced(f) is True for f in fns) or not self._trains_fns(fns):
                continue
            for cs in m.calls:
                if not isinstance(cs.node.func, cst.Name):
                    continue
                if not any(e is pcs.node for e, _s, _o in m.reaching_exprs(cs.node.func, cs.scope, cs.order) or ()):
                    continue
                loop = _eager_loop(m, cs)
                if loop is None:
                    continue
                name = vals[0].qname.rsplit(".", 1)[-1]
                yield Report(
                    pcs.node,
                    f"`{m.code(pcs.node)}` is called eagerly from a Python loop (line {{line}}), outside any "
                    f"`tf.function`: TensorFlow warns \"Using {name} eagerly has significant overhead\" and runs "
                    f"the replicas one after another in Python on every step; wrap it in `tf.function(...)`",
                    {"strategy": name},
                    related=loop.node,
                )
                break

    def _trains_fns(self, fns: list[FunctionInfo]) -> bool:
        m = self.module
        work = list(fns)
        seen: set[int] = set()
        while work and len(seen) < 20:
            fn = work.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            for c in m.calls_within(fn):
                name = attr_name(c.node.func)
                if name in ("apply_gradients", "minimize"):
                    return True
                if name == "gradient" and isinstance(c.node.func, cst.Attribute):
                    if any(v.kind == api.TAPE for v in m.infer_at(c.node.func.value, c)):
                        return True
                work.extend(m.resolve_function(c.node.func, c.scope, c.order))
        return False

    def _run_eagerly(self) -> Iterator[Report]:
        """``tf.config.run_functions_eagerly(True)`` left on: the ``tf.function`` steps that call
        ``strategy.run`` from a loop run eagerly as well."""
        m = self.module
        switches = [(cs, _literal_bool(arg(cs.node, 0, "run_eagerly"))) for cs, _q in m.calls_to(RUN_EAGERLY)]
        if not switches or any(on is not True for _cs, on in switches):
            return  # switched off again somewhere, or not a literal: not judged
        for cs, recv, meth in m.method_calls(api.RUN_METHODS):
            vals = _mirrored_run(m, recv, cs)
            if not vals or cs.func is None or m.runs_traced(cs.func) is not True:
                continue  # the eager ones are reported at the call itself
            loop = _repeated(m, cs)
            fn = arg(cs.node, 0, "fn")
            if loop is None or fn is None or isinstance(fn, cst.Call) \
                    or not m.resolve_function(fn, cs.scope, cs.order) or not _trains(m, cs):
                continue  # a local Python function (a tf.function too: it runs eagerly now)
            name = vals[0].qname.rsplit(".", 1)[-1]
            for sw, _on in switches:
                yield Report(
                    sw.node,
                    f"`{m.code(sw.node)}` makes every `tf.function` run eagerly, including the step that calls "
                    f"`{m.code(recv)}.{meth}(...)` (line {{line}}) from a Python loop: TensorFlow warns \"Using "
                    f"{name} eagerly has significant overhead\" and runs the replicas one after another; remove "
                    f"it (it is meant for debugging)",
                    {"strategy": name},
                    related=cs.node,
                )
            return

    # -- fix (unsafe: inside tf.function Python side effects run at trace time only, and `.numpy()`
    #    fails): decorate the function that calls `strategy.run` with `@tf.function`
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        from tfpar_lint.fix import UNSAFE, Fix, line_indent, tf_alias

        m = self.module
        cm = call_method(report.node) if isinstance(report.node, cst.Call) else None
        if cm is None or cm[1] not in api.RUN_METHODS:
            return None  # reported at a functools.partial(...) or a run_functions_eagerly(True) switch
        site = m.site_of_call.get(id(report.node))
        tf = tf_alias(m)
        if site is None or site.func is None or tf is None or report.related is None:
            return None  # the run sits in the loop itself: the loop body has to become a function first
        fn = site.func.node
        if not isinstance(fn, cst.FunctionDef):
            return None
        anchor = fn.decorators[0] if fn.decorators else fn
        return Fix(f"Decorate `{fn.name.value}` with `@{tf}.function`", UNSAFE).insert_lines_before(
            anchor, f"{line_indent(m, fn)}@{tf}.function\n")
