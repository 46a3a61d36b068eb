"""TFP7xx: how the distributed step executes.

Child side: the core instrumentation already counts, per call site,
``strategy.run`` calls made eagerly vs while tracing a ``tf.function``
(``run_sites``) and records exceptions that left an outer ``tf.function``
call (``fn_errors``), whether or not the script caught them.

Parent side:

* TFP701: ``strategy.run`` at the line called eagerly (outside any
  ``tf.function``) several times, with a replica function that computed gradients (a training
  step; a replica function that only draws numbers or predicts is not one);
* TFP702, TFP703, TFP705: TensorFlow's / Keras' own error at the line;
* TFP704: scripts with this finding run with a simulated preemption (worker
  1 of the local cluster leaves after a few steps); confirmed when an
  exception raised in the ``try`` body whose handler is at the line was
  caught there and the script went on without re-raising it.
"""
from __future__ import annotations

import ast
from typing import Any

from tfpar_lint.finding import INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify import symptoms
from tfpar_lint.verify.probes import Seen, errors_seen

CODES = "TFP7xx"

ERRORS = symptoms.errors("tape-reused", "optimizer-unknown-variable", "numpy-while-tracing")


def install(R) -> None:  # everything needed is recorded by instrument.py
    R.execution = True


def collect(R) -> dict[str, Any]:
    return {"run_sites": dict(getattr(R, "run_sites", {})), "fn_errors": len(getattr(R, "fn_errors", []))}


# ================================================================== parent
def _sites(run) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for w in run.workers:
        for line, c in ((w or {}).get("run_sites") or {}).items():
            d = out.setdefault(line, {"eager": 0, "traced": 0, "keras": 0, "trains": 0})
            for k in d:
                d[k] = max(d[k], c.get(k, 0))
    return out


def _handlers(path: str) -> list[tuple[int, int, int, str]]:
    """(handler line, first and last line of its try body, what it catches) for every handler."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            last = max(getattr(n, "end_lineno", n.lineno) for n in node.body)
            for h in node.handlers:
                out.append((h.lineno, node.body[0].lineno, last, ast.unparse(h.type) if h.type is not None
                            else "everything"))
    return out


def _seen_704(run) -> list:
    """TFP704 (scripts with this finding run with worker 1 leaving after a few steps): an exception
    raised in a try body, caught by its handler, and the script went on."""
    preempted = [i for i, w in enumerate(run.workers) if (w or {}).get("preempted")]
    if not preempted:
        return []
    inject = f" (the verifier made worker {preempted[0]} leave after a few steps)"
    out = []
    for line, lo, hi, what in _handlers(run.path):
        verdict = None
        for i, w in enumerate(run.workers):
            if not w or w.get("preempted") or verdict:
                continue
            for e in list(w.get("fn_errors") or []) + list(w.get("caught") or []):
                lines = [ln for ln in e.get("script_lines", []) if lo <= ln <= hi]
                if not lines:
                    continue
                if (w.get("error") or {}).get("type") == e.get("type"):
                    verdict = Seen("TFP704", line, (f"worker {i}: {e.get('type')} raised at line {lines[-1]} in the "
                                                    f"try body was re-raised by the handler at line {line}{inject}"),
                                   status=NOT_REPRODUCED, runtime=False)
                else:
                    verdict = Seen("TFP704", line, (
                        f"worker {i}: {run.error_text(e)} raised at line {lines[-1]} inside the try (lines {lo}-{hi}) "
                        f"was caught by 'except {what}' at line {line} and the script went on (outcome "
                        f"{w.get('outcome')}){inject}"), runtime=False)
                break
        out.append(verdict or Seen("TFP704", line, (
            f"nothing raised in the try body (lines {lo}-{hi}) reached the handler at line {line}{inject}"),
            status=NOT_REPRODUCED if run.ran(line) is not False else INCONCLUSIVE, runtime=False))
    return out


def _eager_text(line: int, c: dict, run) -> str:
    return (f"strategy.run at line {line} ran a training step (its replica function computed gradients) eagerly "
            f"{c['eager']} times ({c['traced']} traced in a tf.function) on {run.ctx()}: every step dispatches each "
            f"replica's ops one by one from Python")


def seen(run) -> list:
    out = errors_seen(run, ERRORS)
    for ln, c in _sites(run).items():
        if not ln.isdigit():
            continue
        line = int(ln)
        if c["eager"] >= 2 and c["trains"]:
            out.append(Seen("TFP701", line, _eager_text(line, c, run), runtime=c["eager"] >= 3))
        elif c["eager"] >= 2:
            out.append(Seen("TFP701", line, f"strategy.run at line {line} ran eagerly {c['eager']} times, but its "
                                            f"replica function computed no gradients: not a training step",
                            status=NOT_REPRODUCED))
        elif c["eager"] == 1:
            out.append(Seen("TFP701", line, f"strategy.run at line {line} ran eagerly once only (one call is not a "
                                            f"slow loop)", status=INCONCLUSIVE))
        elif c["traced"]:
            out.append(Seen("TFP701", line, f"strategy.run at line {line} ran only inside tf.function "
                                            f"({c['traced']} trace(s))", status=NOT_REPRODUCED))
    return out + _seen_704(run)
