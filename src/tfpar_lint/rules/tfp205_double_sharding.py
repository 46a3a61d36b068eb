from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.datasets import all_autosharding, consumers, policy, shard_calls


class DoubleSharding(Rule):
    CODE = "TFP205"
    NAME = "double-sharding"
    SUMMARY = "dataset `.shard()`-ed by hand and then auto-sharded again by MultiWorkerMirroredStrategy"
    FIX_HINT = ("Either drop the manual `.shard()` or set `options.experimental_distribute.auto_shard_policy = "
                "tf.data.experimental.AutoShardPolicy.OFF` on the dataset.")
    SEVERITY = "warning"
    PROBE = "input"
    MARKERS = (STRATEGY_MARKERS, (".shard(",), ("MultiWorker",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for c in consumers(m):
            if not all_autosharding(c.strategies):
                continue
            shards = shard_calls(c.dataset)
            if not shards:
                continue
            p = policy(m, c.dataset)
            if p.name is None or p.name == "OFF":
                continue
            yield Report(
                shards[-1],
                f"`{m.code(shards[-1])}` shards the dataset by hand, and it is then auto-sharded again by "
                f"MultiWorkerMirroredStrategy (`{m.code(c.node)}`, line {{line}}, policy {p.name}): each worker "
                f"gets 1/N^2 of the data and the rest is never read; set AutoShardPolicy.OFF or drop the manual shard",
                {"policy": p.name},
                related=c.node,
            )

    # -- fix (unsafe: which elements each worker reads changes, and the variables the manual shard
    #    used may be left unused): drop the manual `.shard(...)`, keep the auto-sharding
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        import libcst as cst

        from tfpar_lint.fix import UNSAFE, Fix, parent, statement_of

        m = self.module
        call = report.node
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return None
        recv = call.func.value
        fix = Fix("Drop the manual `.shard(...)` (auto-sharding already splits the data)", UNSAFE)
        holder = parent(m, call)
        if isinstance(holder, cst.Assign) and holder.value is call and len(holder.targets) == 1 \
                and isinstance(recv, cst.Name) and isinstance(holder.targets[0].target, cst.Name) \
                and holder.targets[0].target.value == recv.value:
            stmt = statement_of(m, holder)  # `ds = ds.shard(n, i)`: the statement goes
            return fix.delete_statement(stmt) if stmt is not None else None
        return fix.replace(call, m.tree.code_for_node(recv))
