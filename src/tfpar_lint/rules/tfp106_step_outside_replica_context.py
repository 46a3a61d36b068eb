from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.scope_use import created_in_scope


class StepOutsideReplicaContext(Rule):
    CODE = "TFP106"
    NAME = "step-outside-replica-context"
    SUMMARY = "optimizer built in a strategy scope stepped outside both the scope and `strategy.run`"
    FIX_HINT = "Call `apply_gradients` inside the function passed to `strategy.run` (or under the scope)."
    SEVERITY = "warning"
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("apply_gradients", "minimize"))
    NEEDS = (("strategy",), ("optimizer",), ("scope",), ("attr:apply_gradients", "attr:minimize"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, meth in m.method_calls(("apply_gradients", "minimize")):
            vals = m.infer_at(recv, cs)
            if not vals or not all(v.kind == api.OPTIMIZER and created_in_scope(m, v) for v in vals):
                continue
            known, maybe = m.scope_strategies(cs)
            if known or maybe or m.in_replica_fn(cs.scope):
                continue
            # a step function nobody here calls may be run by strategy.run elsewhere
            if any(not m.callers(f) for f in m.enclosing_functions(cs.scope)):
                continue
            yield Report(
                cs.node,
                f"`{m.code(cs.node.func)}` steps an optimizer created under a strategy scope from outside both "
                f"the scope and `strategy.run`: the update runs once, undistributed (Keras 3 raises `RuntimeError: "
                f"Need to be inside \"with strategy.scope()\"` when it must create slot variables); call it in the "
                f"function run by `strategy.run`",
                {"optimizer": m.code(recv)},
            )
