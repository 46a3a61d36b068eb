"""Base for TFP101/102/103/105: an object of one kind created outside the scope, then used with the strategy."""
from __future__ import annotations

from typing import ClassVar, Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.rules._scope import created_outside_scope, uses_with_strategy, values_of_kind


class CreatedOutsideScopeRule(Rule):
    KIND: ClassVar[str] = ""
    WHAT: ClassVar[str] = ""  # "Keras model"
    MARKERS = (STRATEGY_MARKERS, ("scope(", ".run(", "experimental_run"))
    SEVERITY = "error"
    PROBE = "scope"

    def check(self) -> Iterator[Report]:
        m = self.module
        for v in values_of_kind(m, self.KIND):
            if not created_outside_scope(m, v) or not self.applies(v):
                continue
            for use in uses_with_strategy(m, v):
                if use.site is not None and v.site is not None and m.exclusive(v.site, use.site):
                    continue  # made in one arm of `if t:`, used in the other arm of a later `if t:`
                yield Report(
                    v.origin,
                    f"{self.WHAT} `{use.subject or m.code(v.origin)}` is created outside the strategy's scope, but "
                    f"{use.how}; create it inside `with {use.strategy}.scope():`{self.why(v)}",
                    {"object": m.code(v.origin), "kind": self.KIND, **self.data(v)},
                    related=use.node,
                )
                break

    def applies(self, v) -> bool:
        """Is the object's creation outside the scope a mistake in the version it runs on?"""
        return True

    def why(self, v) -> str:
        """What the message adds (the TensorFlow version a version-dependent rule assumes)."""
        return ""

    def data(self, v) -> dict:
        return {}

    # -- fix (safe): move the creating statement into the `with X.scope():` right after it
    FIXABLE = "safe"

    def fix(self, report: Report):
        from tfpar_lint.fix import Fix, move_into_with, scope_with_after, statement_of
        import libcst as cst

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
