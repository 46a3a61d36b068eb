from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.callbacks import LEARNING_RATE, one_sided_callbacks


class ChiefOnlyTrainingCallback(Rule):
    """A callback that changes the training state (learning rate, early stop) given to the chief
    only, or to the other workers only, of a MultiWorkerMirroredStrategy ``fit``."""

    CODE = "TFP609"
    NAME = "chief-only-training-callback"
    SUMMARY = ("a callback that changes training (learning-rate scheduler, `ReduceLROnPlateau`, `EarlyStopping`) is "
               "given to the chief only (or to the other workers only) of a MultiWorkerMirroredStrategy `fit`")
    FIX_HINT = ("Give every worker the callbacks that change training (schedulers, early stopping); keep only "
                "logging and the like (TensorBoard, CSV logs) on the chief.")
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("callbacks",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cb in one_sided_callbacks(m):
            who = "only the chief" if cb.chief_only else "only the non-chief workers"
            if cb.what == LEARNING_RATE:
                effect = ("sets the learning rate on those workers alone: the workers apply the same all-reduced "
                          "gradients with different learning rates and their copies of the model drift apart "
                          "(measured: after 4 epochs the chief's learning rate was 1e-6, the other worker's 0.01, "
                          "and the kernels differed)")
            else:
                effect = ("stops training on those workers alone: the others' next step waits for peers that have "
                          "left (measured: the other worker failed with `UnavailableError: ... Collective ops is "
                          "aborted by: Socket closed`)")
            yield Report(
                cb.node,
                f"`{cb.callback}` is given to {who} (test on line {{line}}) for the MultiWorkerMirroredStrategy "
                f"`{m.code(cb.fit.node.func)}(..., callbacks=...)`: it {effect}; give every worker the callbacks "
                f"that change training",
                {"callback": cb.callback},
                related=cb.test,
            )
