"""TFP2xx: input distribution.

Child side:

* every ``strategy.run`` replica function is wrapped so that each replica
  fingerprints (hash + shape) the tensors it receives, per step (eagerly, or
  through a ``tf.numpy_function`` callback inside a ``tf.function``);
* ``experimental_distribute_values_from_function``: fingerprints of the value
  each replica got from the user's ``value_fn``;
* ``distribute_datasets_from_function``: the contexts the callback received,
  the first element of each replica/worker, and two counterfactual calls of
  the callback with other ``InputContext`` objects (input pipeline 1 of 2;
  twice the replicas) to see whether it shards and batches per replica.

A finding is confirmed when the replicas (or workers) received identical
data, when each replica received the whole undistributed batch, or when the
dataset callback returned the same data for every input pipeline / the same
batch whatever the number of replicas.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED

CODES = "TFP2xx"
MAX_TENSORS = 6


# =================================================================== child
class _State:
    def __init__(self):
        self.sites: dict[int, dict[str, Any]] = {}
        self.values_fn: list[dict[str, Any]] = []
        self.dataset_fns: list[dict[str, Any]] = []
        self.distributed_datasets: list[dict[str, Any]] = []
        self.reads: dict[str, dict[str, Any]] = {}
        self.list_files: list[dict[str, Any]] = []
        self.made: dict[int, dict[str, Any]] = {}  # id(dataset from shard/batch) -> record
        self.made_refs: list[Any] = []
        self.coverage: list[dict[str, Any]] = []  # TFP205
        self.split: list[dict[str, Any]] = []  # TFP208
        self.local = __import__("threading").local()  # .call: the strategy.run call this replica thread runs
        self.plain_iters: dict[str, dict[str, Any]] = {}  # plain iterators consumed inside replica functions
        # iterators each replica makes inside the replica function over one plain dataset, per (iter line, site)
        self.inner_iters: dict[str, dict[str, Any]] = {}
        self.hand: dict[int, dict[str, Any]] = {}  # id(dataset) -> one dataset held several times in a list
        self.hand_refs: list[Any] = []


def _flat_tensors(tf, obj) -> list:
    out = []
    for t in tf.nest.flatten(obj, expand_composites=False):
        if isinstance(t, tf.Tensor) and not isinstance(t, tf.Variable) and t.dtype != tf.resource:
            out.append(t)
    return out


def install(R) -> None:
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.distribute import distribute_lib
    from tensorflow.python.eager import context
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_util

    from tfpar_lint.verify import instrument
    from tfpar_lint.verify.runtime import STOP_SENTINEL, fingerprint, patch

    S = _State()
    R.input = S
    per_site_cap = max(R.max_steps, 3) + 2

    def record(site: dict, rid: int, arrays: list) -> None:
        fps = [[list(np.shape(a)), str(getattr(a, "dtype", "")), fingerprint(a)] for a in arrays]
        with R.lock:
            steps = site["replicas"].setdefault(str(rid), [])
            site["count"][str(rid)] = site["count"].get(str(rid), 0) + 1
            n = site["count"][str(rid)]
            if len(steps) < per_site_cap:
                steps.append(fps)
        # An in-graph loop over the whole dataset inside one tf.function call:
        # stop it once the evidence is in (the Python-level step bound cannot).
        if (not site["keras"] and not R.keras_loop_depth and not site["eager"]
                and n > 2 * R.max_steps + 2):
            R.stop_reason = f"stopped inside an in-graph loop after {n - 1} steps"
            raise RuntimeError(f"{STOP_SENTINEL}: {R.stop_reason}")

    def wrap(fn, call):
        key = (tuple(call["lines"]), call["name"], call["strategy"])
        site = S.sites.setdefault(key, {
            "lines": call["lines"], "strategy": call["strategy"], "eager": call["eager"],
            "keras": call["keras"], "arg_kind": call.get("arg_kind", "none"), "name": call["name"],
            "replicas": {}, "count": {},
        })

        def replica_fn(*args, **kwargs):
            tensors = _flat_tensors(tf, (args, kwargs))[:MAX_TENSORS]
            if tensors:
                try:
                    ctx = tf.distribute.get_replica_context()
                    rid = ctx.replica_id_in_sync_group
                    if context.executing_eagerly():
                        record(site, int(rid), [t.numpy() for t in tensors])
                    elif not control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()):
                        def cb(r, *arrs):
                            record(site, int(r), list(arrs))
                            return []

                        tf.numpy_function(cb, [tf.cast(rid, tf.int32)] + tensors, [], stateful=True,
                                          name="tfpar_input_probe")
                except RuntimeError:
                    raise
                except Exception as e:  # pragma: no cover - never break the script
                    R.note(f"input probe skipped a replica function: {type(e).__name__}")
            prev = getattr(S.local, "call", None)
            S.local.call = call
            try:
                return fn(*args, **kwargs)
            finally:
                S.local.call = prev

        return replica_fn

    instrument.RUN_WRAPPERS.append(wrap)

    # ---- experimental_distribute_values_from_function
    def make_values(orig):
        def experimental_distribute_values_from_function(self, value_fn):
            rec = {"lines": R.script_lines(2), "replicas": {}, "strategy": R.strategy_index(self)}
            S.values_fn.append(rec)

            def wrapped(ctx):
                v = value_fn(ctx)
                try:
                    ts = _flat_tensors(tf, v)[:MAX_TENSORS]
                    arrs = [t.numpy() if hasattr(t, "numpy") else np.asarray(t) for t in ts]
                    if not ts:
                        arrs = [np.asarray(x) for x in tf.nest.flatten(v)][:MAX_TENSORS]
                    rec["replicas"][str(ctx.replica_id_in_sync_group)] = [
                        [list(np.shape(a)), str(getattr(a, "dtype", "")), fingerprint(a)] for a in arrs]
                except Exception:
                    pass
                return v

            return orig(self, wrapped)

        return experimental_distribute_values_from_function

    for cls in (distribute_lib.StrategyBase, distribute_lib.Strategy, distribute_lib.StrategyV1):
        if "experimental_distribute_values_from_function" in cls.__dict__:
            patch(cls, "experimental_distribute_values_from_function", make_values)

    # ---- distribute_datasets_from_function
    def first_element(ds):
        for el in ds.take(1):
            ts = _flat_tensors(tf, el)
            return [[list(t.shape), t.dtype.name, fingerprint(t.numpy())] for t in ts]
        return []

    def make_dff(orig):
        def distribute_datasets_from_function(self, dataset_fn, options=None):
            rec = {"lines": R.script_lines(2), "contexts": [], "counterfactual": {}, "strategy": R.strategy_index(self),
                   "used": set()}
            S.dataset_fns.append(rec)
            probed = []

            def wrapped(input_context):
                rec["contexts"].append({
                    "pipelines": input_context.num_input_pipelines,
                    "pipeline_id": input_context.input_pipeline_id,
                    "replicas": input_context.num_replicas_in_sync,
                })
                ds = dataset_fn(_ContextSpy(input_context, rec["used"]))
                if not probed:
                    probed.append(True)
                    rec["counterfactual"] = _counterfactual(tf, dataset_fn, input_context, first_element)
                    try:
                        rec["first"] = first_element(ds)
                    except Exception:
                        pass
                return ds

            return orig(self, wrapped, options) if options is not None else orig(self, wrapped)

        return distribute_datasets_from_function

    for cls in (distribute_lib.StrategyBase, distribute_lib.Strategy, distribute_lib.StrategyV1):
        if "distribute_datasets_from_function" in cls.__dict__:
            patch(cls, "distribute_datasets_from_function", make_dff)

    _install_dataset_reads(R, S, tf, patch, fingerprint)
    _install_list_files(R, S, tf, patch)
    _install_made(R, S, tf, patch)
    _install_plain_iterators(R, S, tf, patch, fingerprint)


def _install_dataset_reads(R, S, tf, patch, fingerprint) -> None:
    """What each worker's replicas read when the script iterates a distributed
    dataset itself (``for batch in dist_dataset``), and errors raised while
    distributing or iterating (auto-sharding errors)."""
    from tensorflow.python.distribute import distribute_lib, input_lib

    cap = max(R.max_steps, 3) * 4

    def make_next(orig):
        def __next__(self):
            try:
                out = orig(self)
            except StopIteration:
                raise
            except Exception as e:
                R.record_caught(e, "distributed dataset iteration")
                raise
            line = R.direct_caller_line(2)
            if line is not None:
                try:
                    strategy = getattr(self, "_strategy", None)
                    parts = strategy.experimental_local_results(out) if strategy is not None else (out,)
                    site = S.reads.setdefault(str(line), {"line": line, "elements": []})
                    if len(site["elements"]) < cap:
                        for part in parts:
                            ts = _flat_tensors(tf, part)
                            if ts:
                                site["elements"].append([[list(t.shape), t.dtype.name, fingerprint(t.numpy())]
                                                         for t in ts])
                except Exception:
                    pass
            return out

        return __next__

    if "__next__" in input_lib.DistributedIteratorBase.__dict__:
        patch(input_lib.DistributedIteratorBase, "__next__", make_next, tag="input")

    def make_distribute(orig):
        def experimental_distribute_dataset(self, dataset, options=None):
            try:
                out = orig(self, dataset, options) if options is not None else orig(self, dataset)
            except Exception as e:
                R.record_caught(e, "experimental_distribute_dataset")
                raise
            try:
                _after_distribute(R, S, tf, self, dataset)
            except Exception:
                pass
            try:  # the auto-shard policy the workers will apply (OFF: every worker reads everything)
                line = R.direct_caller_line(2)
                policy = dataset.options().experimental_distribute.auto_shard_policy
                if line is not None and len(S.distributed_datasets) < 20:
                    S.distributed_datasets.append({"line": line, "policy": getattr(policy, "name", str(policy))})
            except Exception:
                pass
            return out

        return experimental_distribute_dataset

    patch(distribute_lib.StrategyBase, "experimental_distribute_dataset", make_distribute, tag="input")


def _same_object_held(R, obj) -> Optional[tuple[str, int, int]]:
    """(binding, times, length) of a list or tuple of the script's frames that holds ``obj``
    (by identity) at least twice: one dataset replicated by hand (``[ds] * n``)."""
    import sys

    f = sys._getframe(2)
    depth = 0
    while f is not None and depth < 40:
        if f.f_code.co_filename == R.script:
            for name, v in list(f.f_locals.items()):
                if isinstance(v, (list, tuple)) and 2 <= len(v) <= 4096:
                    n = sum(1 for x in v if x is obj)
                    if n >= 2:
                        return name, n, len(v)
        f = f.f_back
        depth += 1
    return None


def _install_plain_iterators(R, S, tf, patch, fingerprint) -> None:
    """Three things seen through ``iter(dataset)`` / ``next(iterator)`` on plain tf.data:

    * a plain iterator consumed inside a replica function (``strategy.run(lambda:
      next(iterator))``): which replicas took which element, per call site;
    * a plain dataset iterated inside the replica function (``for b in ds`` or
      ``next(iter(ds))`` there): every replica makes its own iterator; what each
      replica read, per (line of the ``iter()``, call site);
    * one dataset object held several times in a list of the script (``[ds] * n``)
      and iterated entry after entry: the first elements of each pass."""
    from tensorflow.python.data.ops import dataset_ops, iterator_ops
    from tensorflow.python.eager import context

    cap = max(R.max_steps, 3) * 2

    def fps_of(el) -> list:
        return [[list(t.shape), t.dtype.name, fingerprint(t.numpy())] for t in _flat_tensors(tf, el)][:MAX_TENSORS]

    def make_iter(orig):
        def __iter__(self):
            it = orig(self)
            try:
                if not context.executing_eagerly():
                    return it
                line = R.direct_caller_line(2)
                if line is None:
                    return it
                it._tfpar_iter_line = line
                call = getattr(S.local, "call", None)
                if call is not None and R.in_replica_fn():  # made by the replica function itself
                    key = f"{line}@{','.join(map(str, call['lines']))}"
                    with R.lock:
                        inner = S.inner_iters.get(key)
                        if inner is None and len(S.inner_iters) < 20:
                            inner = S.inner_iters[key] = {"lines": call["lines"], "made": line, "replicas": {},
                                                          "iterators": 0}
                        if inner is not None:
                            inner["iterators"] += 1
                    it._tfpar_inner = inner
                    return it
                rec = S.hand.get(id(self))
                if rec is None and len(S.hand) < 20 and R.in_main_thread():
                    held = _same_object_held(R, self)
                    if held is not None:
                        made = S.made.get(id(self), {}).get("line")
                        rec = S.hand[id(self)] = {"line": line, "name": held[0], "times": held[1], "len": held[2],
                                                  "made": made, "passes": []}
                        S.hand_refs.append(self)
                if rec is not None and len(rec["passes"]) < 8:
                    rec["passes"].append([])
                    it._tfpar_hand = rec["passes"][-1]
            except Exception:  # pragma: no cover - never break the script
                pass
            return it

        return __iter__

    def make_next(orig):
        def __next__(self):
            out = orig(self)
            try:
                hand = getattr(self, "_tfpar_hand", None)
                if hand is not None and len(hand) < cap:
                    hand.append(fps_of(out))
                call = getattr(S.local, "call", None)
                inner = getattr(self, "_tfpar_inner", None)
                if inner is not None:
                    if R.in_replica_fn():
                        rid = int(tf.distribute.get_replica_context().replica_id_in_sync_group)
                        with R.lock:
                            got = inner["replicas"].setdefault(str(rid), [])
                            if len(got) < cap:
                                got.append(fps_of(out))
                elif call is not None and R.in_replica_fn():
                    rid = int(tf.distribute.get_replica_context().replica_id_in_sync_group)
                    key = f"{id(self)}@{','.join(map(str, call['lines']))}"
                    with R.lock:
                        rec = S.plain_iters.setdefault(key, {
                            "lines": call["lines"], "made": getattr(self, "_tfpar_iter_line", None),
                            "at": R.direct_caller_line(2), "eager": context.executing_eagerly(), "replicas": {}})
                        got = rec["replicas"].setdefault(str(rid), [])
                        if len(got) < cap:
                            got.append(fps_of(out) if rec["eager"] else [])
            except Exception:  # pragma: no cover - never break the script
                pass
            return out

        return __next__

    patch(dataset_ops.DatasetV2, "__iter__", make_iter, tag="input")
    patch(iterator_ops.OwnedIterator, "__next__", make_next, tag="input")


def _install_made(R, S, tf, patch) -> None:
    """Record ``Dataset.shard`` and ``Dataset.batch`` calls of the script (TFP205, TFP208)."""
    from tensorflow.python.data.ops import dataset_ops

    def make(kind):
        def wrap(orig):
            def method(self, *a, **k):
                out = orig(self, *a, **k)
                line = R.direct_caller_line(2)
                if line is None or len(S.made) >= 200:
                    return out
                try:
                    if kind == "shard":
                        n = a[0] if a else k.get("num_shards")
                        idx = a[1] if len(a) > 1 else k.get("index")
                        rec = {"kind": kind, "line": line, "num_shards": int(n), "index": int(idx), "src": self}
                    else:
                        b = a[0] if a else k.get("batch_size")
                        rec = {"kind": kind, "line": line, "batch_size": int(b)}
                    with R.lock:
                        S.made[id(out)] = rec
                        S.made_refs.append(out)
                except Exception:
                    pass
                return out

            return method

        return wrap

    patch(dataset_ops.DatasetV2, "shard", make("shard"), tag="input")
    patch(dataset_ops.DatasetV2, "batch", make("batch"), tag="input")


def _rows(ds, cap: int = 20000) -> Optional[int]:
    import tensorflow as tf

    n = 0
    for i, el in enumerate(ds):
        if i >= cap:
            return None
        flat = tf.nest.flatten(el)
        t = flat[0] if flat else None
        n += int(t.shape[0]) if t is not None and t.shape.rank else 1
    return n


def _chain(S, dataset) -> list[dict[str, Any]]:
    out, ds, seen = [], dataset, 0
    while ds is not None and seen < 50:
        rec = S.made.get(id(ds))
        if rec is not None:
            out.append(rec)
        ds = getattr(ds, "_input_dataset", None)
        seen += 1
    return out


def _after_distribute(R, S, tf, strategy, dataset) -> None:
    import sys

    recs = _chain(S, dataset)
    if not recs:
        return
    line = R.direct_caller_line(3)
    replicas = int(strategy.num_replicas_in_sync)
    shard = next((r for r in recs if r["kind"] == "shard"), None)
    if shard is not None and R.worker_mode and len(S.coverage) < 5:
        from tensorflow.python.distribute import input_ops

        resolver = getattr(strategy, "cluster_resolver", None)
        workers = len(resolver.cluster_spec().as_dict().get("worker", [])) if resolver is not None else 1
        total = _rows(shard["src"])
        mine = _rows(input_ops.auto_shard_dataset(dataset, workers, R.worker_index or 0, replicas))
        S.coverage.append({"line": shard["line"], "num_shards": shard["num_shards"], "index": shard["index"],
                           "workers": workers, "total": total, "rows": mine, "distribute_line": line})
    batch = next((r for r in recs if r["kind"] == "batch"), None)
    if batch is not None and len(S.split) < 5:
        names_b, names_g = [], []
        f = sys._getframe(0)
        while f is not None and f.f_code.co_filename != R.script:
            f = f.f_back
        if f is not None:
            for k, v in list(f.f_globals.items()):
                if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_"):
                    if v == batch["batch_size"]:
                        names_b.append(k)
                    elif v == batch["batch_size"] * replicas:
                        names_g.append(k)
        S.split.append({"line": batch["line"], "batch_size": batch["batch_size"], "replicas": replicas,
                        "per_replica": batch["batch_size"] / max(1, replicas), "names": names_b[:5],
                        "global_names": names_g[:5], "distribute_line": line})


def _install_list_files(R, S, tf, patch) -> None:
    """``Dataset.list_files`` called by the script: list the files twice more
    with the same arguments and see whether the order changes (it does when
    the list is shuffled without a seed: every worker then shards its own
    order, so workers overlap and skip files)."""
    from tensorflow.python.data.ops import dataset_ops

    def make(orig):
        def list_files(file_pattern, shuffle=None, seed=None, name=None):
            out = orig(file_pattern, shuffle=shuffle, seed=seed, name=name)
            line = R.direct_caller_line(2)
            if line is None or len(S.list_files) >= 20:
                return out
            rec = {"line": line, "shuffle": shuffle, "seed": seed, "orders_differ": None, "example": []}
            try:
                orders = []
                for _ in range(2):
                    ds = orig(file_pattern, shuffle=shuffle, seed=seed, name=name)
                    orders.append([os.path.basename(f.numpy().decode()) for f in ds.take(64)])
                rec["orders_differ"] = orders[0] != orders[1]
                rec["example"] = [o[:4] for o in orders]
                rec["files"] = len(orders[0])
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {str(e)[:160]}"
            S.list_files.append(rec)
            return out

        return list_files

    patch(dataset_ops.DatasetV2, "list_files", make, tag="input")


class _ContextSpy:
    """Forwards to the real InputContext and records what the callback used."""

    def __init__(self, ctx, used: set):
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "_used", used)

    def __getattr__(self, name):
        self._used.add(name)
        return getattr(self._ctx, name)

    def __repr__(self):
        return repr(self._ctx)


def _counterfactual(tf, dataset_fn, real, first_element) -> dict[str, Any]:
    """Call the user's dataset_fn with other InputContexts and compare what it returns.

    * input pipelines 0 and 1 of 2: the same leading elements (and, for
      constant data, as many elements as one pipeline alone) mean no sharding;
    * twice the replicas: the same batch size means the batch is not derived
      from the context (not per replica)."""
    out: dict[str, Any] = {}
    r = max(1, int(real.num_replicas_in_sync))
    cap = 64

    def ctx(pipelines, pid, replicas):
        return tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pid,
                                          num_replicas_in_sync=replicas)

    def head(ds, k=8):
        from tfpar_lint.verify.runtime import fingerprint

        fps, n = [], 0
        for el in ds.take(cap):
            if len(fps) < k:
                fps.append([fingerprint(t.numpy()) for t in _flat_tensors(tf, el)])
            n += 1
        return fps, n

    try:
        a, na = head(dataset_fn(ctx(2, 0, 2 * r)))
        b, nb = head(dataset_fn(ctx(2, 1, 2 * r)))
        _, n1 = head(dataset_fn(ctx(1, 0, 2 * r)))
        same = bool(a) and a == b
        if same and na < cap and n1 < cap and n1 > na:
            same = False  # constant data, but each pipeline gets a part of it
        out["same_for_pipelines"] = same
        out["elements"] = [na, nb, n1]
    except Exception as e:
        out["error_pipelines"] = f"{type(e).__name__}: {str(e)[:200]}"
    try:
        c = first_element(dataset_fn(ctx(1, 0, r)))
        d = first_element(dataset_fn(ctx(1, 0, 2 * r)))
        out["batch_r"] = c[0][0][:1] if c and c[0][0] else []
        out["batch_2r"] = d[0][0][:1] if d and d[0][0] else []
        out["same_batch_for_replicas"] = bool(c and d and c[0][0] and d[0][0]) and c[0][0][0] == d[0][0][0]
        out["replicas"] = r
    except Exception as e:
        # e.g. get_per_replica_batch_size raising for an indivisible batch: it depends on replicas.
        out["error_replicas"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def collect(R) -> dict[str, Any]:
    S: _State = getattr(R, "input", None)
    if S is None:
        return {}
    dfs = []
    for d in S.dataset_fns:
        d = dict(d)
        d["used"] = sorted(d["used"])
        dfs.append(d)
    return {"sites": list(S.sites.values()), "values_fn": S.values_fn, "dataset_fns": dfs,
            "reads": list(S.reads.values()), "list_files": S.list_files, "coverage": S.coverage,
            "split": S.split, "plain_iters": list(S.plain_iters.values()), "hand": list(S.hand.values()),
            "inner_iters": list(S.inner_iters.values()),
            "distributed": S.distributed_datasets}


# ================================================================== parent
def _steps(site) -> list[dict[str, Any]]:
    """[{replica id: fingerprints}] per step, for steps seen by >= 2 replicas."""
    reps = site.get("replicas", {})
    if len(reps) < 2:
        return []
    n = min(len(v) for v in reps.values())
    return [{rid: reps[rid][k] for rid in reps} for k in range(n)]


def _identical(step: dict) -> bool:
    vals = list(step.values())
    return all(v == vals[0] for v in vals[1:])


def _nontrivial(step: dict) -> bool:
    for fps in step.values():
        for shape, _dt, _fp in fps:
            n = 1
            for s in shape:
                n *= s
            if n >= 2:
                return True
    return False


def _shape_str(step: dict) -> str:
    fps = next(iter(step.values()))
    if not fps:
        return "nothing"
    big = max(fps, key=lambda f: _size(f[0]))
    return f"({', '.join(str(s) for s in big[0])}{',' if len(big[0]) == 1 else ''}) {big[1]}"


def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _all_sites(run) -> list[tuple[int, dict]]:
    """strategy.run sites; a site seen on several workers (same lines, same
    function) is merged: replica ids are global under MultiWorkerMirroredStrategy."""
    merged: dict[tuple, dict] = {}
    out = []
    for w, o in enumerate(run.probe("input")):
        for s in (o or {}).get("sites", []):
            key = (tuple(s["lines"]), s["name"])
            m = merged.get(key)
            if m is None:
                m = merged[key] = dict(s, replicas=dict(s["replicas"]), workers=[w])
                out.append((w, m))
            else:
                for rid, steps in s["replicas"].items():
                    m["replicas"].setdefault(rid, steps)
                m["workers"].append(w)
    return out


def _site_verdict(site) -> Optional[tuple[bool, int, str]]:
    """(identical on every step, steps, shape) for one strategy.run site."""
    steps = [s for s in _steps(site) if _nontrivial(s)]
    if not steps:
        return None
    ident = all(_identical(s) for s in steps)
    return ident, len(steps), _shape_str(steps[0])


def _worker_overlap(run) -> Optional[str]:
    """Identical per-step data on two workers (MWMS) at the same site."""
    per_worker = run.probe("input")
    if len(per_worker) < 2:
        return None
    keyed = []
    for o in per_worker:
        d = {}
        for s in (o or {}).get("sites", []):
            key = (tuple(s["lines"]), s["name"])
            d.setdefault(key, []).append(s)
        keyed.append(d)
    for key, sites0 in keyed[0].items():
        for other in keyed[1:]:
            for s0 in sites0:
                for s1 in other.get(key, []):
                    fp0 = {json_key(fps) for steps in s0["replicas"].values() for fps in steps}
                    fp1 = {json_key(fps) for steps in s1["replicas"].values() for fps in steps}
                    common = fp0 & fp1
                    if common and any(_size(f[0]) >= 2 for f in json_load(next(iter(common)))):
                        return (f"workers received the same data at strategy.run line {key[0][-1] if key[0] else '?'}"
                                f" ({len(common)} of {len(fp0)} per-replica inputs identical across workers)")
    return None


def _read_overlap(run) -> Optional[str]:
    """Batches the script read from a distributed dataset on two workers that
    are identical (the same data trained on twice)."""
    per_worker = [o for o in run.probe("input") if o]
    if len(per_worker) < 2:
        return None
    sets = []
    for o in per_worker:
        fps = {json_key(el) for r in o.get("reads", []) for el in r["elements"]
               if any(_size(f[0]) >= 1 for f in el)}
        sets.append(fps)
    if not all(sets):
        return None
    common = sets[0].intersection(*sets[1:])
    if common:
        lines = sorted({r["line"] for o in per_worker for r in o.get("reads", [])})
        return (f"the {len(per_worker)} workers read the same data from the distributed dataset (line "
                f"{', '.join(map(str, lines))}): {len(common)} of {len(sets[0])} per-replica batches of worker 0 were "
                f"also read by worker 1")
    return None


def _read_summary(run) -> Optional[str]:
    per_worker = [o for o in run.probe("input") if o]
    if len(per_worker) < 2 or not all(o.get("reads") for o in per_worker):
        return None
    n = [sum(len(r["elements"]) for r in o["reads"]) for o in per_worker]
    return f"the {len(per_worker)} workers read disjoint data ({' and '.join(map(str, n))} per-replica batches)"


_SHARD_ERRORS = (r"shardable source|auto_shard_policy|AutoShardPolicy|aren't enough elements in this dataset for "
                 r"each shard|FILE-based sharding|sharding.*fil")


def json_key(fps) -> str:
    import json

    return json.dumps(fps)


def json_load(s):
    import json

    return json.loads(s)


def _dff_symptom(d, multiworker: bool = False, finding: bool = False) -> Optional[str]:
    """What the dataset_fn did wrong, or None.

    With several workers (or input pipelines), returning the same data for
    every pipeline is the symptom.  With one worker nothing is visible in the
    run itself: for a flagged call (``finding``) the counterfactual calls show
    whether the callback ignores its context entirely (the same data for
    every pipeline and the same batch whatever the replica count)."""
    cf = d.get("counterfactual", {})
    ctxs = d.get("contexts", [])
    pipelines = max([c.get("pipelines", 1) for c in ctxs] or [1])
    multi = multiworker or pipelines > 1
    same_data = bool(cf.get("same_for_pipelines"))
    same_batch = bool(cf.get("same_batch_for_replicas"))
    used = d.get("used", [])
    u = f"; the callback used input_context.{', '.join(used)}" if used else "; the callback never used its input_context"
    data_txt = ("it returned the same data for input pipelines 0 and 1 of 2 (no sharding: every worker reads the "
                "same data)")
    b = cf.get("batch_r", ["?"])
    batch_txt = (f"its batch size stays {b[0] if b else '?'} with {cf.get('replicas')} or "
                 f"{2 * cf.get('replicas', 1)} replicas (not derived from the context: each replica gets the whole "
                 f"batch the callback built)")
    if multi and same_data:
        return "dataset_fn: " + data_txt + (" and " + batch_txt if same_batch else "") + u
    if finding and same_data and same_batch:
        return "dataset_fn ignores its InputContext: " + data_txt + " and " + batch_txt + u
    return None


def _dff_ok(d) -> str:
    cf = d.get("counterfactual", {})
    if cf.get("same_for_pipelines"):
        return ("dataset_fn does not shard by input pipeline, which only matters with several workers (this run had "
                "one); its batch follows the replica count")
    if cf.get("same_batch_for_replicas"):
        return ("dataset_fn shards by input pipeline; its batch size does not follow the replica count (a fixed "
                "per-replica batch)")
    return "dataset_fn shards by input pipeline and batches per replica (its output changes with the InputContext)"


KNOWN = ("TFP201", "TFP202", "TFP203", "TFP204", "TFP205", "TFP206", "TFP207", "TFP208")


def _double_shard(c: dict) -> bool:
    w = c.get("workers") or 1
    return bool(w >= 2 and c.get("total") and c.get("rows") is not None
                and c["rows"] * w * w <= c["total"] * 1.25)


def _coverage_text(run, cs: list[dict]) -> str:
    c = cs[0]
    w = c["workers"]
    each = "; ".join(f"worker {i}: {x['rows']} of {x['total']}" for i, x in enumerate(cs))
    return (f"the dataset sharded by hand at line {c['line']} (shard({c['num_shards']}, i)) was auto-sharded again by "
            f"experimental_distribute_dataset over {w} workers: each worker reads 1/{w * w} of the data ({each} rows); "
            f"{c['total'] - sum(x['rows'] for x in cs)} rows are read by no worker")


def _per_replica_shown(s: dict) -> bool:
    """The split is shown by values, not names: with several replicas, the script holds the global
    batch (a module-level int equal to batch size x replicas) next to the per-replica size it
    batched with."""
    return bool(s.get("global_names")) and s["replicas"] >= 2


def _split_text(s: dict) -> str:
    names = f", the value of {', '.join(s['names'])}" if s["names"] else ""
    glob = f" ({s['global_names'][0]} {s['batch_size'] * s['replicas']} / {s['replicas']}\u00b2)" if s[
        "global_names"] else ""
    return (f"dataset batched with {s['batch_size']} at line {s['line']}{names}; experimental_distribute_dataset split "
            f"each batch over {s['replicas']} replicas: per-replica batches of {s['per_replica']:g}{glob}")


def _judge_205_208(finding, run):
    code, line = finding.code, finding.line
    if code == "TFP205":
        cs = [c for o in run.probe("input") for c in (o or {}).get("coverage", []) if c["line"] == line]
        if not cs:
            return None
        if all(_double_shard(c) for c in cs):
            return CONFIRMED, _coverage_text(run, cs)
        return NOT_REPRODUCED, "; ".join(f"worker {i} reads {c['rows']} of {c['total']} rows" for i, c in enumerate(cs))
    ss = [x for o in run.probe("input") for x in (o or {}).get("split", []) if x["line"] == line]
    if not ss:
        return None
    s = ss[0]
    if _per_replica_shown(s):
        return CONFIRMED, _split_text(s)
    return NOT_REPRODUCED, (f"batch({s['batch_size']}) at line {line} gives {s['replicas']} replicas "
                            f"{s['per_replica']:g} rows each; the script holds no global batch of "
                            f"{s['batch_size']} x {s['replicas']}")


# TFP209: TensorFlow's shape errors when the global batch sizes a per-replica tensor
SHAPE_ERRORS = [r"Cannot reshape a tensor with", r"Dimensions must be equal", r"must be evenly divisible",
                r"Dimension \d+ in both shapes must be equal", r"Incompatible shapes", r"ConcatOp : Dimension"]


def _judge_209(run, line) -> Optional[tuple[str, str]]:
    from tfpar_lint.verify.probes import error_at_line

    v = error_at_line(run, line, SHAPE_ERRORS)
    if v:
        return v
    from tfpar_lint.verify.probes.scope import _block_lines, error_matches

    block = _block_lines(run.path, line)
    for err in run.all_errors():
        inner = [ln for ln in err.get("script_lines") or [] if ln in block]
        if inner and error_matches(err, SHAPE_ERRORS):
            return CONFIRMED, (f"TensorFlow raised {run.error_text(err)} at line {inner[-1]}, in the replica "
                               f"function that sizes a tensor at line {line} with the global batch ({run.ctx()})")
    if run.ran(line) and run.outcome in ("ok", "stopped"):
        return NOT_REPRODUCED, (f"line {line} ran on {run.ctx()} without a shape error (a size that is only "
                                f"counted, like `tf.range`, fails silently: not observed)")
    return None


def judge(finding, run) -> Optional[tuple[str, str]]:
    code, line = finding.code, finding.line
    if code == "TFP209":
        return _judge_209(run, line)
    if code == "TFP210":
        return INCONCLUSIVE, ("the verifier does not run parameter-server clusters: what each worker reads from "
                              "the coordinator is not observed")
    if code not in KNOWN:
        return INCONCLUSIVE, f"the input probe has no observation for {code} yet"
    if code in ("TFP205", "TFP208"):
        return _judge_205_208(finding, run)
    if code == "TFP207":
        lfs = [r for o in run.probe("input") for r in (o or {}).get("list_files", []) if r["line"] == line]
        ov = _read_overlap(run) or _worker_overlap(run)
        for r in lfs:
            if r.get("orders_differ"):
                a, b = r["example"]
                return CONFIRMED, (f"Dataset.list_files at line {line} (no seed) listed its {r.get('files')} files in a "
                                   f"different order each time ({a} vs {b}): every worker shards its own order, so "
                                   f"workers overlap and skip files" + (f"; {ov}" if ov else ""))
        if ov:
            return CONFIRMED, ov
        if lfs and lfs[0].get("orders_differ") is False:
            return NOT_REPRODUCED, f"Dataset.list_files at line {line} listed the files in the same order every time"
        if not lfs:
            return None
    if code in ("TFP204", "TFP207"):
        ov = _read_overlap(run) or _worker_overlap(run)
        if ov:
            return CONFIRMED, ov
        if len([o for o in run.probe("input") if o]) < 2:
            return INCONCLUSIVE, "the script ran as a single worker: no second worker to overlap with"
        ok = _read_summary(run)
        return (NOT_REPRODUCED, ok) if ok else None
    if code == "TFP206":
        import re

        for err in run.errors():
            if re.search(_SHARD_ERRORS, f"{err.get('type')}: {err.get('message')}", re.I):
                caught = " (the script caught it)" if err.get("caught") else ""
                return CONFIRMED, f"auto-sharding failed: {run.error_text(err)}{caught}"
        if len([o for o in run.probe("input") if o]) < 2:
            return INCONCLUSIVE, "the script ran as a single worker: auto-sharding does not apply"
        return NOT_REPRODUCED, "auto-sharding raised no error"
    sites = _all_sites(run)
    overlap = _worker_overlap(run)
    if code == "TFP203":
        dfs = [d for o in run.probe("input") for d in (o or {}).get("dataset_fns", []) if line in d["lines"]]
        if not dfs:
            dfs = [d for o in run.probe("input") for d in (o or {}).get("dataset_fns", [])]
        if not dfs:
            return None
        multi = len([o for o in run.probe("input") if o]) > 1
        for d in dfs:
            sym = _dff_symptom(d, multi, finding=True)
            if sym:
                return CONFIRMED, sym + (f"; {overlap}" if overlap else "")
        if overlap:
            return CONFIRMED, overlap
        cf = dfs[0].get("counterfactual", {})
        if "error_pipelines" in cf and "error_replicas" in cf:
            return INCONCLUSIVE, f"could not call the dataset_fn with other contexts: {cf['error_pipelines']}"
        return NOT_REPRODUCED, _dff_ok(dfs[0])
    if code == "TFP202":
        for o in run.probe("input"):
            for v in (o or {}).get("values_fn", []):
                reps = list(v["replicas"].values())
                if line in v["lines"] and len(reps) >= 2:
                    if all(r == reps[0] for r in reps[1:]) and any(_size(f[0]) >= 2 for f in reps[0]):
                        return CONFIRMED, (f"experimental_distribute_values_from_function at line {line}: value_fn "
                                           f"gave all {len(reps)} replicas the same value")
                    return NOT_REPRODUCED, (f"value_fn at line {line} gave the {len(reps)} replicas different values")
        for o in run.probe("input"):
            for rec in (o or {}).get("hand", []):
                text = _hand_text(rec)
                if text:
                    return CONFIRMED, text
        if run.ran(line) is False:
            return None
        verdicts = [(s, _site_verdict(s)) for _, s in sites]
        verdicts = [(s, v) for s, v in verdicts if v]
        same = [(s, v) for s, v in verdicts if v[0]]
        if same:
            s, (_, n, shape) = same[0]
            return CONFIRMED, (f"all replicas received identical {shape} inputs at every one of {n} steps of "
                               f"strategy.run at line {_site_line(s)}")
        if overlap:
            return CONFIRMED, overlap
        if verdicts:
            return NOT_REPRODUCED, f"replicas received different inputs at {len(verdicts)} strategy.run call site(s)"
        return None
    # TFP201 and other 2xx: the strategy.run call at the finding's line
    at = [s for _, s in sites if line in s["lines"]] or ([] if code == "TFP201" else [s for _, s in sites])
    verdicts = [(s, _site_verdict(s)) for s in at]
    verdicts = [(s, v) for s, v in verdicts if v]
    for s, (ident, n, shape) in verdicts:
        if ident:
            kind = "an undistributed tensor" if s.get("arg_kind") == "plain" else "identical data"
            return CONFIRMED, (f"strategy.run at line {_site_line(s)} received {kind}: each of the "
                               f"{len(s['replicas'])} replicas got the same {shape} batch at all {n} steps "
                               f"(the full global batch, not a per-replica slice)")
    for o in run.probe("input"):
        for rec in (o or {}).get("plain_iters", []):
            text = _plain_iter_text(rec)
            if text and (line in rec.get("lines", []) or line in (rec.get("made"), rec.get("at"))):
                return CONFIRMED, text
        for rec in (o or {}).get("inner_iters", []):
            text = _inner_iter_text(rec)
            if text and (line in rec.get("lines", []) or line == rec.get("made")):
                return CONFIRMED, text
    if overlap:
        return CONFIRMED, overlap
    if verdicts:
        s, (_, n, shape) = verdicts[0]
        return NOT_REPRODUCED, (f"strategy.run at line {_site_line(s)}: the {len(s['replicas'])} replicas received "
                                f"different {shape} inputs at each of {n} steps")
    if at:
        return INCONCLUSIVE, f"strategy.run at line {line} ran but passed no tensors to the replicas"
    return None


def _stream(site) -> bool:
    """The largest input changes from step to step (batches of data, not a
    constant broadcast to every replica)."""
    steps = _steps(site)
    if len(steps) < 2:
        return False
    seen = set()
    for st in steps:
        fps = next(iter(st.values()))
        if not fps:
            return False
        seen.add(max(fps, key=lambda f: _size(f[0]))[2])
    return len(seen) >= 2


def _site_line(s) -> str:
    return str(s["lines"][0]) if s.get("lines") else "?"


def observe(run) -> tuple[str, str]:
    cs = [c for o in run.probe("input") for c in (o or {}).get("coverage", [])]
    if cs and all(_double_shard(c) for c in cs):
        return CONFIRMED, _coverage_text(run, cs)
    for o in run.probe("input"):
        # a batch split over the replicas is what experimental_distribute_dataset does by design:
        # alone (no TFP208 finding to judge) it shows no mistake, whatever integers the script holds
        for rec in (o or {}).get("plain_iters", []):
            text = _plain_iter_text(rec)
            if text:
                return CONFIRMED, text
        for rec in (o or {}).get("inner_iters", []):
            text = _inner_iter_text(rec)
            if text:
                return CONFIRMED, text
        for rec in (o or {}).get("hand", []):
            text = _hand_text(rec)
            if text:
                return CONFIRMED, text
    return _observe_streams(run)


def _observe_streams(run) -> tuple[str, str]:
    obs = run.probe("input")
    if not any(obs):
        return INCONCLUSIVE, "no observations (the run ended before the probe reported)"
    for o in obs:
        for v in (o or {}).get("values_fn", []):
            reps = list(v["replicas"].values())
            if len(reps) >= 2 and all(r == reps[0] for r in reps[1:]) and any(_size(f[0]) >= 2 for f in reps[0]):
                return CONFIRMED, (f"value_fn at line {_site_line(v)} gave all {len(reps)} replicas the same value")
        for d in (o or {}).get("dataset_fns", []):
            sym = _dff_symptom(d, len([x for x in obs if x]) > 1)
            if sym:
                return CONFIRMED, sym
    overlap = _worker_overlap(run) or _read_overlap(run)
    if overlap:
        return CONFIRMED, overlap
    sites = _all_sites(run)
    verdicts = [(s, _site_verdict(s)) for _, s in sites]
    verdicts = [(s, v) for s, v in verdicts if v]
    for s, (ident, n, shape) in verdicts:
        # A plain tensor broadcast on purpose (the same every step) is no symptom;
        # a stream of batches that every replica receives whole is.
        if ident and (s.get("arg_kind") != "plain" or _stream(s)):
            return CONFIRMED, (f"all {len(s['replicas'])} replicas received the same {shape} input at each of {n} "
                               f"steps of strategy.run at line {_site_line(s)}")
    if verdicts:
        steps = sum(v[1] for _, v in verdicts)
        return NOT_REPRODUCED, (f"{len(verdicts)} strategy.run site(s), {steps} step(s): every replica received "
                                f"different data")
    inner = [r for o in obs for r in (o or {}).get("inner_iters", []) if len(r.get("replicas", {})) >= 2]
    if inner:
        r = inner[0]
        return NOT_REPRODUCED, (f"the replicas of strategy.run at line {_site_line(r)} read different data from the "
                                f"dataset they iterated inside the replica function (iter() at line {r['made']})")
    if sites:
        return NOT_REPRODUCED, "strategy.run passed no per-replica data (fewer than 2 replicas or no tensors)"
    return NOT_REPRODUCED, "no strategy.run calls"


# ------------------------------------------------------------ runtime findings
def _plain_iter_text(rec: dict) -> Optional[str]:
    reps = rec.get("replicas", {})
    if len(reps) < 2:
        return None
    site = rec["lines"][0] if rec.get("lines") else "?"
    made = f" (iter() at line {rec['made']})" if rec.get("made") else ""
    first = next((g[0] for g in reps.values() if g and g[0]), None)
    shape = f" {_shape_str({0: first})}" if first else ""
    n = sum(len(g) for g in reps.values())
    return (f"the {len(reps)} replicas of strategy.run at line {site} each called next() on one undistributed "
            f"iterator{made} inside the replica function: {n} whole{shape} batches taken in turn by replica threads, "
            f"none split across the replicas by tf.distribute")


def _inner_iter_text(rec: dict) -> Optional[str]:
    """Every replica read the same batches from a plain dataset it iterated inside the replica
    function (compared element by element, as far as the replica that read least)."""
    reps = {rid: g for rid, g in rec.get("replicas", {}).items() if g}
    if len(reps) < 2:
        return None
    got = list(reps.values())
    n = min(len(g) for g in got)
    if any(g[k] != got[0][k] for g in got[1:] for k in range(n)):
        return None  # the replicas read different data (e.g. a dataset sharded by replica id inside)
    if not any(_size(f[0]) >= 2 for k in range(n) for f in got[0][k]):
        return None  # scalars only: nothing that could have been split
    site = rec["lines"][0] if rec.get("lines") else "?"
    shape = _shape_str({0: got[0][0]})
    return (f"the {len(reps)} replicas of strategy.run at line {site} each iterated the undistributed dataset "
            f"(iter() at line {rec['made']}, inside the replica function) and read the same batches: {n} "
            f"{shape} batch{'es' if n != 1 else ''} identical on every replica, none split across the replicas "
            f"by tf.distribute")


def _hand_text(rec: dict) -> Optional[str]:
    passes = [p for p in rec.get("passes", []) if p]
    if len(passes) < 2:
        return None
    n = min(len(p) for p in passes)
    same = sum(1 for k in range(n) if all(p[k] == passes[0][k] for p in passes[1:]))
    if same == 0:
        return None
    made = f" (made at line {rec['made']})" if rec.get("made") else ""
    return (f"`{rec['name']}` holds the same tf.data.Dataset object {rec['times']} times{made}; iterating its "
            f"entries at line {rec['line']} gave identical batches ({same} of {n} batches compared in each of "
            f"{len(passes)} passes): every device gets the same data")


def _same_values_fps(run) -> set:
    """Fingerprints of the values that a value_fn gave identically to every replica."""
    out = set()
    for o in run.probe("input"):
        for v in (o or {}).get("values_fn", []):
            reps = list(v["replicas"].values())
            if len(reps) >= 2 and all(r == reps[0] for r in reps[1:]):
                out.update(f[2] for f in reps[0] if _size(f[0]) >= 2)
    return out


def _fed_by(site: dict, fps: set) -> bool:
    """Every non-scalar input the site's replicas received is one of ``fps``."""
    got = {f[2] for steps in site.get("replicas", {}).values() for step in steps for f in step if _size(f[0]) >= 2}
    return bool(got) and got <= fps


def locate(run) -> list:
    """Input mistakes seen at one place: identical batches on every replica of a
    ``strategy.run`` call (TFP201), a plain iterator consumed inside the replica function
    (TFP201), a plain dataset iterated by every replica inside the replica function
    (TFP201), a value function that gave every replica the same value, or one dataset
    replicated by hand in a list (TFP202), a dataset function that ignores its input
    context across workers (TFP203), workers reading the same data from a dataset
    distributed with AutoShardPolicy.OFF (TFP204), a hand-sharded dataset auto-sharded
    again (TFP205).  Not located (no runtime finding; the input probe's observation
    says it): workers reading the same data for another reason, and a batch size the
    script names per replica (TFP208, judged only for a static finding)."""
    from tfpar_lint.verify.probes import Seen

    out = []
    same_values = _same_values_fps(run)
    for _, s in _all_sites(run):
        v = _site_verdict(s)
        if v and v[0] and (s.get("arg_kind") != "plain" or _stream(s)) and s.get("lines"):
            if s.get("arg_kind") == "distributed" and _fed_by(s, same_values):
                continue  # the value_fn's mistake (TFP202 below), seen again where its values arrive
            kind = "an undistributed tensor" if s.get("arg_kind") == "plain" else "identical data"
            out.append(Seen("TFP201", int(s["lines"][0]), (
                f"strategy.run at line {s['lines'][0]} received {kind}: each of the {len(s['replicas'])} replicas "
                f"got the same {v[2]} batch at all {v[1]} steps (the full global batch, not a per-replica slice)"),
                tuple(s["lines"])))
    for o in run.probe("input"):
        for rec in (o or {}).get("plain_iters", []):
            text = _plain_iter_text(rec)
            if text and rec.get("lines"):
                out.append(Seen("TFP201", int(rec["lines"][0]), text,
                                tuple(x for x in [rec.get("made"), rec.get("at")] if x) + tuple(rec["lines"])))
        for rec in (o or {}).get("inner_iters", []):
            text = _inner_iter_text(rec)
            if text and rec.get("lines"):
                out.append(Seen("TFP201", int(rec["lines"][0]), text, (int(rec["made"]),) + tuple(rec["lines"])))
        for rec in (o or {}).get("hand", []):
            text = _hand_text(rec)
            if text:
                out.append(Seen("TFP202", int(rec["line"]), text, tuple(x for x in [rec.get("made")] if x)))
        for v in (o or {}).get("values_fn", []):
            reps = list(v["replicas"].values())
            if (v.get("lines") and len(reps) >= 2 and all(r == reps[0] for r in reps[1:])
                    and any(_size(f[0]) >= 2 for f in reps[0])):
                out.append(Seen("TFP202", int(v["lines"][0]), f"experimental_distribute_values_from_function at line "
                                                              f"{v['lines'][0]}: value_fn gave all {len(reps)} "
                                                              f"replicas the same value"))
        for d in (o or {}).get("dataset_fns", []):
            sym = _dff_symptom(d, len([x for x in run.probe("input") if x]) > 1)
            if sym and d.get("lines"):
                out.append(Seen("TFP203", int(d["lines"][0]), sym))
                break
    cs = [c for o in run.probe("input") for c in (o or {}).get("coverage", [])]
    if cs and all(_double_shard(c) for c in cs):
        out.append(Seen("TFP205", int(cs[0]["line"]), _coverage_text(run, cs)))
    overlap = _worker_overlap(run) or _read_overlap(run)
    off = [d for o in run.probe("input") for d in (o or {}).get("distributed", []) if d.get("policy") == "OFF"]
    if overlap and off:
        out.append(Seen("TFP204", int(off[0]["line"]), f"{overlap}; the dataset distributed at line {off[0]['line']} "
                                                       f"has AutoShardPolicy.OFF"))
    return out
