from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import arg, replicated

PLAIN = (api.ELEMENT, api.ITERATOR, api.DATASET)


class RunOnUndistributedInput(Rule):
    CODE = "TFP201"
    NAME = "run-on-undistributed-input"
    SUMMARY = "`strategy.run` fed from a tf.data dataset that was never distributed"
    FIX_HINT = ("Iterate `strategy.experimental_distribute_dataset(ds)` (or "
                "`distribute_datasets_from_function`) and pass its elements to `strategy.run`.")
    PROBE = "input"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run_v2"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, meth, strat in m.strategy_method_calls(api.RUN_METHODS):
            if not replicated(strat):
                continue  # one replica (OneDeviceStrategy, one device) cannot duplicate data
            args = arg(cs.node, 1, "args")
            exprs: list[cst.BaseExpression] = []
            if isinstance(args, (cst.Tuple, cst.List)):
                exprs = [el.value for el in args.elements if not isinstance(el, cst.StarredElement)]
            elif args is not None:
                exprs = [args]
            kwargs = arg(cs.node, 2, "kwargs")
            if isinstance(kwargs, cst.Dict):
                exprs += [el.value for el in kwargs.elements if isinstance(el, cst.DictElement)]
            for e in exprs:
                vals = m.infer_at(e, cs)
                if vals and all(v.kind in PLAIN for v in vals):
                    yield Report(
                        cs.node,
                        f"`{m.code(cs.node.func)}` receives `{m.code(e)}`, drawn from a tf.data dataset that was "
                        f"never distributed: every replica gets the same full batch (N-times updates, no "
                        f"speed-up); iterate `{m.code(recv)}.experimental_distribute_dataset(...)` instead",
                        {"argument": m.code(e)},
                    )
                    break
