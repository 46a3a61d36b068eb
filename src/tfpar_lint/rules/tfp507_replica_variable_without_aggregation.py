from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.rules._scope import values_of_kind
from tfpar_lint.semantic import arg, is_constant, keyword

ASSIGNS = ("assign", "assign_add", "assign_sub", "scatter_add", "scatter_sub", "scatter_update",
           "scatter_nd_update", "scatter_nd_add", "scatter_nd_sub", "scatter_max", "scatter_min",
           "scatter_mul", "scatter_div")
# Verified on TF 2.21 for these (TPUStrategy places variables its own way: not claimed).
MIRRORING = frozenset({"tensorflow.distribute.MirroredStrategy"}) | api.MULTI_WORKER_STRATEGIES


class ReplicaVariableWithoutAggregation(Rule):
    CODE = "TFP507"
    NAME = "replica-variable-without-aggregation"
    SUMMARY = "`tf.Variable` created in scope without `aggregation=` but assigned inside `strategy.run` (replicas diverge)"
    FIX_HINT = ("Create it with `aggregation=tf.VariableAggregation.SUM` / `MEAN` / `ONLY_FIRST_REPLICA` "
                "(and `synchronization=tf.VariableSynchronization.ON_READ` for per-replica accumulators).")
    SEVERITY = "warning"
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("Variable",), ("assign", "scatter_"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for v in values_of_kind(m, api.VARIABLE):
            call = v.origin
            if not isinstance(call, cst.Call) or v.site is None or v.qname != "tensorflow.Variable":
                continue
            if any(a.star for a in call.args) or keyword(call, "aggregation") is not None \
                    or keyword(call, "synchronization") is not None or len([a for a in call.args if a.keyword is None]) > 5:
                continue
            known, _ = m.scope_strategies(v.site)
            if not known or not all(s.qname in MIRRORING for s in known):
                continue
            for cs, recv, meth in m.method_calls(ASSIGNS):
                if not m.in_replica_fn(cs.scope):
                    continue
                vals = m.infer_at(recv, cs)
                if not vals or not all(x.origin is call for x in vals):
                    continue
                value = arg(cs.node, 0, "value") or arg(cs.node, 0, "delta") or arg(cs.node, 0, "sparse_delta")
                if value is None or is_constant(value):
                    continue  # the same constant on every replica keeps the copies equal
                yield Report(
                    cs.node,
                    f"`{m.code(cs.node)}` updates `{m.code(recv)}` inside a function run by `strategy.run`, but the "
                    f"variable (line {{line}}) was created in scope without `aggregation=`: on TF 2.21 each replica "
                    f"updates only its own copy and the copies silently diverge; pass "
                    f"`aggregation=tf.VariableAggregation.SUM` (or MEAN / ONLY_FIRST_REPLICA)",
                    {"variable": m.code(recv)},
                    related=call,
                )
                break
