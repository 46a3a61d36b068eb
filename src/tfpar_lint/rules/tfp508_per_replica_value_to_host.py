from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import CallSite, arg, call_method
from tfpar_lint.semantic.perreplica import per_replica_kind

# Python-side functions whose inputs TensorFlow converts to tensors (a PerReplica reaches the function
# as a 0-d object array, or the call fails inside a tf.function)
PY_FUNCTIONS = frozenset({"tensorflow.numpy_function", "tensorflow.py_function", "tensorflow.py_func",
                          "tensorflow.experimental.numpy_function"})
# TensorFlow ops that convert their input: "It looks like you are using a PerReplica object while not
# inside a replica context" (measured for reduce_mean and convert_to_tensor on TF 2.21)
CONVERTING_OPS = frozenset("tensorflow." + n for n in (
    "reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_any", "reduce_all",
    "math.reduce_mean", "math.reduce_sum", "math.reduce_max", "math.reduce_min", "math.reduce_prod",
    "convert_to_tensor", "cast", "squeeze", "reshape", "argmax", "argmin", "math.argmax", "math.argmin",
    "size", "shape", "unstack", "gather", "one_hot", "math.round", "round"))
KIND_TEXT = {
    "run": "the PerReplica result of `strategy.run`",
    "batch": "an element of a distributed dataset (a PerReplica value with one component per replica)",
    "hedged": ("a per-replica value: the same function reads this container's items as PerReplica "
               "(`.values[...]` in a `try` with a fallback) on line {line}"),
}


class PerReplicaValueToHost(Rule):
    """A PerReplica value (a distributed batch, a ``strategy.run`` result) handed to code that wants
    one tensor or a NumPy array, in cross-replica context."""

    CODE = "TFP508"
    NAME = "per-replica-value-to-host"
    SUMMARY = ("PerReplica value (distributed batch or `strategy.run` result) given to host code: `.numpy()`, "
               "NumPy, `tf.numpy_function`, a TF op or a metric outside `strategy.run`")
    FIX_HINT = ("Reduce or gather it first (`strategy.reduce`, `strategy.gather`), take the local components "
                "(`strategy.experimental_local_results(x)`), or do the work inside the function given to "
                "`strategy.run`.")
    SEVERITY = "error"
    PROBE = "loss"
    # (no bracket inside these strings: tfpar_lint.deep's nesting count reads them as code)
    # A PerReplica comes from a strategy: a strategy marker, or a component taken by index
    # (`x.values[0]`: a PerReplica known by use).  `.values` alone, on every dict (`d.values()`),
    # made the pre-filter pass a third of Keras's files for this rule only; among the uses it counts.
    MARKERS = (STRATEGY_MARKERS + (".values[",),
               (".run", "experimental_run_v2", "distribute_dataset", "distribute_datasets_from_function",
                ".values", "distribute_values_from_function"))
    # the relevance stage (tfpar_lint.relevance): a strategy.run result, distributed data, or x.values[i] hedged
    NEEDS = (("strategy", "values_item"), ("replica_run", "distributes", "values_item"))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs in m.calls:
            if m.in_replica_fn(cs.scope) or self._run_by_replicas_only(cs):
                continue
            got = self._sink(cs)
            if got is None:
                continue
            expr, kind, what = got
            related = None
            text = KIND_TEXT[kind]
            if kind == "hedged":
                related = self._hedge_node(expr, cs)
            yield Report(
                cs.node,
                f"`{m.code(expr)}` is {text}; {what} in cross-replica context fails once there is more than "
                f"one replica; reduce or gather it first (`strategy.reduce` / `strategy.gather`), use "
                f"`strategy.experimental_local_results(...)`, or do this inside `strategy.run`",
                {"value": m.code(expr), "kind": kind},
                related=related,
            )

    def _run_by_replicas_only(self, cs: CallSite) -> bool:
        """``cs`` is in a function of this module that the project calls only from replica functions
        (a loss helper of ``losses.py`` called by the step that ``strategy.run`` runs in
        ``train.py``): it runs in replica context, where a per-replica value is the replica's own."""
        m = self.module
        fns = list(m.enclosing_functions(cs.scope))
        if not fns:
            return False
        fn = fns[-1]  # the outermost: the one other modules can call
        calls = [(m, c) for c in m.callers(fn)]
        for mod in m.importers():
            for c in mod.calls:
                if any(f is fn for f in mod.resolve_function(c.node.func, c.scope, c.order)):
                    calls.append((mod, c))
        return bool(calls) and any(mod is not m for mod, _c in calls) \
            and all(mod.in_replica_fn(c.scope) for mod, c in calls)

    def _hedge_node(self, expr: cst.BaseExpression, cs: CallSite) -> Optional[cst.CSTNode]:
        from tfpar_lint.semantic.perreplica import hedged_roots, root_of

        m = self.module
        root = root_of(m, expr, cs.scope, cs.order)
        for fn in m.enclosing_functions(cs.scope):
            t = hedged_roots(m, fn).get(root)
            if t is not None:
                return t
        return None

    def _kind(self, expr: Optional[cst.BaseExpression], cs: CallSite, allow_run: bool = True) -> Optional[str]:
        if expr is None:
            return None
        k = per_replica_kind(self.module, expr, cs)
        if k == "run" and not allow_run:
            return None
        return k

    def _sink(self, cs: CallSite) -> Optional[tuple[cst.BaseExpression, str, str]]:
        m = self.module
        node = cs.node
        cm = call_method(node)
        if cm is not None:
            recv, meth = cm
            if meth == "numpy" and not node.args:
                # `.numpy()` of a strategy.run result is TFP506's
                k = self._kind(recv, cs, allow_run=False)
                if k:
                    return recv, k, "`.numpy()` (`AttributeError: 'PerReplica' object has no attribute 'numpy'`)"
                return None
            if meth == "update_state":
                for a in node.args:
                    k = self._kind(a.value, cs)
                    if k and k != "hedged":
                        return a.value, k, (f"`{m.code(node.func)}(...)` (`ValueError: It looks like you are using "
                                            f"a PerReplica object while not inside a replica context`)")
                return None
        f = node.func
        if isinstance(f, cst.Name) and f.value in ("float", "int") and not m.lookup(f.value, cs.scope, cs.order) \
                and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
            k = self._kind(node.args[0].value, cs, allow_run=False)
            if k and k != "hedged":
                return node.args[0].value, k, f"`{f.value}()` (`TypeError`)"
            return None
        q, _ = m.qualified_name(f, cs.scope, cs.order)
        if not q:
            return None
        if q in PY_FUNCTIONS:
            inp = arg(node, 1, "inp")
            items = [el.value for el in inp.elements] if isinstance(inp, (cst.List, cst.Tuple)) else [inp]
            for e in items:
                k = self._kind(e, cs)
                if k and k != "hedged":
                    return e, k, (f"`{m.code(f)}` (the Python function gets a 0-d object array wrapping the "
                                  f"PerReplica, not the values; inside a `tf.function` it raises `TypeError`)")
            return None
        if q.startswith("numpy.") and not q.startswith("numpy.random."):
            for a in node.args:
                if a.keyword is not None or a.star:
                    continue
                items = [el.value for el in a.value.elements] if isinstance(a.value, (cst.List, cst.Tuple)) \
                    else [a.value]
                for e in items:
                    k = self._kind(e, cs)
                    if k:
                        return e, k, (f"`{m.code(f)}(...)` (NumPy sees one opaque object: `TypeError` / "
                                      f"`ValueError`, or a 0-d object array)")
            return None
        if q in CONVERTING_OPS:
            a = node.args[0].value if node.args and node.args[0].keyword is None and not node.args[0].star else None
            k = self._kind(a, cs)
            if k and k != "hedged":
                return a, k, (f"`{m.code(f)}(...)` (`ValueError: It looks like you are using a PerReplica object "
                              f"while not inside a replica context`)")
        return None
