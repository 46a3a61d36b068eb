from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import arg, replicated
from tfpar_lint.semantic.crossreplica import created_under, cross_replica_context


class StepInCrossReplicaContext(Rule):
    """An optimizer step, or a Keras 2 metric update, on objects of a replicated strategy, made in
    cross-replica context (in the scope or in the driving code, not in ``strategy.run``)."""

    CODE = "TFP111"
    NAME = "step-in-cross-replica-context"
    SUMMARY = ("`optimizer.apply_gradients` / `minimize` or a tf_keras `metric.update_state` on objects of a "
               "replicated strategy, called in cross-replica context instead of inside `strategy.run`")
    FIX_HINT = ("Put the training step (forward pass, tape, `apply_gradients`, metric updates) in a function and "
                "run it with `strategy.run(step, args=(batch,))` on a distributed dataset's batches.")
    SEVERITY = "error"
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("apply_gradients", "minimize", "update_state"))
    NEEDS = (("strategy",), ("optimizer", "metric"), ("scope",), ("attr:apply_gradients", "attr:minimize", "attr:update_state"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, meth in m.method_calls(("apply_gradients", "minimize", "update_state")):
            vals = m.infer_at(recv, cs)
            if not vals:
                continue
            kind = api.METRIC if meth == "update_state" else api.OPTIMIZER
            if not all(v.kind == kind for v in vals):
                continue
            scoped = [(v, created_under(m, v)) for v in vals]
            in_scope = [(v, s) for v, s in scoped if s and replicated(s)]
            if not in_scope:
                continue
            if kind == api.METRIC and not all(versions.keras_flavor(m, v) == "tf_keras" for v, _ in in_scope):
                continue  # a Keras 3 metric updates in cross-replica context (measured)
            if kind == api.OPTIMIZER and self._tfp106_reports(cs, vals):
                continue
            grads = arg(cs.node, 0, "grads_and_vars") if meth == "apply_gradients" else None
            if isinstance(grads, (cst.List, cst.Tuple)) and not grads.elements:
                continue  # apply_gradients([]): steps nothing
            where = cross_replica_context(m, cs)
            if where is None:
                continue
            v0 = in_scope[0][0]
            if kind == api.OPTIMIZER:
                what = ("steps an optimizer built under a replicated strategy's scope (line {line}) " + where +
                        ", outside `strategy.run`: the step runs in cross-replica context (Keras 3 and tf_keras "
                        "raise `ValueError: DistributedVariable.handle is not available outside the replica "
                        "context`, or, outside the scope, one device trains on the whole batch)")
            else:
                what = ("updates a tf_keras metric built under a replicated strategy's scope (line {line}) " + where +
                        ", outside `strategy.run`: `ValueError: SyncOnReadVariable does not support `assign_add` "
                        "in cross-replica context`")
            partial = "" if len(in_scope) == len(vals) else " (on the branch that builds it in the scope)"
            yield Report(
                cs.node,
                f"`{m.code(cs.node.func)}(...)` {what}{partial}; run the step with `strategy.run`",
                {"object": m.code(recv), "where": where},
                related=v0.origin,
            )

    def _tfp106_reports(self, cs, vals) -> bool:
        """TFP106's own case: every value built in a scope, the step outside every scope."""
        m = self.module
        if not all(created_under(m, v) for v in vals):
            return False
        known, maybe = m.scope_strategies(cs)
        if known or maybe or m.in_replica_fn(cs.scope):
            return False
        return not any(not m.callers(f) for f in m.enclosing_functions(cs.scope))
