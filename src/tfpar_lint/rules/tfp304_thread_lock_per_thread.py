from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.threads import LOCAL

HOGWILD = ("If lock-free (Hogwild) updates are intended, drop the lock and suppress this finding with "
           "`# noqa: TFP304`, saying why")


class ThreadLockPerThread(Rule):
    CODE = "TFP304"
    NAME = "thread-lock-per-thread"
    SUMMARY = ("The lock held around an update of shared variables is made for each thread (or by the thread), "
               "so it excludes nothing")
    FIX_HINT = ("Make one lock that every thread shares (a module-level or class attribute, or one lock passed "
                "to every worker) and hold it around the update.")
    PROBE = "threads"
    MARKERS = (("Thread", "submit", "Pool", "Executor", "Timer"), ("Lock", "Semaphore", "Condition", "acquire"))
    # the relevance stage (tfpar_lint.relevance): a thread, and TensorFlow state it writes (semantic.threads.writes)
    NEEDS = (("thread",), ("variable", "optimizer", "model", "session", "keras_function", "attr:assign"))

    def check(self) -> Iterator[Report]:
        m = self.module
        T = m.threads
        done: set[int] = set()
        for run in T.runs():
            if not T.concurrent(run.target):
                continue
            for guard, step, w in T.weak_locks(run):
                expr, at, status = guard
                if at.scope.module is not m or id(expr) in done:
                    continue
                done.add(id(expr))
                made = "by the thread itself" if status == LOCAL else "once for each thread"
                origin = T.lock_origin(expr, at.scope, at.order)
                fn = T.function_of(origin) if origin is not None else None
                where = f" (in `{fn.name}`)" if fn is not None else ""
                shared = ", ".join(f"`{c}`" for c, st in w.targets if st == "shared")
                yield Report(
                    expr,
                    f"`{m.code(expr)}` is a lock made {made}{where}: every thread holds its own, so it excludes "
                    f"nothing, and `{m.code(at.node)}` under it (line {{line}}) still updates {shared}, shared "
                    f"by every thread, from several threads at once; make one lock that every thread shares "
                    f"(module level, a class attribute, or the same lock passed to every worker). {HOGWILD}",
                    {"lock": m.code(expr)},
                    related=at.node,
                )
