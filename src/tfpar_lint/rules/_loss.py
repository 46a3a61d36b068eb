"""Moved to :mod:`tfpar_lint.semantic.loss` (the analysis layer answers the loss questions; rules
only ask them).  Kept so that imports written against the old place keep working."""
from tfpar_lint.semantic.loss import *  # noqa: F401,F403
from tfpar_lint.semantic.loss import (  # noqa: F401
    _builtin, _per_replica_origin, _replica_products, _self_attr_exprs, _unwrap,
)
