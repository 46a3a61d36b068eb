from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.replicagrads import gathered_losses


class GatheredLossOnEveryReplica(Rule):
    """A loss made only of values gathered from every replica: each replica computes the same
    global-batch loss and the summed gradients are num_replicas_in_sync times too large."""

    CODE = "TFP514"
    NAME = "gathered-loss-on-every-replica"
    SUMMARY = ("after an all-gather (`all_gather`, a gathering `merge_call`) every replica computes the same "
               "global-batch loss, and `apply_gradients` sums their identical gradients (N x too large)")
    FIX_HINT = ("Divide the gathered loss by `strategy.num_replicas_in_sync`, or compute each replica's loss on its "
                "own shard (using the gathered values only as extra context, e.g. negatives).")
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("all_gather", "merge_call"), ("apply_gradients",))

    def check(self) -> Iterator[Report]:
        m = self.module
        seen: set[int] = set()
        for gl in gathered_losses(m):
            if id(gl.term) in seen:
                continue
            seen.add(id(gl.term))
            yield Report(
                gl.term,
                f"`{m.code(gl.term)}` is made only of values gathered from every replica "
                f"(`{m.code(gl.gather.node)}`, line {{line}}): each replica computes the same global-batch loss, and "
                f"`apply_gradients` sums their identical gradients, num_replicas_in_sync times the gradient of that "
                f"loss (measured: 2.00x on 2 replicas); divide it by `strategy.num_replicas_in_sync` or compute the "
                f"loss on the replica's own shard",
                {"loss": m.code(gl.term)},
                related=gl.gather.node,
            )
