"""TFP4xx: randomness in replica functions.

Child side: the public random ops (``tf.random.*``, ``tf.random.stateless_*``,
``tf.nn.dropout``, ``keras.random.*``) are wrapped; a call made directly
from the script inside a replica function records, per call site, replica
and call number, a fingerprint of the values drawn (eagerly, or through a
``tf.numpy_function`` callback when traced).  ``tf.random.set_seed`` and
``keras.utils.set_random_seed`` calls are recorded with their context.

A finding is confirmed when the replicas drew identical values at the same
call (after ``set_seed`` inside the replica function for TFP401, at the
flagged call for TFP402/TFP403), or, for TFP403, when two runs with the same
global seed drew different values.  Draws inside library code (e.g. Keras
``Dropout``) are not counted.
"""
from __future__ import annotations

from typing import Any, Optional

from tfpar_lint.finding import INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify.probes import Seen

CODES = "TFP4xx"

_TF_RANDOM = ("uniform", "normal", "truncated_normal", "shuffle", "categorical", "gamma", "poisson",
              "stateless_uniform", "stateless_normal", "stateless_truncated_normal", "stateless_categorical",
              "stateless_binomial", "stateless_gamma", "stateless_poisson", "stateless_parameterized_truncated_normal")
_KERAS_RANDOM = ("uniform", "normal", "truncated_normal", "dropout", "shuffle", "categorical", "randint",
                 "gamma", "binomial", "beta")


_NP_RANDOM = ("normal", "uniform", "rand", "randn", "randint", "random", "random_sample", "choice", "permutation",
              "shuffle", "standard_normal", "binomial", "poisson", "beta", "gamma", "exponential", "integers")


class _State:
    def __init__(self):
        self.sites: dict[str, dict[str, Any]] = {}
        self.seeds: list[dict[str, Any]] = []
        self.numpy: dict[str, dict[str, Any]] = {}  # numpy draws in replica functions, per line


def install(R) -> None:
    import tensorflow as tf
    from tensorflow.python.eager import context
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_util

    from tfpar_lint.verify.runtime import fingerprint, patch, when_imported

    S = _State()
    R.randomness = S
    cap = max(R.max_steps, 3) * 4

    def record(key: str, rid: int, arr) -> None:
        with R.lock:
            site = S.sites[key]
            lst = site["replicas"].setdefault(str(rid), [])
            if len(lst) < cap:
                lst.append(fingerprint(arr))

    def observe_draw(api: str, out, seeded: bool) -> None:
        try:
            if not R.in_replica_fn():
                return
            line = R.direct_caller_line(3)
            if line is None:
                return
            key = f"{line}:{api}"
            eager = context.executing_eagerly()
            tensors = [t for t in tf.nest.flatten(out) if isinstance(t, tf.Tensor)]
            if not tensors:
                return
            t = tensors[0]
            n = t.shape.num_elements()
            low = not t.dtype.is_floating and (n is None or n < 16)  # e.g. a shuffle of 4 items
            with R.lock:
                S.sites.setdefault(key, {"line": line, "api": api, "seeded": seeded, "eager": eager,
                                         "replicas": {}, "after_seed": bool(_seed_in_replica(S)),
                                         "low_entropy": low})
            rid = tf.distribute.get_replica_context().replica_id_in_sync_group
            if eager:
                record(key, int(rid), t.numpy())
            elif not control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()):
                def cb(r, a):
                    record(key, int(r), a)
                    return []

                tf.numpy_function(cb, [tf.cast(rid, tf.int32), t], [], stateful=True, name="tfpar_rng_probe")
        except Exception as e:  # pragma: no cover - never break the script
            R.note(f"randomness probe skipped a draw: {type(e).__name__}")

    def make_rng(api: str, seed_pos: Optional[int]):
        def make(orig):
            def rng(*args, **kwargs):
                out = orig(*args, **kwargs)
                seeded = kwargs.get("seed") is not None or (seed_pos is not None and len(args) > seed_pos
                                                            and args[seed_pos] is not None)
                observe_draw(api, out, seeded)
                return out

            return rng

        return make

    import inspect

    def seed_position(fn) -> Optional[int]:
        try:
            params = list(inspect.signature(fn).parameters)
            return params.index("seed") if "seed" in params else None
        except (TypeError, ValueError):
            return None

    for name in _TF_RANDOM:
        fn = getattr(tf.random, name, None)
        if fn is not None:
            patch(tf.random, name, make_rng(f"tf.random.{name}", seed_position(fn)), tag="randomness")
    exp = getattr(tf.random, "experimental", None)
    if exp is not None:
        for name in _TF_RANDOM:
            if name.startswith("stateless") and getattr(exp, name, None) is not None:
                patch(exp, name, make_rng(f"tf.random.experimental.{name}", seed_position(getattr(exp, name))),
                      tag="randomness")
    patch(tf.nn, "dropout", make_rng("tf.nn.dropout", seed_position(tf.nn.dropout)), tag="randomness")
    # The implementations, for draws TensorFlow makes on the script's behalf
    # (tf.image.random_flip_left_right, random_brightness, ... call these); the
    # caller is still the script line that called the public function.
    from tensorflow.python.ops import random_ops, stateless_random_ops

    for mod, names, _prefix in (
        (random_ops, ("random_uniform", "random_normal", "truncated_normal", "random_shuffle",
                      "multinomial", "categorical", "random_gamma", "random_poisson_v2"), "tf.random"),
        (stateless_random_ops, ("stateless_random_uniform", "stateless_random_normal",
                                "stateless_truncated_normal", "stateless_random_binomial",
                                "stateless_random_gamma", "stateless_random_poisson"), "tf.random"),
    ):
        for name in names:
            fn = getattr(mod, name, None)
            if fn is not None:
                api = f"{mod.__name__.rsplit('.', 1)[-1]}.{name} (inside the TensorFlow op called there)"
                patch(mod, name, make_rng(api, seed_position(fn)), tag="randomness")

    def make_set_seed(api: str):
        def make(orig):
            def set_seed(*args, **kwargs):
                rec = {"api": api, "lines": R.script_lines(2), "replica": bool(_safe(R.in_replica_fn)),
                       "eager": context.executing_eagerly(),
                       "seed": repr(args[0] if args else kwargs.get("seed"))[:40]}
                with R.lock:
                    if len(S.seeds) < 200:
                        S.seeds.append(rec)
                return orig(*args, **kwargs)

            return set_seed

        return make

    patch(tf.random, "set_seed", make_set_seed("tf.random.set_seed"), tag="randomness")
    patch(tf.compat.v1, "set_random_seed", make_set_seed("tf.compat.v1.set_random_seed"), tag="randomness")

    def keras_random(mod):
        for name in _KERAS_RANDOM:
            f = getattr(mod, name, None)
            if f is not None:
                patch(mod, name, make_rng(f"keras.random.{name}", seed_position(f)), tag="randomness")

    when_imported("keras.random", keras_random)

    def keras_utils(mod):
        if getattr(mod, "set_random_seed", None) is not None:
            patch(mod, "set_random_seed", make_set_seed("keras.utils.set_random_seed"), tag="randomness")

    when_imported("keras.utils", keras_utils)
    when_imported("keras.src.utils.rng_utils", keras_utils)
    _install_numpy(R, S, context)


def _install_numpy(R, S, context) -> None:
    """``np.random.*`` called by the script inside a replica function: while a tf.function is traced
    the draw runs once, in Python, and its numbers become constants of the graph (the same at
    every step).  Records, per line, the draws made eagerly and while tracing, and the step
    function being traced (its calls are counted by the core instrumentation)."""
    import numpy as np

    from tfpar_lint.verify.runtime import patch

    def make(api):
        def wrap(orig):
            def draw(*a, **k):
                try:
                    if R.in_replica_fn():
                        line = R.direct_caller_line(2)
                        if line is not None:
                            traced = not context.executing_eagerly()
                            step = R.tracing_step
                            with R.lock:
                                rec = S.numpy.setdefault(str(line), {"line": line, "api": api, "eager": 0,
                                                                     "traced": 0, "fn": None, "fn_name": ""})
                                rec["traced" if traced else "eager"] += 1
                                if traced and step is not None:
                                    rec["fn"] = id(step)
                                    rec["fn_name"] = str(getattr(step, "_name", "") or "tf.function")
                except Exception:  # pragma: no cover - never break the script
                    pass
                return orig(*a, **k)

            return draw

        return wrap

    for name in _NP_RANDOM:
        if getattr(np.random, name, None) is not None:
            patch(np.random, name, make(f"np.random.{name}"), tag="randomness")


def _safe(fn, default=False):
    try:
        return fn()
    except Exception:
        return default


def _seed_in_replica(S) -> bool:
    return any(s["replica"] for s in S.seeds)


def collect(R) -> dict[str, Any]:
    S: _State = getattr(R, "randomness", None)
    if S is None:
        return {}
    numpy = []
    for rec in S.numpy.values():
        rec = dict(rec)
        fn = rec.pop("fn")
        rec["fn_calls"] = max((n for k, n in R.steps.items() if k == ("fn", fn)), default=0) if fn else 0
        numpy.append(rec)
    return {"sites": list(S.sites.values()), "seeds": S.seeds, "numpy": numpy}


# ================================================================== parent
def _compare(site) -> Optional[tuple[int, int, bool]]:
    """(identical draws, compared draws, repeats across steps) for one site."""
    reps = site.get("replicas", {})
    if len(reps) < 2:
        return None
    n = min(len(v) for v in reps.values())
    if n == 0:
        return None
    lists = list(reps.values())
    same = sum(1 for k in range(n) if all(lst[k] == lists[0][k] for lst in lists[1:]))
    repeats = any(len(set(lst)) < len(lst) for lst in lists)
    return same, n, repeats


def _sites(run, line: Optional[int] = None) -> list[dict]:
    out = []
    for o in run.probe("randomness"):
        for s in (o or {}).get("sites", []):
            if line is None or s["line"] == line:
                out.append(s)
    return out


def _rerun_diff(run, line: int) -> Optional[tuple[int, int]]:
    """(differing, compared) draws at ``line`` between the run and its re-run."""
    if run.rerun is None:
        return None
    a = {(s["api"], rid): v for s in _sites(run, line) for rid, v in s["replicas"].items()}
    b = {(s["api"], rid): v for s in _sites(run.rerun, line) for rid, v in s["replicas"].items()}
    diff = comp = 0
    for k in a.keys() & b.keys():
        for x, y in zip(a[k], b[k]):
            comp += 1
            diff += int(x != y)
    return (diff, comp) if comp else None


def _frozen(run) -> list[tuple[dict, str]]:
    """numpy draws made only while a step function was traced, which then ran more often than it was
    traced: the same numbers at every step."""
    out = []
    n = max(run.replicas, 1)
    for o in run.probe("randomness"):
        for rec in (o or {}).get("numpy", []):
            traces = -(-rec["traced"] // n)  # draws while tracing, per replica
            if rec["traced"] and not rec["eager"] and rec.get("fn_calls", 0) > traces:
                out.append((rec, (f"{rec['api']} at line {rec['line']} ran only while {rec['fn_name']} was traced "
                                  f"({rec['traced']} draw{'s' if rec['traced'] != 1 else ''}, one per replica and "
                                  f"trace), and {rec['fn_name']} then ran {rec['fn_calls']} times: the numbers are "
                                  f"constants of the traced graph, the same at every step")))
    return out


def _seen_seeds(run) -> list[Seen]:
    """TFP401, at each set_seed call: did the replicas then draw alike, or the same values every step?"""
    out = []
    by_line: dict[int, list[dict]] = {}
    for o in run.probe("randomness"):
        for x in (o or {}).get("seeds", []):
            if x.get("lines"):
                by_line.setdefault(int(x["lines"][0]), []).append(x)
    for line, seeds in by_line.items():
        lines = tuple(sorted({ln for x in seeds for ln in x["lines"]}))
        in_replica = any(x["replica"] for x in seeds)
        where = ("in the replica function" if in_replica else "outside any replica function") + (
            ", eagerly" if any(x["eager"] for x in seeds) else ", at trace time only (tf.function)")
        cands = ([s for s in _sites(run) if s.get("after_seed")] if in_replica else []) or _sites(run)
        verdict = None
        for s in cands:
            c = _compare(s)
            if not c:
                continue
            same, n, rep = c
            mode = "eagerly" if s["eager"] else "in a tf.function"
            if same > 0:
                verdict = Seen("TFP401", line, (
                    f"after {seeds[0]['api']} at line {line}{' inside the replica function' if in_replica else ''}, "
                    f"the replicas drew identical values from {s['api']} at line {s['line']} ({same} of {n} draws, "
                    f"{mode})" + ("; the same values repeat at every step" if rep else "")), lines + (s["line"],),
                    runtime=in_replica and bool(s.get("after_seed")) and not s.get("low_entropy"))
                break
            if rep and not s.get("low_entropy"):
                verdict = Seen("TFP401", line, (
                    f"{seeds[0]['api']} at line {line} re-seeds every step: each replica draws the same values from "
                    f"{s['api']} at line {s['line']} at every step"), lines, runtime=False)
                break
            verdict = verdict or Seen("TFP401", line, (
                f"{seeds[0]['api']} at line {line} ran {where}; the replicas drew different values at line "
                f"{s['line']} and no value repeated across steps ({n} draws compared)"), lines, NOT_REPRODUCED)
        out.append(verdict or Seen("TFP401", line, f"set_seed at line {line} ran {where}, but no random draw in a "
                                                   f"replica function was seen", lines, INCONCLUSIVE))
    return out


def _seen_draws(run) -> list[Seen]:
    """TFP402/TFP403, at each draw the script made in a replica function."""
    seeded_replica = any(x.get("replica") for o in run.probe("randomness") for x in (o or {}).get("seeds", []))
    out = []
    for s in _sites(run):
        line, c = int(s["line"]), _compare(s)
        code = "TFP402" if s.get("seeded") else "TFP403"
        if not c:
            out.append(Seen(code, line, f"random draws at line {line} were seen on fewer than 2 replicas",
                            status=INCONCLUSIVE, also=("TFP402", "TFP403")))
            continue
        same, n, rep = c
        if same > 0:
            seeded = "with a constant seed " if s.get("seeded") else ""
            out.append(Seen(code, line, (f"{s['api']} {seeded}at line {line}: the replicas drew identical values ({same} "
                                         f"of {n} draws)" + ("; the same values repeat across steps" if rep else "")),
                            also=("TFP402", "TFP403"),
                            # after a set_seed in the replica function the mistake is the set_seed (TFP401)
                            runtime=not s.get("low_entropy") and not (seeded_replica and s.get("after_seed"))))
            continue
        d = _rerun_diff(run, line)
        if d and d[0] > 0:
            out.append(Seen("TFP403", line, (f"{s['api']} at line {line}: two runs with the same global seed drew "
                                             f"different values ({d[0]} of {d[1]} draws differ); replicas drew "
                                             f"different values"), runtime=False))
        elif d:
            out.append(Seen("TFP403", line, (f"{s['api']} at line {line}: replicas drew different values ({n} draws "
                                             f"each) and two runs with the same global seed drew the same values "
                                             f"({d[1]} draws); TensorFlow 2.21 derives the op seeds deterministically "
                                             f"here"), status=NOT_REPRODUCED))
        else:
            out.append(Seen("TFP403", line, (f"{s['api']} at line {line}: replicas drew different values ({n} draws "
                                             f"each); no second run to compare"), status=NOT_REPRODUCED))
        out.append(Seen("TFP402", line, f"{s['api']} at line {line}: the replicas drew different values ({n} draws "
                                        f"compared)", status=NOT_REPRODUCED))
    return out


def seen(run) -> list[Seen]:
    frozen = [Seen("TFP403", int(rec["line"]), text) for rec, text in _frozen(run)]
    return frozen + _seen_seeds(run) + _seen_draws(run)
