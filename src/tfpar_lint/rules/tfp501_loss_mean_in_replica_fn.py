from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import (MEANS, V1_LOSSES, gradient_targets, is_per_replica_batch, loss_terms,
                                    mentions_replicas, replica_fn_strategies, replica_fns, replicated, v1_mean_loss)
from tfpar_lint.semantic import arg
from tfpar_lint.semantic.replicagrads import gathered_only


class LossMeanInReplicaFn(Rule):
    CODE = "TFP501"
    NAME = "loss-mean-in-replica-fn"
    SUMMARY = "loss averaged over the per-replica batch inside a function run by `strategy.run` (gradients N x too large)"
    FIX_HINT = ("Compute per-example losses and use `tf.nn.compute_average_loss(per_example_loss, "
                "global_batch_size=GLOBAL_BATCH_SIZE)`.")
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run", "call_for_each_replica"),
               ("reduce_mean", "mean(", "/", "losses."))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for fn in replica_fns(m):
            if not replicated(replica_fn_strategies(m, fn)):
                continue
            for cs, target in gradient_targets(m, fn):
                passed: set[int] = set()
                for t in loss_terms(m, target, cs.scope, cs.order):
                    if any(mentions_replicas(m, d, sc, od) for d, sc, od in t.divisors):
                        continue  # already divided by the number of replicas
                    if gathered_only(m, t.node, t.scope, t.order) is not None:
                        continue  # the same global-batch loss on every replica: TFP514's
                    if t.forward_only is not None:
                        if id(t.forward_only) not in passed and self._divides(t.forward_only, t.scope, t.order):
                            passed.add(id(t.forward_only))
                            yield Report(
                                t.forward_only,
                                f"`{m.code(t.forward_only)}` divides the loss of `{fn.name}` (run on every replica) "
                                f"in the forward pass only: `tf.grad_pass_through` passes the gradient of the "
                                f"undivided loss, so the replicas' summed gradients are num_replicas_in_sync times "
                                f"too large; divide the loss itself (`tf.nn.compute_average_loss(..., "
                                f"global_batch_size=...)`)",
                                {"function": fn.name},
                                related=cs.node,
                            )
                        continue
                    node = t.node
                    at = self._at(node, t)
                    if at is None:
                        continue
                    if isinstance(node, cst.Call):
                        q, raw = m.qualified_name(node.func, t.scope, t.order)
                        if q in MEANS and self._whole_batch(node):
                            yield Report(
                                at,
                                f"`{m.code(node)}`{self._in(at, node)} averages the loss over the per-replica batch inside `{fn.name}`, "
                                f"which runs on every replica: the replicas' gradients are summed, so the update is "
                                f"num_replicas_in_sync times too large; use `tf.nn.compute_average_loss(per_example_loss, "
                                f"global_batch_size=...)`",
                                {"function": fn.name},
                                related=cs.node,
                            )
                            continue
                        if q in api.LOSS_FUNCTIONS and not t.summed and not t.divisors:
                            yield Report(
                                at,
                                f"`{m.code(node)}`{self._in(at, node)} (a Keras loss function called directly: one loss per example, "
                                f"or the mean of a flattened batch) is the loss of `{fn.name}`, which runs on every "
                                f"replica, and nothing divides it by the global batch size: the replicas' gradients "
                                f"are summed, so the update is too large; use `tf.nn.compute_average_loss("
                                f"per_example_loss, global_batch_size=...)`",
                                {"function": fn.name},
                                related=cs.node,
                            )
                            continue
                        if raw in V1_LOSSES and v1_mean_loss(node):  # as spelled: tf.losses is Keras' in TF 2
                            yield Report(
                                at,
                                f"`{m.code(node)}`{self._in(at, node)} (a `tf.compat.v1.losses` loss, averaged over its batch by its "
                                f"default reduction) is the loss of `{fn.name}`, which runs on every replica: the "
                                f"replicas' gradients are summed, so the update is num_replicas_in_sync times too "
                                f"large; pass `reduction=tf.compat.v1.losses.Reduction.NONE` and use "
                                f"`tf.nn.compute_average_loss(..., global_batch_size=...)`",
                                {"function": fn.name},
                                related=cs.node,
                            )
                            continue
                    if t.summed:
                        for d, sc, od in t.divisors:
                            if is_per_replica_batch(m, d, sc, od):
                                yield Report(
                                    d,
                                    f"the loss in `{fn.name}` (run on every replica) is divided by the per-replica "
                                    f"batch size `{m.code(d)}`: the replicas' gradients are summed, so the update is "
                                    f"num_replicas_in_sync times too large; divide by the global batch size "
                                    f"(`tf.nn.compute_average_loss(..., global_batch_size=...)`)",
                                    {"function": fn.name},
                                    related=cs.node,
                                )
                                break

    def _at(self, node, t):
        """Where to report a loss term: itself, or, when a helper of another module makes it, the
        call of that helper here (None: neither is in this module)."""
        m = self.module
        if not isinstance(node, cst.Call) or id(node) in m.site_of_call:
            return node
        if t.via is not None and id(t.via) in m.site_of_call:
            return t.via
        return None

    def _in(self, at, node) -> str:
        """" (returned by `helper(...)`)" when the term is reported at the helper call."""
        return "" if at is node else f" (returned by `{self.module.code(at)}`)"

    def _divides(self, call: cst.Call, scope, order) -> bool:
        """``tf.grad_pass_through(f)(loss)`` whose ``f`` divides (or rescales by the replicas)."""
        f = call.func.args[0].value if isinstance(call.func, cst.Call) and call.func.args else None
        body = f.body if isinstance(f, cst.Lambda) else None
        if body is None:
            fns = self.module.resolve_function(f, scope, order) if f is not None else []
            body = fns[0].returns[0][0] if len(fns) == 1 and len(fns[0].returns) == 1 else None
        return isinstance(body, cst.BinaryOperation) and isinstance(body.operator, (cst.Divide, cst.Multiply))

    @staticmethod
    def _whole_batch(call: cst.Call) -> bool:
        """``reduce_mean(x)`` / ``reduce_mean(x, axis=None)``: a mean over every element."""
        if any(a.star for a in call.args):
            return False
        axis = arg(call, 1, "axis")
        return axis is None or (isinstance(axis, cst.Name) and axis.value == "None")

    # -- fix (unsafe: equal only for a per-example loss of rank 1):
    #    tf.reduce_mean(per_example_loss) -> tf.nn.compute_average_loss(per_example_loss)
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        from tfpar_lint.fix import UNSAFE, Fix, tf_alias

        m = self.module
        call = report.node
        tf = tf_alias(m)
        if tf is None or not isinstance(call, cst.Call) or len(call.args) != 1 or call.args[0].keyword:
            return None
        return Fix("Average with `tf.nn.compute_average_loss` (divides by the global batch size)", UNSAFE).replace(
            call, f"{tf}.nn.compute_average_loss({m.tree.code_for_node(call.args[0].value)})")
