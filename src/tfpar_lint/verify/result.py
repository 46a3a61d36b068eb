"""What one verifier run of one script produced (printed by the CLI).

No TensorFlow import here: the CLI imports this module in the parent process.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, COULD_NOT_RUN, INCONCLUSIVE, NOT_REPRODUCED, Finding

# Rule families and the probe module that observes each one.
FAMILIES: dict[str, str] = {
    "1": "scope",
    "2": "input",
    "3": "threads",
    "4": "randomness",
    "5": "loss",
    "6": "lifecycle",
    "7": "execution",
}


def family_of(code: str) -> Optional[str]:
    """``"TFP203"`` -> ``"input"`` (None for codes without a probe)."""
    if len(code) >= 4 and code[:3].upper() == "TFP" and code[3:4].isdigit():
        return FAMILIES.get(code[3])
    return None


@dataclass
class FamilyObservation:
    """What one probe saw in one run, independent of any finding.

    ``status`` is CONFIRMED when the family's symptom was observed (even if
    the linter reported nothing), NOT_REPRODUCED when the probe saw the
    relevant operations behave correctly (or saw none of them), INCONCLUSIVE
    when the run crashed or hung before the probe could conclude.
    """

    family: str  # "scope" | "input" | "threads" | "randomness" | "loss" | "lifecycle" | "execution"
    codes: str  # "TFP1xx"
    status: str
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScriptRun:
    """One script run under instrumentation (one process, or one local cluster)."""

    path: str
    outcome: str = "ok"  # ok | stopped | error | hung | failed
    exit_status: Optional[int] = None  # child exit code (worst over workers); None when killed
    seconds: float = 0.0  # wall time of the run (all workers)
    replicas: int = 0  # num_replicas_in_sync of the strategies the script created (max)
    devices: list[str] = field(default_factory=list)
    workers: int = 1
    strategies: list[str] = field(default_factory=list)  # e.g. "MirroredStrategy(2 replicas)"
    steps: int = 0  # strategy.run / fit steps observed
    error: str = ""  # "ValueError: ... (script.py:12)" when the script raised
    error_line: int = 0  # the script line where it raised (0: unknown)
    hang_location: str = ""  # "script.py:40 in <module>" when killed
    notes: list[str] = field(default_factory=list)
    observations: list[FamilyObservation] = field(default_factory=list)
    startup_seconds: float = 0.0  # TensorFlow import + device set-up in the child
    workdir: str = ""
    sandbox: str = ""  # "namespaces" (user/mount/PID/IPC namespaces, overlays) or "none" (--sandbox none)
    sandbox_refused: list[str] = field(default_factory=list)  # mount/namespace calls the script tried (refused)
    stdout: str = ""  # the script's output (capped; see TFPAR_VERIFY_OUTPUT_MB)
    stderr: str = ""
    # Mistakes the run showed that no static finding covers (Finding.to_dict(), verdict RUNTIME).
    runtime_findings: list[dict[str, Any]] = field(default_factory=list)
    # The script's verdict (verify.report.script_verdict): CONFIRMED (something was seen), COULD_NOT_RUN
    # (it did not run through and showed nothing), INCONCLUSIVE (it ran, a finding was not decided) or
    # NOT_REPRODUCED (it ran and showed nothing: verified clean); why, and its last stderr lines.
    verdict: str = ""
    reason: str = ""
    stderr_tail: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The script's verdict (older records without one: from the probes' observations)."""
        if self.verdict:
            return self.verdict
        if any(o.status == CONFIRMED for o in self.observations):
            return CONFIRMED
        if self.outcome in ("error", "hung", "failed"):
            return COULD_NOT_RUN
        if any(o.status == INCONCLUSIVE for o in self.observations):
            return INCONCLUSIVE
        return NOT_REPRODUCED

    @property
    def unverified(self) -> bool:
        """The run proves nothing about the script, or leaves a finding undecided (exit status 2)."""
        return self.status in (COULD_NOT_RUN, INCONCLUSIVE)

    def new_findings(self) -> list[Finding]:
        """The runtime findings as :class:`Finding` objects (for the report and the exit code)."""
        return [Finding.from_dict(d) for d in self.runtime_findings]

    def observation(self, family: str) -> Optional[FamilyObservation]:
        for o in self.observations:
            if o.family == family:
                return o
        return None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status
        for name in ("stdout", "stderr"):  # reports carry the end of the output; --show-output prints it all
            d[name] = _tail_text(d[name], OUTPUT_IN_REPORTS)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ScriptRun":
        d = dict(d)
        d.pop("status", None)
        obs = [FamilyObservation(**o) for o in d.pop("observations", [])]
        return cls(observations=obs, **d)

    def summary(self) -> str:
        """One line: ``path: outcome in 4.2 s, 2 replicas on CPU:0,CPU:1; scope: ...; input: ...``."""
        dev = ",".join(_short_device(x) for x in self.devices) or "no devices"
        head = f"{self.path}: {self.outcome}"
        if self.exit_status not in (None, 0):
            head += f" (exit {self.exit_status})"
        head += f" in {self.seconds:.1f} s"
        if self.workers > 1:
            head += f", {self.workers} workers"
        if self.replicas:
            head += f", {self.replicas} replica{'s' if self.replicas != 1 else ''} on {dev}"
        else:
            head += f", no strategy created (devices {dev})"
        parts = [head]
        if self.error:
            parts.append(f"error: {self.error}")
        if self.hang_location:
            parts.append(f"hung at {self.hang_location}")
        for o in self.observations:  # what each probe saw; verdicts belong to findings only
            parts.append(f"{o.family} probe: {o.summary}")
        if self.notes:
            parts.append("notes: " + "; ".join(self.notes))
        return "; ".join(parts)


OUTPUT_IN_REPORTS = 8192  # characters of each stream kept in JSON/SARIF


def _tail_text(text: str, limit: int) -> str:
    mark = "[...]\n"
    if len(text) <= limit:
        return text
    return mark + text[-(limit - len(mark)):]


def _short_device(name: str) -> str:
    # "/job:worker/replica:0/task:1/device:CPU:0" -> "worker1/CPU:0"
    if "/device:" not in name:
        return name.lstrip("/")
    head, dev = name.split("/device:", 1)
    if "/job:" in head and "/task:" in head:
        job = head.split("/job:")[1].split("/")[0]
        task = head.split("/task:")[1].split("/")[0]
        if job != "localhost":
            return f"{job}{task}/{dev}"
    return dev
