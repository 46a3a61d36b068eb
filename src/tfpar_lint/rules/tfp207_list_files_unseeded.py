from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.datasets import chain, list_files_unseeded

LIST_FILES = "tensorflow.data.Dataset.list_files"


class ListFilesUnseeded(Rule):
    CODE = "TFP207"
    NAME = "list-files-unseeded"
    SUMMARY = "`Dataset.list_files` without `seed=`/`shuffle=False` sharded by hand (workers overlap and skip files)"
    FIX_HINT = "Pass `shuffle=False` (or the same `seed=` on every worker) to `Dataset.list_files`, then shard."
    SEVERITY = "warning"
    PROBE = "input"
    MARKERS = (("list_files",), (".shard(",))

    def check(self) -> Iterator[Report]:
        m = self.module
        reported: set[int] = set()
        for cs, recv, meth in m.method_calls(("shard",)):
            vals = m.infer_at(recv, cs)
            if not vals or not all(v.kind == api.DATASET for v in vals):
                continue
            for v in vals:
                src = None
                for x in chain(v):
                    src = x
                if src is None or src.qname != LIST_FILES or not isinstance(src.origin, cst.Call):
                    continue
                if id(src.origin) in reported or not list_files_unseeded(src.origin):
                    continue
                reported.add(id(src.origin))
                yield Report(
                    src.origin,
                    f"`{m.code(src.origin)}` shuffles the file list with a random seed, and the dataset is then "
                    f"sharded by hand (`{m.code(cs.node)}`, line {{line}}): every worker shuffles differently, so "
                    f"shards overlap and some files are never read; pass `shuffle=False` or a fixed `seed=`",
                    related=cs.node,
                )

    # -- fix (unsafe: the file order changes): list_files(..., shuffle=False)
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix, UNSAFE

        call = report.node
        if not isinstance(call, cst.Call) or any(a.keyword and a.keyword.value in ("shuffle", "seed")
                                                 for a in call.args):
            return None
        if not call.args or any(a.star for a in call.args):
            return None
        from tfpar_lint.fix import add_keyword

        return Fix("Pass `shuffle=False` to `list_files`", UNSAFE).replace(
            call, add_keyword(call, "shuffle", "False"))
