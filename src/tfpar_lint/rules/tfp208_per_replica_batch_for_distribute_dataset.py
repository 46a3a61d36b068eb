from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.datasets import batches_after_rebatch, chain, consumers, method_of
from tfpar_lint.semantic.loss import per_replica_size
from tfpar_lint.semantic import arg, replicated


class PerReplicaBatchForDistributeDataset(Rule):
    CODE = "TFP208"
    NAME = "per-replica-batch-for-distribute-dataset"
    SUMMARY = "dataset batched with a per-replica batch size and passed to `experimental_distribute_dataset`"
    FIX_HINT = ("Batch with the global batch size (`per_replica * strategy.num_replicas_in_sync`): "
                "`experimental_distribute_dataset` splits each batch across the replicas.")
    SEVERITY = "warning"
    PROBE = "input"
    MARKERS = (STRATEGY_MARKERS, ("experimental_distribute_dataset", ".fit("), (".batch(",))

    def check(self) -> Iterator[Report]:
        m = self.module
        done: set[int] = set()
        for c in consumers(m):
            # `experimental_distribute_dataset(ds)`, or `model.fit(ds)` for a model built under a
            # strategy that may run several replicas (Keras distributes the dataset the same way)
            if c.how == "fit" and not any(replicated([s]) for s in c.strategies):
                continue
            dv = c.dataset
            if batches_after_rebatch(dv):
                continue
            for x in chain(dv):
                if method_of(x) != "batch" or id(x.origin) in done:
                    continue
                size = arg(x.origin, 0, "batch_size")
                site = m.site_of_call.get(id(x.origin)) or x.site
                if size is None or site is None:
                    break
                done.add(id(x.origin))
                made_by = {id(v.origin) for v in chain(dv)}  # the helper calls this dataset came from
                for at, why in self._per_replica_at(x.origin, size, site, made_by):
                    yield Report(
                        at,
                        f"`{m.code(x.origin)}` batches with a per-replica size ({why}; `{m.code(at)}`), but the "
                        f"dataset goes to `{m.code(c.node.func)}` (line {{line}}), which splits every batch across "
                        f"the replicas: each replica gets 1/num_replicas_in_sync of the intended batch; batch with "
                        f"the global batch size",
                        {"batch_size": m.code(size)},
                        related=c.node,
                    )
                break  # only the last batch() before distribution matters

    def _per_replica_at(self, call: cst.Call, size: cst.BaseExpression, site, made_by: set) -> list:
        """Where the per-replica size enters: the ``batch`` call itself, or, when the size is a
        parameter of the function that batches, the argument of the call that made this dataset
        (``ds = make_dataset(batch_size=per_replica)``; other calls of the helper are other
        datasets). As (node to report, why)."""
        m = self.module
        if isinstance(size, cst.Name):
            bs = m.lookup(size.value, site.scope, site.order)
            if len(bs) == 1 and bs[0].kind == "param":
                args = [(e, sc, od) for e, sc, od, cs in m.values.param_args(bs[0]) or ()
                        if cs is not None and id(cs.node) in made_by]
                if args:
                    out = []
                    for e, sc, od in args:
                        why = self._per_replica(e, sc, od)
                        if why:
                            out.append((e, why))
                    return out
        why = self._per_replica(size, site.scope, site.order)
        return [(call, why)] if why else []

    def _per_replica(self, size: cst.BaseExpression, scope, order: int) -> Optional[str]:
        """Why ``size`` is a per-replica batch size, from its value story (never its name)."""
        return per_replica_size(self.module, size, scope, order)

    # -- fix (unsafe: every epoch then has num_replicas_in_sync times fewer steps):
    #    .batch(PER_REPLICA) -> .batch(PER_REPLICA * strategy.num_replicas_in_sync)
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        import libcst as cst

        from tfpar_lint.fix import UNSAFE, Fix

        m = self.module
        size = arg(report.node, 0, "batch_size")
        dist = report.related
        site = m.site_of_call.get(id(report.node))
        if size is None or site is None or not isinstance(dist, cst.Call) or not isinstance(dist.func, cst.Attribute):
            return None
        recv = dist.func.value
        if not isinstance(recv, cst.Name) or not m.lookup(recv.value, site.scope, site.order):
            return None  # the strategy is not bound yet where the dataset is batched
        text = m.tree.code_for_node(size)
        if not isinstance(size, (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)):
            text = f"({text})"
        return Fix("Batch with the global batch size", UNSAFE).replace(
            size, f"{text} * {recv.value}.num_replicas_in_sync")
