from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import (AVERAGE_LOSS, MEANS, gradient_targets, is_per_replica_batch, mentions_replicas,
                                    replica_fn_strategies, replica_fns, replicated)
from tfpar_lint.semantic import arg
from tfpar_lint.semantic.batchsizes import global_batch


class LossScaledTwice(Rule):
    """A loss that is already a per-replica mean (``tf.reduce_mean`` over the batch, or the result of
    ``tf.nn.compute_average_loss``) divided again by a batch size, or a ``compute_average_loss``
    result divided again by the number of replicas."""

    CODE = "TFP511"
    NAME = "loss-scaled-twice"
    SUMMARY = ("loss that is already a per-replica mean (`reduce_mean`, `compute_average_loss`) divided again by a "
               "batch size or by `num_replicas_in_sync` in a replica function (gradients too small)")
    FIX_HINT = ("Scale once: per-example losses through `tf.nn.compute_average_loss(per_example, "
                "global_batch_size=GLOBAL)`, with nothing divided afterwards.")
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run_v2", "call_for_each_replica"),
               ("reduce_mean", "compute_average_loss", "mean("))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        from tfpar_lint.semantic.loss import loss_terms

        m = self.module
        seen: set[int] = set()
        for fn in replica_fns(m):
            if not replicated(replica_fn_strategies(m, fn)):
                continue
            for cs, target in gradient_targets(m, fn):
                for t in loss_terms(m, target, cs.scope, cs.order):
                    node = t.node
                    if not isinstance(node, cst.Call) or id(node) in seen:
                        continue
                    q, _ = m.qualified_name(node.func, t.scope, t.order)
                    if q in MEANS and _whole_batch(node):
                        what = f"`{m.code(node)}` is already the mean over the batch"
                        bad = self._batch_divisor(t.divisors)
                    elif q in AVERAGE_LOSS:
                        what = f"`{m.code(node)}` is already divided by the global batch size"
                        bad = self._batch_divisor(t.divisors) or self._replica_divisor(t.divisors)
                    else:
                        continue
                    if bad is None:
                        continue
                    d, why = bad
                    seen.add(id(node))
                    yield Report(
                        d,
                        f"{what}, and the loss of `{fn.name}` (run on every replica) is divided again by "
                        f"`{m.code(d)}` ({why}): the gradients are scaled twice, too small by that factor; scale "
                        f"once, with `tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)`",
                        {"function": fn.name},
                        related=node,
                    )

    def _batch_divisor(self, divisors) -> Optional[tuple[cst.BaseExpression, str]]:
        m = self.module
        for d, sc, od in divisors:
            why = global_batch(m, d, sc, od)
            if why:
                return d, why
            if is_per_replica_batch(m, d, sc, od):
                return d, "a batch size"
        return None

    def _replica_divisor(self, divisors) -> Optional[tuple[cst.BaseExpression, str]]:
        m = self.module
        for d, sc, od in divisors:
            if mentions_replicas(m, d, sc, od):
                return d, "the number of replicas"
        return None


def _whole_batch(call: cst.Call) -> bool:
    if any(a.star for a in call.args):
        return False
    axis = arg(call, 1, "axis")
    return axis is None or (isinstance(axis, cst.Name) and axis.value == "None")
