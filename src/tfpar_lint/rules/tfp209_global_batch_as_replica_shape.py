from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import replicated
from tfpar_lint.semantic import arg
from tfpar_lint.semantic.batchsizes import global_batch

# op -> (position, keyword) of its shape-like argument
SHAPE_ARGS = {
    "tensorflow.reshape": (1, "shape"),
    "tensorflow.zeros": (0, "shape"),
    "tensorflow.ones": (0, "shape"),
    "tensorflow.fill": (0, "dims"),
    "tensorflow.broadcast_to": (1, "shape"),
    "tensorflow.split": (1, "num_or_size_splits"),
    "tensorflow.random.normal": (0, "shape"),
    "tensorflow.random.uniform": (0, "shape"),
    "tensorflow.range": (0, "start"),
    "tensorflow.one_hot": (1, "depth"),
    "tensorflow.eye": (0, "num_rows"),
    "keras.ops.reshape": (1, "newshape"),
    "keras.ops.zeros": (0, "shape"),
    "keras.ops.ones": (0, "shape"),
}


class GlobalBatchAsReplicaShape(Rule):
    """The global batch size used as a size inside the function run by ``strategy.run``, where each
    replica holds only its share of the batch."""

    CODE = "TFP209"
    NAME = "global-batch-as-replica-shape"
    SUMMARY = ("global batch size used as a shape inside the function run by `strategy.run` (`tf.reshape`, "
               "`tf.zeros`, `tf.split`, `tf.range`...), where each replica holds only its share of the batch")
    FIX_HINT = ("Take the batch dimension from the tensor itself (`tf.shape(x)[0]`), or use the per-replica "
                "batch size (global batch // `num_replicas_in_sync`).")
    SEVERITY = "error"
    PROBE = "input"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run_v2", "call_for_each_replica"),
               ("num_replicas_in_sync", "global_batch_size", "batch("))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs in m.calls:
            q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
            spec = SHAPE_ARGS.get(q)
            if spec is None:
                continue
            strategies = m.replica_strategies(cs.scope)
            if not strategies or not replicated(strategies):
                continue
            shape = arg(cs.node, spec[0], spec[1])
            if shape is None:
                continue
            got = self._global_part(shape, cs)
            if got is None:
                continue
            part, why = got
            yield Report(
                part,
                f"`{m.code(part)}` is the global batch size ({why}), used as a size in `{m.code(cs.node.func)}` inside "
                f"a function run on every replica, where each replica holds only batch / num_replicas_in_sync "
                f"examples: it fails (`Cannot reshape a tensor with ...`, `Dimensions must be equal`) or silently "
                f"sizes the work for the whole batch; use `tf.shape(x)[0]`",
                {"size": m.code(part)},
            )

    def _global_part(self, shape: cst.BaseExpression, cs) -> Optional[tuple[cst.BaseExpression, str]]:
        m = self.module
        parts = [el.value for el in shape.elements] if isinstance(shape, (cst.List, cst.Tuple)) else [shape]
        for p in parts:
            if isinstance(p, (cst.Integer, cst.Float, cst.UnaryOperation)):
                continue
            why = global_batch(m, p, cs.scope, cs.order)
            if why:
                return p, why
        return None
