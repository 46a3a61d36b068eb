from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import (L2_LOSS, applied_gradients, differentiated_owner_keys, loss_terms,
                                      mentions_replicas, model_variable_terms, replica_fn_strategies,
                                      replica_fns, replicated)
from tfpar_lint.semantic import arg


class UnscaledRegularizationLoss(Rule):
    CODE = "TFP504"
    NAME = "unscaled-regularization-loss"
    SUMMARY = "`model.losses` added to the loss in a replica function without `tf.nn.scale_regularization_loss`"
    FIX_HINT = "Add `tf.nn.scale_regularization_loss(model.losses)` instead of the raw sum."
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, (".losses", "l2_loss", "apply_gradients"))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for fn in replica_fns(m):
            if not replicated(replica_fn_strategies(m, fn)):
                continue
            applied = applied_gradients(m, fn)
            if applied is None:
                continue
            yield from self._decay_on_gradients(fn, applied)
            for cs, target in applied.targets:
                trained = differentiated_owner_keys(m, cs)
                for t in loss_terms(m, target, cs.scope, cs.order):
                    node = t.node
                    if any(mentions_replicas(m, d, sc, od) for d, sc, od in t.divisors):
                        continue
                    if self._weight_decay(node, t):
                        at = t.via if t.via is not None else node  # the helper call in the replica function
                        yield Report(
                            at,
                            f"`{m.code(at)}` (weight decay on the model's variables) is added to the loss in "
                            f"`{fn.name}`, which runs on every replica: the replicas' gradients are summed, so the "
                            f"decay is num_replicas_in_sync times too strong; wrap the penalty in "
                            f"`tf.nn.scale_regularization_loss(...)`",
                            {"function": fn.name},
                            related=cs.node,
                        )
                        continue
                    if not (isinstance(node, cst.Attribute) and node.attr.value == "losses"):
                        continue
                    owner = m.infer(node.value, t.scope, t.order)
                    if not owner or not all(v.kind in (api.MODEL, api.LAYER) for v in owner):
                        # an object the linter cannot follow, whose variables this gradient is taken of
                        # (`tape.gradient(loss, self.model.trainable_variables)`): a Keras model by its use
                        if not (all(v.kind == api.UNKNOWN for v in owner)
                                and m.receiver_key(node.value, t.scope, t.order) in trained - {None}):
                            continue
                    how = "num_replicas_in_sync times too strong"
                    if t.divisors:  # scaled, but by something else (`(loss + reg) / batch_size`)
                        how = (f"scaled by num_replicas_in_sync / `{m.code(t.divisors[0][0])}` instead of by 1 "
                               f"(it is divided by that, not by the number of replicas)")
                    yield Report(
                        node,
                        f"`{m.code(node)}` is added to the loss in `{fn.name}`, which runs on every replica: the "
                        f"replicas' gradients are summed, so the regularization is {how}; use "
                        f"`tf.nn.scale_regularization_loss({m.code(node)})`",
                        {"function": fn.name},
                        related=cs.node,
                    )

    def _decay_on_gradients(self, fn, applied) -> Iterator[Report]:
        """``[g + wd * v for g, v in zip(grads, model.trainable_variables)]`` before
        ``apply_gradients``: weight decay added to every replica's gradient, then summed."""
        m = self.module
        for expr, scope, order in applied.added:
            if not model_variable_terms(m, expr, scope, order) or mentions_replicas(m, expr, scope, order):
                continue
            yield Report(
                expr,
                f"`{m.code(expr)}` (weight decay on the model's variables) is added to the gradients in "
                f"`{fn.name}`, which runs on every replica: the replicas' gradients are summed, so the decay is "
                f"num_replicas_in_sync times too strong; divide it by `strategy.num_replicas_in_sync` (or add "
                f"the penalty to the loss with `tf.nn.scale_regularization_loss`)",
                {"function": fn.name},
            )

    def _weight_decay(self, node: cst.BaseExpression, t) -> bool:
        """``tf.nn.l2_loss(v)`` of a Keras model's or layer's variable (``v`` from
        ``model.trainable_variables``, ``layer.kernel``)."""
        m = self.module
        if not isinstance(node, cst.Call):
            return False
        q, _ = m.qualified_name(node.func, t.scope, t.order)
        if q not in L2_LOSS:
            return False
        x = arg(node, 0, "t")
        vals = m.infer(x, t.scope, t.order) if x is not None else []
        return bool(vals) and all(v.kind == api.VARIABLE and v.source is not None
                                  and v.source.kind in (api.MODEL, api.LAYER, api.VARIABLES) for v in vals)

    # -- fix (safe): tf.add_n(model.losses) -> tf.nn.scale_regularization_loss(tf.add_n(model.losses))
    FIXABLE = "safe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix, parent, tf_alias

        m = self.module
        tf = tf_alias(m)
        arg_node = parent(m, report.node)
        call = parent(m, arg_node) if isinstance(arg_node, cst.Arg) else None
        if tf is None or not isinstance(call, cst.Call) or len(call.args) != 1:
            return None
        fname = m.tree.code_for_node(call.func)
        if not (fname == "sum" or fname.endswith("add_n") or fname.endswith("reduce_sum")):
            return None
        return Fix("Scale with `tf.nn.scale_regularization_loss`").replace(
            call, f"{tf}.nn.scale_regularization_loss({m.tree.code_for_node(call)})")
