from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import applies_in_replica, replica_fn_strategies, replica_fns, replicated
from tfpar_lint.semantic import arg
from tfpar_lint.semantic.gradflow import local_gradients

CLIPS = frozenset({"tensorflow.clip_by_global_norm", "tensorflow.clip_by_norm", "tensorflow.clip_by_average_norm"})


class PerReplicaGradientClipping(Rule):
    """Gradients clipped by norm inside the replica function before ``apply_gradients`` sums them:
    each replica is clipped by its own norm, not the applied gradient by its norm.  (A Keras 3
    optimizer's own ``clipnorm`` / ``global_clipnorm`` does the same under a strategy, measured, but
    is not flagged: see the page.)"""

    CODE = "TFP509"
    NAME = "per-replica-gradient-clipping"
    SUMMARY = ("gradients clipped by norm inside the function run by `strategy.run`, before `apply_gradients` sums "
               "them across replicas (each replica clipped by its own norm)")
    FIX_HINT = ("All-reduce first, then clip: `grads = tf.distribute.get_replica_context().all_reduce('SUM', grads)`, "
                "`tf.clip_by_global_norm(grads, c)`, then apply without aggregating again (tf_keras: "
                "`experimental_aggregate_gradients=False`; Keras 3 sums again, so hand it 1/num_replicas of the "
                "clipped gradients); or use tf_keras, whose `clipnorm` clips after aggregation.")
    SEVERITY = "warning"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("clip_by_global_norm", "clip_by_norm", "clip_by_average_norm"))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for fn in replica_fns(m):
            if not replicated(replica_fn_strategies(m, fn)) or not applies_in_replica(m, fn):
                continue
            for cs in m.calls_within(fn):
                q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
                if q not in CLIPS:
                    continue
                g = arg(cs.node, 0, "t_list" if q.endswith("global_norm") else "t")
                if g is None or not local_gradients(m, g, cs.scope, cs.order):
                    continue
                yield Report(
                    cs.node,
                    f"`{m.code(cs.node.func)}` clips the gradients of one replica by that replica's own norm inside "
                    f"`{fn.name}` (run by `strategy.run`), and `apply_gradients` then sums the replicas' clipped "
                    f"gradients: the applied gradient is not clipped by its norm (measured on 2 replicas: a 1.73x "
                    f"larger update than the clipped one); all-reduce first, clip, then apply without aggregating "
                    f"again",
                    {"function": fn.name},
                )
