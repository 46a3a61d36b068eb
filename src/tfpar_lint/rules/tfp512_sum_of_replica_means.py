from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import MEANS, gradient_targets, loss_terms, mentions_replicas, replicated, run_calls
from tfpar_lint.semantic import CallSite, arg
from tfpar_lint.semantic.batchsizes import global_batch


class SumOfReplicaMeans(Rule):
    """``strategy.reduce(SUM, x)`` where every replica returns a mean over its own batch: the
    reported value is num_replicas times the mean."""

    CODE = "TFP512"
    NAME = "sum-of-replica-means"
    SUMMARY = "`strategy.reduce(SUM, ...)` of per-replica means (`reduce_mean` over each replica's batch): the value is N x too large"
    FIX_HINT = ("Reduce the per-replica means with `tf.distribute.ReduceOp.MEAN`, or return per-replica sums "
                "(`compute_average_loss` with the global batch) and keep `SUM`.")
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("SUM", "sum"), ("reduce_mean", "ops.mean"))
    # the relevance stage (tfpar_lint.relevance): strategy.reduce of a run result
    NEEDS = (("strategy",), ("replica_run",), ("attr:reduce",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, _recv, _meth, strat in m.strategy_method_calls(("reduce",)):
            if not replicated(strat) or not self._is_sum(cs):
                continue
            value = arg(cs.node, 1, "value")
            if value is None:
                continue
            index = self._unpacked_index(value, cs)
            vals = m.infer_at(value, cs)
            if not vals or not all(v.kind == api.PER_REPLICA for v in vals):
                continue
            means = []
            for v in vals:
                got = self._returned_means(v.origin, index)
                if got is None:
                    means = []
                    break
                means.extend(got)
            if not means:
                continue
            node = means[0]
            yield Report(
                cs.node,
                f"`{m.code(value)}` holds each replica's mean over its own batch (`{m.code(node)}`, line {{line}}): "
                f"summing them with `ReduceOp.SUM` reports num_replicas_in_sync times the mean; reduce with "
                f"`tf.distribute.ReduceOp.MEAN`, or return `tf.nn.compute_average_loss(...)` values and keep `SUM`",
                {"value": m.code(value)},
                related=node,
            )

    def _is_sum(self, cs: CallSite) -> bool:
        m = self.module
        op = arg(cs.node, 0, "reduce_op")
        if isinstance(op, cst.SimpleString):
            return str(op.evaluated_value).upper() == "SUM"
        if op is None:
            return False
        q, _ = m.qualified_name(op, cs.scope, cs.order)
        return q == "tensorflow.distribute.ReduceOp.SUM"

    def _unpacked_index(self, value: cst.BaseExpression, cs: CallSite) -> Optional[int]:
        """``a, b = strategy.run(...)``: the position ``value`` was unpacked from (None: not unpacked)."""
        if not isinstance(value, cst.Name):
            return None
        bs = self.module.lookup(value.value, cs.scope, cs.order)
        if len(bs) == 1 and len(bs[0].path) == 1:
            return bs[0].path[0]
        return None

    def _run_calls(self, call) -> list:
        return run_calls(self.module, call)

    def _returned_means(self, origin, index: Optional[int]) -> Optional[list[cst.BaseExpression]]:
        """The whole-batch means every replica function behind ``origin`` returns (at ``index`` of
        a returned tuple); None when some return is not such a mean."""
        m = self.module
        runs = self._run_calls(origin)
        if not runs:
            return None
        out: list[cst.BaseExpression] = []
        for run, site in runs:
            fns = m.resolve_function(arg(run, 0, "fn"), site.scope, site.order)
            if not fns:
                return None
            for fn in fns:
                if not fn.returns:
                    return None
                for expr, order in fn.returns:
                    if index is not None:
                        if not isinstance(expr, (cst.Tuple, cst.List)) or index >= len(expr.elements):
                            return None
                        expr = expr.elements[index].value
                    elif isinstance(expr, (cst.Tuple, cst.List, cst.Dict)):
                        return None
                    mean = self._mean_of(expr, fn.scope, order)
                    if mean is None or id(mean) in self._trained_means(fn):
                        return None  # the training loss itself: TFP501's (its fix mends the sum too)
                    out.append(mean)
        return out

    def _trained_means(self, fn) -> set[int]:
        """ids of the loss terms whose gradients ``fn`` applies."""
        m = self.module
        out: set[int] = set()
        for cs, target in gradient_targets(m, fn):
            for t in loss_terms(m, target, cs.scope, cs.order):
                out.add(id(t.node))
        return out

    def _mean_of(self, expr: cst.BaseExpression, scope, order: int) -> Optional[cst.BaseExpression]:
        m = self.module
        terms = list(loss_terms(m, expr, scope, order))
        if not terms:
            return None
        first = None
        for t in terms:
            node = t.node
            if not isinstance(node, cst.Call) or t.summed:
                return None
            q, _ = m.qualified_name(node.func, t.scope, t.order)
            if q not in MEANS or any(a.keyword is not None and a.keyword.value == "axis" for a in node.args) \
                    or len([a for a in node.args if a.keyword is None]) > 1:
                return None
            if any(mentions_replicas(m, d, sc, od) or global_batch(m, d, sc, od) for d, sc, od in t.divisors):
                return None
            first = first or node
        return first
