from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.rules._scope import created_in_scope, created_outside_scope, values_of_kind
from tfpar_lint.semantic import Module, Value


def scoped_objects(m: Module, ckpt: Value) -> list[str]:
    """Names of the scoped models/optimizers a checkpoint tracks."""
    call = ckpt.origin
    if not isinstance(call, cst.Call) or ckpt.site is None:
        return []
    out = []
    for a in call.args:
        if a.keyword is None:
            continue
        vals = m.infer_at(a.value, ckpt.site)
        if vals and all(v.kind in (api.MODEL, api.OPTIMIZER) and created_in_scope(m, v) for v in vals):
            out.append(a.keyword.value)
    return out


class CheckpointOutsideScope(Rule):
    CODE = "TFP104"
    NAME = "checkpoint-outside-scope"
    SUMMARY = "`tf.train.Checkpoint` of scoped model/optimizer created or restored outside `strategy.scope()`"
    FIX_HINT = "Create the checkpoint and call `restore()` inside `with strategy.scope():`."
    SEVERITY = "error"
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("Checkpoint",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for ck in values_of_kind(m, api.CHECKPOINT):
            tracked = scoped_objects(m, ck)
            if not tracked:
                continue
            if created_outside_scope(m, ck):
                yield Report(
                    ck.origin,
                    f"Checkpoint tracking {', '.join(tracked)} (created under a strategy scope) is created "
                    f"outside the scope; create it, and restore it, inside `with strategy.scope():`",
                    {"tracked": tracked},
                )
                continue
            for cs, recv, meth in m.method_calls(("restore", "read")):
                vals = m.infer_at(recv, cs)
                if not vals or not all(v.origin is ck.origin for v in vals):
                    continue
                known, maybe = m.scope_strategies(cs)
                if known or maybe or m.in_replica_fn(cs.scope):
                    continue
                yield Report(
                    cs.node,
                    f"Checkpoint tracking {', '.join(tracked)} (created under a strategy scope) is restored "
                    f"outside the scope; call `{meth}` inside `with strategy.scope():`",
                    {"tracked": tracked},
                )
