from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.rules._loss import replicated
from tfpar_lint.semantic import Scope, call_method

CONVERTERS = ("float", "int", "bool", "complex")


class PerReplicaResultAsTensor(Rule):
    CODE = "TFP506"
    NAME = "per-replica-result-as-tensor"
    SUMMARY = "result of `strategy.run` used as a tensor (`.numpy()`, `float()`, `print`) without `strategy.reduce`"
    FIX_HINT = ("Reduce it first: `strategy.reduce(tf.distribute.ReduceOp.SUM, result, axis=None)`, or look at "
                "`strategy.experimental_local_results(result)`.")
    SEVERITY = "error"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run_v2"), ("numpy", "float(", "int(", "print(", "f\"", "f'"))

    def _per_replica(self, expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
        vals = self.module.infer(expr, scope, order)
        strategies = [v.source for v in vals if v.source is not None]
        return bool(vals) and all(v.kind == api.PER_REPLICA for v in vals) and replicated(strategies) \
            and len(strategies) == len(vals)

    def _builtin(self, call: cst.Call, scope: Scope, order: int) -> Optional[str]:
        f = call.func
        if isinstance(f, cst.Name) and not self.module.lookup(f.value, scope, order):
            return f.value
        return None

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs in m.calls:
            cm = call_method(cs.node)
            if cm is not None and cm[1] == "numpy" and self._per_replica(cm[0], cs.scope, cs.order):
                yield Report(cs.node, f"`{m.code(cs.node)}`: `{m.code(cm[0])}` is the per-replica result of "
                                      f"`strategy.run` (a PerReplica value with several replicas), which has no "
                                      f"`numpy()` (AttributeError); reduce it with `strategy.reduce(...)` or use "
                                      f"`strategy.experimental_local_results(...)`")
                continue
            name = self._builtin(cs.node, cs.scope, cs.order)
            if name in CONVERTERS or name == "print":
                for a in cs.node.args:
                    if a.keyword is not None or a.star:
                        continue
                    if self._per_replica(a.value, cs.scope, cs.order):
                        what = ("prints the PerReplica wrapper (one value per replica), not the step's result"
                                if name == "print" else "cannot convert a PerReplica value (TypeError)")
                        yield Report(cs.node, f"`{m.code(cs.node)}` {what}: `{m.code(a.value)}` is the per-replica "
                                              f"result of `strategy.run`; reduce it with `strategy.reduce(...)` first")
                        break
        for expr, scope, order in m.fstring_exprs:
            if self._per_replica(expr, scope, order):
                yield Report(expr, f"`{m.code(expr)}` in an f-string formats the PerReplica wrapper of "
                                   f"`strategy.run` (one value per replica), not the step's result; reduce it with "
                                   f"`strategy.reduce(...)` first")
