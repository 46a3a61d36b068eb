from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.loss import replicated
from tfpar_lint.semantic import call_method
from tfpar_lint.semantic.crossreplica import replica_fn_traced


class HostWorkInReplicaFn(Rule):
    """``.numpy()`` inside the function given to ``strategy.run`` when that function is traced by a
    ``tf.function``: its tensors are symbolic there."""

    CODE = "TFP705"
    NAME = "host-work-in-replica-fn"
    SUMMARY = ("`.numpy()` inside the function run by `strategy.run` under a `tf.function` (symbolic tensors: "
               "`AttributeError`)")
    FIX_HINT = ("Return the tensors from the replica function and convert them outside `strategy.run` (after "
                "`strategy.reduce` or `experimental_local_results`); inside it use TensorFlow ops (`tf.print`).")
    SEVERITY = "error"
    PROBE = "execution"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run_v2", "call_for_each_replica"), ("numpy()",))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        infos = m.replica_fn_infos
        for key, strategies in m.replica_functions().items():
            if not replicated(strategies):
                continue
            fn = infos[key]
            for cs in fn.calls:
                cm = call_method(cs.node)
                if cm is None or cm[1] != "numpy" or cs.node.args:
                    continue
                if replica_fn_traced(m, fn) is not True:
                    continue
                yield Report(
                    cs.node,
                    f"`{m.code(cs.node)}` runs inside `{fn.name}`, which `strategy.run` executes under a "
                    f"`tf.function`: its tensors are symbolic there (`AttributeError: 'SymbolicTensor' object has "
                    f"no attribute 'numpy'`); return the value and convert it outside `strategy.run`, or use "
                    f"`tf.print`",
                    {"function": fn.name},
                )
