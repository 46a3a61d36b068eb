from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint import versions
from tfpar_lint.semantic.loss import (AVERAGE_LOSS, default_reduction, loss_object, loss_terms,
                                    mentions_replicas, replicated, run_calls)
from tfpar_lint.semantic import CallSite, arg, call_method


MEAN_METRICS = frozenset({"keras.metrics.Mean"})
DATASET_PASS = frozenset({"repeat", "shuffle", "prefetch", "cache", "take", "skip", "map", "filter", "with_options",
                          "apply", "unbatch", "interleave", "flat_map"})


def _batch_sizes(m, expr, scope, order, _depth: int = 0) -> list:
    """The ``batch_size`` arguments of the ``.batch(...)`` calls a dataset expression was built with."""
    if _depth > 12 or expr is None:
        return []
    if isinstance(expr, cst.Name):
        out = []
        for e, sc, od in m.reaching_exprs(expr, scope, order) or ():
            out.extend(_batch_sizes(m, e, sc, od, _depth + 1))
        return out
    cm = call_method(expr) if isinstance(expr, cst.Call) else None
    if cm is None:
        return []
    recv, meth = cm
    if meth == "batch":
        size = arg(expr, 0, "batch_size")
        return ([(size, scope, order)] if size is not None else []) + _batch_sizes(m, recv, scope, order, _depth + 1)
    if meth in DATASET_PASS:
        return _batch_sizes(m, recv, scope, order, _depth + 1)
    return []


def _constant_int(m, expr, scope, order, _depth: int = 0):
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    if isinstance(expr, cst.Name) and _depth < 8:
        reaching = m.reaching_exprs(expr, scope, order) or ()
        vals = {_constant_int(m, e, sc, od, _depth + 1) for e, sc, od in reaching}
        return vals.pop() if len(vals) == 1 else None
    return None


class MeanReduceOfScaledLoss(Rule):
    CODE = "TFP505"
    NAME = "mean-reduce-of-scaled-loss"
    SUMMARY = "`strategy.reduce(MEAN, ...)` of per-replica losses already divided by the global batch size"
    FIX_HINT = "Use `strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_loss, axis=None)`."
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("MEAN", "mean", "Mean"), ("compute_average_loss", "keras", "batch"))
    _version_unknown = False  # a term was a default-reduction Keras loss of a version nothing states
    # the relevance stage (tfpar_lint.relevance): strategy.reduce of a run result, or a metric updated in a replica function
    NEEDS = (("strategy",), ("replica_run",), ("attr:reduce", "attr:update_state"))

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
                self._version_unknown = False
                how = self._scaled_by(v)
                if not how and self._version_unknown:  # a Keras 3 loss only, and no version stated
                    versions.withhold(m, self.CODE)
                    break
                if how:
                    yield Report(
                        cs.node,
                        f"`{m.code(value)}` holds per-replica losses that are already {how}: averaging them with "
                        f"`ReduceOp.MEAN` reports a loss num_replicas_in_sync times too small; reduce with "
                        f"`tf.distribute.ReduceOp.SUM`",
                        {"value": m.code(value)},
                    )
                    break
        yield from self._mean_metrics()

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
        for run, site in self._run_calls(v.origin):
            how = self._scaled_in(run, site)
            if how:
                return how
        return None

    def _run_calls(self, call) -> list:
        return run_calls(self.module, call)

    def _scaled_in(self, run: cst.Call, site: CallSite) -> Optional[str]:
        m = self.module
        for fn in m.resolve_function(arg(run, 0, "fn"), site.scope, site.order):
            for expr, order in fn.returns:
                if isinstance(expr, (cst.Tuple, cst.List, cst.Dict)):
                    continue
                how = self._scaled_expr(expr, fn.scope, order)
                if how:
                    return how
        return None

    def _scaled_expr(self, expr: cst.BaseExpression, scope, order: int) -> Optional[str]:
        """How the loss ``expr`` is scaled for the strategy, if one of its terms is: by the global
        batch size (``tf.nn.compute_average_loss``, or a sum divided by the batch size the
        distributed dataset was batched with) or by 1/num_replicas_in_sync (Keras 3 loss)."""
        m = self.module
        for t in loss_terms(m, expr, scope, order):
            node = t.node
            if any(mentions_replicas(m, d, sc, od) for d, sc, od in t.divisors):
                continue
            if t.summed:
                for d, sc, od in t.divisors:
                    if self._global_batch(d, sc, od):
                        return (f"divided by the global batch size (`{m.code(d)}`, the batch of the distributed "
                                f"dataset)")
                continue
            if not isinstance(node, cst.Call):
                continue
            q, _ = m.qualified_name(node.func, t.scope, t.order)
            if q in AVERAGE_LOSS:
                return "divided by the global batch size (`tf.nn.compute_average_loss`)"
            lo = loss_object(m, node, t.scope, t.order)
            if lo is not None and versions.is_keras3(m, lo) and default_reduction(m, lo):
                return f"scaled by 1/num_replicas_in_sync (Keras 3 default-reduction loss{versions.note(m, lo, ', ')})"
            if lo is not None and versions.keras_flavor(m, lo) == "unknown" and default_reduction(m, lo):
                self._version_unknown = True
        return None

    def _global_batch(self, d: cst.BaseExpression, scope, order: int) -> bool:
        """``d`` is the global batch size: the same constant as the ``batch_size`` of a dataset passed
        to ``strategy.experimental_distribute_dataset`` (which takes globally batched datasets)."""
        m = self.module
        sizes = getattr(self, "_global_batches", None)
        if sizes is None:
            sizes = set()
            for cs, _recv, _meth, _strat in m.strategy_method_calls(("experimental_distribute_dataset",)):
                for size, sc, od in _batch_sizes(m, arg(cs.node, 0, "dataset"), cs.scope, cs.order):
                    n = _constant_int(m, size, sc, od)
                    if n is not None:
                        sizes.add(n)
            self._global_batches = sizes
        n = _constant_int(m, d, scope, order)
        return n is not None and n in sizes

    def _mean_metrics(self) -> Iterator[Report]:
        """``train_loss.update_state(loss)`` of a ``keras.metrics.Mean`` inside a replica function,
        with ``loss`` already scaled for the strategy: the metric averages the scaled values (the
        tutorials multiply by ``num_replicas_in_sync`` first, or track the per-example losses)."""
        m = self.module
        for cs in m.calls:
            cm = call_method(cs.node)
            if cm is None or cm[1] != "update_state":
                continue
            vals = m.infer_at(cm[0], cs)
            if not vals or not all(v.kind == api.METRIC and v.qname in MEAN_METRICS for v in vals):
                continue
            strat = m.replica_strategies(cs.scope)
            if not replicated(strat):
                continue
            value = arg(cs.node, 0, "values")
            how = self._scaled_expr(value, cs.scope, cs.order) if value is not None else None
            if how:
                yield Report(
                    cs.node,
                    f"`{m.code(value)}` is already {how}: the `Mean` metric `{m.code(cm[0])}` averages these "
                    f"per-replica values and reports a loss num_replicas_in_sync times too small; update it with "
                    f"`{m.code(value)} * strategy.num_replicas_in_sync` or with the per-example losses",
                    {"value": m.code(value)},
                )

    # -- fix (safe): ReduceOp.MEAN -> ReduceOp.SUM in the flagged `strategy.reduce`
    FIXABLE = "safe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix

        cm = call_method(report.node) if isinstance(report.node, cst.Call) else None
        if cm is None or cm[1] != "reduce":
            return None  # a Mean metric's update_state: no mechanical fix
        op = arg(report.node, 0, "reduce_op")
        if isinstance(op, cst.Attribute) and op.attr.value == "MEAN":
            return Fix("Reduce with `ReduceOp.SUM`").replace(op.attr, "SUM")
        if isinstance(op, cst.SimpleString) and op.evaluated_value in ("MEAN", "mean"):
            return Fix("Reduce with `ReduceOp.SUM`").replace(op, op.quote + "SUM" + op.quote)
        return None
