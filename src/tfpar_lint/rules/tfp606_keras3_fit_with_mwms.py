from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.lifecycle import created_under_mwms, is_mwms


class Keras3FitWithMwms(Rule):
    CODE = "TFP606"
    NAME = "keras3-fit-with-mwms"
    SUMMARY = "Keras 3 `model.fit` under MultiWorkerMirroredStrategy (fails with PerReplica ValueError)"
    FIX_HINT = ("Use Keras 2 (`import tf_keras`, or `TF_USE_LEGACY_KERAS=1` before importing TensorFlow) for "
                "`fit` with MultiWorkerMirroredStrategy, or train with a custom loop (`strategy.run`).")
    DEFAULT_ENABLED = True
    SEVERITY = "error"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("fit",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, _meth in m.method_calls(("fit",)):
            vals = m.infer_at(recv, cs)
            if not vals or any(v.kind != api.MODEL or v.origin is not vals[0].origin for v in vals):
                continue
            model = vals[0]
            flavor = versions.keras_flavor(m, model)
            if flavor not in ("keras", "unknown"):
                continue
            known, _ = m.scope_strategies(cs)
            if not (created_under_mwms(m, model) or any(is_mwms(s) for s in known)):
                continue
            if flavor == "unknown":  # Keras 2's fit works here: no finding without the version
                versions.withhold(m, self.CODE)
                continue
            spelling = "tf.keras" if model.raw_qname.startswith("tensorflow") else "keras"
            yield Report(
                cs.node,
                f"with {versions.target_of(m).describe(3)}, `{m.code(recv)}` is a Keras 3 model (`{spelling}`) trained with `fit` under a "
                f"MultiWorkerMirroredStrategy: with more than one worker Keras 3 fails with `ValueError: Attempt to "
                f"convert a value (PerReplica:{{...}}) with an unsupported type ... to a Tensor`; use tf_keras "
                f"(`TF_USE_LEGACY_KERAS=1`) or a custom training loop",
                {"keras": spelling, "tf_version": versions.target_of(m).version_text(), "tf_version_source": versions.target_of(m).source},
            )
