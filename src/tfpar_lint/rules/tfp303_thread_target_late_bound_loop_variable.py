from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint.rule import Report, Rule


class ThreadTargetLateBoundLoopVariable(Rule):
    CODE = "TFP303"
    NAME = "thread-target-late-bound-loop-variable"
    SUMMARY = ("A lambda or nested function run by a thread reads a loop variable when the thread runs, not "
               "when it was started")
    FIX_HINT = ("Bind the value when the thread is made: `lambda worker=worker: worker.work()`, "
                "`Thread(target=worker.work)`, or pass it with `args=`.")
    PROBE = "threads"
    MARKERS = (("Thread", "submit", "apply_async", "Timer"), ("for ",))
    # the relevance stage (tfpar_lint.relevance): a thread whose target is made in a loop
    NEEDS = (("thread",), ("loop_closure",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for fn, start, name, loop in m.threads.late_bound():
            kind = "comprehension" if not isinstance(loop, (cst.For, cst.While)) else "loop"
            what = "lambda" if fn.is_lambda else f"function `{fn.name}`"
            fix = (f"`lambda {name}={name}: ...`" if fn.is_lambda else f"a parameter with the default `{name}={name}`")
            yield Report(
                fn.node,
                f"The {what} `{m.code(fn.node)}` is run by a thread (line {{line}}) made in a {kind}, and reads "
                f"`{name}` when the thread runs, not when it was started: by then the {kind} may have moved "
                f"`{name}` on, so two threads can run with the same `{name}` and another value is never used; "
                f"bind it when the thread is made ({fix}, or pass it with `args=`)",
                {"variable": name},
                related=start.node,
            )
