from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.datasets import FILE_READERS, IN_MEMORY_SOURCES, policy, policy_assignments, root
from tfpar_lint.semantic import Value, arg


class FileShardingSingleSource(Rule):
    CODE = "TFP206"
    NAME = "file-sharding-single-source"
    SUMMARY = "`AutoShardPolicy.FILE` on an in-memory or single-file dataset (TensorFlow raises when auto-sharding)"
    FIX_HINT = "Use `AutoShardPolicy.DATA` for in-memory or single-file sources, or split the data into many files."
    SEVERITY = "error"
    PROBE = "input"
    MARKERS = (("AutoShardPolicy",), ("FILE",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, meth in m.method_calls(("with_options",)):
            vals = m.infer_at(cs.node, cs)
            if len(vals) != 1 or vals[0].kind != api.DATASET:
                continue
            v = vals[0]
            p = policy(m, v)
            if p.name != "FILE" or p.node is not cs.node:
                continue
            src = root(v)
            why = self._single_source(src)
            if why is None:
                continue
            yield Report(
                cs.node,
                f"`{m.code(cs.node)}` asks for FILE-based auto-sharding, but the dataset comes from {why} "
                f"(`{m.code(src.origin)}`, line {{line}}): with several workers TensorFlow fails (`Found an "
                f"unshardable source dataset` / `Could not apply FILE based sharding: the dataset only has 1 "
                f"file(s)`); use `AutoShardPolicy.DATA`",
                {"source": m.code(src.origin)},
                related=src.origin,
            )

    @staticmethod
    def _single_source(src: Value) -> Optional[str]:
        if src.qname in IN_MEMORY_SOURCES:
            return "memory (`" + src.qname.rsplit(".", 1)[-1] + "`)"
        if src.qname in FILE_READERS and isinstance(src.origin, cst.Call):
            files = arg(src.origin, 0, "filenames")
            if isinstance(files, cst.SimpleString) or (
                    isinstance(files, (cst.List, cst.Tuple)) and len(files.elements) == 1):
                return "a single file"
        return None

    # -- fix (safe: DATA sharding is right for any source, only slower for many files):
    #    `options...auto_shard_policy = AutoShardPolicy.FILE` -> `AutoShardPolicy.DATA`
    FIXABLE = "safe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix

        m = self.module
        site = m.site_of_call.get(id(report.node))
        opts = arg(report.node, 0, "options")
        if site is None or opts is None:
            return None
        vals = m.infer_at(opts, site)
        if len(vals) != 1 or vals[0].origin is None:
            return None
        targets = [value for value, _scope, _order in policy_assignments(m, vals[0].origin)]
        if not targets or not isinstance(targets[-1], cst.Attribute) or targets[-1].attr.value != "FILE":
            return None
        return Fix("Shard by data: `AutoShardPolicy.DATA`").replace(targets[-1].attr, "DATA")
