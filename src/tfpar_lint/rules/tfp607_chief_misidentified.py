from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.chieftests import (contains, facts, mentions_chief, narrowed_family,
                                             save_path_worker_zero_parts, verdict)


class ChiefMisidentified(Rule):
    """A hand-written chief test that disagrees with TensorFlow's chief: true on two tasks of a
    cluster with a ``chief`` task (the chief and worker 0), or on none of a worker-only cluster."""

    CODE = "TFP607"
    NAME = "chief-misidentified"
    SUMMARY = ("chief test that holds on two tasks (the `chief` task and worker 0) or on none (a worker-only "
               "cluster), unlike TensorFlow's chief")
    FIX_HINT = ("Use TensorFlow's own answer, `strategy.extended.should_checkpoint`, or test "
                "`task_type == 'chief' or (task_type == 'worker' and task_id == 0 and 'chief' not in "
                "cluster_spec.as_dict())` (the multi-worker tutorials' fixed `_is_chief`).")
    SEVERITY = "warning"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy", "TF_CONFIG", "cluster_resolver", "task_type"),
               ("chief", "master"))
    # the relevance stage (tfpar_lint.relevance): somewhere the task type or index comes from
    NEEDS = (("task_source",),)

    def check(self) -> Iterator[Report]:
        m = self.module
        f = facts(m)
        module_strategies = {c.node for c, _ in m.calls_to(api.PARAMETER_SERVER_STRATEGIES)}
        module_mwms = [c for c, _ in m.calls_to(api.MULTI_WORKER_STRATEGIES)]
        for be in f.exprs:
            got = verdict(m, be)
            if got is None:
                continue
            kind, ev = got
            fams = {narrowed_family(m, e, be.scope, be.order) for e, _ in ev.fields}
            if "ps" in fams or (module_strategies and not module_mwms and fams <= {None}):
                continue  # a parameter-server cluster always has a chief (the coordinator)
            anchor = next((c for c in ev.comparisons if mentions_chief(c)), ev.comparisons[0])
            if kind == "two-chiefs":
                if any(contains(be.node, part) for part in save_path_worker_zero_parts(m)):
                    continue  # the test decides where a save writes: TFP604 reports it there
                # not exempt when the module writes a worker-only TF_CONFIG for a demonstration: the
                # same test is wrong on the clusters with a chief task it will meet (the tutorial fix)
                yield Report(
                    anchor,
                    f"`{m.code(be.node)}` holds on two tasks of a cluster that has a `chief` task: the chief and "
                    f"worker 0 (both have index 0), while TensorFlow makes only the chief the chief; two tasks "
                    f"then write the chief's files to one path. Test the cluster too (`'chief' not in "
                    f"cluster_spec.as_dict()`), or use `strategy.extended.should_checkpoint`",
                    {"test": m.code(be.node), "kind": kind},
                )
            else:
                if "mwms" not in fams and not (module_mwms and fams <= {None, "mwms"}):
                    continue  # only MultiWorkerMirroredStrategy clusters may have no chief task
                if f.cluster_jobs and all("chief" in jobs for jobs in f.cluster_jobs):
                    continue  # the module's own clusters always have a chief task
                yield Report(
                    anchor,
                    f"`{m.code(be.node)}` takes only the `chief` task for the chief: in a worker-only cluster "
                    f"(no `chief` task; TensorFlow then makes worker 0 the chief) no task passes it, so the "
                    f"chief's work (the real export path) is done by none. Treat worker 0 as the chief when the "
                    f"cluster has no `chief` task, or use `strategy.extended.should_checkpoint`",
                    {"test": m.code(be.node), "kind": kind},
                )
