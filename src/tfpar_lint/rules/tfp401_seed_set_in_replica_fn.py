from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import CallSite, FunctionInfo, Module, call_method


def _mode(m: Module, run: CallSite):
    """Whether the ``strategy.run`` call ``run`` is traced (True), eager (False) or unknown (None)."""
    if run.func is None:
        return False  # module level: eager
    if m.in_tf_function(run.scope):
        return True
    return m.runs_traced(run.func)


def runs_strategy(m: Module, fn: FunctionInfo) -> bool:
    """``fn`` is a training step: it calls ``strategy.run`` itself."""
    for cs in fn.calls:
        cm = call_method(cs.node)
        if cm and cm[1] in api.RUN_METHODS:
            if m.strategies(cm[0], cs):
                return True
    return False


class SeedSetInReplicaFn(Rule):
    CODE = "TFP401"
    NAME = "seed-set-in-replica-fn"
    SUMMARY = "global seed set inside a replica function or a distributed training step"
    FIX_HINT = ("Seed once at program start; inside replicas use a `tf.random.Generator` created in scope or "
                "stateless ops with `replica_id_in_sync_group` folded into the seed.")
    PROBE = "randomness"
    MARKERS = (STRATEGY_MARKERS, ("set_seed", "set_random_seed"))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        """Only where the seed is reset at run time: in a replica function (or a training step
        around ``strategy.run``) that runs eagerly.  Inside a ``tf.function`` the seed is applied
        once, while tracing, and the replicas (and steps) draw different numbers: measured on TF
        2.21 with 2 logical CPUs, not a mistake there."""
        m = self.module
        for cs, q in m.calls_to(api.SEED_SETTERS):
            if m.in_replica_fn(cs.scope):
                fn = next((f for f in m.enclosing_functions(cs.scope) if id(f) in m.replica_fn_infos), None)
                sites = m.replica_run_sites(fn) if fn is not None else []
                eager = [r for r in sites if _mode(m, r) is not True]
                if not eager:
                    continue  # every run of it is traced: the seed is set once, at trace time
                run = eager[0]
                msg = (f"`{m.code(cs.node.func)}` is called inside a function run on every replica by "
                       f"`{m.code(run.node.func)}` ({{line}}), which runs eagerly (not inside a `tf.function`): "
                       f"every replica restarts the same random sequence, so replicas draw identical "
                       f"\"random\" numbers at every step; seed once at start-up")
                where = "replica"
                related = run.node
            elif cs.func is not None and runs_strategy(m, cs.func) and m.runs_traced(cs.func) is not True:
                msg = (f"`{m.code(cs.node.func)}` is called inside the training step `{cs.func.name}`, which calls "
                       f"`strategy.run` and runs eagerly (not inside a `tf.function`): every step restarts the "
                       f"same random sequence, so each step repeats the previous step's \"random\" numbers; seed "
                       f"once at start-up")
                where = "step"
                related = None
            else:
                continue
            yield Report(cs.node, msg, {"call": m.code(cs.node.func), "where": where}, related=related)

    # -- fix (unsafe: the random sequence changes): move a constant-seed `set_seed(...)` call out of
    #    the function, to module level right before the function's definition
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        import libcst as cst

        from tfpar_lint.fix import UNSAFE, Fix, block_of, parent, statement_of, statement_text
        from tfpar_lint.semantic import is_constant

        m = self.module
        call = report.node
        stmt = statement_of(m, call)
        if stmt is None or not isinstance(stmt.body[0], cst.Expr) or stmt.body[0].value is not call:
            return None
        if not all(is_constant(a.value) for a in call.args):
            return None
        block, _ = block_of(m, stmt)
        if block is None or len(block.body) < 2:
            return None  # the function would be left without a body
        top = stmt
        while parent(m, top) is not None and not isinstance(parent(m, top), cst.Module):
            top = parent(m, top)
        if not isinstance(top, (cst.FunctionDef, cst.ClassDef)) or top is stmt:
            return None
        text = statement_text(m, stmt)
        if "\n" in text.rstrip("\n"):
            return None
        anchor = top.decorators[0] if top.decorators else top
        return (Fix("Seed once at module level, before the function", UNSAFE)
                .delete_statement(stmt, keep_comment=False).insert_lines_before(anchor, (text if text.endswith("\n") else text + "\n") + "\n\n"))
