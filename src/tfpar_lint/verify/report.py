"""Report: what one run showed, as verdicts (no TensorFlow import; runs in the CLI process).

:func:`conclude` turns what the driver collected (:class:`~tfpar_lint.verify.probes.RunData`)
into a :class:`~tfpar_lint.verify.result.ScriptRun`:

* every static finding of the script gets a verdict from its family's probe (``judge``):
  CONFIRMED (the symptom was seen), NOT_REPRODUCED (the flagged code ran and the probe saw it
  behave correctly, with that evidence) or INCONCLUSIVE (it did not run, or the probe cannot
  decide);
* what a probe saw at a place of the script that no static finding covers (``locate``) becomes
  a finding of its own, RUNTIME;
* the script gets one verdict (:func:`script_verdict`): CONFIRMED when anything was seen,
  COULD_NOT_RUN when it did not run through (import error, crash, time-out, hang, not started)
  and nothing was seen, INCONCLUSIVE when it ran but a finding could not be decided, and
  NOT_REPRODUCED when it ran and showed nothing (verified clean).
"""
from __future__ import annotations

import copy
from typing import Optional

from tfpar_lint.finding import (CONFIRMED, COULD_NOT_RUN, INCONCLUSIVE, NOT_REPRODUCED, RUNTIME, Finding,
                                Verification)
from tfpar_lint.verify import probes as probes_pkg
from tfpar_lint.verify.probes import RunData
from tfpar_lint.verify.result import FAMILIES, FamilyObservation, ScriptRun, family_of

FORCED_SEED = 1234  # the global (and numpy) seed of a run that is compared with a second run
STDERR_TAIL = 20  # last lines of the script's stderr kept with a COULD_NOT_RUN verdict
_IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")


def script_line(f: Finding, cmap: dict) -> int:
    """The line of the script that runs (a notebook's cells run as one script)."""
    if cmap and f.cell is not None:
        return cmap.get((f.cell, f.line), f.line)
    return f.line


def conclude(job, data: RunData, display: str, keep_root: str = "", ctx: Optional[dict] = None) -> ScriptRun:
    run = _script_run(job, data, display, keep_root, ctx)
    for fam_digit, name in FAMILIES.items():
        try:
            status, summary = probes_pkg.observe(name, data)
        except Exception as e:  # pragma: no cover - a probe bug must not lose the run
            status, summary = INCONCLUSIVE, f"probe error: {type(e).__name__}: {e}"
        if not ran_through(data) and status == NOT_REPRODUCED:
            status, summary = INCONCLUSIVE, summary + f" (run incomplete: {data.outcome})"
        run.observations.append(FamilyObservation(name, f"TFP{fam_digit}xx", status, summary))
    for f in job.findings:
        g = f
        if job.cell_map and f.cell is not None:
            g = copy.copy(f)
            g.line = script_line(f, job.cell_map)
        status, evidence = judge(g, data)
        if g is not f:
            evidence += f" (cell {f.cell}, line {f.line} = line {g.line} of the cells run as one script)"
        f.verification = _verification(status, evidence, data)
    run.runtime_findings = [g.to_dict() for g in runtime_findings(job, data, display)]
    statuses = [f.verification.status for f in job.findings if f.verification is not None]
    statuses += [RUNTIME] * len(run.runtime_findings)
    run.verdict, run.reason = script_verdict(data, statuses)
    if run.verdict == COULD_NOT_RUN:
        run.stderr_tail = run.stderr.rstrip("\n").split("\n")[-STDERR_TAIL:] if run.stderr.strip() else []
    return run


def _verification(status: str, evidence: str, data: RunData) -> Verification:
    return Verification(status=status, evidence=evidence, replicas=data.replicas, devices=list(data.devices),
                        seconds=round(data.seconds, 2))


def ran_through(data: RunData) -> bool:
    """The script ran to its end, or to the verifier's step bound."""
    return data.outcome in ("ok", "stopped")


def script_verdict(data: RunData, statuses: list[str]) -> tuple[str, str]:
    """(verdict, why) for the whole script from its findings' verdicts and how the run ended."""
    if any(s in (CONFIRMED, RUNTIME) for s in statuses):
        return CONFIRMED, ""
    if not ran_through(data):
        return COULD_NOT_RUN, not_run_reason(data)
    undecided = statuses.count(INCONCLUSIVE)
    if undecided:
        return INCONCLUSIVE, (f"{undecided} finding{'s' if undecided != 1 else ''} could not be decided by the run "
                              f"(the evidence of each says why)")
    return NOT_REPRODUCED, ""


def not_run_reason(data: RunData) -> str:
    """Why the run proves nothing: ``import error: ModuleNotFoundError: ... (x.py:3)``, ``timeout: hung at
    x.py:9 in <module>; killed after 30 s``, ``crash: ...``, ``not run: ...``."""
    if data.outcome == "hung":
        where = f"hung at {data.hang}" if data.hang else "hung"
        return f"timeout: {where}; killed after {data.hang_seconds or data.seconds:.0f} s (--timeout)"
    err = data.error or {}
    text = data.error_text() or "no result"
    steps = max([(w or {}).get("steps", 0) or 0 for w in data.workers] or [0])
    after = f" after {steps} step{'s' if steps != 1 else ''}" if steps else " before any training step"
    if err.get("type") in _IMPORT_ERRORS:
        return f"import error: {text}"
    if err.get("type") == "SyntaxError":
        return f"syntax error: {text}"
    if data.outcome == "failed":
        return f"not run: {text}"
    if err.get("type") == "SystemExit":
        return f"exited{after}: {text}"
    return f"crash{after}: {text}"


def judge(f: Finding, data: RunData) -> tuple[str, str]:
    """The verdict of one static finding (``f.line`` is a line of the script that ran)."""
    fam = family_of(f.code)
    if fam is None:
        return INCONCLUSIVE, f"no runtime probe for {f.code} yet"
    try:
        verdict = probes_pkg.judge(fam, f, data)
    except Exception as e:  # pragma: no cover - a probe bug must not lose the run
        verdict = (INCONCLUSIVE, f"probe error: {type(e).__name__}: {e}")
    if verdict and verdict[0] == CONFIRMED:
        return verdict
    ran = data.ran(f.line)
    err = data.error_text()
    if data.outcome == "hung":
        where = f" at {data.hang}" if data.hang else ""
        before = f" before line {f.line} ran" if ran is False else ""
        return INCONCLUSIVE, f"hung after {data.hang_seconds or data.seconds:.0f} s{where}{before}"
    if ran is False:
        if err:
            return INCONCLUSIVE, f"the script failed before line {f.line} ran: {err}"
        stop = next(((r or {}).get("stop_reason") for r in data.workers if (r or {}).get("stop_reason")), "")
        if stop:
            return INCONCLUSIVE, f"line {f.line} was not reached ({stop}); raise --max-steps"
        tail = f"; {verdict[1]}" if verdict and verdict[1] else ""
        return INCONCLUSIVE, f"line {f.line} never ran{tail}"
    if verdict is None:
        if err:
            return INCONCLUSIVE, f"the script failed: {err}"
        return INCONCLUSIVE, f"line {f.line} ran, but the {fam} probe saw nothing to judge there"
    status, evidence = verdict
    if status == NOT_REPRODUCED and err:
        if f.line in data.error_lines():
            # the flagged statement itself raised: the probe never saw it work
            return INCONCLUSIVE, f"line {f.line} raised before the probe could see it work: {err}"
        evidence += f" (the script then failed: {err})"
    return status, evidence


# ------------------------------------------------------------ runtime findings
def _seen(data: RunData) -> list:
    """What every probe saw at a place of the script (``probes.Seen``), one per code and line."""
    out, keys = [], set()
    for name in FAMILIES.values():
        try:
            seen = probes_pkg.locate(name, data)
        except Exception:  # pragma: no cover - a probe bug must not lose the run
            continue
        for s in seen:
            if (s.code, s.line) not in keys:
                keys.add((s.code, s.line))
                out.append(s)
    return out


def runtime_findings(job, data: RunData, display: str) -> list[Finding]:
    """Mistakes the run showed that no static finding covers, as findings of their own
    (verdict RUNTIME).  A static finding of the same family on the line where the mistake
    was seen (or one of its other lines) is the same mistake: it gets the verdict CONFIRMED
    and the evidence instead; a CONFIRMED static finding of the same code covers it too."""
    from tfpar_lint import registry

    rules = registry.rules_by_code()
    back = {v: k for k, v in job.cell_map.items()} if job.cell_map else {}
    out: list[Finding] = []
    for s in _seen(data):
        fam = s.code[:4]
        near = set(range(s.line - 1, s.line + 2)) | set(s.lines)
        covered = False
        for f in job.findings:
            if not f.code.startswith(fam) or f.verification is None:
                continue
            if script_line(f, job.cell_map) in near:
                if f.verification.status != CONFIRMED:
                    f.verification.status = CONFIRMED
                    f.verification.evidence = s.evidence
                covered = True
            elif f.code == s.code and f.verification.status == CONFIRMED:
                covered = True
        if covered:
            continue
        rule = rules.get(s.code)
        cell, line = back.get(s.line, (None, s.line))
        g = Finding(code=s.code, name=rule.NAME if rule else "", path=display, line=line, col=1, end_line=line,
                    end_col=1, cell=cell, severity=rule.SEVERITY if rule else "warning",
                    message=(rule.SUMMARY if rule else s.code) + " (seen at runtime; the linter did not report it)",
                    fix_hint=(rule.FIX_HINT or "") if rule else "")
        g.verification = _verification(RUNTIME, s.evidence, data)
        out.append(g)
    return out


# ------------------------------------------------------------ the script run
def _script_run(job, data: RunData, display: str, keep_root: str, ctx: Optional[dict]) -> ScriptRun:
    notes: list[str] = []
    for n in list(getattr(data, "driver_notes", [])) + list(getattr(data, "sandbox_notes", [])) + [
            n for r in data.workers for n in (r or {}).get("notes", [])]:
        if n not in notes:
            notes.append(n)
    stop = next(((r or {}).get("stop_reason") for r in data.workers if (r or {}).get("stop_reason")), "")
    if stop:
        notes.append(stop)
    if data.rerun is not None and job.one_replica:
        notes.append(f"ran again on one replica (global and numpy seed {FORCED_SEED} in both runs) to compare "
                     f"the first training step")
    elif data.rerun is not None:
        notes.append(f"ran twice with global seed {FORCED_SEED} to compare random streams")
    if data.outcome == "hung":
        notes.insert(0, f"hung after {data.hang_seconds or data.seconds:.0f} s; killed")
    codes = list(getattr(data, "exit_codes", []))
    exit_status = None if any(getattr(data, "killed", [])) else (
        max(codes, key=lambda c: abs(c or 0)) if codes else None)
    workers = [r or {} for r in data.workers]
    return ScriptRun(
        path=display, outcome=data.outcome, exit_status=exit_status, seconds=round(data.seconds, 2),
        replicas=data.replicas, devices=data.devices, workers=len(data.workers),
        strategies=[f"{s['type']}({s['replicas']} replicas)" for s in _unique_strategies(data)],
        steps=max([w.get("steps", 0) or 0 for w in workers] or [0]),
        error=data.error_text(), error_line=probes_pkg.error_line(data.error) or 0, hang_location=data.hang,
        notes=notes,
        startup_seconds=max([w.get("startup_seconds", 0) or 0 for w in workers] or [0]),
        workdir=getattr(data, "rundir", "") if keep_root else "",
        sandbox=_sandbox_name(data, ctx), sandbox_refused=refused(data.workers),
        stdout=_joined(data, "stdout"), stderr=_joined(data, "stderr"),
    )


def refused(results) -> list[str]:
    """The mount and namespace calls the script tried, every worker's, in order."""
    out: list[str] = []
    for r in results:
        for what in (r or {}).get("sandbox_refused", []) or []:
            if what not in out:
                out.append(str(what))
    return out


def _sandbox_name(data: RunData, ctx: Optional[dict]) -> str:
    modes = [m for m in getattr(data, "sandbox", []) if m]
    if modes and all(m == "namespaces" for m in modes):
        return "namespaces"
    if modes:
        return "none"
    return (ctx or {}).get("sandbox", "")


def _joined(data: RunData, name: str) -> str:
    outs = getattr(data, "outputs", [])
    if len(outs) == 1:
        return outs[0].get(name, "")
    return "".join(f"--- worker {i} ---\n{o.get(name, '')}" for i, o in enumerate(outs) if o.get(name))


def _unique_strategies(data: RunData) -> list[dict]:
    seen, out = set(), []
    for s in data.strategies():
        k = (s.get("type"), s.get("replicas"))
        if k not in seen:
            seen.add(k)
            out.append(s)
    return out
