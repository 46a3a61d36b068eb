from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import is_per_replica_batch, per_replica_size, replicated
from tfpar_lint.semantic import arg
from tfpar_lint.semantic.batchsizes import AVERAGE_LOSS


class AverageLossWithReplicaBatch(Rule):
    """``tf.nn.compute_average_loss(..., global_batch_size=B)`` where ``B`` is the per-replica batch
    size: each replica divides by its own batch, the replicas' gradients are summed, the update is
    num_replicas times too large."""

    CODE = "TFP510"
    NAME = "average-loss-with-replica-batch"
    SUMMARY = "`tf.nn.compute_average_loss(..., global_batch_size=...)` given the per-replica batch size (gradients N x too large)"
    FIX_HINT = ("Pass the global batch size (per-replica batch x `strategy.num_replicas_in_sync`), or leave "
                "`global_batch_size` out inside `strategy.run`: TensorFlow then multiplies the per-replica batch "
                "by the number of replicas itself.")
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("compute_average_loss",), ("global_batch_size",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, _q in m.calls_to(AVERAGE_LOSS):
            g = arg(cs.node, 1, "global_batch_size")
            if g is None:
                continue
            strategies = m.replica_strategies(cs.scope)
            if strategies and not any(replicated([s]) for s in strategies):
                continue  # one replica on every path (a MirroredStrategy on one of them is enough)
            why = per_replica_size(m, g, cs.scope, cs.order)
            if why is None and is_per_replica_batch(m, g, cs.scope, cs.order):
                why = f"`{m.code(g)}` is the batch this replica sees"
            if why is None:
                continue
            yield Report(
                g,
                f"`global_batch_size={m.code(g)}` is the per-replica batch size ({why}): every replica divides its "
                f"loss by its own batch and the replicas' gradients are summed, so the update is "
                f"num_replicas_in_sync times too large; pass the global batch size (or leave `global_batch_size` "
                f"out inside `strategy.run`)",
                {"batch": m.code(g)},
            )
