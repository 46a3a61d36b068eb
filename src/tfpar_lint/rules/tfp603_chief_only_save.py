from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule
from tfpar_lint.rules._lifecycle import mwms_state, save_calls, task_guard


class ChiefOnlySave(Rule):
    CODE = "TFP603"
    NAME = "chief-only-save"
    SUMMARY = "model or checkpoint of a MultiWorkerMirroredStrategy saved only on the chief (collective deadlock)"
    FIX_HINT = ("Let every worker save: the chief to the real path, the others to a temporary directory of their "
                "own that they delete afterwards (the `write_filepath` pattern of the multi-worker tutorials).")
    DEFAULT_ENABLED = True
    SEVERITY = "error"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("save", "write", "export"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for sc in save_calls(m):
            if not mwms_state(m, sc.obj):
                continue
            guard = task_guard(m, sc.site)
            if guard is None or not guard.chief_only:
                continue
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
