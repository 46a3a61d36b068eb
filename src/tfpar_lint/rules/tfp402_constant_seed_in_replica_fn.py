from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.randomness import (keras_seeded_draws_in_replica_fns, replica_invariant, rng_calls_in_replica_fns,
                                   seed_arg)


class ConstantSeedInReplicaFn(Rule):
    CODE = "TFP402"
    NAME = "constant-seed-in-replica-fn"
    SUMMARY = "random op with a constant seed inside a function run by `strategy.run`"
    FIX_HINT = ("Use a `tf.random.Generator` created under the scope, or fold "
                "`tf.distribute.get_replica_context().replica_id_in_sync_group` into a stateless seed.")
    PROBE = "randomness"
    MARKERS = (STRATEGY_MARKERS, ("random", "dropout", "seed", "initializers"))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, q in rng_calls_in_replica_fns(m):
            seed = seed_arg(cs, q)
            if seed is None:
                continue
            if not m.constant_exprs(seed, cs.scope, cs.order):
                if replica_invariant(m, seed, cs.scope, cs.order):
                    # not a literal, but the same on every replica (args.seed, [step, 0])
                    yield Report(
                        cs.node,
                        f"`{m.code(cs.node.func)}` with the seed `{m.code(seed)}`, the same on every replica (no "
                        f"replica id in it): all replicas draw the same numbers; fold the replica id into the seed "
                        f"or use a `tf.random.Generator` created in scope",
                        {"op": q},
                    )
                continue  # a seed that may vary per replica (a replica id folded in, a Generator's draw)
            kind = "stateless" if api.is_stateless_rng(q) else "op-level"
            yield Report(
                cs.node,
                f"`{m.code(cs.node.func)}` with the constant {kind} seed `{m.code(seed)}` runs on every replica: "
                f"all replicas draw the same numbers; fold the replica id into the seed or use a "
                f"`tf.random.Generator` created in scope",
                {"op": q},
            )
        for cs, q, seed in keras_seeded_draws_in_replica_fns(m):
            if q == "keras.random.SeedGenerator":
                what = f"`{m.code(cs.node)}` is created on every replica with the same seed"
            elif q.startswith("keras.initializers."):
                what = (f"`{m.code(cs.node)}` calls an initializer seeded with the constant `{m.code(seed)}` "
                        f"(seeded initializers draw statelessly) on every replica")
            else:
                what = f"`{m.code(cs.node.func)}` with the constant seed `{m.code(seed)}` runs on every replica"
            yield Report(
                cs.node,
                f"{what}: all replicas draw the same numbers; fold the replica id into the seed or use a "
                f"`tf.random.Generator` created in scope",
                {"op": q},
            )
