from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import replicated
from tfpar_lint.semantic.crossreplica import created_under, replica_fn_traced
from tfpar_lint.semantic.optimizers import built_before_use, has_slots


class OptimizerBuiltInFirstStep(Rule):
    """A Keras 3 optimizer with slot variables, created under a MirroredStrategy's scope but never built
    there, whose slots are first created by ``apply_gradients`` inside the first traced ``strategy.run``
    step: with several replicas that step fails (keras-team/keras#19246)."""

    CODE = "TFP113"
    NAME = "optimizer-built-in-first-step"
    SUMMARY = ("Keras 3 optimizer with slots never built in the scope: its variables are first created inside a "
               "traced `strategy.run` step, which fails with several replicas (off by default)")
    FIX_HINT = "Build it in the scope before the first step: `optimizer.build(model.trainable_variables)`."
    SEVERITY = "error"
    DEFAULT_ENABLED = False
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("apply_gradients",))
    NEEDS = (("strategy",), ("optimizer",), ("scope",), ("replica_run",), ("attr:apply_gradients",))

    def check(self) -> Iterator[Report]:
        yield from self._lazy_slots()

    def _lazy_slots(self) -> Iterator[Report]:
        m = self.module
        done: set[int] = set()
        for cs, recv, _meth in m.method_calls(("apply_gradients",)):
            vals = m.infer_at(recv, cs)
            if not vals or not all(v.kind == api.OPTIMIZER for v in vals):
                continue
            for v in vals:
                flavor = versions.keras_flavor(m, v)
                if id(v.origin) in done or flavor not in ("keras", "unknown") or has_slots(v) is not True:
                    continue
                strategies = created_under(m, v)
                # measured with MirroredStrategy; MultiWorkerMirroredStrategy (one replica per worker) works; TPU not measured
                if not strategies or not replicated(strategies) or any(
                        s.qname in api.MULTI_WORKER_STRATEGIES or s.qname in api.TPU_STRATEGIES for s in strategies):
                    continue
                if built_before_use(m, v):
                    continue
                fns = list(m.enclosing_functions(cs.scope))
                if not fns or not m.in_replica_fn(cs.scope) or replica_fn_traced(m, fns[0]) is not True:
                    continue
                done.add(id(v.origin))
                if flavor == "unknown":  # Keras 2's optimizers build their slots otherwise
                    versions.withhold(m, self.CODE)
                    continue
                yield Report(
                    v.origin,
                    f"`{m.code(v.origin)}` is a Keras 3 optimizer with slot variables, built under the strategy's "
                    f"scope but never built there: its slots are first created by `apply_gradients` (line {{line}}) "
                    f"inside the first traced `strategy.run` step, and with several replicas that step fails with "
                    f"`InvalidArgumentError: You must feed a value for placeholder tensor`; call "
                    f"`optimizer.build(model.trainable_variables)` in the scope",
                    {"optimizer": m.code(v.origin)},
                    related=cs.node,
                )
