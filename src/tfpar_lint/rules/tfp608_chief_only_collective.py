from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.chieftests import facts, task_dependent_guard
from tfpar_lint.semantic.collectives import calls_in, collective
from tfpar_lint.semantic.walk import contains


def _tasks(tasks: set) -> str:
    return " and ".join(f"worker {i}" for _t, i in sorted(tasks))


class ChiefOnlyCollective(Rule):
    """A MultiWorkerMirroredStrategy collective that only some workers make: a training loop the
    chief alone leaves (early stopping decided on one task), or ``evaluate`` / ``strategy.reduce`` /
    a step run under a chief test."""

    CODE = "TFP608"
    NAME = "chief-only-collective"
    SUMMARY = ("MultiWorkerMirroredStrategy collective made by some workers only: a chief-only `break` out of "
               "the training loop, or a chief-only `evaluate` / `strategy.reduce` / step (the others hang or abort)")
    FIX_HINT = ("Let every worker take the same path: decide early stopping from a value all workers share "
                "(a reduced metric), and run evaluation and reductions on every worker; keep only file writes "
                "chief-only.")
    SEVERITY = "error"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",),)

    def check(self) -> Iterator[Report]:
        m = self.module
        f = facts(m)
        for stmt, ifs, loop, scope, order in f.exits:
            inner_ifs = tuple((i, b) for i, b in ifs if contains(loop, i))
            guard = task_dependent_guard(m, inner_ifs, scope, order)
            if guard is None:
                continue
            why = next((w for w in (collective(m, cs) for cs in calls_in(m, loop)) if w), None)
            if why is None:
                continue
            if_node, tasks = guard
            word = "break" if isinstance(stmt, cst.Break) else "return"
            yield Report(
                stmt,
                f"`{word}` leaves the training loop on {_tasks(tasks)} only of a worker-only cluster (task test "
                f"on line {{line}}), while the loop makes {why}: the other workers' next collective has no peer, "
                f"so they hang or abort (`Collective ops is aborted by: ...`); decide from a value every worker "
                f"shares (a reduced metric) so that all leave together",
                {"exit": word},
                related=if_node,
            )
        statements: set[int] = set()
        for cs in m.calls:
            if cs.stmt is not None and id(cs.stmt) in statements:
                continue  # one report per statement (`strategy.reduce(..., strategy.run(...))`)
            why = collective(m, cs)
            if why is None:
                continue
            guard = task_dependent_guard(m, cs.ifs, cs.scope, cs.order)
            if guard is None:
                continue
            if_node, tasks = guard
            if cs.stmt is not None:
                statements.add(id(cs.stmt))
            yield Report(
                cs.node,
                f"{why} runs on {_tasks(tasks)} only of a worker-only cluster (task test on line {{line}}): the "
                f"other workers never join it, so it hangs or aborts (`Collective ops is aborted by: ...`); run it "
                f"on every worker and keep only the file writes chief-only",
                {"call": m.code(cs.node.func)},
                related=if_node,
            )
