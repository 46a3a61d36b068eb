"""TFP7xx: how the distributed step executes.

Child side: the core instrumentation already counts, per call site,
``strategy.run`` calls made eagerly vs while tracing a ``tf.function``
(``run_sites``) and records exceptions that left an outer ``tf.function``
call (``fn_errors``), whether or not the script caught them.

Parent side:

* TFP701: ``strategy.run`` at the line called eagerly (outside any
  ``tf.function``), with the count;
* TFP702, TFP703, TFP705: TensorFlow's / Keras' own error at the line;
* TFP704: scripts with this finding run with a simulated preemption (worker
  1 of the local cluster leaves after a few steps); confirmed when an
  exception raised in the ``try`` body whose handler is at the line was
  caught there and the script went on without re-raising it.
"""
from __future__ import annotations

import ast
from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED

CODES = "TFP7xx"

ERRORS = {
    "TFP702": [r"A non-persistent GradientTape can only be used to compute one set of gradients"],
    "TFP703": [r"Unknown variable: .*This optimizer can only be called for the variables it was originally built with",
               r"optimizer can only be called for the variables it was originally built with"],
    "TFP705": [r"'(Symbolic)?Tensor' object has no attribute 'numpy'"],
}


def install(R) -> None:  # everything needed is recorded by instrument.py
    R.execution = True


def collect(R) -> dict[str, Any]:
    return {"run_sites": dict(getattr(R, "run_sites", {})), "fn_errors": len(getattr(R, "fn_errors", []))}


# ================================================================== parent
def _sites(run) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for w in run.workers:
        for line, c in ((w or {}).get("run_sites") or {}).items():
            d = out.setdefault(line, {"eager": 0, "traced": 0, "keras": 0})
            for k in d:
                d[k] = max(d[k], c.get(k, 0))
    return out


def _try_body(path: str, line: int) -> Optional[tuple[int, int, str]]:
    """(first, last line of the try body, handler text) for the handler at ``line``."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            for h in node.handlers:
                if h.lineno == line:
                    last = max(getattr(n, "end_lineno", n.lineno) for n in node.body)
                    what = ast.unparse(h.type) if h.type is not None else "everything"
                    return node.body[0].lineno, last, what
    return None


def judge(finding, run) -> Optional[tuple[str, str]]:
    from tfpar_lint.verify.probes import error_at_line

    code, line = finding.code, finding.line
    if code in ERRORS:
        v = error_at_line(run, line, ERRORS[code])
        if v:
            return v
        if run.ran(line) and run.outcome in ("ok", "stopped"):
            return NOT_REPRODUCED, f"line {line} ran on {run.ctx()} without {ERRORS[code][0]!r}"
        return None
    if code == "TFP701":
        c = _sites(run).get(str(line))
        if not c:
            return None
        if c["eager"] == 1:
            return INCONCLUSIVE, f"strategy.run at line {line} ran eagerly once only (one call is not a slow loop)"
        if c["eager"]:
            return CONFIRMED, (f"strategy.run at line {line} was called eagerly {c['eager']} time(s) "
                               f"({c['traced']} traced in a tf.function) on {run.ctx()}: every step dispatches "
                               f"each replica's ops one by one from Python")
        return NOT_REPRODUCED, f"strategy.run at line {line} ran only inside tf.function ({c['traced']} trace(s))"
    if code == "TFP704":
        return _judge_704(finding, run, line)
    return INCONCLUSIVE, f"the execution probe has no observation for {code}"


def _judge_704(finding, run, line):
    body = _try_body(run.path, line)
    if body is None:
        return None
    lo, hi, what = body
    preempted = [i for i, w in enumerate(run.workers) if (w or {}).get("preempted")]
    inject = f" (the verifier made worker {preempted[0]} leave after a few steps)" if preempted else ""
    for i, w in enumerate(run.workers):
        if not w or w.get("preempted"):
            continue
        errs = list(w.get("fn_errors") or []) + list(w.get("caught") or [])
        for e in errs:
            lines = [ln for ln in e.get("script_lines", []) if lo <= ln <= hi]
            if not lines:
                continue
            final = w.get("error") or {}
            if final.get("type") == e.get("type"):
                return NOT_REPRODUCED, (f"worker {i}: {e.get('type')} raised at line {lines[-1]} in the try body was "
                                        f"re-raised by the handler at line {line}{inject}")
            text = run.error_text(e)
            return CONFIRMED, (f"worker {i}: {text} raised at line {lines[-1]} inside the try (lines {lo}-{hi}) was "
                               f"caught by 'except {what}' at line {line} and the script went on "
                               f"(outcome {w.get('outcome')}){inject}")
    if run.ran(line) is False or not preempted:
        return INCONCLUSIVE, (f"nothing was raised inside the try body (lines {lo}-{hi}) in this run{inject}; the "
                              f"handler at line {line} was not exercised")
    return NOT_REPRODUCED, f"nothing raised in the try body (lines {lo}-{hi}) reached the handler{inject}"


def observe(run) -> tuple[str, str]:
    from tfpar_lint.verify.probes import first_family_error

    err = first_family_error(run, ERRORS)
    if err:
        return CONFIRMED, f"TensorFlow raised {run.error_text(err)}"
    if not any((w or {}).get("probes", {}).get("execution") is not None for w in run.workers):
        return INCONCLUSIVE, "no observations (the run ended before the probe reported)"
    sites = _sites(run)
    eager = {ln: c for ln, c in sites.items() if c["eager"] >= 3}  # a Python loop of eager steps
    if eager:
        ln, c = next(iter(eager.items()))
        return CONFIRMED, f"strategy.run called eagerly at line {ln} ({c['eager']} calls)"
    traced = sum(c["traced"] for c in sites.values())
    return NOT_REPRODUCED, (f"{len(sites)} strategy.run site(s), {traced} traced call(s), none eager; no tape or "
                            f"optimizer misuse error")


def locate(run) -> list:
    from tfpar_lint.verify.probes import Seen, located_errors

    out = located_errors(run, ERRORS)
    for ln, c in _sites(run).items():
        if c["eager"] >= 3 and ln.isdigit():
            out.append(Seen("TFP701", int(ln), f"strategy.run at line {ln} ran eagerly {c['eager']} times from a "
                                               f"Python loop (no tf.function)"))
    return out
