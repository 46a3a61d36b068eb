from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.placement import device_calls


class UncheckedManualPlacement(Rule):
    CODE = "TFP108"
    NAME = "unchecked-manual-placement"
    SUMMARY = "hard-coded `tf.device('/GPU:N')` (N >= 1) with no check of the devices present (off by default)"
    FIX_HINT = ("Check `tf.config.list_logical_devices('GPU')` first and fail (or adapt) when there are fewer "
                "GPUs, or call `tf.config.set_soft_device_placement(False)` so TensorFlow raises.")
    SEVERITY = "warning"
    DEFAULT_ENABLED = False
    PROBE = "scope"
    MARKERS = (("device(",), ("GPU", "gpu"))

    def check(self) -> Iterator[Report]:
        m = self.module
        if any(True for _ in m.calls_to(api.DEVICE_QUERIES)):
            return
        for cs, text, kind, idx in device_calls(m):
            if kind != "GPU" or not idx:
                continue
            if m.in_replica_fn(cs.scope) or m.scope_strategies(cs)[0]:
                continue  # TFP107's ground
            yield Report(
                cs.node,
                f"`{m.code(cs.node)}` hard-codes GPU {idx} and nothing in this module checks which devices exist: "
                f"with fewer GPUs soft placement silently runs this block on another device (hand-made model "
                f"parallelism collapses onto one device); check `tf.config.list_logical_devices('GPU')`",
                {"device": text},
            )
