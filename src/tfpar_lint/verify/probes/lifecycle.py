"""TFP6xx: multi-worker lifecycle (a real local cluster of 2 workers).

Child side records every save the script makes (``tf.train.Checkpoint.save``
/ ``write``, ``CheckpointManager.save``, Keras ``Model.save`` of Keras 3 and
tf_keras, ): the path (relative to the worker's own
working directory when inside it), the script lines, the error if any; and,
at the end, ``TF_CONFIG``'s worker count.

The parent compares the workers: a save at the line made by one worker only
while the run then failed or hung (TFP603), the same path written by both
workers (TFP604), a strategy with fewer replicas than TF_CONFIG lists workers
(TFP602); TFP601 and TFP606 are TensorFlow's own errors at the line.

TFP602 cannot normally be shown here: the verifier gives every worker its
TF_CONFIG before the script starts, so a TF_CONFIG the script writes after
creating the strategy finds the cluster already configured (and a script
that writes it only when given --worker_hosts never writes it).
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED

CODES = "TFP6xx"

ERRORS = {
    "TFP601": [r"Collective ops must be configured at program startup"],
    "TFP606": [r"Attempt to convert a value \(PerReplica", r"unsupported type \(<class '[\w.]*PerReplica'>\)"],
}
_PEER_FAILED = [r"UnavailableError", r"Collective ops is aborted", r"DeadlineExceeded", r"tasks are unhealthy"]


# =================================================================== child
def install(R) -> None:
    import tensorflow as tf
    from tensorflow.python.checkpoint import checkpoint as ckpt
    from tensorflow.python.checkpoint import checkpoint_management as cm

    from tfpar_lint.verify.runtime import patch, when_imported

    saves: list[dict[str, Any]] = []
    R.lifecycle = saves
    cwd = os.path.realpath(os.getcwd())

    def norm(p) -> str:
        try:
            p = os.fspath(p)
            if isinstance(p, bytes):
                p = p.decode()
            if "://" in p:
                return p
            rp = os.path.realpath(os.path.abspath(p))
            if rp == cwd or rp.startswith(cwd + os.sep):
                return "./" + os.path.relpath(rp, cwd)
            return rp
        except Exception:
            return repr(p)[:200]

    def make(api, path_of):
        def wrap(orig):
            def save(self, *a, **k):
                line = R.direct_caller_line(2)
                if line is None or len(saves) >= 100:
                    return orig(self, *a, **k)
                try:
                    path = norm(path_of(self, a, k))
                except Exception:
                    path = "?"
                rec = {"api": api, "path": path, "lines": R.script_lines(2)[:4], "error": ""}
                with R.lock:
                    saves.append(rec)
                try:
                    return orig(self, *a, **k)
                except Exception as e:
                    rec["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
                    raise

            return save

        return wrap

    def arg0(name):
        return lambda self, a, k: a[0] if a else k.get(name)

    patch(ckpt.Checkpoint, "save", make("Checkpoint.save", arg0("file_prefix")), tag="lifecycle")
    patch(ckpt.Checkpoint, "write", make("Checkpoint.write", arg0("file_prefix")), tag="lifecycle")
    patch(cm.CheckpointManager, "save", make("CheckpointManager.save", lambda self, a, k: self.directory),
          tag="lifecycle")

    when_imported("keras.src.models.model", lambda m: patch(
        m.Model, "save", make("keras Model.save", arg0("filepath")), tag="lifecycle"))
    when_imported("tf_keras.src.engine.training", lambda m: patch(
        m.Model, "save", make("tf_keras Model.save", arg0("filepath")), tag="lifecycle"))
    del tf


def collect(R) -> dict[str, Any]:
    saves = getattr(R, "lifecycle", None)
    if saves is None:
        return {}
    try:
        tfc = json.loads(os.environ.get("TF_CONFIG") or "{}")
        workers = len((tfc.get("cluster") or {}).get("worker", []) or []) + len(
            (tfc.get("cluster") or {}).get("chief", []) or [])
    except ValueError:
        workers = -1
    return {"saves": saves, "tf_config_workers": workers, "worker": R.worker_index}


# ================================================================== parent
def _saves_at(run, line) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for i, w in enumerate(run.workers):
        o = ((w or {}).get("probes") or {}).get("lifecycle") or {}
        for s in o.get("saves", []):
            if line in s["lines"]:
                out.setdefault(i, []).append(s)
    return out


def judge(finding, run) -> Optional[tuple[str, str]]:
    from tfpar_lint.verify.probes import error_at_line

    code, line = finding.code, finding.line
    n = len(run.workers)
    if code in ERRORS:
        v = error_at_line(run, line, ERRORS[code])
        if v:
            return v
        if run.ran(line) and run.outcome in ("ok", "stopped"):
            return NOT_REPRODUCED, f"line {line} ran on {n} worker(s) ({run.ctx()}) without {ERRORS[code][0]!r}"
        return None
    if code == "TFP602":
        return _judge_602(run, line)
    if code == "TFP608":
        return _judge_608(run, line)
    if code == "TFP607":
        return INCONCLUSIVE, ("a misidentified chief shows on a cluster with a `chief` task (two chiefs) or in "
                              "which branch each worker takes (no chief); the verifier runs workers only and "
                              "marks the flagged statement, not its branches")
    saves = _saves_at(run, line)
    if code == "TFP603":
        if not saves:
            return None
        who = sorted(saves)
        if len(who) < n:
            from tfpar_lint.verify.probes import error_elsewhere

            peer = error_elsewhere(run, _PEER_FAILED)
            after = (f"; then {run.error_text(peer)} on worker {peer['worker']}" if peer else
                     f"; the run then hung ({run.hang})" if run.outcome == "hung" else "")
            if peer or run.outcome == "hung":
                return CONFIRMED, (f"{saves[who[0]][0]['api']} at line {line} ran on worker {who[0]} only, of {n} "
                                   f"workers: its collective reads had no peer{after}")
            return NOT_REPRODUCED, (f"{saves[who[0]][0]['api']} at line {line} ran on worker {who[0]} only, but "
                                    f"the run finished without a failed or blocked collective")
        return NOT_REPRODUCED, f"line {line} saved on all {n} workers"
    if code == "TFP604":
        if not saves:
            return None
        paths: dict[str, list[int]] = {}
        for w, ss in saves.items():
            for s in ss:
                paths.setdefault(s["path"], [])
                if w not in paths[s["path"]]:
                    paths[s["path"]].append(w)
        shared = [(p, ws) for p, ws in paths.items() if len(ws) >= 2]
        if shared:
            p, ws = shared[0]
            errs = [s["error"] for ss in saves.values() for s in ss if s["error"]]
            tail = f"; a save failed: {errs[0]}" if errs else (
                f"; the run then failed: {run.error_text()}" if run.error else "")
            api = saves[ws[0]][0]["api"]
            return CONFIRMED, (f"{api} at line {line}: workers {', '.join(map(str, ws))} all wrote {p}{tail}")
        if len(saves) >= 2:
            return NOT_REPRODUCED, f"line {line}: each worker wrote its own path ({', '.join(sorted(paths))[:200]})"
        return INCONCLUSIVE, f"line {line} saved on worker {sorted(saves)[0]} only in this run"
    return INCONCLUSIVE, f"the lifecycle probe has no observation for {code}"


def _ran_on(run, line) -> Optional[list[int]]:
    """The workers on which the statement of ``line`` started (None: it carried no marker)."""
    out, known = [], False
    for i, w in enumerate(run.workers):
        marks = {int(k): v for k, v in ((w or {}).get("marks") or {}).items()}
        mid = marks.get(line)
        if mid is None:
            continue
        known = True
        if {int(k): v for k, v in ((w or {}).get("ran") or {}).items()}.get(mid):
            out.append(i)
    return out if known else None


def _judge_608(run, line):
    """TFP608: the chief-only exit or collective at the line ran on some workers only, and a peer's
    collective then failed or the run hung."""
    from tfpar_lint.verify.probes import error_elsewhere

    who = _ran_on(run, line)
    n = len(run.workers)
    if not who:
        return None
    if len(who) == n:
        return NOT_REPRODUCED, f"line {line} ran on all {n} workers"
    peer = error_elsewhere(run, _PEER_FAILED)
    if peer or run.outcome == "hung":
        after = (f"{run.error_text(peer)} on worker {peer['worker']}" if peer else f"the run hung ({run.hang})")
        return CONFIRMED, (f"line {line} ran on worker {', '.join(map(str, who))} only, of {n} workers; then "
                           f"{after}: the other workers' collective had no peer")
    return NOT_REPRODUCED, f"line {line} ran on worker {', '.join(map(str, who))} only, but no collective failed or hung"


def _judge_602(run, line):
    tfc = [((w or {}).get("probes") or {}).get("lifecycle", {}).get("tf_config_workers") for w in run.workers]
    sts = run.strategies()
    mw = [s for s in sts if s.get("type") in ("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy")]
    listed = max([t for t in tfc if isinstance(t, int)] or [0])
    if mw and listed >= 2 and any(s.get("replicas", 0) < listed for s in mw):
        s = min(mw, key=lambda s: s.get("replicas", 0))
        return CONFIRMED, (f"{s['type']} has num_replicas_in_sync {s['replicas']} while TF_CONFIG lists {listed} "
                           f"workers: TF_CONFIG was written after the strategy was created (line {line})")
    why = ("the verifier sets TF_CONFIG for its local cluster before the script starts, so the strategy saw the "
           "cluster whatever the script writes later")
    if run.ran(line):
        return NOT_REPRODUCED, (f"line {line} ran; every strategy had {max((s.get('replicas', 0) for s in mw), default=0)}"
                                f" replicas for {listed} workers in TF_CONFIG ({why})")
    return INCONCLUSIVE, f"the script wrote no TF_CONFIG at line {line} (it does only when asked to); {why}"


def observe(run) -> tuple[str, str]:
    from tfpar_lint.verify.probes import first_family_error

    err = first_family_error(run, ERRORS)
    if err:
        return CONFIRMED, f"TensorFlow raised {run.error_text(err)}"
    obs = [((w or {}).get("probes") or {}).get("lifecycle") for w in run.workers]
    if not any(o is not None for o in obs):
        return INCONCLUSIVE, "no observations (the run ended before the probe reported)"
    n = len(run.workers)
    paths: dict[str, set] = {}
    for i, o in enumerate(obs):
        for s in (o or {}).get("saves", []):
            paths.setdefault(s["path"], set()).add(i)
    if n >= 2:
        shared = [p for p, ws in paths.items() if len(ws) >= 2]
        if shared:
            return CONFIRMED, f"{len(shared)} path(s) written by several workers, e.g. {shared[0]}"
    nsaves = sum(len((o or {}).get("saves", [])) for o in obs)
    return NOT_REPRODUCED, (f"{n} worker(s); {nsaves} save(s), no path written by two workers; no collective "
                            f"start-up or Keras 3 PerReplica error")


def locate(run) -> list:
    from tfpar_lint.verify.probes import Seen, located_errors

    out = located_errors(run, ERRORS)
    obs = [((w or {}).get("probes") or {}).get("lifecycle") for w in run.workers]
    if len(run.workers) >= 2:
        by_path: dict[str, list] = {}
        for i, o in enumerate(obs):
            for s in (o or {}).get("saves", []):
                by_path.setdefault(s["path"], []).append((i, s))
        for path, ws in by_path.items():
            if len({i for i, _ in ws}) >= 2 and ws[0][1].get("lines"):
                s = ws[0][1]
                out.append(Seen("TFP604", int(s["lines"][0]), f"{s['api']} at line {s['lines'][0]} wrote {path} on "
                                                              f"{len({i for i, _ in ws})} workers (the same path)"))
                break
    return out
