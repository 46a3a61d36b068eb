"""TensorFlow's errors that are the symptom of a distribution mistake: the one table, error text -> rules.

Each :class:`Symptom` is a regular expression searched in an error's ``Type: message`` followed by
the functions it passed through (:func:`tfpar_lint.verify.probes.error_matches`), the rules whose
mistake raises it (the usual one first), the text the rule pages quote (``tests/test_verify_symptoms.py``
checks that the "How --verify confirms it" section of every page named here quotes it), and when the
text alone shows the mistake.

Two uses, both in the parent process (no TensorFlow import here):

* the probes judge a static finding by the texts of its rule (``scope``, ``input``, ``loss``,
  ``lifecycle`` and ``execution`` take their patterns from here: :func:`pattern`, :func:`errors`);
* :func:`crash_seen`: a script that crashed with one of these errors, where no probe tied the error to
  a finding already, gets a finding of the symptom's rule at the place the error was raised (RUNTIME,
  or CONFIRMED for a static finding of that rule on a line of the traceback) instead of COULD_NOT_RUN.
  A crash that matches no symptom stays COULD_NOT_RUN.

``alone`` is False for texts that ordinary bugs raise too (a shape error, a peer that went away):
they are a rule's symptom only under the conditions in ``when`` (see :data:`CONDITIONS`), and a
symptom that is not ``alone`` and has no condition only judges a static finding of its rule.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from tfpar_lint.verify.seen import error_matches


@dataclass(frozen=True)
class Symptom:
    key: str
    pattern: str  # regular expression (re.S), searched in "Type: message\n<functions it passed through>"
    codes: tuple[str, ...]  # the rules it is the symptom of, the usual one first
    quote: str  # what the rule pages quote of it
    alone: bool = True  # the text alone (and ``when``) shows the mistake: a crash with it is a finding
    when: tuple[str, ...] = ()  # conditions on the run (CONDITIONS) for a crash to be a finding


SYMPTOMS: tuple[Symptom, ...] = (
    # ---- TFP1xx: strategy scope
    Symptom("colocate", r"colocate_vars_with` must only be passed a variable created in this tf\.distribute\.Strategy"
                        r"\.scope", ("TFP101", "TFP102", "TFP103", "TFP105"),
            "`colocate_vars_with` must only be passed a variable created in this tf.distribute.Strategy.scope()"),
    Symptom("not-in-scope", r"was not created in the distribution strategy scope",
            ("TFP101", "TFP102", "TFP103", "TFP105", "TFP104"), "was not created in the distribution strategy scope"),
    # Keras 3, a model outside the scope with plain SGD: a bare AssertionError from the update step
    Symptom("update-assert", r"^AssertionError\b.*(_distributed_tf_update_step|_update_step_xla|extended\.update|"
                             r"update_step)", ("TFP101", "TFP105"), "AssertionError", when=("replicas",)),
    Symptom("mixing", r"Mixing different tf\.distribute\.Strategy objects", ("TFP109", "TFP101", "TFP102", "TFP110"),
            "Mixing different tf.distribute.Strategy objects"),
    # a legacy tf_keras optimizer makes its slots under the strategy it was created with: made outside
    # the scope, restoring or stepping it outside the scope creates them under the default strategy
    Symptom("slot", r"Trying to create optimizer slot variable under the scope for tf\.distribute\.Strategy",
            ("TFP102", "TFP106", "TFP104"),
            "Trying to create optimizer slot variable under the scope for tf.distribute.Strategy"),
    Symptom("metric", r"passed to `?model\.compile`? was created inside (of )?a different distribution strategy scope",
            ("TFP103",), "was created inside a different distribution strategy scope than the model"),
    Symptom("need-scope", r"Need to be inside \"with strategy\.scope\(\)\"", ("TFP106", "TFP111"),
            'Need to be inside "with strategy.scope()"'),
    Symptom("handle-outside-replica", r"DistributedVariable\.handle is not available outside the replica context",
            ("TFP111",), "DistributedVariable.handle is not available outside the replica context"),
    Symptom("sync-on-read-cross-replica", r"SyncOnReadVariable does not support `assign_add` in cross-replica context",
            ("TFP111",), "SyncOnReadVariable does not support `assign_add` in cross-replica context"),
    Symptom("cross-replica-call", r"cannot be called in cross-replica context", ("TFP111",),
            "cannot be called in cross-replica context"),
    # Keras 3 variables first created in a traced step of several replicas: an optimizer's slots
    # (built by its first apply_gradients), or the weights of a model made outside the scope
    Symptom("lazy-slots-placeholder", r"You must feed a value for placeholder tensor", ("TFP113", "TFP101"),
            "You must feed a value for placeholder tensor", when=("replicas", "not_session")),
    Symptom("shadow-variables", r"tuple indices must be integers or slices, not \w*Variable", ("TFP112",),
            "tuple indices must be integers or slices, not", when=("moving_averages",)),
    # ---- TFP2xx: input
    Symptom("auto-shard", r"(?i:shardable source|auto_shard_policy|AutoShardPolicy|aren't enough elements in this "
                          r"dataset for each shard|FILE-based sharding|sharding.*fil)", ("TFP206",),
            "Found an unshardable source dataset"),
    # the global batch used as a per-replica size: one size of the message is the other times the replicas
    Symptom("global-batch-shape", r"Cannot reshape a tensor with|Dimensions must be equal|must be evenly divisible|"
                                  r"Dimension \d+ in both shapes must be equal|Incompatible shapes|ConcatOp : Dimension",
            ("TFP209",), "Dimensions must be equal", alone=False, when=("global_batch",)),
    # ---- TFP5xx: loss and reductions
    Symptom("keras2-loss-reduction", r"Please use `tf\.keras\.losses\.Reduction\.SUM` or `tf\.keras\.losses\.Reduction"
                                     r"\.NONE`|reduction.*(is not supported|should be).*(distribut|strategy)",
            ("TFP502",), "Please use `tf.keras.losses.Reduction.SUM` or `tf.keras.losses.Reduction.NONE`"),
    Symptom("per-replica-outside-replica-context", r"using a PerReplica object while not inside a replica context",
            ("TFP506", "TFP508"), "using a PerReplica object while not inside a replica context"),
    Symptom("per-replica-as-tensor", r"'PerReplica' object has no attribute 'numpy'|not 'PerReplica'|"
                                     r"passed to PerReplica\.__format__|for /: 'PerReplica'",
            ("TFP506", "TFP508"), "'PerReplica' object has no attribute 'numpy'"),
    # gradients computed outside strategy.run, applied by every replica: one tensor all-reduced by the
    # optimizer (measured, TF 2.21: Keras 3 inside a tf.function; tf_keras in its all-reduce)
    Symptom("gradients-outside-replicas", r"destinations can not be empty|IndexError: tuple index out of range"
                                          r".*_all_reduce_sum_fn", ("TFP513",), "destinations can not be empty"),
    # ---- TFP6xx: multi-worker
    Symptom("collectives-configured-late", r"Collective ops must be configured at program startup", ("TFP601",),
            "Collective ops must be configured at program startup"),
    Symptom("keras3-fit-per-replica", r"Attempt to convert a value \(PerReplica|unsupported type \(<class "
                                      r"'[\w.]*PerReplica'>\)", ("TFP606",), "Attempt to convert a value (PerReplica"),
    # several workers wrote one checkpoint path: their temporary shards collided and a merge failed
    Symptom("shared-save-path", r"allow_missing_files was set to false", ("TFP604", "TFP610"),
            "allow_missing_files was set to false", when=("cluster",)),
    # several workers wrote one HDF5 file (tf_keras model.save(".../model.h5")): h5py's lock refused one
    Symptom("shared-h5-file", r"unable to lock file", ("TFP610", "TFP604"), "unable to lock file",
            when=("cluster",)),
    # the workers made different collectives at the same point (one ran an extra reduce, save or evaluate)
    Symptom("collective-mismatch", r"Collective ops is aborted by:\s*(Shape mismatch in the collective instance|"
                                   r"Collective instance .{0,300}?expected type)", ("TFP608", "TFP603", "TFP609"),
            "Shape mismatch in the collective instance", when=("cluster",)),
    # a worker's collective had no peer because the peer had already run to its end
    # (one worker left the loop: a chief-only break, or a callback on some workers only, TFP609)
    Symptom("collective-peer-ended", r"Collective ops is aborted by", ("TFP608", "TFP603", "TFP609"),
            "Collective ops is aborted", alone=False, when=("cluster", "peer_ended")),
    # a peer failed or went away: the context the lifecycle probe needs for TFP603 / TFP608 (judges only)
    Symptom("peer-failed", r"UnavailableError|Collective ops is aborted|DeadlineExceeded|tasks are unhealthy",
            ("TFP603", "TFP608"), "UnavailableError", alone=False),
    # ---- TFP7xx: execution
    Symptom("tape-reused", r"A non-persistent GradientTape can only be used to compute one set of gradients",
            ("TFP702",), "A non-persistent GradientTape can only be used to compute one set of gradients"),
    Symptom("optimizer-unknown-variable", r"optimizer can only be called for the variables it was originally built "
                                          r"with|optimizer cannot recognize variable", ("TFP703",),
            "This optimizer can only be called for the variables it was originally built with"),
    Symptom("numpy-while-tracing", r"'(Symbolic)?Tensor' object has no attribute 'numpy'", ("TFP705",),
            "'SymbolicTensor' object has no attribute 'numpy'"),
)

BY_KEY: dict[str, Symptom] = {s.key: s for s in SYMPTOMS}


def pattern(key: str) -> str:
    return BY_KEY[key].pattern


def errors(*keys: str) -> dict[str, list[str]]:
    """A probe's ``ERRORS`` table: the first rule of each symptom -> its patterns."""
    out: dict[str, list[str]] = {}
    for k in keys:
        s = BY_KEY[k]
        out.setdefault(s.codes[0], []).append(s.pattern)
    return out


def quote_for(pat: str) -> str:
    """What the rule pages quote of the symptom with this pattern (the pattern itself when none has it)."""
    return next((s.quote for s in SYMPTOMS if s.pattern == pat), pat)


def patterns_of(code: str, keys: Optional[tuple[str, ...]] = None) -> list[str]:
    """The patterns of every symptom (of ``keys``, or all) whose rules include ``code``."""
    return [s.pattern for s in SYMPTOMS if code in s.codes and (keys is None or s.key in keys)]


# ------------------------------------------------------------ conditions on the run
def _replicas(run, err) -> bool:
    return max([int(s.get("replicas") or 0) for s in run.strategies()] + [int(run.replicas or 0)]) >= 2


def _cluster(run, err) -> bool:
    return len(run.workers) >= 2


def _not_session(run, err) -> bool:
    """Not a TF1 ``Session.run`` missing its feed (the same text, another mistake)."""
    return not any(os.path.basename(str(f[0])) == "session.py" for f in err.get("frames") or ())


def _moving_averages(run, err) -> bool:
    return any(os.path.basename(str(f[0])) == "moving_averages.py" for f in err.get("frames") or ())


def _peer_ended(run, err) -> bool:
    """Another worker ran to its end (not stopped by the verifier's step bound, not failed) while this
    one was still in a collective: they did not make the same collectives."""
    me = err.get("worker")
    return any(i != me and (w or {}).get("outcome") == "ok" for i, w in enumerate(run.workers))


def _global_batch(run, err) -> bool:
    """Two sizes of the message are N and N x the number of replicas (``but are 4 and 8`` on 2 replicas;
    ``12 elements to shape [8,3,1] (24 elements)``)."""
    n = max([int(s.get("replicas") or 0) for s in run.strategies()] + [int(run.replicas or 0)])
    if n < 2:
        return False
    said = quote(err, BY_KEY["global-batch-shape"])  # the error's own line (AutoGraph puts frames before it)
    nums = {int(x) for x in re.findall(r"(?<![\w.])(\d{1,9})(?![\w.])", said)}
    return any(a > 0 and a * n in nums for a in nums)


CONDITIONS: dict[str, Callable[[Any, dict], bool]] = {
    "replicas": _replicas,  # a strategy of two or more replicas in sync was made
    "cluster": _cluster,  # the run was a local cluster of several workers
    "not_session": _not_session,
    "moving_averages": _moving_averages,  # the error passed through tf.train.ExponentialMovingAverage
    "peer_ended": _peer_ended,
    "global_batch": _global_batch,
}


def holds(s: Symptom, run, err: dict) -> bool:
    return all(CONDITIONS[c](run, err) for c in s.when)


def match(err: Optional[dict], run=None, *, crash: bool = False) -> Optional[Symptom]:
    """The first symptom whose text the error has (and, with ``crash``, whose conditions hold on
    ``run`` and which shows the mistake without a static finding: ``alone`` or conditioned)."""
    if not err:
        return None
    for s in SYMPTOMS:
        if crash and not (s.alone or s.when):
            continue
        if error_matches(err, [s.pattern]) and (run is None or holds(s, run, err)):
            return s
    return None


def quote(err: dict, s: Symptom) -> str:
    """The message's line that has the symptom (TensorFlow's graph errors put it after the frames)."""
    msg = str(err.get("message", ""))
    m = re.search(s.pattern, msg, re.S)
    if not m:
        return ""
    start = msg.rfind("\n", 0, m.start()) + 1
    end = msg.find("\n", m.end())
    line = msg[start:end if end >= 0 else len(msg)]
    line = re.sub(r"^\s*(\(\d+\)\s+)?[A-Z_]+:\s+", "", line)  # "(0) INVALID_ARGUMENT:  "
    line = re.sub(r"^\s*\{\{function_node [^}]*\}\}\s*", "", line)  # the op's name
    line = " ".join(line.split()).rstrip(":")
    return line[:300] + ("..." if len(line) > 300 else "")


def crash_seen(run, seen: list, findings: list) -> list:
    """The crash (every worker's uncaught error) as the symptom of a rule, one
    :class:`~tfpar_lint.verify.probes.Seen` per rule, where nothing covers it yet: no static finding of
    one of the symptom's rules is CONFIRMED and no probe located a mistake of one of them.  The code
    is the one a probe tied to this run (a save on one worker only: TFP603; an optimizer not built in
    the scope: TFP113), else the symptom's first; the place is where the probe saw it, else the
    script line where the error was raised."""
    from tfpar_lint import registry
    from tfpar_lint.finding import CONFIRMED
    from tfpar_lint.verify.seen import Seen, error_line

    rules = registry.rules_by_code()
    out: list = []
    for err in run.all_errors():
        if err.get("caught"):
            continue
        s = match(err, run, crash=True)
        if s is None:
            continue
        codes = [c for c in s.codes if c in rules]
        if any(f.code in codes and f.verification is not None and f.verification.status == CONFIRMED
               for f in findings):
            continue
        at = error_line(err) or 0
        if any(x.status == CONFIRMED and x.runtime and x.line and (x.code in codes or at in (x.line, *x.lines))
               for x in seen + out):
            continue  # a probe located this mistake already (a finding of its own, or its static finding)
        tied = [x for c in codes for x in seen if x.code == c and x.status == CONFIRMED and x.line]
        code = tied[0].code if tied else codes[0] if codes else ""
        if not code or not (at or tied):
            continue
        rule = rules[code]
        who = f" on worker {err['worker']}" if len(run.workers) > 1 else ""
        where = f" at line {at}" if at else ""
        text = quote(err, s) or " ".join(str(err.get("message", "")).split())[:300]
        evidence = f"the script crashed{where}{who} with {err.get('type', 'Error')}: {text}"
        if tied:  # the probe's evidence quotes the error too
            evidence = f"the script crashed{where}{who}"
        evidence += f", the symptom of {code} ({rule.NAME})"
        if s.key == "collective-peer-ended":
            ended = [i for i, w in enumerate(run.workers) if i != err.get("worker") and (w or {}).get("outcome") == "ok"]
            steps = ", ".join(f"worker {i}: {int((w or {}).get('steps') or 0)}" for i, w in enumerate(run.workers))
            evidence += (f": worker {ended[0]} had run to its end, so this collective had no peer (training steps "
                         f"{steps})")
        if tied:
            evidence += f"; {tied[0].evidence}"
        lines = tuple(sorted(set(err.get("script_lines") or ()) | ({at} if at else set()) |
                             (set(tied[0].lines) if tied else set())))
        out.append(Seen(code, tied[0].line if tied else at, evidence, lines))
    return out
