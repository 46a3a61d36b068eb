from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic import CallSite, Module
from tfpar_lint.semantic.threads import SHARED, Step, ThreadRun, Write

HOGWILD = ("If lock-free (Hogwild) updates are intended, suppress this finding with `# noqa: TFP302` "
           "and say why")


def tfp301_nodes(m: Module) -> set[int]:
    """ids of the nodes TFP301 reports in ``m`` (it explains those updates better: a
    read-modify-write, a shared Keras 3 optimizer's step counter)."""
    got = m.rule_memo.get("TFP301.nodes")
    if got is None:
        from tfpar_lint.rules.tfp301_thread_unlocked_read_modify_write import ThreadUnlockedReadModifyWrite

        got = {id(r.node) for r in ThreadUnlockedReadModifyWrite(m).check()}
        m.rule_memo["TFP301.nodes"] = got
    return got


class ThreadUnlockedSharedUpdate(Rule):
    CODE = "TFP302"
    NAME = "thread-unlocked-shared-update"
    SUMMARY = ("Python threads update variables every thread shares (an optimizer step, a TF1 update op run "
               "by a session, a Keras training function or call) without a lock")
    FIX_HINT = ("Hold one `threading.Lock` shared by every thread around the update; if lock-free Hogwild "
                "updates are intended, suppress with `# noqa: TFP302` and say why.")
    PROBE = "threads"
    MARKERS = (("Thread", "submit", "Pool", "Executor", "Timer"),
               ("apply_gradients", "minimize", "get_updates", "train_on_batch", "fit", "run("))
    # the relevance stage (tfpar_lint.relevance): a thread, and TensorFlow state it writes (semantic.threads.writes)
    NEEDS = (("thread",), ("optimizer", "model", "session", "keras_function", "attr:assign"))

    def check(self) -> Iterator[Report]:
        m = self.module
        T = m.threads
        done: set[int] = set()
        skip = None
        for run in T.runs():
            if not T.concurrent(run.target):
                continue
            for step, w in T.shared_writes(run):
                if step.guards or w.what == "read-modify-write":
                    continue  # under a lock (one that cannot exclude is TFP304's); v.assign(f(v)) is TFP301's
                node, fn_name = self._place(m, step)
                if node is None or id(node) in done:
                    continue
                if skip is None:
                    skip = tfp301_nodes(m)
                if id(step.site.node) in skip or id(node) in skip:
                    continue
                done.add(id(node))
                yield self._report(m, run, step, w, node, fn_name)

    @staticmethod
    def _place(m: Module, step: Step) -> tuple[Optional[cst.Call], str]:
        """The call of this module on the thread's path to the update, closest to it (the update
        itself when it is here)."""
        chain: list[CallSite] = list(step.via) + [step.site]
        for cs in reversed(chain):
            if cs.scope.module is m:
                return cs.node, cs.func.name if cs.func is not None else "<module>"
        return None, ""

    @staticmethod
    def _report(m: Module, run: ThreadRun, step: Step, w: Write, node: cst.Call, fn_name: str) -> Report:
        shared = [c for c, st in w.targets if st == SHARED]
        what = ", ".join(c if c == "every trainable variable" else f"`{c}`" for c in shared[:3])
        wm = w.site.scope.module
        op = wm.code(w.op) if w.op is not None else ""
        if w.what == "session run":
            does, shown = f"runs the update op `{op}`{{at}}, which writes {what}", w.op
        elif w.what == "training function":
            does, shown = f"calls a Keras training function{{at}} whose updates write {what}", w.op
        elif w.what == "training call":
            does, shown = f"trains the model {what}", None
        elif w.what == "push":
            does, shown = f"copies the thread's own values over {what}", None
        else:
            does, shown = f"applies an optimizer step to {what}", None
        if w.site.node is node:
            related = shown if shown is not None and shown is not node else None
            does = does.replace("{at}", " (line {line})" if related is not None else "")
        else:  # the update happens further down the thread's path (in a callee, maybe another file)
            related = w.site.node
            does = f"reaches `{wm.code(w.site.node)}` (line {{line}}), which " + does.replace("{at}", "")
        return Report(
            node,
            f"`{m.code(node)}` in `{fn_name}` (run by several Python threads at once) {does}, shared by every "
            f"thread, without a lock: the threads' updates of the variables (and of the optimizer's slots) run "
            f"at once, so updates are lost or mixed; hold one `threading.Lock` shared by every thread around "
            f"it. {HOGWILD}",
            {"function": fn_name, "write": w.what, "variables": shared},
            related=related,
        )
