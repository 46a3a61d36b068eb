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

import json
import os
import re
from typing import Any, Optional

from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED
from tfpar_lint.verify import symptoms
from tfpar_lint.verify.probes import Seen, error_line

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
            "replicas": {}, "count": {}, "from_data": False,
        })
        site["from_data"] = site["from_data"] or bool(call.get("from_data"))

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
            rec = {"lines": R.script_lines(2), "replicas": {}, "strategy": R.strategy_index(self), "used": set(),
                   "objects": {}}
            S.values_fn.append(rec)

            def wrapped(ctx):
                v = value_fn(_ContextSpy(ctx, rec["used"]))
                try:
                    # which objects each replica got: one object for every replica is the same data by identity
                    rid = str(ctx.replica_id_in_sync_group)
                    rec["objects"][rid] = [id(x) for x in tf.nest.flatten(v)][:8]
                    # which dataset element each replica got (dataset, position, iter line), where tagged
                    rec.setdefault("origins", {})[rid] = [R.origin(x) for x in tf.nest.flatten(v)][:8]
                    rec.setdefault("refs", []).append(v)
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
                    rid = str(R.replica_id())
                    with R.lock:
                        inner = S.inner_iters.get(key)
                        if inner is None and len(S.inner_iters) < 20:
                            inner = S.inner_iters[key] = {"lines": call["lines"], "made": line, "replicas": {},
                                                          "iterators": 0, "datasets": {}}
                        if inner is not None:
                            inner["iterators"] += 1
                            inner["datasets"][rid] = _pipeline(self)  # the same pipeline on every replica: no split
                            S.hand_refs.append(self)
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
                        rid = R.replica_id()
                        with R.lock:
                            got = inner["replicas"].setdefault(str(rid), [])
                            if len(got) < cap:
                                got.append(fps_of(out))
                elif call is not None and R.in_replica_fn():
                    rid = R.replica_id()
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
    # inside a tf.function AutoGraph turns next(iterator) into iterator.get_next()
    patch(iterator_ops.OwnedIterator, "get_next", make_next, tag="input")


def _pipeline(ds) -> str:
    """The identity of what iterating ``ds`` reads: its source dataset object and the chain of
    transformations on it, with the index of every ``shard`` (two replicas whose pipelines are equal
    read the same elements, whatever their values)."""
    parts, root = [], ds
    for _ in range(50):
        name = type(root).__name__
        if name.startswith("_Shard") or name == "ShardDataset":
            try:
                name += f"({int(root._index.numpy())}/{int(root._num_shards.numpy())})"  # noqa: SLF001
            except Exception:
                name += f"(#{id(root)})"  # not readable: count it as its own
        parts.append(name)
        nxt = getattr(root, "_input_dataset", None)
        if nxt is None:
            break
        root = nxt
    return f"{id(root)}:{'<'.join(parts)}"


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
        f = sys._getframe(0)
        while f is not None and f.f_code.co_filename != R.script:
            f = f.f_back
        # the script's module-level integers are read at the end of the run (collect), so that a global
        # batch defined after this line counts as well as one defined before it
        S.split.append({"line": batch["line"], "batch_size": batch["batch_size"], "replicas": replicas,
                        "per_replica": batch["batch_size"] / max(1, replicas), "distribute_line": line,
                        "_globals": f.f_globals if f is not None else {}})


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
        a2, _ = head(dataset_fn(ctx(2, 0, 2 * r)))  # the control: the same context again
        b, nb = head(dataset_fn(ctx(2, 1, 2 * r)))
        _, n1 = head(dataset_fn(ctx(1, 0, 2 * r)))
        # Values tell pipelines apart only when the same context gives the same data (not data drawn at
        # random when the callback runs); otherwise the context objects' use decides (see _dff_symptom).
        out["deterministic"] = bool(a) and a == a2
        same = bool(a) and a == b
        if na < cap and n1 < cap and n1 > na:
            same = False  # each pipeline gets a part of the data (counted, whatever the values)
            out["split_by_count"] = True
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
    split = []
    for x in S.split:
        x = dict(x)
        names_b, names_g = [], []
        for k, v in list(x.pop("_globals").items()):
            if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_"):
                if v == x["batch_size"]:
                    names_b.append(k)
                elif v == x["batch_size"] * x["replicas"]:
                    names_g.append(k)
        split.append(dict(x, names=names_b[:5], global_names=names_g[:5]))
    values_fn = [dict(v, used=sorted(v["used"]), refs=None) for v in S.values_fn]
    return {"sites": list(S.sites.values()), "values_fn": values_fn, "dataset_fns": dfs,
            "reads": list(S.reads.values()), "list_files": S.list_files, "coverage": S.coverage,
            "split": split, "plain_iters": list(S.plain_iters.values()), "hand": list(S.hand.values()),
            "inner_iters": list(S.inner_iters.values()),
            "distributed": S.distributed_datasets}


# ================================================================== parent
# Sameness is judged by identity, never from equal values alone: a plain tensor handed to
# ``strategy.run`` is one object given to every replica; a PerReplica value gives each replica its
# own part; a replica iterating a dataset object every replica iterates reads the same elements.
# Values are compared only where they identify elements: fingerprints that occur once in a
# worker's own stream (constant data, tf.ones, identifies nothing), or a callback whose output is
# the same when called twice with the same context.

def _steps(site) -> list[dict[str, Any]]:
    """[{replica id: fingerprints}] per step, for steps seen by >= 2 replicas."""
    reps = site.get("replicas", {})
    if len(reps) < 2:
        return []
    n = min(len(v) for v in reps.values())
    return [{rid: reps[rid][k] for rid in reps} for k in range(n)]


def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _nontrivial(step: dict) -> bool:
    return any(_size(shape) >= 2 for fps in step.values() for shape, _dt, _fp in fps)


def _shape_str(step: dict) -> str:
    fps = next(iter(step.values()))
    if not fps:
        return "nothing"
    big = max(fps, key=lambda f: _size(f[0]))
    return f"({', '.join(str(s) for s in big[0])}{',' if len(big[0]) == 1 else ''}) {big[1]}"


def _all_sites(run) -> list[dict]:
    """strategy.run sites; a site seen on several workers (same lines, same function) is merged:
    replica ids are global under MultiWorkerMirroredStrategy."""
    merged: dict[tuple, dict] = {}
    for w, o in enumerate(run.probe("input")):
        for s in (o or {}).get("sites", []):
            key = (tuple(s["lines"]), s["name"])
            m = merged.get(key)
            if m is None:
                merged[key] = dict(s, replicas=dict(s["replicas"]), workers=[w])
            else:
                for rid, steps in s["replicas"].items():
                    m["replicas"].setdefault(rid, steps)
                m["workers"].append(w)
                m["from_data"] = m.get("from_data") or s.get("from_data")
    return list(merged.values())


def _site_line(s) -> str:
    return str(s["lines"][0]) if s.get("lines") else "?"


def _unique(stream: list) -> set:
    """The elements of one worker's stream that occur once in it: only these identify an element."""
    keys = [json.dumps(x) for x in stream]
    return {k for k in keys if keys.count(k) == 1 and any(_size(f[0]) >= 2 for f in json.loads(k))}


def _worker_overlap(run) -> Optional[str]:
    """Two workers received the same elements at the same strategy.run site (MWMS)."""
    per_worker = run.probe("input")
    if len(per_worker) < 2:
        return None
    keyed = []
    for o in per_worker:
        d: dict = {}
        for s in (o or {}).get("sites", []):
            d.setdefault((tuple(s["lines"]), s["name"]), []).extend(
                fps for steps in s["replicas"].values() for fps in steps)
        keyed.append(d)
    for key, stream0 in keyed[0].items():
        for other in keyed[1:]:
            if key not in other:
                continue
            mine, theirs = _unique(stream0), _unique(other[key])
            common = mine & theirs
            if common:
                return (f"workers received the same data at strategy.run line {key[0][0] if key[0] else '?'} "
                        f"({len(common)} of {len(mine)} distinct per-replica inputs of worker 0 also reached worker 1)")
    return None


def _read_overlap(run) -> Optional[str]:
    """Batches the script read from a distributed dataset on two workers that are the same elements."""
    per_worker = [o for o in run.probe("input") if o]
    if len(per_worker) < 2:
        return None
    sets = [_unique([el for r in o.get("reads", []) for el in r["elements"]]) for o in per_worker]
    if not all(sets):
        return None
    common = sets[0].intersection(*sets[1:])
    if common:
        lines = sorted({r["line"] for o in per_worker for r in o.get("reads", [])})
        return (f"the {len(per_worker)} workers read the same data from the distributed dataset (line "
                f"{', '.join(map(str, lines))}): {len(common)} of {len(sets[0])} distinct per-replica batches of "
                f"worker 0 were also read by worker 1")
    return None


def _read_summary(run) -> Optional[str]:
    per_worker = [o for o in run.probe("input") if o]
    if len(per_worker) < 2 or not all(o.get("reads") for o in per_worker):
        return None
    n = [sum(len(r["elements"]) for r in o["reads"]) for o in per_worker]
    return f"the {len(per_worker)} workers read disjoint data ({' and '.join(map(str, n))} per-replica batches)"


_SHARD_ERRORS = symptoms.pattern("auto-shard")


def _dff_symptom(d, multiworker: bool = False) -> tuple[Optional[str], bool]:
    """(what the dataset_fn did wrong, whether it shows in this run itself) or (None, False).

    Whether it shards by input pipeline: the same context called twice gives the same data and
    pipelines 0 and 1 of 2 the same data (or the same number of elements as one pipeline alone);
    where the data is drawn anew at every call, the callback's use of ``input_pipeline_id`` /
    ``num_input_pipelines`` decides.  Whether it batches per replica: the batch size (a shape)
    stays the same with twice the replicas.  With several workers or input pipelines, returning
    the same data for every pipeline shows in the run; with one, only the calls with other
    contexts show it (judged for a static finding, never reported on its own)."""
    cf = d.get("counterfactual", {})
    if "same_for_pipelines" not in cf or "same_batch_for_replicas" not in cf:
        return None, False  # the callback raised (or was never probed): nothing was seen
    used = d.get("used", [])
    sharded = any(u in used for u in ("input_pipeline_id", "num_input_pipelines"))
    if cf.get("split_by_count"):
        same_data = False
    elif cf.get("deterministic"):
        same_data = bool(cf.get("same_for_pipelines"))
    else:
        same_data = not sharded
    same_batch = bool(cf.get("same_batch_for_replicas"))
    pipelines = max([c.get("pipelines", 1) for c in d.get("contexts", [])] or [1])
    u = f"; the callback used input_context.{', '.join(used)}" if used else "; the callback never used its input_context"
    how = "it returned the same data" if cf.get("deterministic") else "it never read input_pipeline_id"
    data_txt = f"{how} for input pipelines 0 and 1 of 2 (no sharding: every worker reads the same data)"
    b = cf.get("batch_r", ["?"])
    batch_txt = (f"its batch size stays {b[0] if b else '?'} with {cf.get('replicas')} or "
                 f"{2 * cf.get('replicas', 1)} replicas (not derived from the context: each replica gets the whole "
                 f"batch the callback built)")
    if (multiworker or pipelines > 1) and same_data:
        return "dataset_fn: " + data_txt + (" and " + batch_txt if same_batch else "") + u, True
    if same_data and same_batch:
        return "dataset_fn ignores its InputContext: " + data_txt + " and " + batch_txt + u, False
    return None, False


def _dff_ok(d) -> str:
    cf = d.get("counterfactual", {})
    if cf.get("same_for_pipelines") and cf.get("deterministic"):
        return ("dataset_fn does not shard by input pipeline, which only matters with several workers (this run had "
                "one); its batch follows the replica count")
    if cf.get("same_batch_for_replicas"):
        return ("dataset_fn shards by input pipeline; its batch size does not follow the replica count (a fixed "
                "per-replica batch)")
    return "dataset_fn shards by input pipeline and batches per replica (its output changes with the InputContext)"


def _double_shard(c: dict) -> bool:
    w = c.get("workers") or 1
    return bool(w >= 2 and c.get("total") and c.get("rows") is not None
                and c["rows"] * w * w <= c["total"] * 1.25)


def _coverage_text(cs: list[dict]) -> str:
    c = cs[0]
    w = c["workers"]
    each = "; ".join(f"worker {i}: {x['rows']} of {x['total']}" for i, x in enumerate(cs))
    return (f"the dataset sharded by hand at line {c['line']} (shard({c['num_shards']}, i)) was auto-sharded again by "
            f"experimental_distribute_dataset over {w} workers: each worker reads 1/{w * w} of the data ({each} rows); "
            f"{c['total'] - sum(x['rows'] for x in cs)} rows are read by no worker")


def _global_batch_shown(run, s: dict) -> Optional[str]:
    """With several replicas the script holds the global batch (batch size x replicas) as a value: a
    module-level integer, or the ``global_batch_size`` it gives ``compute_average_loss``."""
    if s["replicas"] < 2:
        return None
    g = s["batch_size"] * s["replicas"]
    if s.get("global_names"):
        return f"{s['global_names'][0]} {g} / {s['replicas']}\u00b2"
    for o in run.probe("loss"):
        for c in (o or {}).get("average_loss", []):
            if c.get("global_batch_size") == g:
                return f"compute_average_loss(global_batch_size={g}) at line {c['line']} / {s['replicas']}\u00b2"
    return None


def _hand_text(rec: dict) -> Optional[str]:
    passes = [p for p in rec.get("passes", []) if p]
    if len(passes) < 2:
        return None
    made = f" (made at line {rec['made']})" if rec.get("made") else ""
    return (f"`{rec['name']}` holds the same tf.data.Dataset object {rec['times']} times{made}; its entries were "
            f"iterated at line {rec['line']} {len(passes)} times: every device gets the same data (one object)")


def _plain_iter_text(rec: dict) -> Optional[str]:
    reps = rec.get("replicas", {})
    if len(reps) < 2:
        return None
    site = rec["lines"][0] if rec.get("lines") else "?"
    made = f" (iter() at line {rec['made']})" if rec.get("made") else ""
    first = next((g[0] for g in reps.values() if g and g[0]), None)
    shape = f" {_shape_str({0: first})}" if first else ""
    when = "" if rec.get("eager", True) else " (while the tf.function was traced: at every step)"
    n = sum(len(g) for g in reps.values())
    return (f"the {len(reps)} replicas of strategy.run at line {site} each called next() on one undistributed "
            f"iterator{made} inside the replica function{when}: {n} whole{shape} batches taken in turn by the "
            f"replicas, none split across them by tf.distribute")


def _inner_iter_text(rec: dict) -> Optional[str]:
    """Every replica iterated one dataset object inside the replica function (the same elements)."""
    ds = rec.get("datasets", {})
    if len(ds) < 2 or len(set(ds.values())) != 1:
        return None  # the replicas iterated different datasets (e.g. sharded by replica id inside)
    reps = {rid: g for rid, g in rec.get("replicas", {}).items() if g}
    n = min([len(g) for g in reps.values()] or [0])
    shape = f" {_shape_str({0: next(iter(reps.values()))[0]})}" if reps and n else ""
    site = rec["lines"][0] if rec.get("lines") else "?"
    return (f"the {len(ds)} replicas of strategy.run at line {site} each iterated the same undistributed dataset "
            f"pipeline (iter() at line {rec['made']}, inside the replica function), reading the same{shape} batches "
            f"from its start, identical on every replica by construction: none split across the replicas by "
            f"tf.distribute")


def _same_element(v: dict) -> Optional[tuple]:
    """The (dataset, position, iter line) every replica's value came from, when it is one element."""
    origins = [tuple(map(tuple, (o for o in got if o))) for got in v.get("origins", {}).values()]
    if len(origins) >= 2 and origins[0] and all(o == origins[0] for o in origins[1:]):
        return origins[0][0]
    return None


def _values_fn_same(v: dict) -> Optional[str]:
    reps = list(v["replicas"].values())
    if len(reps) < 2 or not any(_size(f[0]) >= 2 for f in reps[0]):
        return None
    same = _same_element(v)
    if same is not None:
        made = f" made at line {same[2]}" if same[2] else ""
        return (f"experimental_distribute_values_from_function at line {_site_line(v)}: every one of the {len(reps)} "
                f"replicas got element {same[1]} of its own iterator over one dataset object (iterators{made}): the "
                f"same data, none split across the replicas")
    if not all(r == reps[0] for r in reps[1:]):
        return None
    objs = list(v.get("objects", {}).values())
    one_object = len(objs) >= 2 and all(o == objs[0] for o in objs[1:])
    if one_object:
        why = "returned one object for every replica"
    elif not v.get("used"):
        why = "never used its context (every replica gets what the same call builds)"
    else:
        return None  # equal values, but built per replica from the context
    return (f"experimental_distribute_values_from_function at line {_site_line(v)}: value_fn {why}: all "
            f"{len(reps)} replicas got the same value")


def seen(run) -> list[Seen]:
    out: list[Seen] = []
    obs = [o or {} for o in run.probe("input")]
    multi = len([o for o in obs if o]) > 1
    for s in _all_sites(run):
        steps = [st for st in _steps(s) if _nontrivial(st)]
        if not steps or not s.get("lines"):
            continue
        line, lines, shape, n = int(s["lines"][0]), tuple(s["lines"]), _shape_str(steps[0]), len(steps)
        if s.get("arg_kind") == "plain":
            src = ", an element of a tf.data dataset" if s.get("from_data") else ""
            out.append(Seen("TFP201", line, (
                f"strategy.run at line {line} received an undistributed tensor{src}: one object handed to each of the "
                f"{len(s['replicas'])} replicas (not a PerReplica value), the same {shape} batch at all {n} steps (the "
                f"full global batch, not a per-replica slice)"), lines, also=("TFP202",), runtime=bool(s.get("from_data"))))
        else:
            out.append(Seen("TFP201", line, (
                f"strategy.run at line {line}: each of the {len(s['replicas'])} replicas received its own part of a "
                f"distributed value (PerReplica) at each of {n} steps ({shape})"), lines, NOT_REPRODUCED,
                also=("TFP202",)))
    for o in obs:
        for rec in o.get("plain_iters", []):
            text = _plain_iter_text(rec)
            if text and rec.get("lines"):
                out.append(Seen("TFP201", int(rec["lines"][0]), text, tuple(
                    x for x in [rec.get("made"), rec.get("at")] if x) + tuple(rec["lines"])))
        for rec in o.get("inner_iters", []):
            text = _inner_iter_text(rec)
            if text and rec.get("lines"):
                out.append(Seen("TFP201", int(rec["lines"][0]), text, (int(rec["made"]),) + tuple(rec["lines"])))
            elif len(rec.get("datasets", {})) >= 2 and rec.get("lines"):
                out.append(Seen("TFP201", int(rec["lines"][0]), (
                    f"the replicas of strategy.run at line {rec['lines'][0]} read different data from the dataset they "
                    f"iterated inside the replica function (iter() at line {rec['made']}): each its own pipeline "
                    f"({' / '.join(sorted({v.split(':', 1)[-1] for v in rec['datasets'].values()}))[:200]})"),
                    (int(rec["made"]),) + tuple(rec["lines"]), NOT_REPRODUCED))
        for rec in o.get("hand", []):
            text = _hand_text(rec)
            if text:
                out.append(Seen("TFP202", int(rec["line"]), text, tuple(x for x in [rec.get("made")] if x),
                                anywhere=True))
        for v in o.get("values_fn", []):
            if not v.get("lines") or len(v["replicas"]) < 2:
                continue
            text = _values_fn_same(v)
            same = _same_element(v)
            out.append(Seen("TFP202", int(v["lines"][0]), text or (
                f"value_fn at line {v['lines'][0]} gave the {len(v['replicas'])} replicas different values, or values "
                f"built per replica from its context"), tuple(v["lines"]) + ((same[2],) if same and same[2] else ()),
                CONFIRMED if text else NOT_REPRODUCED))
        for d in o.get("dataset_fns", []):
            if not d.get("lines"):
                continue
            sym, shows = _dff_symptom(d, multi)
            cf = d.get("counterfactual", {})
            if sym:
                out.append(Seen("TFP203", int(d["lines"][0]), sym, tuple(d["lines"]), runtime=shows))
            elif "same_for_pipelines" in cf and "same_batch_for_replicas" in cf:
                out.append(Seen("TFP203", int(d["lines"][0]), _dff_ok(d), tuple(d["lines"]), NOT_REPRODUCED))
            else:
                why = cf.get("error_pipelines") or cf.get("error_replicas") or "the callback did not return"
                out.append(Seen("TFP203", int(d["lines"][0]), f"could not call the dataset_fn with other contexts: "
                                f"{why}", tuple(d["lines"]), INCONCLUSIVE))
        for r in o.get("list_files", []):
            if r.get("orders_differ"):
                a, b = r["example"]
                out.append(Seen("TFP207", int(r["line"]), (
                    f"Dataset.list_files at line {r['line']} (no seed) listed its {r.get('files')} files in a different "
                    f"order each time ({a} vs {b}): every worker shards its own order, so workers overlap and skip "
                    f"files"), runtime=False))
            elif r.get("orders_differ") is False:
                out.append(Seen("TFP207", int(r["line"]), f"Dataset.list_files at line {r['line']} listed the files "
                                f"in the same order every time", status=NOT_REPRODUCED))
        for x in o.get("split", []):
            shown = _global_batch_shown(run, x)
            names = f", the value of {', '.join(x['names'])}" if x.get("names") else ""
            if shown:
                out.append(Seen("TFP208", int(x["line"]), (
                    f"dataset batched with {x['batch_size']} at line {x['line']}{names}; experimental_distribute_dataset "
                    f"split each batch over {x['replicas']} replicas: per-replica batches of {x['per_replica']:g} "
                    f"({shown})"), runtime=False))
            else:
                out.append(Seen("TFP208", int(x["line"]), (
                    f"batch({x['batch_size']}) at line {x['line']} gives {x['replicas']} replicas {x['per_replica']:g} "
                    f"rows each; the script holds no global batch of {x['batch_size']} x {x['replicas']}"),
                    status=NOT_REPRODUCED))
    cs = [c for o in obs for c in o.get("coverage", [])]
    if cs:
        bad = all(_double_shard(c) for c in cs)
        out.append(Seen("TFP205", int(cs[0]["line"]), _coverage_text(cs) if bad else "; ".join(
            f"worker {i} reads {c['rows']} of {c['total']} rows" for i, c in enumerate(cs)),
            status=CONFIRMED if bad else NOT_REPRODUCED))
    overlap = _worker_overlap(run) or _read_overlap(run)
    off = [d for o in obs for d in o.get("distributed", []) if d.get("policy") == "OFF"]
    if overlap:
        line = int(off[0]["line"]) if off else 0
        text = f"{overlap}; the dataset distributed at line {line} has AutoShardPolicy.OFF" if off else overlap
        out.append(Seen("TFP204", line, text, also=("TFP201", "TFP202", "TFP203", "TFP207"), anywhere=True,
                        runtime=bool(off)))
    elif multi:
        ok = _read_summary(run)
        if ok:
            out.append(Seen("TFP204", 0, ok, status=NOT_REPRODUCED, also=("TFP207",), anywhere=True))
    else:
        out.append(Seen("TFP204", 0, "the script ran as a single worker: no second worker to overlap with",
                        status=INCONCLUSIVE, also=("TFP207",), anywhere=True))
    for err in run.errors():
        if re.search(_SHARD_ERRORS, f"{err.get('type')}: {err.get('message')}", re.I):
            caught = " (the script caught it)" if err.get("caught") else ""
            out.append(Seen("TFP206", error_line(err) or 0, f"auto-sharding failed: {run.error_text(err)}{caught}",
                            anywhere=True, runtime=False))
    out.append(Seen("TFP206", 0, "auto-sharding raised no error" if multi else
                    "the script ran as a single worker: auto-sharding does not apply",
                    status=NOT_REPRODUCED if multi and run.outcome in ("ok", "stopped") else INCONCLUSIVE,
                    anywhere=True))
    return out + _seen_209(run) + [Seen("TFP210", 0, (
        "the verifier does not run parameter-server clusters: what each worker reads from the coordinator is not "
        "observed"), status=INCONCLUSIVE, anywhere=True, runtime=False)]


# TFP209: TensorFlow's shape errors when the global batch sizes a per-replica tensor
SHAPE_ERRORS = [symptoms.pattern("global-batch-shape")]
WHEN_RAN = {"TFP209": "no shape error (a size that is only counted, like `tf.range`, fails silently: not observed)"}


def _seen_209(run) -> list[Seen]:
    """TFP209: a shape error TensorFlow raised at a line, or in the function body (the replica function)
    that holds it: it decides a finding on any line of that body."""
    from tfpar_lint.verify.probes import error_matches
    from tfpar_lint.verify.probes.scope import _block_lines

    out: list[Seen] = []
    for err in run.all_errors():
        if not error_matches(err, SHAPE_ERRORS):
            continue
        at = error_line(err) or 0
        body = _block_lines(run.path, at, loops=False) if at else set()
        caught = " (the script caught it)" if err.get("caught") else ""
        out.append(Seen("TFP209", at, (f"TensorFlow raised {run.error_text(err)}{caught} at line {at}, in the replica "
                                       f"function ({run.ctx()})"),
                        tuple(err.get("script_lines") or ()) + tuple(sorted(body)), runtime=False))
    return out
