from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import arg, replicated
from tfpar_lint.semantic.crossreplica import created_under
from tfpar_lint.semantic.optimizers import SHADOW_CLASSES


class ShadowVariablesOutsideScope(Rule):
    """``tf.train.ExponentialMovingAverage.apply`` of variables that belong to a replicated strategy's
    scope, called outside that scope and outside ``strategy.run``: the shadow variables are made (or
    updated) under the default strategy, and on mirrored variables it fails."""

    CODE = "TFP112"
    NAME = "shadow-variables-outside-scope"
    SUMMARY = ("`tf.train.ExponentialMovingAverage.apply` of a strategy's variables outside its scope and outside "
               "`strategy.run` (the shadow variables are not the strategy's: `TypeError`)")
    FIX_HINT = "Call `ema.apply(model.trainable_variables)` inside `with strategy.scope():` (or in the replica function)."
    SEVERITY = "error"
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("ExponentialMovingAverage",))
    # the relevance stage (tfpar_lint.relevance): EMA.apply of variables made under a scope
    NEEDS = (("strategy",), ("scope",), ("attr:apply",))

    def check(self) -> Iterator[Report]:
        yield from self._shadows()

    def _shadows(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, _meth in m.method_calls(("apply",)):
            vals = m.infer_at(recv, cs)
            if not vals or not all(v.qname in SHADOW_CLASSES for v in vals):
                continue
            known, maybe = m.scope_strategies(cs)
            if known or maybe or m.in_replica_fn(cs.scope):
                continue
            var_list = arg(cs.node, 0, "var_list")
            if var_list is None:
                continue
            owners = self._variable_owners(var_list, cs)
            if not owners:
                continue
            yield Report(
                cs.node,
                f"`{m.code(cs.node)}` creates (or updates) the moving averages of variables that belong to a "
                f"replicated strategy's scope, outside that scope and outside `strategy.run`: on mirrored variables "
                f"it fails (`TypeError: tuple indices must be integers or slices, not ...Variable`); call it inside "
                f"`with strategy.scope():` (or in the replica function)",
                {"shadow": m.code(recv)},
            )

    def _variable_owners(self, expr, cs) -> list:
        m = self.module
        items = m.container_items(expr, cs.scope, cs.order)
        exprs = [(e, s, o) for e, s, o in items] if items is not None else [(expr, cs.scope, cs.order)]
        owners = []
        for e, s, o in exprs:
            vals = m.infer(e, s, o)
            if not vals or not all(v.kind in (api.VARIABLE, api.VARIABLES) for v in vals):
                return []
            for v in vals:
                if versions.keras_flavor(m, v) in ("keras", "unknown"):
                    return []  # Keras 3 variables: EMA rejects them anyway ('str' ... 'base_dtype'), measured;
                    # a Keras variable of a version nothing states: no finding
                st = created_under(m, v)
                if not st or not replicated(st):
                    return []
                owners.extend(st)
        return owners
