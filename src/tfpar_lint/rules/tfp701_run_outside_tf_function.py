from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import CallSite, FunctionInfo, Module, arg, attr_name


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


class RunOutsideTfFunction(Rule):
    CODE = "TFP701"
    NAME = "run-outside-tf-function"
    SUMMARY = "training step run eagerly with `strategy.run`, step after step, from a Python loop (no `tf.function`)"
    FIX_HINT = "Wrap the step that calls `strategy.run` in `@tf.function` (and loop over that step)."
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "execution"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run_v2"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, meth in m.method_calls(api.RUN_METHODS):
            vals = m.infer_at(recv, cs)
            if not vals or any(v.kind != api.STRATEGY or v.qname not in api.MIRRORED_RUN_STRATEGIES for v in vals):
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

    # -- fix (unsafe: inside tf.function Python side effects run at trace time only, and `.numpy()`
    #    fails): decorate the function that calls `strategy.run` with `@tf.function`
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        from tfpar_lint.fix import UNSAFE, Fix, line_indent, tf_alias

        m = self.module
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
