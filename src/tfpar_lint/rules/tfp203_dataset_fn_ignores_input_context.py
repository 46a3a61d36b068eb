from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import per_replica_size
from tfpar_lint.semantic import arg, replicated
from tfpar_lint.semantic.partitions import in_unit_test, own_partition

# Parameter-server training does not shard by design (each worker is one replica and reads the
# whole dataset, shuffled differently): the PS tutorial's dataset_fn ignores its context.
MULTI = api.MULTI_WORKER_STRATEGIES


def _passed(callee, cs) -> dict:
    """The arguments ``cs`` gives a plain function's parameters: name -> (expr, scope, order)."""
    if callee.cls is not None or any(a.star for a in cs.node.args):
        return {}
    names = [p.name.value for p in callee.params]
    out = {}
    for i, a in enumerate(cs.node.args):
        if a.keyword is not None:
            out[a.keyword.value] = (a.value, cs.scope, cs.order)
        elif i < len(names):
            out[names[i]] = (a.value, cs.scope, cs.order)
    return out


class DatasetFnIgnoresInputContext(Rule):
    CODE = "TFP203"
    NAME = "dataset-fn-ignores-input-context"
    SUMMARY = "`distribute_datasets_from_function` callback that ignores its input context (no shard, no per-replica batch)"
    FIX_HINT = ("Shard with `ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)` and batch with "
                "`ctx.get_per_replica_batch_size(global_batch_size)`.")
    PROBE = "input"
    MARKERS = (STRATEGY_MARKERS, ("datasets_from_function",))
    # the relevance stage (tfpar_lint.relevance): a dataset function given to a strategy
    NEEDS = (("strategy",), tuple(f"attr:{x}" for x in api.DISTRIBUTE_FN_METHODS))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, meth, strat in m.strategy_method_calls(api.DISTRIBUTE_FN_METHODS):
            if any(v.qname in api.PARAMETER_SERVER_STRATEGIES for v in strat) or not replicated(strat):
                continue  # parameter servers read whole datasets by design; one replica needs no split
            fns = m.resolve_function(arg(cs.node, 0, "dataset_fn"), cs.scope, cs.order)
            if not fns or any(v.kind != api.FUNCTION for v in m.infer_at(arg(cs.node, 0, "dataset_fn"), cs)):
                continue  # some alternative is a callable we cannot see (`fn if callable(fn) else lambda _: fn`)
            multi = all(v.qname in MULTI for v in strat)
            misused = [fn for fn in fns if self._context_used_as_dataset(fn)]
            if misused and len(misused) == len(fns):
                fn = misused[0]
                yield Report(cs.node, f"the dataset function passed to `{meth}` treats its input context "
                                      f"`{fn.params[0].name.value}` as a dataset: TensorFlow calls it with a "
                                      f"`tf.distribute.InputContext`, so it raises `AttributeError: 'InputContext' "
                                      f"object has no attribute ...`, and nothing shards the data or sizes the "
                                      f"per-replica batch; build the dataset inside the function, shard with "
                                      f"`ctx.input_pipeline_id` and batch with `ctx.get_per_replica_batch_size(...)`")
                continue
            if all(m.param_used(fn, 0) is False for fn in fns) and (
                    multi or not all(self._batches_per_replica(fn) for fn in fns)):
                # Single-worker strategies: the TPU guide ignores the context and batches with
                # `global // strategy.num_replicas_in_sync` computed by hand, which is correct.
                # Sharding and batching matter only where they change what replicas see: one host
                # has one input pipeline (no shard needed), and a function that batches nothing
                # itself (a dataset built and batched elsewhere) shows no batch to judge.
                # a unit test runs in one process: its TPU is one host's, its batch sizes the
                # test's choice; a process that holds only its own partition has nothing to shard
                in_test = in_unit_test(m, cs.scope)
                tpu = any(v.qname in api.TPU_STRATEGIES for v in strat) and not in_test
                global_batch = any(self._batches_globally(fn) for fn in fns)
                if not multi and (in_test or (not tpu and not global_batch)):
                    continue
                own = multi and all(own_partition(m, fn) for fn in fns)
                if own and not global_batch:
                    continue
                if multi and not own:
                    symptom = "every worker reads all the data and each replica gets a whole global batch"
                elif own:
                    symptom = "each replica gets a whole global batch (N times the intended batch)"
                elif global_batch:
                    symptom = ("each replica gets a whole global batch (N times the intended batch) and, with "
                               "several workers, every worker reads all the data")
                else:
                    symptom = "on a TPU with several hosts every host reads all the data (nothing shards it)"
                yield Report(cs.node, f"the dataset function passed to `{meth}` ignores its input context: "
                                      f"{symptom}; shard with `ctx.input_pipeline_id` and batch with "
                                      f"`ctx.get_per_replica_batch_size(...)`")
                continue
            if multi and all(not self._shards(fn) for fn in fns) and not all(own_partition(m, fn) for fn in fns):
                yield Report(cs.node, f"under a multi-worker strategy the dataset function passed to `{meth}` never "
                                      f"calls `.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)`: every worker "
                                      f"reads the same data")

    def _context_used_as_dataset(self, fn) -> bool:
        """Every use of the context parameter is a tf.data method call on it (``ctx.batch(...)``):
        the function was written for a dataset, not for an InputContext."""
        m = self.module
        if not fn.params or fn.params[0].star:
            return False
        pname = fn.params[0].name.value
        refs = {id(r.node) for r in m.function_refs(fn) if r.node.value == pname}
        if not refs:
            return False
        as_dataset = {id(c.node.func.value) for c in m.calls_within(fn)
                      if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value in api.DATASET_METHODS
                      and id(c.node.func.value) in refs}
        return as_dataset == refs

    def _batches_per_replica(self, fn, depth: int = 0, passed: Optional[dict] = None) -> bool:
        """``fn``, or a local function it calls, batches with a size that is per-replica by its
        value story (``global // strategy.num_replicas_in_sync`` computed by hand, as the TPU
        guide does; see ``_loss.per_replica_size``).  A callee's parameter is read as the
        argument of the call followed (``lambda _: get_dataset(per_replica)``), not as whatever
        its other callers pass."""
        m = self.module
        for cs in m.calls_within(fn):
            f = cs.node.func
            callees = m.resolve_function(f, cs.scope, cs.order)
            if not callees and not (isinstance(f, cst.Attribute) and f.attr.value == "batch") and any(
                    not a.star and per_replica_size(m, a.value, cs.scope, cs.order) for a in cs.node.args):
                return True  # a per-replica size handed to code that builds the dataset (`as_dataset(n // r)`)
            if isinstance(f, cst.Attribute) and f.attr.value == "batch":
                size = arg(cs.node, 0, "batch_size")
                where = (size, cs.scope, cs.order)
                if isinstance(size, cst.Name) and passed:
                    bs = m.lookup(size.value, cs.scope, cs.order)
                    if len(bs) == 1 and bs[0].kind == "param" and bs[0].func is fn and size.value in passed:
                        where = passed[size.value]
                if where[0] is not None and per_replica_size(m, *where):
                    return True
            if depth < 4:
                for callee in callees:
                    if callee is not fn and self._batches_per_replica(callee, depth + 1, _passed(callee, cs)):
                        return True
        return False

    def _batches_globally(self, fn, depth: int = 0, passed: Optional[dict] = None) -> bool:
        """``fn``, or a local function it calls, batches with a size that is not per replica by its
        value story (a batch this function makes, which every replica then receives whole)."""
        m = self.module
        for cs in m.calls_within(fn):
            f = cs.node.func
            callees = m.resolve_function(f, cs.scope, cs.order)
            if not callees and not (isinstance(f, cst.Attribute) and f.attr.value == "batch") and any(
                    not a.star and self._constant_int(a.value, cs) for a in cs.node.args):
                return True  # a fixed size handed to code that builds the dataset (`as_dataset(64)`)
            if isinstance(f, cst.Attribute) and f.attr.value == "batch":
                size = arg(cs.node, 0, "batch_size")
                where = (size, cs.scope, cs.order)
                if isinstance(size, cst.Name) and passed:
                    bs = m.lookup(size.value, cs.scope, cs.order)
                    if len(bs) == 1 and bs[0].kind == "param" and bs[0].func is fn and size.value in passed:
                        where = passed[size.value]
                if where[0] is not None and not per_replica_size(m, *where):
                    return True
            if depth < 4:
                for callee in callees:
                    if callee is not fn and self._batches_globally(callee, depth + 1, _passed(callee, cs)):
                        return True
        return False

    def _constant_int(self, expr: cst.BaseExpression, cs) -> bool:
        """An integer literal, or a name every value of which is one."""
        if isinstance(expr, cst.Integer):
            return True
        if isinstance(expr, cst.Name):
            got = self.module.reaching_exprs(expr, cs.scope, cs.order)
            return bool(got) and all(isinstance(e, cst.Integer) for e, _s, _o in got)
        return False

    def _shards(self, fn, depth: int = 0) -> bool:
        """``fn``, or a local function it calls (e.g. ``lambda ctx: make(gbs, ctx)``), calls ``.shard``;
        also True when the context is handed to a function we cannot see (it may shard)."""
        m = self.module
        ctx_name = fn.params[0].name.value if fn.params else None
        for cs in m.calls_within(fn):
            f = cs.node.func
            if isinstance(f, cst.Attribute) and f.attr.value == "shard":
                return True
            callees = m.resolve_function(f, cs.scope, cs.order)
            if not callees and ctx_name and any(
                    isinstance(a.value, cst.Name) and a.value.value == ctx_name for a in cs.node.args):
                return True
            if depth < 4:
                for callee in callees:
                    if callee is not fn and self._shards(callee, depth + 1):
                        return True
        return False
