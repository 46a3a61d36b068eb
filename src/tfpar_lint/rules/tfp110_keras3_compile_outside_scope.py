from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import replicated
from tfpar_lint.semantic.optimizers import compile_optimizer, has_slots_by_name


class Keras3CompileOutsideScope(Rule):
    """A Keras 3 model built under a strategy's scope, compiled outside it with an optimizer
    given by name (or the default): Keras 3 builds that optimizer's variables under the default
    strategy and ``fit`` fails with "Mixing different tf.distribute.Strategy objects"."""

    CODE = "TFP110"
    NAME = "keras3-compile-outside-scope"
    SUMMARY = ("Keras 3 model built in `strategy.scope()` but compiled outside it with an optimizer given by "
               "name (or the default): `fit` fails with \"Mixing different tf.distribute.Strategy objects\"")
    FIX_HINT = "Call `model.compile(...)` inside the same `with strategy.scope():` block that builds the model."
    SEVERITY = "error"
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("compile(",), (".scope()",))
    NEEDS = (("strategy",), ("model",), ("scope",), ("attr:compile",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, _meth in m.method_calls(("compile",)):
            known, maybe = m.scope_strategies(cs)
            if known or maybe or m.in_replica_fn(cs.scope):
                continue
            vals = m.infer_at(recv, cs)
            if not vals or not all(v.kind == api.MODEL and v.site is not None for v in vals):
                continue
            flavors = {versions.keras_flavor(m, v) for v in vals}
            if not flavors <= {"keras", "unknown"}:
                continue  # tf_keras (Keras 2) accepts it: measured
            strategies = []
            for v in vals:
                s, _ = m.scope_strategies(v.site)
                if not s:
                    break
                strategies.extend(s)
            else:
                if not replicated(strategies):
                    continue
                how, name, expr = compile_optimizer(m, cs)
                if how not in ("name", "default") or not has_slots_by_name(name):
                    continue
                if "unknown" in flavors:  # Keras 2 accepts it: no finding without the version
                    versions.withhold(m, self.CODE)
                    continue
                given = f"`optimizer={m.code(expr)}`" if how == "name" else \
                    f"no `optimizer=` (the Keras 3 default is `\"{name}\"`)"
                yield Report(
                    cs.node,
                    f"`{m.code(recv)}` is a Keras 3 model built under a strategy's scope (line {{line}}), but "
                    f"`{m.code(cs.node.func)}(...)` runs outside the scope with {given}: Keras 3 creates the "
                    f"optimizer's variables under the default strategy and `fit` fails with `RuntimeError: Mixing "
                    f"different tf.distribute.Strategy objects`; compile inside the scope",
                    {"model": m.code(recv), "optimizer": name},
                    related=vals[0].origin,
                )
