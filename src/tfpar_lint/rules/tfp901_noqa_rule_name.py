"""TFP901: a ``# noqa`` directive that names a rule by its kebab-case name.

tfpar-lint's own command honours ``# noqa: model-outside-scope`` for TFP101, but
flake8 reads only codes after ``noqa:``: when the list starts with a name,
flake8 takes the comment as a bare ``# noqa`` and hides every code on the line
(F401 and E501 too); a name later in the list is ignored.  Judged from the text
by the engine (``noqa.name_directives``), in the standalone command.
"""
from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule


class NoqaRuleName(Rule):
    CODE = "TFP901"
    NAME = "noqa-rule-name"
    SUMMARY = "`# noqa` names a rule (`model-outside-scope`): flake8 reads it as a bare `# noqa` hiding every code"
    FIX_HINT = "Write the rule's code: `# noqa: TFP101`."
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    FIXABLE = "safe"
    TEXT_ONLY = True

    def check(self) -> Iterator[Report]:
        return iter(())
