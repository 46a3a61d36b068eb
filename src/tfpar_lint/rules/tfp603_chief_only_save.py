from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.lifecycle import mwms_state, others_save, save_calls, task_guard
from tfpar_lint.semantic import ClassInfo, keyword

CHECKPOINT_CALLBACKS = frozenset({"keras.callbacks.ModelCheckpoint"})


class ChiefOnlySave(Rule):
    CODE = "TFP603"
    NAME = "chief-only-save"
    SUMMARY = "model or checkpoint of a MultiWorkerMirroredStrategy saved only on the chief (collective deadlock)"
    FIX_HINT = ("Let every worker save: the chief to the real path, the others to a temporary directory of their "
                "own that they delete afterwards (the `write_filepath` pattern of the multi-worker tutorials).")
    DEFAULT_ENABLED = True
    SEVERITY = "error"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("save", "write", "export", "ModelCheckpoint"))

    def check(self) -> Iterator[Report]:
        m = self.module
        saves = list(save_calls(m))
        for sc in saves:
            if not mwms_state(m, sc.obj):
                continue
            guard = task_guard(m, sc.site)
            if guard is None or not guard.chief_only:
                continue
            if others_save(m, sc, saves):
                continue  # `if chief: save(real) else: save(temp)`: every worker saves
            yield Report(
                sc.site.node,
                f"`{sc.what}(...)` runs only on the chief (test on line {{line}}), but the object holds "
                f"MultiWorkerMirroredStrategy variables: saving needs every worker (reading ON_READ variables such "
                f"as metrics or batch-norm statistics is a collective all-reduce), so the chief blocks in "
                f"`CollectiveReduceV2` and fails with `UnavailableError` or hangs; let all workers save, "
                f"non-chief workers to a temporary path",
                {"save": sc.what},
                related=guard.node,
            )
        yield from self._checkpoint_callbacks()

    def _checkpoint_callback_calls(self):
        """``ModelCheckpoint(...)`` calls, and calls of a class (here or in another module of the
        project) that derives from it."""
        m = self.module
        out = [cs for cs, _q in m.calls_to(CHECKPOINT_CALLBACKS)]
        for cs in m.calls:
            if cs in out or not isinstance(cs.node.func, (cst.Name, cst.Attribute)):
                continue
            vals = m.infer_at(cs.node.func, cs)
            if vals and all(v.kind == api.CLASS and isinstance(v.info, ClassInfo)
                            and m.values.derives_from(v.info, CHECKPOINT_CALLBACKS) for v in vals):
                out.append(cs)
        return out

    def _checkpoint_callbacks(self) -> Iterator[Report]:
        """``ModelCheckpoint(...)`` built only on the chief for a model that ``fit``s with
        ``callbacks=`` under a MultiWorkerMirroredStrategy: the chief's save waits for the others."""
        m = self.module
        fits = [cs for cs, recv, _ in m.method_calls(("fit",)) if keyword(cs.node, "callbacks") is not None
                and any(v.kind == api.MODEL and mwms_state(m, v) for v in m.infer_at(recv, cs))]
        if not fits:
            return
        for cs in self._checkpoint_callback_calls():
            guard = task_guard(m, cs)
            if guard is None or not guard.chief_only:
                continue
            yield Report(
                cs.node,
                f"`{m.code(cs.node.func)}(...)` is created only on the chief (test on line {{line}}) for the "
                f"MultiWorkerMirroredStrategy `{m.code(fits[0].node.func)}(..., callbacks=...)`: its save is a "
                f"collective the other workers never join, so the chief fails in "
                f"`CollectiveReduceV2` or hangs; give every worker the callback, non-chief workers with a "
                f"temporary path",
                {"save": m.code(cs.node.func)},
                related=guard.node,
            )
