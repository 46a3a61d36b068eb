from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint import versions
from tfpar_lint.semantic.loss import default_reduction, loss_object


class TfKerasLossDefaultReduction(Rule):
    CODE = "TFP502"
    NAME = "tf-keras-loss-default-reduction"
    SUMMARY = "tf_keras (Keras 2) loss object with the default reduction called in a replica function or under a scope"
    FIX_HINT = ("Build the loss with `reduction=tf.keras.losses.Reduction.NONE` and average it with "
                "`tf.nn.compute_average_loss(..., global_batch_size=...)`.")
    SEVERITY = "error"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, ("keras",))  # tf.keras is Keras 2 too when tf-version < 2.16
    NEEDS = (("strategy",), ("loss",), ("replica_run", "scope"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs in m.calls:
            lo = loss_object(m, cs.node, cs.scope, cs.order)
            if lo is None or not (versions.is_legacy(m, lo) or versions.keras_flavor(m, lo) == "unknown") or not default_reduction(m, lo):
                continue
            if m.in_replica_fn(cs.scope):
                where = "in a function run by `strategy.run`"
            else:
                known, _ = m.scope_strategies(cs)
                if not known:
                    continue
                where = "under `strategy.scope()`"
            if not versions.is_legacy(m, lo):  # Keras 2 only, and no version stated
                versions.withhold(m, self.CODE)
                continue
            yield Report(
                cs.node,
                f"the Keras 2 (tf_keras) loss `{m.code(lo.origin)}` (line {{line}}) uses the default reduction and "
                f"is called {where}: TensorFlow raises `ValueError: Please use `tf.keras.losses.Reduction.SUM` or "
                f"`tf.keras.losses.Reduction.NONE` ...`; build it with `reduction=...Reduction.NONE` and use "
                f"`tf.nn.compute_average_loss`{versions.note(m, lo)}",
                {"loss": m.code(lo.origin)},
                related=lo.origin,
            )

    # -- fix (unsafe: every call site of the loss changes meaning): build the loss with
    #    reduction=NONE and average the flagged call with tf.nn.compute_average_loss
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        import libcst as cst

        from tfpar_lint.fix import UNSAFE, Fix, tf_alias

        m = self.module
        tf = tf_alias(m)
        ctor = report.related
        call = report.node
        if tf is None or not isinstance(ctor, cst.Call) or not isinstance(ctor.func, cst.Attribute):
            return None
        # `tf_keras.losses.MeanSquaredError` -> `tf_keras.losses.Reduction.NONE`
        losses_mod = ctor.func.value
        if not (isinstance(losses_mod, cst.Attribute) and losses_mod.attr.value == "losses") and not (
                isinstance(losses_mod, cst.Name) and losses_mod.value == "losses"):
            return None
        reduction = f"{m.tree.code_for_node(losses_mod)}.Reduction.NONE"
        if any(a.keyword and a.keyword.value == "reduction" for a in ctor.args):
            return None
        from tfpar_lint.fix import add_keyword

        return (Fix("Build the loss with `reduction=NONE` and average it with `tf.nn.compute_average_loss`", UNSAFE)
                .replace(ctor, add_keyword(ctor, "reduction", reduction))
                .replace(call, f"{tf}.nn.compute_average_loss({m.tree.code_for_node(call)})"))
