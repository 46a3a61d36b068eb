"""Datasets: dataset chains, auto-shard policies and the places where a dataset is handed to a
strategy (the questions of the TFP204-208 input-pipeline rules)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, Module, Scope, Value, arg, call_method, keyword

POLICY_PREFIX = "tensorflow.data.experimental.AutoShardPolicy."
IN_MEMORY_SOURCES = frozenset(
    "tensorflow.data.Dataset." + n
    for n in ("from_tensor_slices", "from_tensors", "range", "from_generator", "random")
)
FILE_READERS = frozenset(
    {"tensorflow.data.TFRecordDataset", "tensorflow.data.TextLineDataset",
     "tensorflow.data.FixedLengthRecordDataset"}
)
# Strategies whose `experimental_distribute_dataset` / Keras `fit` auto-shard across workers.
# TPUStrategy is left out on purpose: a single-host TPU has one input worker (no auto-sharding).
AUTOSHARDING = api.MULTI_WORKER_STRATEGIES


def chain(v: Value) -> Iterator[Value]:
    """``v`` and the datasets it was derived from, outermost first."""
    seen = 0
    while v is not None and v.kind == api.DATASET and seen < 200:
        yield v
        v = v.source
        seen += 1


def method_of(v: Value) -> Optional[str]:
    """``ds.shard(...)`` -> "shard" for a value created by a dataset method call."""
    o = v.origin
    if isinstance(o, cst.Call):
        cm = call_method(o)
        if cm is not None:
            return cm[1]
    return None


def root(v: Value) -> Value:
    last = v
    for x in chain(v):
        last = x
    return last


def policy_of_options(m: Module, opts: Optional[cst.BaseExpression], site: CallSite) -> Optional[str]:
    """The AutoShardPolicy member set on the `tf.data.Options` object ``opts``
    ("OFF", "FILE", "DATA", "AUTO", "HINT"); "" when none is set; None when unknown."""
    if opts is None:
        return None
    vals = m.infer_at(opts, site)
    if len(vals) != 1 or vals[0].origin is None or vals[0].qname != "tensorflow.data.Options":
        return None
    found: Optional[str] = ""
    for value, scope, order in policy_assignments(m, vals[0].origin):
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            # the old spelling, `options.experimental_distribute.auto_shard = False`: sharding off
            found = "AUTO" if value.value == "True" else "OFF"
            continue
        q, _ = m.qualified_name(value, scope, order)
        found = q[len(POLICY_PREFIX):] if q.startswith(POLICY_PREFIX) else None
    return found


def policy_assignments(m: Module, options: cst.CSTNode) -> list[tuple[cst.BaseExpression, Scope, int]]:
    """The values assigned to ``<x>.experimental_distribute.auto_shard_policy`` (any attribute chain
    ending in ``auto_shard_policy``, or in ``auto_shard``, its boolean of TensorFlow 2.0 and 2.1) of
    the `tf.data.Options` object made at ``options``, in order."""
    out = []
    for target, value, scope, order in m.attr_assigns:
        if target.attr.value not in ("auto_shard_policy", "auto_shard"):
            continue
        base = target.value
        while isinstance(base, cst.Attribute):
            base = base.value
        bvals = m.infer(base, scope, order)
        if len(bvals) == 1 and bvals[0].origin is options:
            out.append((value, scope, order))
    return out


@dataclass
class Policy:
    name: Optional[str]  # "OFF", "FILE", ... ; "AUTO" when never set; None when unknown
    node: Optional[cst.CSTNode] = None  # the with_options call that applied it


def _helper_results(m: Module, x: Value) -> Optional[list[Value]]:
    """For a dataset returned by a module-local helper (its origin is the helper call),
    the datasets the helper's ``return`` statements produce; None when ``x`` is not one."""
    call = x.origin
    if not isinstance(call, cst.Call) or method_of(x) is not None or x.source is None:
        return None
    site = x.site or m.site_of_call.get(id(call))
    if site is None:
        return []
    out: list[Value] = []
    for fn in m.resolve_function(call.func, site.scope, site.order):
        for expr, order in fn.returns:
            out.extend(m.infer(expr, fn.scope, order))
    return out


def policy(m: Module, v: Value, _depth: int = 0) -> Policy:
    """The auto-shard policy in force on dataset ``v`` (the last ``with_options`` wins)."""
    for x in chain(v):
        inner = _helper_results(m, x) if _depth < 5 else None
        if inner is not None:
            ps = {policy(m, r, _depth + 1).name if r.kind == api.DATASET else None for r in inner}
            if len(ps) != 1 or None in ps:
                return Policy(None)
            name = ps.pop()
            if name != "AUTO":
                return Policy(name, x.origin)
            continue
        if method_of(x) == "with_options":
            call = x.origin
            site = x.site or m.site_of_call.get(id(call))
            if site is None:
                return Policy(None, call)
            p = policy_of_options(m, arg(call, 0, "options"), site)
            if p == "":
                continue  # options without a policy: keep looking
            return Policy(p, call)
        if method_of(x) == "apply":
            return Policy(None)  # an arbitrary transformation may set options
    return Policy("AUTO")


def shard_calls(v: Value) -> list[cst.Call]:
    return [x.origin for x in chain(v) if method_of(x) == "shard"]


def batches_after_rebatch(v: Value) -> bool:
    return any(method_of(x) in ("rebatch", "unbatch") for x in chain(v))


@dataclass
class Consumer:
    node: cst.Call  # the call handing the dataset to the strategy
    dataset: Value
    strategies: list[Value]
    how: str  # "experimental_distribute_dataset" | "fit"


def consumers(m: Module) -> Iterator[Consumer]:
    """Datasets handed to a known strategy: ``strategy.experimental_distribute_dataset(ds)``
    or ``model.fit(ds)`` for a model built (or fitted) under a strategy's scope."""
    for cs, recv, meth in m.method_calls(api.DISTRIBUTE_DATASET_METHODS | {"fit"}):
        if meth == "fit":
            mv = m.infer_at(recv, cs)
            if not mv or not all(v.kind == api.MODEL for v in mv):
                continue
            strat, _ = m.scope_items(cs)
            if not strat:
                for v in mv:
                    if v.site is not None:
                        k, _ = m.scope_strategies(v.site)
                        strat = strat + k
            data = arg(cs.node, 0, "x")
        else:
            strat = m.strategies(recv, cs)
            if not strat:
                continue
            data = arg(cs.node, 0, "dataset")
        if not strat or data is None:
            continue
        for dv in m.infer_at(data, cs):
            if dv.kind == api.DATASET:
                yield Consumer(cs.node, dv, strat, meth)


def all_autosharding(strategies: list[Value]) -> bool:
    return bool(strategies) and all(v.qname in AUTOSHARDING for v in strategies)


def literal_false(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def list_files_unseeded(call: cst.Call) -> bool:
    """``Dataset.list_files(pattern)`` that shuffles with a random seed (no ``seed=``, not ``shuffle=False``)."""
    if any(a.star for a in call.args):
        return False
    shuffle = arg(call, 1, "shuffle")
    seed = arg(call, 2, "seed")
    if literal_false(shuffle):
        return False
    if seed is not None and not (isinstance(seed, cst.Name) and seed.value == "None"):
        return False
    return True


def keyword_or(call: cst.Call, pos: int, kw: str) -> Optional[cst.BaseExpression]:
    return arg(call, pos, kw) or keyword(call, kw)
