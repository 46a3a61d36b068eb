from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.rules._loss import (AVERAGE_LOSS, default_reduction, is_keras3, loss_object, loss_terms,
                                    mentions_replicas, replicated)
from tfpar_lint.semantic import CallSite, arg


class MeanReduceOfScaledLoss(Rule):
    CODE = "TFP505"
    NAME = "mean-reduce-of-scaled-loss"
    SUMMARY = "`strategy.reduce(MEAN, ...)` of per-replica losses already divided by the global batch size"
    FIX_HINT = "Use `strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_loss, axis=None)`."
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("MEAN", "mean"), ("compute_average_loss", "keras"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, meth, strat in m.strategy_method_calls(("reduce",)):
            if not replicated(strat):
                continue
            if not self._is_mean(cs) or not self._axis_none(cs):
                continue
            value = arg(cs.node, 1, "value")
            vals = m.infer_at(value, cs)
            if not vals or not all(v.kind == api.PER_REPLICA for v in vals):
                continue
            for v in vals:
                how = self._scaled_by(v)
                if how:
                    yield Report(
                        cs.node,
                        f"`{m.code(value)}` holds per-replica losses that are already {how}: averaging them with "
                        f"`ReduceOp.MEAN` reports a loss num_replicas_in_sync times too small; reduce with "
                        f"`tf.distribute.ReduceOp.SUM`",
                        {"value": m.code(value)},
                    )
                    break

    def _is_mean(self, cs: CallSite) -> bool:
        m = self.module
        op = arg(cs.node, 0, "reduce_op")
        if isinstance(op, cst.SimpleString):
            return str(op.evaluated_value).upper() == "MEAN"
        if op is None:
            return False
        q, _ = m.qualified_name(op, cs.scope, cs.order)
        return q == "tensorflow.distribute.ReduceOp.MEAN"

    @staticmethod
    def _axis_none(cs: CallSite) -> bool:
        axis = arg(cs.node, 2, "axis")
        return isinstance(axis, cst.Name) and axis.value == "None"

    def _scaled_by(self, v) -> Optional[str]:
        """How the replica function's returned loss was scaled by the global batch, if it was."""
        m = self.module
        run = v.origin
        site = m.site_of_call.get(id(run)) if run is not None else None
        if not isinstance(run, cst.Call) or site is None:
            return None
        for fn in m.resolve_function(arg(run, 0, "fn"), site.scope, site.order):
            for expr, order in fn.returns:
                if isinstance(expr, (cst.Tuple, cst.List, cst.Dict)):
                    continue
                for t in loss_terms(m, expr, fn.scope, order):
                    node = t.node
                    if not isinstance(node, cst.Call) or t.summed:
                        continue
                    if any(mentions_replicas(m, d, sc, od) for d, sc, od in t.divisors):
                        continue
                    q, _ = m.qualified_name(node.func, t.scope, t.order)
                    if q in AVERAGE_LOSS:
                        return "divided by the global batch size (`tf.nn.compute_average_loss`)"
                    lo = loss_object(m, node, t.scope, t.order)
                    if lo is not None and is_keras3(m, lo) and default_reduction(m, lo):
                        return "scaled by 1/num_replicas_in_sync (Keras 3 default-reduction loss)"
        return None

    # -- fix (safe): ReduceOp.MEAN -> ReduceOp.SUM in the flagged `strategy.reduce`
    FIXABLE = "safe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix

        op = arg(report.node, 0, "reduce_op")
        if isinstance(op, cst.Attribute) and op.attr.value == "MEAN":
            return Fix("Reduce with `ReduceOp.SUM`").replace(op.attr, "SUM")
        if isinstance(op, cst.SimpleString) and op.evaluated_value in ("MEAN", "mean"):
            return Fix("Reduce with `ReduceOp.SUM`").replace(op, op.quote + "SUM" + op.quote)
        return None
