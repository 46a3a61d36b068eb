from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.lifecycle import (mentions_task, mwms_state, path_text, save_calls, task_tests,
                                           worker_zero_as_chief)
from tfpar_lint.semantic.clusters import has_chief_task
from tfpar_lint.semantic.savepaths import shared_path_reason


class SharedSavePath(Rule):
    CODE = "TFP604"
    NAME = "shared-save-path"
    SUMMARY = "every MultiWorkerMirroredStrategy worker saves to the same path on storage they share"
    FIX_HINT = ("Give each non-chief worker its own temporary path (e.g. `<dir>/workertemp_<task_id>`) and delete "
                "it after saving; only the chief writes the real path.")
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("save", "write", "export"))

    def check(self) -> Iterator[Report]:
        m = self.module
        reported: set[int] = set()
        # a cluster declared without a chief task (a job spec of Worker replicas only): worker 0 is
        # the chief there, and a test that lets it in is TensorFlow's own rule
        no_chief = has_chief_task(m) is False
        for sc in save_calls(m):
            if not mwms_state(m, sc.obj):
                continue
            for test, scope, order in ([] if no_chief else task_tests(m, sc)):
                part = worker_zero_as_chief(m, test, scope, order)
                if part is None or id(part) in reported:
                    continue
                reported.add(id(part))
                yield Report(
                    part,
                    f"`{m.code(part)}` counts worker 0 as the chief, and the test also passes the `chief` task: "
                    f"when TF_CONFIG has a `chief` task, the chief and worker 0 both take the chief's side of "
                    f"`{m.code(test)}` and both run `{sc.what}(...)` (line {{line}}) to the real path, overwriting "
                    f"each other's files; TensorFlow counts worker 0 as the chief only when the cluster has no "
                    f"chief task (`strategy.extended.should_checkpoint` says which task it is)",
                    {"path": path_text(m, sc.path)},
                    related=sc.site.node,
                )
            if sc.path is None or sc.path_site is None or mentions_task(m, sc.site):
                continue
            shared = shared_path_reason(m, sc)
            if shared is None:
                continue
            related = sc.path if sc.path_site is not sc.site else None
            yield Report(
                sc.site.node,
                f"every worker of the MultiWorkerMirroredStrategy runs `{sc.what}(...)` to the same path "
                f"`{m.code(sc.path)}`{' (line {line})' if related is not None else ''} ({shared}): the workers "
                f"overwrite each other's files (checkpoint saves fail in `MergeV2Checkpoints` with `NotFoundError` / "
                f"`InvalidArgumentError`, or leave mixed files); non-chief workers should write to a temporary "
                f"path of their own",
                {"path": m.code(sc.path)},
                related=related,
            )
