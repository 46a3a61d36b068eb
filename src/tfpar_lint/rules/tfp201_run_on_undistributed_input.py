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
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run", "call_for_each_replica"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, _meth, _strat in m.replica_runs():
            strat = m.strategies(recv, cs)  # every possible receiver is a strategy
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
            else:
                read = self._closure_read(cs)
                if read is not None:
                    yield Report(
                        cs.node,
                        f"the function run by `{m.code(cs.node.func)}` draws `{m.code(read)}` from a tf.data "
                        f"dataset that was never distributed (through a closure or global, not `args=`): every "
                        f"replica gets the same batch (N-times updates, no speed-up); iterate "
                        f"`{m.code(recv)}.experimental_distribute_dataset(...)` and pass its elements in `args=`",
                        {"argument": m.code(read)},
                    )

    def _closure_read(self, cs) -> "cst.Call | None":
        """A ``next(it)`` / ``it.get_next()`` inside the replica function on an iterator of a plain
        dataset created outside it (a closure or global): every replica draws the same element."""
        m = self.module
        for fn in m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order):
            for inner in m.calls_within(fn):
                vals = m.infer_at(inner.node, inner)
                if vals and all(v.kind == api.ELEMENT and v.source is not None
                                and v.source.kind in (api.ITERATOR, api.DATASET)
                                and v.source.origin is not None and not m.created_within(v.source.origin, fn)
                                for v in vals):
                    return inner.node
        return None

    # -- fix (unsafe: every other use of the dataset now sees distributed values): wrap the
    #    dataset where it is built, `ds = strategy.experimental_distribute_dataset(<dataset>)`
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        from tfpar_lint.fix import UNSAFE, Fix, statement_of

        m = self.module
        cs = m.site_of_call.get(id(report.node))
        call = report.node
        if cs is None or not isinstance(call.func, cst.Attribute):
            return None
        recv = call.func.value
        if not isinstance(recv, cst.Name):
            return None
        e = None
        for ex in [arg(call, 1, "args")]:
            e = ex
        exprs = [el.value for el in e.elements] if isinstance(e, (cst.Tuple, cst.List)) else [e]
        wanted = report.data.get("argument")
        datasets = set()
        for ex in exprs:
            if ex is None or m.tree.code_for_node(ex) != wanted:
                continue
            for v in m.infer_at(ex, cs):
                while v is not None and v.kind != api.DATASET:
                    v = v.source
                if v is None or v.origin is None or v.site is None:
                    return None
                datasets.add((id(v.origin), v))
        if len(datasets) != 1:
            return None
        (_, ds), = datasets
        stmt = statement_of(m, ds.origin)
        if stmt is None or not isinstance(stmt.body[0], cst.Assign) or stmt.body[0].value is not ds.origin:
            return None
        if ds.site.scope is not cs.scope and ds.site.scope is not m.scope:
            return None
        if not m.lookup(recv.value, ds.site.scope, ds.site.order):
            return None  # the strategy is not bound yet where the dataset is built
        return Fix(f"Distribute the dataset with `{recv.value}.experimental_distribute_dataset`", UNSAFE).replace(
            ds.origin, f"{recv.value}.experimental_distribute_dataset({m.tree.code_for_node(ds.origin)})")
