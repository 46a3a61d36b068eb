"""Probes, one module per rule family (``scope``, ``input``, ``threads``, ``randomness``, ``loss``,
``lifecycle``, ``execution``: TFP1xx ... TFP7xx).

Every probe module has two halves:

child side (imports TensorFlow lazily, runs inside the instrumented process)
    ``install(R)``  patch what the family needs to observe;
    ``collect(R) -> dict``  JSON-serialisable observations at the end.

parent side (no TensorFlow)
    ``seen(run) -> list[Seen]``  what the run showed, place by place: each mistake (CONFIRMED),
    each place the flagged kind of code behaved correctly (NOT_REPRODUCED), each place it cannot
    tell (INCONCLUSIVE), with the evidence; ``run`` is a :class:`RunData`.
    ``ERRORS``  (optional) code -> TensorFlow's error texts that are its symptom; and
    ``WHEN_RAN``  (optional) code -> what a line of that code that ran without a symptom shows.

From ``seen`` this module derives, the same way for every family, the verdict of a static finding
(:func:`judge`), the mistakes that become findings of their own (:func:`locate`, RUNTIME) and the
probe's one-line summary (:func:`observe`).  A probe observes the real symptom (TensorFlow errors,
which replica got which object, lost updates, random draws); it never re-runs the static check.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Optional

from tfpar_lint.verify.result import FAMILIES
from tfpar_lint.verify.seen import Seen, error_line, error_matches  # noqa: F401  (the probes' import place)

PROBE_MODULES = tuple(FAMILIES.values())  # scope, input, threads, randomness, loss, lifecycle, execution


def load(name: str):
    return importlib.import_module(f"tfpar_lint.verify.probes.{name}")


@dataclass
class RunData:
    """Everything the parent knows about one script run (all workers)."""

    path: str
    workers: list[dict[str, Any]]  # child result per worker (may be {} when killed)
    outcome: str  # ok | stopped | error | hung | failed
    seconds: float
    hang: str = ""
    hang_seconds: float = 0.0
    rerun: Optional["RunData"] = None  # second run with the same seed (TFP403)
    replicas: int = 0
    devices: list[str] = field(default_factory=list)

    def probe(self, name: str) -> list[dict[str, Any]]:
        """This probe's observations, one dict per worker that reported."""
        return [w.get("probes", {}).get(name, {}) for w in self.workers if w]

    def ran_on(self) -> dict[int, list[int]]:
        """Each marked line -> the workers on which its statement started (empty: none did)."""
        out: dict[int, list[int]] = {}
        for i, w in enumerate(self.workers):
            if not w:
                continue
            ran = {int(k): v for k, v in (w.get("ran") or {}).items()}
            for line, mid in ((int(k), v) for k, v in (w.get("marks") or {}).items()):
                who = out.setdefault(line, [])
                if ran.get(mid):
                    who.append(i)
        return out

    def ran(self, line: int) -> Optional[bool]:
        """Whether the statement of ``line`` started (None when it carried no marker)."""
        who = self.ran_on().get(line)
        return None if who is None else bool(who)

    @property
    def error(self) -> Optional[dict[str, Any]]:
        for w in self.workers:
            if w and w.get("error"):
                return w["error"]
        return None

    def errors(self) -> list[dict[str, Any]]:
        """The uncaught error first, then errors the script caught that left a
        TensorFlow API (strategy.run, strategy.scope())."""
        out = [self.error] if self.error else []
        for w in self.workers:
            for c in (w or {}).get("caught", []) or []:
                out.append(dict(c, caught=True))
        return out

    def all_errors(self) -> list[dict[str, Any]]:
        """Every worker's uncaught error, then the errors caught by the script
        after they left a TensorFlow API (each with ``worker``: its index)."""
        out = []
        for i, w in enumerate(self.workers):
            if w and w.get("error"):
                out.append(dict(w["error"], worker=i))
        for i, w in enumerate(self.workers):
            for c in (w or {}).get("caught", []) or []:
                out.append(dict(c, caught=True, worker=i))
        return out

    def error_text(self, e: Optional[dict[str, Any]] = None) -> str:
        e = e or self.error
        if not e:
            return ""
        where = f" ({e['location']})" if e.get("location") else ""
        import re

        raw = str(e.get("message", ""))
        if "in user code:" in raw:
            # AutoGraph's message: frames, then the original error on its own line.
            inner = re.findall(r"^\s*(\w+(?:Error|Exception|Exit)): (.+)$", raw, re.M)
            if inner:
                raw = f"{inner[-1][1]}"
        elif raw.lstrip().startswith("Graph execution error"):
            raw = _graph_error_core(raw) or raw
        raw = re.sub(r"^\s*\{\{function_node [^}]*\}\}\s*", "", raw)  # the op's name, before its error
        msg = " ".join(raw.split())
        if len(msg) > 300:
            msg = msg[:300] + "..."
        return f"{e.get('type', 'Error')}: {msg}{where}"

    def error_lines(self) -> set[int]:
        e = self.error
        return set(e.get("script_lines", [])) if e else set()

    def strategies(self) -> list[dict[str, Any]]:
        out = []
        for w in self.workers:
            out.extend((w or {}).get("strategies", []))
        return out

    def ctx(self) -> str:
        """``2 replicas of MirroredStrategy`` for evidence strings."""
        sts = self.strategies()
        if not sts:
            return "no strategy"
        s = max(sts, key=lambda s: s.get("replicas", 0))
        n = s.get("replicas", 0)
        return f"{s.get('type', 'strategy')} with {n} replica{'s' if n != 1 else ''}"


def _graph_error_core(raw: str) -> str:
    """TensorFlow's own error in a ``Graph execution error``: the line after the frames of the node
    (``(0) INVALID_ARGUMENT:  You must feed ...`` -> ``You must feed ...``), without the op names."""
    import re

    for ln in raw.splitlines():
        t = ln.strip()
        if not t or t.startswith(("Graph execution error", "Detected at node", "File ", "Node:", "[[")) or \
                re.match(r"\d+ root error\(s\) found", t):
            continue
        if ln.startswith((" ", "\t")) and not re.match(r"\s*\(\d+\) ", ln):
            continue  # a frame's source line
        return re.sub(r"^\(\d+\)\s+[A-Z_]+:\s+", "", t)
    return ""


# ------------------------------------------------------------ what a probe saw
_RANK = {"CONFIRMED": 0, "NOT_REPRODUCED": 1, "INCONCLUSIVE": 2}


def judge_from(seen: list[Seen], finding) -> Optional[tuple[str, str]]:
    """The verdict of a static finding: what was seen for its code at its line (a mistake first, then
    correct behaviour, then why it cannot tell); None when nothing was seen there."""
    best: Optional[Seen] = None
    for s in seen:
        if finding.code != s.code and finding.code not in s.also:
            continue
        if not (s.anywhere or finding.line == s.line or finding.line in s.lines or _host_of(finding, s)):
            continue
        if best is None or _RANK.get(s.status, 3) < _RANK.get(best.status, 3):
            best = s
    return (best.status, best.evidence) if best else None


def _host_of(finding, s: Seen) -> bool:
    """A finding made at the host call that hands the data to a ``tf.function`` wrapper: the probe
    sees the mistake at the run inside the wrapper, the finding's related place."""
    data = getattr(finding, "data", None) or {}
    related = data.get("related_line")
    return bool(data.get("host")) and related is not None and (related == s.line or related in s.lines)


def locate_from(seen: list[Seen]) -> list[Seen]:
    """The mistakes that become findings of their own (RUNTIME) where no static finding covers them."""
    return [s for s in seen if s.status == "CONFIRMED" and s.runtime and s.line]


def observe_from(run: "RunData", seen: list[Seen], name: str) -> tuple[str, str]:
    """The probe's line in ``-v``: its first mistake, else what it checked."""
    from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED

    if not any(run.probe(name)):
        return INCONCLUSIVE, "no observations (the run ended before the probe reported)"
    bad = [s for s in seen if s.status == CONFIRMED]
    if bad:
        return CONFIRMED, bad[0].evidence
    ok = [s for s in seen if s.status == NOT_REPRODUCED]
    if ok:
        more = f" (and {len(ok) - 1} more place{'s' if len(ok) > 2 else ''})" if len(ok) > 1 else ""
        return NOT_REPRODUCED, ok[0].evidence + more
    return NOT_REPRODUCED, "nothing of this family ran"


def errors_seen(run: RunData, errors: dict[str, list[str]], runtime: bool = True) -> list[Seen]:
    """One :class:`Seen` per code of ``errors`` (a family's ERRORS table) and error TensorFlow raised
    with that text (uncaught, or caught by the script after it left a TensorFlow API): at the
    innermost script line it passed through, deciding a static finding on any line of its traceback."""
    out: list[Seen] = []
    for code, pats in errors.items():
        for err in run.all_errors():
            if not error_matches(err, pats):
                continue
            caught = " (the script caught it)" if err.get("caught") else ""
            who = f" on worker {err['worker']}" if len(run.workers) > 1 else ""
            out.append(Seen(code, error_line(err) or 0, f"TensorFlow raised {run.error_text(err)}{who}{caught}",
                            tuple(err.get("script_lines") or ()), runtime=runtime))
    return out


# ------------------------------------------------------------ the same for every family
def _seen_of(name: str, run: RunData) -> list[Seen]:
    cache = run.__dict__.setdefault("_seen", {})
    if name not in cache:
        cache[name] = list(load(name).seen(run))
    return cache[name]


def judge(name: str, finding, run: RunData) -> Optional[tuple[str, str]]:
    """The verdict of a static finding of probe ``name``'s family, or None (the report then says
    why it is INCONCLUSIVE: the line never ran, the run failed first, ...)."""
    from tfpar_lint.finding import NOT_REPRODUCED
    from tfpar_lint.verify import symptoms

    verdict = judge_from(_seen_of(name, run), finding)
    if verdict is not None:
        return verdict
    mod = load(name)
    line = finding.line
    if run.outcome in ("ok", "stopped") and run.ran(line):
        if finding.code in getattr(mod, "WHEN_RAN", {}):
            return NOT_REPRODUCED, f"line {line} ran on {run.ctx()}: {mod.WHEN_RAN[finding.code]}"
        if finding.code in getattr(mod, "ERRORS", {}):
            return NOT_REPRODUCED, (f"line {line} ran on {run.ctx()} without TensorFlow's error "
                                    f"{symptoms.quote_for(mod.ERRORS[finding.code][0])!r}")
    return None


def locate(name: str, run: RunData) -> list[Seen]:
    return locate_from(_seen_of(name, run))


def observe(name: str, run: RunData) -> tuple[str, str]:
    return observe_from(run, _seen_of(name, run), name)
