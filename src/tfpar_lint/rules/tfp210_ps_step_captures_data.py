from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic import keyword
from tfpar_lint.semantic.psdata import captured_refs, coordinator_data, schedule_calls, scheduled_functions


class PsStepCapturesData(Rule):
    """A function scheduled on parameter-server workers that reads coordinator-side data (a NumPy
    array, an eager tensor, an iterator made on the coordinator), captured or passed in ``args``,
    instead of a per-worker dataset: every worker trains on the same data, sent from the coordinator."""

    CODE = "TFP210"
    NAME = "ps-step-captures-data"
    SUMMARY = ("function scheduled with `ClusterCoordinator.schedule` reads coordinator-side data (NumPy array, "
               "eager tensor, coordinator iterator) instead of a per-worker dataset")
    FIX_HINT = ("Build the input in a `dataset_fn`, make it with `coordinator.create_per_worker_dataset(dataset_fn)` "
                "and pass `iter(per_worker_dataset)` to `schedule(step, args=(iterator,))`.")
    SEVERITY = "warning"
    PROBE = "input"
    MARKERS = (("ClusterCoordinator",), ("schedule(",))

    def check(self) -> Iterator[Report]:
        m = self.module
        reported: set[int] = set()
        for cs in schedule_calls(m):
            args = keyword(cs.node, "args")
            if args is not None:
                items = [el.value for el in args.elements] if hasattr(args, "elements") else [args]
                for e in items:
                    why = coordinator_data(m, e, cs.scope, cs.order)
                    if why and id(e) not in reported:
                        reported.add(id(e))
                        yield self._report(e, why, "is passed to the scheduled function")
            for fn in scheduled_functions(m, cs):
                for r in captured_refs(m, fn):
                    why = coordinator_data(m, r.node, r.scope, r.order)
                    if why and id(r.node) not in reported:
                        reported.add(id(r.node))
                        yield self._report(r.node, why, f"is captured by `{fn.name}`, which the coordinator schedules")
                        break  # one report per function: the first captured input

    def _report(self, node, why: str, how: str) -> Report:
        m = self.module
        return Report(
            node,
            f"`{m.code(node)}` is {why} on the coordinator and {how}: every worker gets the same data, sent from "
            f"the coordinator (an eager tensor, an argument or a coordinator iterator on every call), instead of "
            f"reading its own part from `coordinator.create_per_worker_dataset(...)`",
            {"data": m.code(node)},
        )
