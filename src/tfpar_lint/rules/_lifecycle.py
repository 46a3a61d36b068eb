"""Moved to :mod:`tfpar_lint.semantic.lifecycle` (the analysis layer answers the multi-worker
questions; rules only ask them).  Kept so that imports written against the old place keep working."""
from tfpar_lint.semantic.lifecycle import *  # noqa: F401,F403
from tfpar_lint.semantic.lifecycle import (  # noqa: F401
    NEUTRAL, _comparison, _followed, _literal, _membership_test, _name_exprs,
)
