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

from tfpar_lint import versions
from tfpar_lint.fix import Fix, move_into_with, scope_with_after, statement_of
from tfpar_lint.semantic.scope_use import outside_scope_uses, wrapped_params

if TYPE_CHECKING:  # pragma: no cover
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


# A strategy is made here, or used (a receiver the module cannot resolve is a strategy by its use,
# semantic/kinds.py: its scope entered, data distributed, a replica function run, a ReduceOp
# reduction).
STRATEGY_MARKERS: tuple[str, ...] = ("Strategy", "get_strategy", "strategy", "num_replicas_in_sync",
                                     "experimental_run", "ReduceOp", ".scope():", "distribute_dataset",
                                     "distribute_datasets_from_function", "call_for_each_replica")


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
    # The relevance stage (tfpar_lint.relevance), after the pre-filter: the facts of the code (names
    # of tfpar_lint.relevance.FACTS) that must hold for the rule to report anything, in the same
    # conjunctive normal form.  None: derived from MARKERS (the strategy group needs a strategy).
    NEEDS: ClassVar[Optional[tuple[tuple[str, ...], ...]]] = None
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


class CreatedOutsideScopeRule(Rule):
    """Base of TFP101/102/103/105: an object of one kind created outside the scope, then used with the
    strategy (the analysis is :func:`tfpar_lint.semantic.scope_use.outside_scope_uses`)."""

    KIND: ClassVar[str] = ""
    WHAT: ClassVar[str] = ""  # "Keras model"
    MARKERS = (STRATEGY_MARKERS, ("scope(", ".run(", "experimental_run"))

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        if cls.KIND and "NEEDS" not in cls.__dict__:
            # a strategy, an object of the kind, and a use with the strategy (outside_scope_uses): under
            # its scope or in a function strategy.run runs; a model also beside a strategy whose scope
            # is never entered (scope_use._trained_beside_unused_strategy)
            cls.NEEDS = (("strategy",), (cls.KIND,)) + ((("scope", "replica_run"),) if cls.KIND != "model" else ())
    SEVERITY = "error"
    PROBE = "scope"

    def check(self) -> Iterator[Report]:
        m = self.module
        for v, use in outside_scope_uses(m, self.KIND, lambda v: self.applies(v) is not False):
            if self.applies(v) is None:  # a mistake only on some versions, and nothing states which
                versions.withhold(m, self.CODE)
                continue
            yield Report(
                v.origin,
                f"{self.WHAT} `{use.subject or m.code(v.origin)}` is created outside the strategy's scope, but "
                f"{use.how}; create it inside `with {use.strategy}.scope():`{self.why(v)}",
                {"object": m.code(v.origin), "kind": self.KIND, **self.data(v)},
                related=use.node,
            )
        for w in wrapped_params(m, self.KIND):
            # made by the caller before this function made its strategy: reported where it is wrapped
            yield Report(
                w.arg,
                f"{self.WHAT} `{w.param}` is made by the caller of `{w.fn.name}`, before `{w.fn.name}` creates its "
                f"strategy, but it is built into `{m.code(w.build.node.func)}(...)` under `{w.strategy}.scope()`: "
                f"its variables stay outside that strategy; create it under the scope (or take the strategy it "
                f"was made under)",
                {"object": w.param, "kind": self.KIND},
            )

    def applies(self, v) -> Optional[bool]:
        """Is the object's creation outside the scope a mistake in the version it runs on?  None:
        only on some versions, and nothing states which (the finding is held back)."""
        return True

    def why(self, v) -> str:
        """What the message adds (the TensorFlow version a version-dependent rule assumes)."""
        return ""

    def data(self, v) -> dict:
        return {}

    # -- fix (safe): move the creating statement into the `with X.scope():` right after it
    FIXABLE = "safe"

    def fix(self, report: Report) -> "Optional[Fix]":
        m = self.module
        stmt = statement_of(m, report.node)
        if stmt is None or not isinstance(stmt.body[0], (cst.Assign, cst.AnnAssign)) \
                or stmt.body[0].value is not report.node:
            return None
        with_node = scope_with_after(m, stmt)
        if with_node is None:
            return None
        return move_into_with(m, stmt, with_node,
                              Fix(f"Move the {self.WHAT} into the `with ...scope():` block below it"))
