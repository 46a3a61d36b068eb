from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.scope_use import values_of_kind
from tfpar_lint.semantic import Scope, arg, is_constant, keyword

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
    # the relevance stage (tfpar_lint.relevance): a tf.Variable made under a mirroring strategy's scope, assigned in a replica function
    NEEDS = (("strategy",), ("mirroring",), ("scope",), ("replica_run",), ("variable",))

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
                if value is None or is_constant(value) or not self._per_replica(value, cs.scope, cs.order):
                    continue  # the same value on every replica keeps the copies equal
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

    def _per_replica(self, expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> bool:
        """Can ``expr`` differ between replicas?  True when it reads a parameter of a replica function
        (the replica's input), a local derived from one, the replica id, or draws random numbers."""
        m = self.module
        if _depth > 12:
            return True
        table = m.replica_functions()
        found = False

        class V(cst.CSTVisitor):
            def __init__(self) -> None:
                super().__init__()
                self.names: list[cst.Name] = []
                self.rng = False

            def visit_Attribute(self, node: cst.Attribute) -> bool:
                nonlocal found
                if node.attr.value == "replica_id_in_sync_group":
                    found = True
                node.value.visit(self)
                return False

            def visit_Call(self, node: cst.Call) -> None:
                q, _ = m.qualified_name(node.func, scope, order)
                if q in api.STATEFUL_RNG_OPS:
                    self.rng = True

            def visit_Name(self, node: cst.Name) -> None:
                self.names.append(node)

        v = V()
        expr.visit(v)
        if found or v.rng:
            return True
        for name in v.names:
            for b in m.lookup(name.value, scope, order):
                if b.kind == "param":
                    fn = b.func
                    if fn is not None and id(fn) in table:
                        is_self = fn.cls is not None and fn.params and b.node is fn.params[0]
                        if not is_self:
                            return True
                elif b.scope.kind in ("function", "lambda") and b.scope.func is not None:
                    if b.kind in ("for", "comp", "with", "except") or b.value is None or b.path:
                        if id(b.scope.func) in table:
                            return True
                        continue
                    if self._per_replica(b.value, b.scope, b.order, _depth + 1):
                        return True
        return False
