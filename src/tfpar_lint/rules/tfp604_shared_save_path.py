from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.lifecycle import constant_path, mentions_task, mwms_state, save_calls


class SharedSavePath(Rule):
    CODE = "TFP604"
    NAME = "shared-save-path"
    SUMMARY = "every MultiWorkerMirroredStrategy worker saves to the same fixed path"
    FIX_HINT = ("Give each non-chief worker its own temporary path (e.g. `<dir>/workertemp_<task_id>`) and delete "
                "it after saving; only the chief writes the real path.")
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("save", "write", "export"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for sc in save_calls(m):
            if sc.path is None or sc.path_site is None:
                continue
            if not mwms_state(m, sc.obj):
                continue
            if mentions_task(m, sc.site):
                continue
            if not constant_path(m, sc.path, sc.path_site.scope, sc.path_site.order):
                continue
            related = sc.path if sc.path_site is not sc.site else None
            yield Report(
                sc.site.node,
                f"every worker of the MultiWorkerMirroredStrategy runs `{sc.what}(...)` to the same path "
                f"`{m.code(sc.path)}`{' (line {line})' if related is not None else ''}: the workers overwrite "
                f"each other's files (checkpoint saves fail in `MergeV2Checkpoints` with `NotFoundError` / "
                f"`InvalidArgumentError`, or leave mixed files); non-chief workers should write to a temporary "
                f"path of their own",
                {"path": m.code(sc.path)},
                related=related,
            )
