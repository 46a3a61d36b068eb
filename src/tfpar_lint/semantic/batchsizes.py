"""Global batch sizes: which values hold the batch of all replicas together.

A value is the global batch size by its story, never by its name:

* it is a product with ``<strategy>.num_replicas_in_sync`` (``BATCH * strategy.num_replicas_in_sync``),
  or it holds the same value as one (``GLOBAL = BATCH * n`` read elsewhere);
* it is what the module passes as ``global_batch_size=`` to ``tf.nn.compute_average_loss``;
* it is the batch size of a dataset the module then distributes (``ds.batch(G)`` followed, through
  names and dataset methods, into ``strategy.experimental_distribute_dataset``).

Per-replica batch sizes are the loss helpers' (``semantic/loss.per_replica_size``,
``is_per_replica_batch``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import Scope
from tfpar_lint.semantic.nodes import arg

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

AVERAGE_LOSS = frozenset({"tensorflow.nn.compute_average_loss"})


def _identity(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[frozenset]:
    from tfpar_lint.semantic.loss import value_identity  # the loss rules' value identities

    return value_identity(m, expr, scope, order)


def _global_identities(m: "Module") -> list[tuple[frozenset, str]]:
    """Identities of the module's global batch sizes, with why (for messages)."""
    memo = m.rule_memo.setdefault("batchsizes", {})
    if "global" in memo:
        return memo["global"]
    from tfpar_lint.semantic.loss import _replica_products

    out: list[tuple[frozenset, str]] = []
    for _ident, product, name in _replica_products(m):
        # the product itself is the global batch: its identity is the product node
        label = f"`{name} = {m.code(product)}`" if name else f"`{m.code(product)}`"
        out.append((frozenset({id(product)}), f"the global batch is {label}"))
    for cs, _q in m.calls_to(AVERAGE_LOSS):
        g = arg(cs.node, 1, "global_batch_size")
        if g is not None:
            ident = _identity(m, g, cs.scope, cs.order)
            if ident:
                out.append((ident, f"it is the `global_batch_size=` of `{m.code(cs.node)}`"))
    for cs, _recv, _meth in m.method_calls(("batch",)):
        b = arg(cs.node, 0, "batch_size")
        if b is None:
            continue
        vals = m.infer_at(cs.node, cs)
        if vals and all(v.kind == api.DATASET for v in vals) and _distributed(m, cs):
            ident = _identity(m, b, cs.scope, cs.order)
            if ident:
                out.append((ident, f"it batches the dataset that is distributed (`{m.code(cs.node)}`)"))
    memo["global"] = out
    return out


def _distributed(m: "Module", batch_site) -> bool:
    """The dataset made at ``batch_site`` reaches ``strategy.experimental_distribute_dataset``."""
    node = batch_site.node
    for cs, recv, meth in m.method_calls(api.DISTRIBUTE_DATASET_METHODS):
        vals = m.infer_at(recv, cs)
        if not vals or not all(v.kind == api.STRATEGY for v in vals):
            continue
        ds = arg(cs.node, 0, "dataset")
        if ds is None:
            continue
        for v in m.infer_at(ds, cs):
            s = v
            for _ in range(20):
                if s is None:
                    break
                if s.origin is node:
                    return True
                s = s.source
    return False


def global_batch(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[str]:
    """Why ``expr`` holds the global batch size, or None."""
    from tfpar_lint.semantic.loss import mentions_replicas

    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply) \
            and (mentions_replicas(m, expr.left, scope, order) or mentions_replicas(m, expr.right, scope, order)):
        return f"`{m.code(expr)}` multiplies by the replicas"
    ident = _identity(m, expr, scope, order)
    if not ident:
        return None
    for other, why in _global_identities(m):
        if ident <= other or other <= ident:
            return why
    # GLOBAL = BATCH * n: a name whose origin is one of the products
    origins = m.origin_exprs(expr, scope, order)
    for e, sc, od in origins or ():
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply) \
                and (mentions_replicas(m, e.left, sc, od) or mentions_replicas(m, e.right, sc, od)):
            return f"it is `{m.code(e)}`"
    return None
