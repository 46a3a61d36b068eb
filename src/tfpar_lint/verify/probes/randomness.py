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
global seed drew different values; TFP404 the other way round: when the
replicas drew different values at the draw that is split by replica id.  Draws inside library code (e.g. Keras
``Dropout``) are not counted.
"""
from __future__ import annotations

from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED

CODES = "TFP4xx"

_TF_RANDOM = ("uniform", "normal", "truncated_normal", "shuffle", "categorical", "gamma", "poisson",
              "stateless_uniform", "stateless_normal", "stateless_truncated_normal", "stateless_categorical",
              "stateless_binomial", "stateless_gamma", "stateless_poisson", "stateless_parameterized_truncated_normal")
_KERAS_RANDOM = ("uniform", "normal", "truncated_normal", "dropout", "shuffle", "categorical", "randint",
                 "gamma", "binomial", "beta")


class _State:
    def __init__(self):
        self.sites: dict[str, dict[str, Any]] = {}
        self.seeds: list[dict[str, Any]] = []


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
    return {"sites": list(S.sites.values()), "seeds": S.seeds}


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


KNOWN = ("TFP401", "TFP402", "TFP403", "TFP404")


def judge(finding, run) -> Optional[tuple[str, str]]:
    code, line = finding.code, finding.line
    if code not in KNOWN:
        return INCONCLUSIVE, f"the randomness probe has no observation for {code} yet"
    if code == "TFP401":
        seeds = [s for o in run.probe("randomness") for s in (o or {}).get("seeds", []) if line in s["lines"]]
        if not seeds:
            return None
        in_replica = any(s["replica"] for s in seeds)
        eager = any(s["eager"] for s in seeds)
        cands = ([s for s in _sites(run) if s.get("after_seed")] if in_replica else []) or _sites(run)
        best = None
        for s in cands:
            c = _compare(s)
            if not c:
                continue
            same, n, rep = c
            mode = "eagerly" if s["eager"] else "in a tf.function"
            if same > 0:
                return CONFIRMED, (f"after {seeds[0]['api']} at line {line}"
                                   f"{' inside the replica function' if in_replica else ''}, the replicas drew "
                                   f"identical values from {s['api']} at line {s['line']} ({same} of {n} draws, "
                                   f"{mode})" + ("; the same values repeat at every step" if rep else ""))
            if rep and not s.get("low_entropy"):
                return CONFIRMED, (f"{seeds[0]['api']} at line {line} re-seeds every step: each replica draws the "
                                   f"same values from {s['api']} at line {s['line']} at every step")
            best = best or (s, c)
        where = ("in the replica function" if in_replica else "outside any replica function") + (
            ", eagerly" if eager else ", at trace time only (tf.function)")
        if best:
            s, (same, n, _) = best
            return NOT_REPRODUCED, (f"{seeds[0]['api']} at line {line} ran {where}; the replicas drew different "
                                    f"values at line {s['line']} and no value repeated across steps ({n} draws "
                                    f"compared)")
        return INCONCLUSIVE, f"set_seed at line {line} ran {where}, but no random draw in a replica function was seen"
    sites = _sites(run, line)
    if not sites:
        return None
    comps = [(s, _compare(s)) for s in sites]
    comps = [(s, c) for s, c in comps if c]
    if not comps:
        return INCONCLUSIVE, f"random draws at line {line} were seen on fewer than 2 replicas"
    if code == "TFP404":  # the split by replica id assumes one shared draw: different draws break it
        for s, (same, n, _rep) in comps:
            if same < n:
                return CONFIRMED, (f"{s['api']} at line {line}: the replicas drew different values ({n - same} of {n} "
                                   f"draws differ), so the parts split by replica id do not partition one draw")
        s, (same, n, _rep) = comps[0]
        return NOT_REPRODUCED, f"{s['api']} at line {line}: the replicas drew identical values ({n} draws)"
    for s, (same, n, rep) in comps:
        if same > 0:
            seeded = "with a constant seed " if s.get("seeded") else ""
            return CONFIRMED, (f"{s['api']} {seeded}at line {line}: the replicas drew identical values ({same} of {n} "
                               f"draws)" + ("; the same values repeat across steps" if rep else ""))
    s, (same, n, rep) = comps[0]
    if code == "TFP403":
        d = _rerun_diff(run, line)
        if d and d[0] > 0:
            return CONFIRMED, (f"{s['api']} at line {line}: two runs with the same global seed drew different "
                               f"values ({d[0]} of {d[1]} draws differ); replicas drew different values")
        if d:
            return NOT_REPRODUCED, (f"{s['api']} at line {line}: replicas drew different values ({n} draws each) "
                                    f"and two runs with the same global seed drew the same values ({d[1]} draws); "
                                    f"TensorFlow 2.21 derives the op seeds deterministically here")
        return NOT_REPRODUCED, (f"{s['api']} at line {line}: replicas drew different values ({n} draws each); "
                                f"no second run to compare")
    return NOT_REPRODUCED, f"{s['api']} at line {line}: the replicas drew different values ({n} draws compared)"


def observe(run) -> tuple[str, str]:
    obs = run.probe("randomness")
    if not any(obs):
        return INCONCLUSIVE, "no observations (the run ended before the probe reported)"
    # Low-entropy draws (a permutation of 4 items) may agree by chance.
    sites = [s for s in _sites(run) if not s.get("low_entropy")]
    comps = [(s, _compare(s)) for s in sites]
    comps = [(s, c) for s, c in comps if c]
    for s, (same, n, rep) in comps:
        if same > 0:
            return CONFIRMED, f"replicas drew identical values from {s['api']} at line {s['line']} ({same} of {n} draws)"
    if comps:
        n = sum(c[1] for _, c in comps)
        return NOT_REPRODUCED, (f"{len(comps)} random call site(s) in replica functions, {n} draws per replica: "
                                f"replicas drew different values")
    return NOT_REPRODUCED, "no random draws by the script inside replica functions"


def locate(run) -> list:
    """Replicas that drew identical values: at the ``set_seed`` call when one ran inside a
    replica function (TFP401), else at the draw (TFP402 with a seed, TFP403 without)."""
    from tfpar_lint.verify.probes import Seen

    sites = [s for s in _sites(run) if not s.get("low_entropy")]
    seeds = [x for o in run.probe("randomness") for x in (o or {}).get("seeds", []) if x.get("replica") and x["lines"]]
    for s in sites:
        c = _compare(s)
        if not c or c[0] == 0:
            continue
        same, n, rep = c
        drew = (f"the replicas drew identical values from {s['api']} at line {s['line']} ({same} of {n} draws)"
                + ("; the same values repeat at every step" if rep else ""))
        if seeds and s.get("after_seed"):
            line = int(seeds[0]["lines"][0])
            return [Seen("TFP401", line, f"after {seeds[0]['api']} at line {line} inside the replica function, {drew}",
                         (s["line"],))]
        return [Seen("TFP402" if s.get("seeded") else "TFP403", int(s["line"]), drew)]
    return []
