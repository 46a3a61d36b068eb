from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.randomness import seed_arg
from tfpar_lint.semantic import CallSite


class RandomDrawSplitByReplica(Rule):
    """A stateful random draw made inside a replica function, then split by the replica id as if
    every replica had drawn the same value (``perm = tf.random.shuffle(idx)`` then
    ``perm[replica_id * n:(replica_id + 1) * n]``).  Each replica draws its own value (measured on
    TF 2.21 with 2 logical CPUs, eagerly and in a ``tf.function``), so the parts overlap and some
    items are taken by no replica."""

    CODE = "TFP404"
    NAME = "random-draw-split-by-replica"
    SUMMARY = "random value drawn inside `strategy.run`, then split by the replica id as if all replicas shared it"
    FIX_HINT = ("Draw it once outside `strategy.run` (cross-replica) and pass it in `args=`, or draw it with a "
                "stateless op and the same seed on every replica.")
    PROBE = "randomness"
    MARKERS = (STRATEGY_MARKERS, ("replica_id_in_sync_group",), ("random",))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        reported: set[int] = set()
        for node, scope, order in m.subscripts:
            if not m.in_replica_fn(scope) or not _index_parts(node):
                continue
            if not any(m.depends_on_replica_id(e, scope, order) for e in _index_parts(node)):
                continue
            for v in m.infer(node.value, scope, order):
                draw = v.origin if isinstance(v.origin, cst.Call) else None
                site = m.site_of_call.get(id(draw)) if draw is not None else None
                if site is None or id(draw) in reported or not _unseeded_draw(m, site) \
                        or not m.in_replica_fn(site.scope):
                    continue
                reported.add(id(draw))
                yield Report(
                    draw,
                    f"`{m.code(draw)}` is drawn inside a function run on every replica, then split by the replica "
                    f"id (`{m.code(node)}`, {{line}}) as if every replica had drawn the same value: each replica "
                    f"draws its own, so the parts the replicas take overlap and some items are taken by none; draw "
                    f"it once outside `strategy.run` and pass it in `args=` (or use a stateless op with the same "
                    f"seed on every replica)",
                    {"op": m.code(draw.func)},
                    related=node,
                )


def _index_parts(node: cst.Subscript) -> list[cst.BaseExpression]:
    out: list[cst.BaseExpression] = []
    for el in node.slice:
        s = el.slice
        if isinstance(s, cst.Index):
            out.append(s.value)
        elif isinstance(s, cst.Slice):
            out.extend(x for x in (s.lower, s.upper) if x is not None)
    return out


def _unseeded_draw(m, site: CallSite) -> bool:
    """A stateful random op with no seed (a constant op seed makes every replica draw the same:
    the split is then right)."""
    q, _ = m.qualified_name(site.node.func, site.scope, site.order)
    return q in api.STATEFUL_RNG_OPS and seed_arg(site, q) is None
