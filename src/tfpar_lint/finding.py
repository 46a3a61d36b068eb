"""The data every part of tfpar-lint exchanges: findings, verdicts, errors.

The engine produces :class:`Finding` objects, the output formats render them,
and the runtime verifier (``tfpar_lint.verify``) attaches a
:class:`Verification` to each one it ran.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

# The start of the reasons of files given up at a per-file limit (engine.gave_up marks them).
LIMIT_REASONS = ("used more than", "gave no answer within", "out of memory")

# The verifier's verdicts, spelled the same in the text report, JSON, SARIF, --help and the README.
CONFIRMED = "CONFIRMED"  # a finding of the linter, whose symptom the run showed
NOT_REPRODUCED = "NOT_REPRODUCED"  # a finding of the linter; the run showed the code behaving correctly
INCONCLUSIVE = "INCONCLUSIVE"  # a finding of the linter the run could not decide (crash, hang, line not reached)
RUNTIME = "RUNTIME"  # a mistake the run showed where the linter reported nothing
COULD_NOT_RUN = "COULD_NOT_RUN"  # a script (not a finding) that did not run through: nothing it holds was verified
VERDICTS: dict[str, str] = {
    CONFIRMED: "the run showed the finding's symptom",
    RUNTIME: "the run showed a mistake the linter did not report (a finding of its own)",
    NOT_REPRODUCED: "the flagged code ran and the run showed it behaving correctly",
    INCONCLUSIVE: "the run could not decide (the flagged code did not run, or the probe cannot tell)",
    COULD_NOT_RUN: "the script did not run through (import error, crash, time-out, hang) and showed nothing: "
                   "it was not verified",
}


@dataclass
class Verification:
    """What the runtime verifier saw for one finding."""

    status: str  # CONFIRMED | NOT_REPRODUCED | INCONCLUSIVE | RUNTIME
    evidence: str
    replicas: int = 0
    devices: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Finding:
    """One rule violation at one place.

    ``line`` and ``col`` are 1-based (as printed); ``end_line``/``end_col``
    delimit the flagged node.  ``cell`` is set for notebooks (1-based cell
    number, with ``line`` counted inside the cell).  ``data`` carries
    rule-specific facts the verifier needs (e.g. the variable's name).
    """

    code: str
    name: str
    message: str
    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    severity: str = "warning"
    fix_hint: str = ""
    cell: Optional[int] = None
    data: dict[str, Any] = field(default_factory=dict)
    verification: Optional[Verification] = None
    # The rule's proposed fix, in ruff's JSON shape: {"applicability": "safe"|"unsafe",
    # "message": ..., "edits": [{"content", "location": {"row", "column"}, "end_location": ...}]}
    # (1-based rows and columns of the linted text).  None: no automatic fix.
    fix: Optional[dict[str, Any]] = None

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.col, self.code)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "severity": self.severity,
            "fix_hint": self.fix_hint,
        }
        if self.cell is not None:
            d["cell"] = self.cell
        if self.data:
            d["data"] = self.data
        if self.verification is not None:
            d["verification"] = self.verification.to_dict()
        d["fix"] = self.fix
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Finding":
        v = d.get("verification")
        return cls(
            code=d["code"], name=d["name"], message=d["message"], path=d["path"],
            line=d["line"], col=d["col"], end_line=d["end_line"], end_col=d["end_col"],
            severity=d.get("severity", "warning"), fix_hint=d.get("fix_hint", ""),
            cell=d.get("cell"), data=dict(d.get("data") or {}),
            verification=Verification(**v) if v else None,
            fix=d.get("fix"),
        )


@dataclass
class FileError:
    """A file that could not be linted (unreadable, undecodable, unparsable, skipped, given up).

    ``code`` is the flake8-style code it is reported under: ``E999`` syntax
    error, ``E902`` not read (I/O, decoding, invalid notebook, skipped),
    ``E903`` analysis gave up (the worker crashed, timed out, ran out of
    memory, or libcst could not parse code Python accepts).  Empty: decided
    from the message (:func:`tfpar_lint.output.error_code`).
    """

    path: str
    message: str
    line: int = 0
    col: int = 0
    code: str = ""

    @property
    def at_limit(self) -> bool:
        """The analysis was given up at a per-file limit (CPU time, memory): the file is fine,
        the budget was not (``--exit-zero`` does not turn this into exit status 2)."""
        return any(self.message.startswith("analysis gave up: " + r) for r in LIMIT_REASONS)

    def render(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {error_code(self)} {self.message}"


def error_code(err: "FileError") -> str:
    """The error's own code (E903: the analysis gave up), else E999 for a syntax error and
    E902 for the rest (flake8's codes)."""
    code = getattr(err, "code", None)
    if isinstance(code, str) and code:
        return code
    msg = err.message.lower()
    if "syntax" in msg or "parse" in msg or "indentation" in msg or "unexpected" in msg:
        return "E999"
    return "E902"


@dataclass
class FileResult:
    """What linting one file gave."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    error: Optional[FileError] = None
    skipped: bool = False
    deps: dict[str, str] = field(default_factory=dict)  # other project files read: path -> sha256
    capped: bool = False  # whole-project analysis hit its cap on files read (semantic.project.MAX_MODULES)
    notes: list[str] = field(default_factory=list)  # what the user should know (deep.note: opaque expressions)


# The key under which a result's dependencies (FileResult.deps) hold who imports the modules whose
# importers its answers asked for (Project.importers_digest): not a path, so never read as one.
GRAPH_KEY = ":importers"
