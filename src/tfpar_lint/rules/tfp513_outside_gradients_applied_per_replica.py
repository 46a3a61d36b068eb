from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.replicagrads import outside_gradients


class OutsideGradientsAppliedPerReplica(Rule):
    """Gradients computed once outside ``strategy.run`` and applied by every replica: the
    optimizer sums the replicas' identical copies."""

    CODE = "TFP513"
    NAME = "outside-gradients-applied-per-replica"
    SUMMARY = ("gradients computed once outside `strategy.run` are handed to every replica, whose `apply_gradients` "
               "sums the identical copies (N x the update, or a TensorFlow error)")
    FIX_HINT = ("Compute the gradients inside the function run by `strategy.run`, from each replica's own shard of "
                "the batch (loss scaled by the global batch size), and apply them there.")
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("apply_gradients",), ("gradient",))

    def check(self) -> Iterator[Report]:
        m = self.module
        seen: set[int] = set()
        for og in outside_gradients(m):
            if id(og.apply.node) in seen:
                continue
            seen.add(id(og.apply.node))
            yield Report(
                og.apply.node,
                f"`{m.code(og.grads)}` is computed once outside `strategy.run` (`{m.code(og.gradient.node)}`, line "
                f"{{line}}) and applied here by every replica: `apply_gradients` all-reduces the replicas' copies with "
                f"SUM, so a copy the replica touched first (clipping, scaling, an optimizer's `clipnorm`) is applied "
                f"num_replicas_in_sync times (measured: 2.00x on 2 replicas), and an untouched one makes TensorFlow "
                f"fail inside a `tf.function` (`ValueError: destinations can not be empty`; tf_keras: `IndexError`); "
                f"compute the gradients inside the replica function from its own shard",
                {"gradients": m.code(og.grads)},
                related=og.gradient.node,
            )
