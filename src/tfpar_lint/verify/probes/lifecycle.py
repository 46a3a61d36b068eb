"""TFP6xx: multi-worker lifecycle (a real local cluster of 2 workers).

Child side records every save the script makes (``tf.train.Checkpoint.save``
/ ``write``, ``CheckpointManager.save``, Keras ``Model.save`` of Keras 3 and
tf_keras, ): the path (relative to the worker's own
working directory when inside it), the script lines, the error if any; and,
at the end, ``TF_CONFIG``'s worker count and the sum of this worker's copy of
every trainable variable.

The parent compares the workers: a save at the line made by one worker only
while the run then failed or hung (TFP603), the same path written by both
workers (TFP604, TFP610), a strategy with fewer replicas than TF_CONFIG lists workers
(TFP602), the workers' own copies of the trainable variables differing at the
end (TFP609: a callback that changed training on some workers only); TFP601 and
TFP606 are TensorFlow's own errors at the line.

TFP602: a script that writes ``TF_CONFIG`` itself runs without the verifier's (the
driver sees the write in its text); a strategy created before the script's write counts one
worker against the cluster the script's TF_CONFIG lists.  A TF_CONFIG the script writes before
creating the strategy is replaced by the verifier's local cluster when the strategy is made.
"""
from __future__ import annotations

import json
import os
from typing import Any

from tfpar_lint.finding import INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify.probes import Seen, error_matches, errors_seen

CODES = "TFP6xx"

ERRORS = {
    "TFP601": [r"Collective ops must be configured at program startup"],
    "TFP606": [r"Attempt to convert a value \(PerReplica", r"unsupported type \(<class '[\w.]*PerReplica'>\)"],
}
_MWMS = ("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy", "_CollectiveAllReduceStrategyExperimental")
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
    mwms = []
    for s, created in zip([s for s in R.strategies if s["type"] in _MWMS], R.tf_config_at_creation):
        n = getattr(getattr(s.get("_ref"), "extended", None), "_num_workers", None)
        mwms.append(dict(created, workers=int(n) if isinstance(n, int) else None, replicas=s.get("replicas", 0)))
    return {"saves": saves, "tf_config_workers": workers, "worker": R.worker_index, "mwms": mwms,
            "own_tf_config": bool(getattr(R, "own_tf_config", False)), "final": _final_values(R)}


def _final_values(R) -> list:
    """[name, sum] of every trainable variable at the end (this worker's own copy: no collective)."""
    S = getattr(R, "scope", None)
    out: list = []
    for rec, v in zip(getattr(S, "variables", ()), getattr(S, "var_refs", ())):
        if len(out) >= 50 or not getattr(v, "trainable", False):
            continue
        try:
            comps = getattr(v, "values", None)
            c = comps[0] if isinstance(comps, tuple) and comps else v
            out.append([str(rec.get("name", "")), float(c.numpy().sum())])
        except Exception:  # a variable the run left unreadable
            continue
    return out


# ================================================================== parent
def _saves(run) -> dict[int, dict[int, list[dict]]]:
    """save line (innermost script line) -> worker -> the saves made there."""
    out: dict[int, dict[int, list[dict]]] = {}
    for i, w in enumerate(run.workers):
        o = ((w or {}).get("probes") or {}).get("lifecycle") or {}
        for s in o.get("saves", []):
            if s.get("lines"):
                out.setdefault(int(s["lines"][0]), {}).setdefault(i, []).append(s)
    return out


def _seen_saves(run) -> list[Seen]:
    n = len(run.workers)
    out = []
    peer = next((e for e in run.all_errors() if error_matches(e, _PEER_FAILED)), None)
    for line, saves in _saves(run).items():
        lines = tuple(sorted({x for ss in saves.values() for s in ss for x in s["lines"]}))
        api = next(iter(saves.values()))[0]["api"]
        who = sorted(saves)
        # TFP603: a save made by one worker only, whose collective reads then had no peer
        if len(who) < n:
            after = (f"; then {run.error_text(peer)} on worker {peer['worker']}" if peer else
                     f"; the run then hung ({run.hang})" if run.outcome == "hung" else "")
            out.append(Seen("TFP603", line, f"{api} at line {line} ran on worker {who[0]} only, of {n} workers: its "
                            f"collective reads had no peer{after}", lines, runtime=False) if peer or run.outcome == "hung"
                       else Seen("TFP603", line, f"{api} at line {line} ran on worker {who[0]} only, but the run finished "
                                 f"without a failed or blocked collective", lines, NOT_REPRODUCED))
        else:
            out.append(Seen("TFP603", line, f"line {line} saved on all {n} workers", lines, NOT_REPRODUCED))
        # TFP604: the same path written by several workers
        paths: dict[str, list[int]] = {}
        for w, ss in saves.items():
            for s in ss:
                if w not in paths.setdefault(s["path"], []):
                    paths[s["path"]].append(w)
        shared = [(p, ws) for p, ws in paths.items() if len(ws) >= 2]
        if shared:
            p, ws = shared[0]
            errs = [s["error"] for ss in saves.values() for s in ss if s["error"]]
            tail = f"; a save failed: {errs[0]}" if errs else (
                f"; the run then failed: {run.error_text()}" if run.error else "")
            local = "://" not in p
            if local:  # the verifier's workers are processes of one machine: they share its disk
                tail += ("; the verifier's workers share this machine's disk, so a local path collides here; "
                         "on separate machines it would only if that path is shared storage")
            out.append(Seen("TFP604", line, f"{api} at line {line}: workers {', '.join(map(str, ws))} all wrote {p}{tail}",
                            lines, also=("TFP610",)))
        elif len(saves) >= 2:
            out.append(Seen("TFP604", line, f"line {line}: each worker wrote its own path "
                                            f"({', '.join(sorted(paths))[:200]})", lines, NOT_REPRODUCED, also=("TFP610",)))
        else:
            out.append(Seen("TFP604", line, f"line {line} saved on worker {who[0]} only in this run", lines,
                            INCONCLUSIVE, also=("TFP610",)))
    return out


def _seen_602(run) -> list[Seen]:
    """A script that writes its own TF_CONFIG runs without the verifier's (each worker process as
    ``python script.py`` would run it): a strategy created before that write counts one worker,
    while the TF_CONFIG the script then wrote lists the cluster."""
    los = [((w or {}).get("probes") or {}).get("lifecycle") or {} for w in run.workers]
    listed = max([o.get("tf_config_workers", 0) for o in los if isinstance(o.get("tf_config_workers"), int)] or [0])
    created = [m for o in los for m in o.get("mwms", [])]
    for m in created:
        if m.get("unset") and listed >= 2 and (m.get("workers") or 1) < listed:
            at = f" at line {m['lines'][0]}" if m.get("lines") else ""
            return [Seen("TFP602", int(m["lines"][0]) if m.get("lines") else 0, (
                f"MultiWorkerMirroredStrategy created{at} before the script wrote TF_CONFIG counted "
                f"{m.get('workers') or 1} worker ({m.get('replicas')} replica(s) in sync), while the TF_CONFIG the "
                f"script then wrote lists {listed} workers: each worker trains alone"), anywhere=True, runtime=False)]
    if not any(o.get("own_tf_config") for o in los):
        why = ("the run used the verifier's TF_CONFIG, set before the script started, so it cannot show when the "
               "script's own TF_CONFIG is written")
        status = INCONCLUSIVE
    elif not listed:
        why, status = "the script wrote no TF_CONFIG in this run", INCONCLUSIVE
    elif created and not any(m.get("unset") for m in created):
        why = (f"the script's TF_CONFIG ({listed} workers) was set before the strategy was created: the strategy "
               f"joined the cluster")
        status = NOT_REPRODUCED
    else:
        why, status = "no MultiWorkerMirroredStrategy was created before the script's TF_CONFIG was written", INCONCLUSIVE
    return [Seen("TFP602", 0, why, status=status, anywhere=True)]


def _seen_608(run) -> list[Seen]:
    """TFP608: a chief-only exit or collective that ran on some workers only, after which a peer's
    collective failed or the run hung (judged at every marked line; never a mistake of its own)."""
    n = len(run.workers)
    if n < 2:
        return []
    peer = next((e for e in run.all_errors() if error_matches(e, _PEER_FAILED)), None)
    steps = [int((w or {}).get("steps") or 0) for w in run.workers]
    left = [(i, (w or {}).get("peer_left")) for i, w in enumerate(run.workers) if (w or {}).get("peer_left")]
    out = []
    for line, who in run.ran_on().items():
        if not who:
            continue
        if len(who) == n:
            out.append(Seen("TFP608", line, f"line {line} ran on all {n} workers", status=NOT_REPRODUCED))
        elif peer or run.outcome == "hung":
            after = (f"{run.error_text(peer)} on worker {peer['worker']}" if peer else f"the run hung ({run.hang})")
            out.append(Seen("TFP608", line, (f"line {line} ran on worker {', '.join(map(str, who))} only, of {n} "
                                             f"workers; then {after}: the other workers' collective had no peer"),
                            runtime=False))
        elif left:
            w, at = left[0]
            out.append(Seen("TFP608", line, (f"line {line} ran on worker {', '.join(map(str, who))} only, of {n} "
                                             f"workers; worker {w} then wanted another training step ({at}) while "
                                             f"its peer had left the loop: that step's collectives had no peer (the "
                                             f"verifier stopped it there; a real cluster blocks)"), runtime=False))
        elif len(set(steps)) > 1:
            # the workers stopped after different numbers of collective steps: the extra steps of
            # some had no peer (on a real cluster they block; here the step bound ended them)
            out.append(Seen("TFP608", line, (f"line {line} ran on worker {', '.join(map(str, who))} only, of {n} "
                                             f"workers; then the workers ran different numbers of training steps "
                                             f"({', '.join(f'worker {i}: {k}' for i, k in enumerate(steps))}): the "
                                             f"extra steps' collectives had no peer"), runtime=False))
        else:
            out.append(Seen("TFP608", line, (f"line {line} ran on worker {', '.join(map(str, who))} only, but no "
                                             f"collective failed or hung"), status=NOT_REPRODUCED))
    return out


# TFP607 (a misidentified chief) shows on a cluster with a `chief` task or in which branch each
# worker takes; the verifier runs workers only and marks the flagged statement, not its branches.
_SEEN_607 = Seen("TFP607", 0, "a misidentified chief shows on a cluster with a `chief` task (two chiefs) or in which "
                              "branch each worker takes (no chief); the verifier runs workers only and marks the "
                              "flagged statement, not its branches", status=INCONCLUSIVE, anywhere=True)


def _diverged(run) -> list[str]:
    """The trainable variables whose copies differ between the workers at the end (mirrored
    variables stay equal while every worker applies the same update)."""
    finals = [dict((n, v) for n, v in (((w or {}).get("probes") or {}).get("lifecycle") or {}).get("final") or [])
              for w in run.workers]
    finals = [f for f in finals if f]
    if len(finals) < 2:
        return []
    out = []
    for name, v in finals[0].items():
        others = [f[name] for f in finals[1:] if name in f]
        if any(abs(o - v) > 1e-5 * max(1.0, abs(v), abs(o)) for o in others):
            out.append(f"{name.split(':')[0]} {' vs '.join(f'{f[name]:.6g}' for f in finals if name in f)}")
    return out


def _seen_609(run) -> list[Seen]:
    """TFP609: a callback that changes training, given to some workers only: at the end the workers'
    copies of the model differ (a learning rate of their own), or a peer's collective failed (one
    worker stopped early).  Judged at every marked line that ran."""
    n = len(run.workers)
    if n < 2:
        return []
    diverged = _diverged(run)
    peer = next((e for e in run.all_errors() if error_matches(e, _PEER_FAILED)), None)
    out = []
    for line, who in run.ran_on().items():
        if not who:
            continue
        where = f"line {line} ran on worker {', '.join(map(str, who))} only, of {n} workers" if len(who) < n \
            else f"line {line} ran on all {n} workers"
        if diverged:
            out.append(Seen("TFP609", line, (f"{where}; at the end the workers' copies of the mirrored variables "
                                             f"differ (sums by worker: {'; '.join(diverged[:3])}): the workers applied "
                                             f"the same gradients with different training settings"), runtime=False))
        elif peer or run.outcome == "hung":
            after = f"{run.error_text(peer)} on worker {peer['worker']}" if peer else f"the run hung ({run.hang})"
            out.append(Seen("TFP609", line, f"{where}; then {after}: one worker left training while the others went "
                                            f"on", runtime=False))
        else:
            out.append(Seen("TFP609", line, f"{where}; the workers' variables agree at the end and no collective "
                                            f"failed", status=NOT_REPRODUCED))
    return out


def seen(run) -> list[Seen]:
    return errors_seen(run, ERRORS) + _seen_saves(run) + _seen_602(run) + _seen_608(run) + _seen_609(run) + [_SEEN_607]
