"""Shared helpers of the TFP4xx randomness rules."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, Module, arg, keyword


def rng_calls_in_replica_fns(m: Module) -> Iterator[tuple[CallSite, str]]:
    """Stateful and stateless RNG op calls inside functions run by ``strategy.run``."""
    for cs in m.calls:
        q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
        if not q or not (q in api.STATEFUL_RNG_OPS or api.is_stateless_rng(q)):
            continue
        if m.in_replica_fn(cs.scope):
            yield cs, q


def seed_arg(cs: CallSite, q: str) -> Optional[cst.BaseExpression]:
    if api.is_stateless_rng(q):
        # stateless_*(shape, seed, ...) ; image ops: (image, ..., seed)
        s = keyword(cs.node, "seed")
        if s is None and q.startswith("tensorflow.random.stateless_"):
            s = arg(cs.node, 1)
        return s
    return keyword(cs.node, "seed")
