from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.lifecycle import mwms_state, save_calls
from tfpar_lint.semantic.savepaths import (every_worker_same_path, separate_machines, shared_path_reason,
                                           under_other_strategy)


class SavePathNotSplit(Rule):
    """Every worker saves to one path with no chief / temporary-directory split, whatever the
    storage (TFP604 reports the saves whose storage the code shows the workers share)."""

    CODE = "TFP610"
    NAME = "save-path-not-split"
    SUMMARY = ("every MultiWorkerMirroredStrategy worker saves to the same path, with no chief / temporary-directory "
               "split (the workers collide wherever they share the storage)")
    FIX_HINT = ("Let the chief write the real path and every other worker a temporary path of its own "
                "(`<dir>/workertemp_<task_id>`), deleted after the save.")
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("save", "write", "export"))

    def check(self) -> Iterator[Report]:
        m = self.module
        apart = None
        for sc in save_calls(m):
            if not mwms_state(m, sc.obj) or not every_worker_same_path(m, sc):
                continue
            if shared_path_reason(m, sc) is not None:
                continue  # TFP604's: storage the code shows the workers share
            if under_other_strategy(m, sc):
                continue  # `elif args.distribute == "tpu": model.save(...)`: not the multi-worker branch
            if apart is None:
                apart = separate_machines(m)
            if apart:
                continue  # the cluster the code writes puts each worker on its own machine
            related = sc.path if sc.path_site is not sc.site else None
            yield Report(
                sc.site.node,
                f"every worker of the MultiWorkerMirroredStrategy runs `{sc.what}(...)` to the same path "
                f"`{m.code(sc.path)}`{' (line {line})' if related is not None else ''}, with no chief / temporary "
                f"directory split: wherever the workers share that storage (one machine, a network file system, a "
                f"bucket) they overwrite each other's files (measured: `MergeV2Checkpoints` fails with "
                f"`NotFoundError` / `InvalidArgumentError`); the multi-worker tutorials have the chief write the path "
                f"and every other worker a temporary path of its own",
                {"path": m.code(sc.path)},
                related=related,
            )
