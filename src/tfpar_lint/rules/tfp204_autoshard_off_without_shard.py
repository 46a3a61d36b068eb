from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.datasets import all_autosharding, consumers, policy, shard_calls


class AutoshardOffWithoutShard(Rule):
    CODE = "TFP204"
    NAME = "autoshard-off-without-shard"
    SUMMARY = "`AutoShardPolicy.OFF` on a dataset distributed by MultiWorkerMirroredStrategy that is never `.shard()`-ed"
    FIX_HINT = ("Keep auto-sharding (drop the OFF policy, or use DATA), or shard by hand: "
                "`ds.shard(num_workers, worker_index)` before batching.")
    SEVERITY = "warning"
    PROBE = "input"
    MARKERS = (STRATEGY_MARKERS, ("AutoShardPolicy", ".auto_shard ="), ("MultiWorker",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for c in consumers(m):
            if not all_autosharding(c.strategies):
                continue
            p = policy(m, c.dataset)
            if p.name != "OFF" or shard_calls(c.dataset):
                continue
            yield Report(
                p.node,
                f"`{m.code(p.node)}` turns auto-sharding OFF for a dataset that is distributed by "
                f"MultiWorkerMirroredStrategy (`{m.code(c.node)}`, line {{line}}) and never `.shard()`-ed: every "
                f"worker reads and trains on all the data; keep auto-sharding or shard by worker",
                {"consumer": c.how},
                related=c.node,
            )
