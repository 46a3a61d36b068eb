from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import replicated
from tfpar_lint.semantic import Scope, call_method
from tfpar_lint.semantic.perreplica import in_hedge

CONVERTERS = ("float", "int", "bool", "complex")


class PerReplicaResultAsTensor(Rule):
    """Only the uses that raise with several replicas are flagged: ``.numpy()``,
    ``float()``/``int()``/``bool()``/``complex()`` and an f-string format spec
    (``f"{r:.3f}"``).  A bare ``print(r)`` / ``f"{r}"`` shows the PerReplica
    wrapper and is what the save-and-load tutorial does on purpose: not flagged."""

    CODE = "TFP506"
    NAME = "per-replica-result-as-tensor"
    SUMMARY = "result of `strategy.run` used as one tensor (`.numpy()`, `float()`, `f\"{x:.3f}\"`) without `strategy.reduce`"
    FIX_HINT = ("Reduce it first: `strategy.reduce(tf.distribute.ReduceOp.SUM, result, axis=None)`, or look at "
                "`strategy.experimental_local_results(result)`.")
    SEVERITY = "error"
    PROBE = "loss"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run", "call_for_each_replica"),
               ("numpy", "float(", "int(", "bool(", "complex(", ":", "+", "-", "*", "/"))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def _per_replica(self, expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
        vals = self.module.infer(expr, scope, order)
        strategies = [v.source for v in vals if v.source is not None]
        return bool(vals) and all(v.kind == api.PER_REPLICA for v in vals) and replicated(strategies) \
            and len(strategies) == len(vals)

    def _builtin(self, call: cst.Call, scope: Scope, order: int) -> Optional[str]:
        f = call.func
        if isinstance(f, cst.Name) and not self.module.lookup(f.value, scope, order):
            return f.value
        return None

    def check(self) -> Iterator[Report]:
        m = self.module
        tail = ("is the per-replica result of `strategy.run` (a PerReplica value when there are several "
                "replicas); reduce it with `strategy.reduce(...)` or use `strategy.experimental_local_results(...)`")
        for cs in m.calls:
            if m.single_replica_path(cs.ifs):
                continue
            cm = call_method(cs.node)
            if cm is not None and cm[1] == "numpy" and not cs.node.args \
                    and self._per_replica(cm[0], cs.scope, cs.order) and not in_hedge(m, cm[0], cs):
                yield Report(cs.node, f"`{m.code(cs.node)}` raises `AttributeError: 'PerReplica' object has no "
                                      f"attribute 'numpy'`: `{m.code(cm[0])}` {tail}")
                continue
            name = self._builtin(cs.node, cs.scope, cs.order)
            if name in CONVERTERS and len(cs.node.args) == 1 and not cs.node.args[0].star \
                    and cs.node.args[0].keyword is None \
                    and self._per_replica(cs.node.args[0].value, cs.scope, cs.order):
                yield Report(cs.node, f"`{m.code(cs.node)}` raises `TypeError` (`{name}()` argument must be a "
                                      f"number, not 'PerReplica'): `{m.code(cs.node.args[0].value)}` {tail}")
        yield from self._arithmetic(tail)
        for node, scope, order in m.fstring_exprs:
            if node.format_spec and self._per_replica(node.expression, scope, order):
                yield Report(node, f"`{m.code(node.expression)}` formatted with a format spec raises `TypeError: "
                                   f"unsupported format string passed to PerReplica.__format__`: "
                                   f"`{m.code(node.expression)}` {tail}")

    def _arithmetic(self, tail: str) -> Iterator[Report]:
        """``total += per_replica`` / ``a + per_replica``: PerReplica defines no arithmetic, and
        tensors refuse to convert it (``TypeError`` / ``ValueError: Attempt to convert a value
        (PerReplica...)``)."""
        m = self.module
        for node, scope, order in m.arithmetic:
            if m.single_replica_path(m.ifs_at.get(id(node), ())):
                continue  # `else` of `if strategy.num_replicas_in_sync > 1:`: a plain tensor there
            for side in (node.left, node.right):
                if isinstance(side, (cst.Name, cst.Attribute)) and self._per_replica(side, scope, order):
                    yield Report(node, f"`{m.code(node)}` raises `TypeError` (unsupported operand type for "
                                       f"'PerReplica'): `{m.code(side)}` {tail}")
                    break
        scopes = [m.scope] + [f.scope for f in m.functions] + [c.scope for c in m.classes]
        for sc in scopes:
            for bs in sc.bindings.values():
                for b in bs:
                    node = b.node
                    if b.kind != "aug" or not isinstance(node, cst.AugAssign) \
                            or m.single_replica_path(m.ifs_at.get(id(node), ())):
                        continue
                    if isinstance(node.value, (cst.Name, cst.Attribute)) \
                            and self._per_replica(node.value, b.scope, b.order):
                        yield Report(node, f"`{m.code(node)}` raises `TypeError` (unsupported operand type for "
                                           f"'PerReplica'): `{m.code(node.value)}` {tail}")
