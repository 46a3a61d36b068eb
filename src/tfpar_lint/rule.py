"""Base class of every rule.

A rule is one file in ``tfpar_lint/rules/`` named by code and slug
(``tfp101_model_outside_scope.py``) holding one subclass of :class:`Rule`
with its metadata.  Rules never walk the tree themselves: the engine builds
one :class:`tfpar_lint.semantic.Module` per file in a single libcst traversal
and every enabled rule queries it in :meth:`Rule.check`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Optional

import libcst as cst

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.fix import Fix
    from tfpar_lint.semantic import Module


class Report:
    """What a rule yields: the node to point at, a message, facts for the verifier."""

    __slots__ = ("node", "message", "data", "related")

    def __init__(self, node: cst.CSTNode, message: str, data: Optional[dict[str, Any]] = None,
                 related: Optional[cst.CSTNode] = None):
        self.node = node
        self.message = message  # "{line}" is replaced by the line of ``related``
        self.data = data or {}
        self.related = related


# A strategy is made here, or used (a receiver the module cannot resolve is a strategy by its use:
# ``semantic.contexts.strategy_by_use``).
STRATEGY_MARKERS: tuple[str, ...] = ("Strategy", "get_strategy", "strategy", "num_replicas_in_sync",
                                     "experimental_run", "ReduceOp")


class Rule:
    CODE: ClassVar[str] = ""
    NAME: ClassVar[str] = ""  # kebab-case
    SUMMARY: ClassVar[str] = ""  # one line, for --list-rules
    DEFAULT_ENABLED: ClassVar[bool] = True
    SEVERITY: ClassVar[str] = "warning"  # "error" when TensorFlow raises, "warning" when silent
    FIX_HINT: ClassVar[str] = ""
    # Pre-filter, in conjunctive normal form: the file is parsed for this rule
    # only if, for every group, its text contains at least one of the group's
    # substrings.  The group STRATEGY_MARKERS stands for "a strategy can be
    # created or received here" (extended by configured strategy factories).
    MARKERS: ClassVar[tuple[tuple[str, ...], ...]] = ()
    # Verifier probe family (module name under tfpar_lint/verify/probes).
    PROBE: ClassVar[str] = ""
    # The automatic fix this rule can offer: "safe", "unsafe" (applied only with
    # --unsafe-fixes), or "" for none.  The rule page's "## Fix" section says the same.
    FIXABLE: ClassVar[str] = ""

    def __init__(self, module: "Module") -> None:
        self.module = module

    def check(self) -> Iterator[Report]:  # pragma: no cover - abstract
        raise NotImplementedError

    def fix(self, report: Report) -> "Optional[Fix]":
        """The fix for one of this rule's reports (see :mod:`tfpar_lint.fix`), or None."""
        return None
