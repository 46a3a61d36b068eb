from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.randomness import rng_calls_in_replica_fns, seed_arg


class GlobalRngInReplicaFn(Rule):
    CODE = "TFP403"
    NAME = "global-rng-in-replica-fn"
    SUMMARY = "legacy global stateful random op inside a function run by `strategy.run` (off by default)"
    FIX_HINT = "Use a `tf.random.Generator` created under the scope, or stateless ops seeded per replica."
    DEFAULT_ENABLED = False
    PROBE = "randomness"
    MARKERS = (STRATEGY_MARKERS, ("random", "dropout"))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, q in rng_calls_in_replica_fns(m):
            if api.is_stateless_rng(q) or seed_arg(cs, q) is not None:
                continue
            yield Report(
                cs.node,
                f"`{m.code(cs.node.func)}` is a legacy global stateful random op inside a replica function: "
                f"its draws depend on op creation order and are not reproducible per replica; the random "
                f"numbers guide recommends a `tf.random.Generator` created in scope or stateless ops",
                {"op": q},
            )
