from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint import versions
from tfpar_lint.semantic.loss import (default_reduction, gradient_targets, loss_object, loss_terms,
                                    mentions_replicas, replica_fns)


class Keras3LossDividedByReplicas(Rule):
    CODE = "TFP503"
    NAME = "keras3-loss-divided-by-replicas"
    SUMMARY = "Keras 3 default-reduction loss divided again by `num_replicas_in_sync` in a replica function"
    FIX_HINT = ("Keras 3 losses with the default reduction already scale by 1/num_replicas_in_sync under a "
                "strategy: drop the extra division (or use `reduction=None` + `tf.nn.compute_average_loss`).")
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("num_replicas_in_sync",))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for fn in replica_fns(m):
            for cs, target in gradient_targets(m, fn):
                for t in loss_terms(m, target, cs.scope, cs.order):
                    if not isinstance(t.node, cst.Call) or t.summed:
                        continue
                    lo = loss_object(m, t.node, t.scope, t.order)
                    if lo is None or not (versions.is_keras3(m, lo) or versions.keras_flavor(m, lo) == "unknown") \
                            or not default_reduction(m, lo):
                        continue
                    for d, sc, od in t.divisors:
                        if mentions_replicas(m, d, sc, od):
                            if not versions.is_keras3(m, lo):  # Keras 3 only, and no version stated
                                versions.withhold(m, self.CODE)
                                break
                            yield Report(
                                d,
                                f"`{m.code(t.node)}` is a Keras 3 loss with the default reduction: inside "
                                f"`strategy.run` it is already scaled by 1/num_replicas_in_sync; dividing it again "
                                f"by `{m.code(d)}` makes the gradients num_replicas_in_sync times too small"
                                f"{versions.note(m, lo)}",
                                {"loss": m.code(lo.origin), "function": fn.name},
                                related=lo.origin,
                            )
                            break

    # -- fix (safe): drop the extra division by num_replicas_in_sync
    FIXABLE = "safe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix, parent, statement_of

        m = self.module
        div = parent(m, report.node)
        msg = "Drop the division by `num_replicas_in_sync`"
        if isinstance(div, cst.AugAssign) and div.operator.__class__ is cst.DivideAssign:
            stmt = statement_of(m, div)
            return Fix(msg).delete_statement(stmt) if stmt is not None else None
        if not (isinstance(div, cst.BinaryOperation) and isinstance(div.operator, cst.Divide)
                and div.right is report.node):
            return None
        holder = parent(m, div)
        if isinstance(holder, cst.Assign) and len(holder.targets) == 1 and isinstance(div.left, cst.Name) \
                and isinstance(holder.targets[0].target, cst.Name) \
                and holder.targets[0].target.value == div.left.value:
            stmt = statement_of(m, holder)  # `loss = loss / n`: the statement goes
            return Fix(msg).delete_statement(stmt) if stmt is not None else None
        left = m.tree.code_for_node(div.left)
        return Fix(msg).replace(div, f"({left})" if div.lpar else left)
