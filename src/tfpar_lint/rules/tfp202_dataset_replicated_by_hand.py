from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.placement import calls_inside
from tfpar_lint.semantic import arg, is_constant
from tfpar_lint.semantic.partitions import in_unit_test_node

DATA = (api.DATASET, api.ITERATOR)
# APIs whose count is the number of replicas or devices (a loop over them builds per-replica inputs)
PER_REPLICA_APIS = ("num_replicas_in_sync", "worker_devices", "list_logical_devices", "list_physical_devices")


def _names(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

    node.visit(V())
    return out


class DatasetReplicatedByHand(Rule):
    CODE = "TFP202"
    NAME = "dataset-replicated-by-hand"
    SUMMARY = "one dataset replicated by hand for several replicas, or a values function that ignores its context"
    FIX_HINT = ("Let the strategy split the input: `strategy.experimental_distribute_dataset(ds)`, or use "
                "`ctx.replica_id_in_sync_group` in the values function.")
    PROBE = "input"
    # a strategy, device placement, or a sequence repeated by hand ([ds] * n, [ds for _ in ...])
    MARKERS = (STRATEGY_MARKERS + ("tf.device", "device(", "] *", "]*", "* [", "*[", "for _ in"),
               ("Dataset", "dataset", "distribute_values_from_function"))
    # data values (or a strategy's values function), in one of the shapes checked below
    # the relevance stage (tfpar_lint.relevance): data values (or a strategy's values function), in one of the shapes checked below
    NEEDS = (("dataset", "values_fn"),
             ("values_fn", "tf_device", *(f"text:{a}" for a in PER_REPLICA_APIS), "sequence_repeat",
              "free_comprehension"))

    def check(self) -> Iterator[Report]:
        # a unit test that gives every replica the same data does so on purpose (to compare the
        # replicas' results); it runs in the test runner's one process
        for r in self._reports():
            if not in_unit_test_node(self.module, r.node):
                yield r

    def _reports(self) -> Iterator[Report]:
        m = self.module
        # [ds] * n  (not as the input of a tf.data API such as sample_from_datasets, which is intended)
        data_api_args = self._data_api_inputs()
        for node, scope, order in m.sequence_repeats:
            if id(node) in data_api_args:
                continue
            seq = node.left if isinstance(node.left, (cst.List, cst.Tuple)) else node.right
            for el in seq.elements:
                vals = m.infer(el.value, scope, order)
                if vals and all(v.kind in DATA for v in vals):
                    yield Report(node, f"`{m.code(node)}` gives every device the same "
                                       f"{'iterator' if vals[0].kind == api.ITERATOR else 'dataset'}: each "
                                       f"replica reads the same data; distribute it with the strategy instead")
                    break
        # [iter(ds) for _ in range(n)], {device: ds for device in devices}
        for node, scope, order in m.comprehensions:
            if id(node) in data_api_args:
                continue
            targets: set[str] = set()
            for_in = node.for_in
            while for_in is not None:
                targets |= _names(for_in.target)
                for_in = for_in.inner_for_in
            elt = node.value if isinstance(node, cst.DictComp) else node.elt
            if targets & _names(elt):
                continue
            vals = m.infer(elt, scope, order)
            if vals and all(v.kind in DATA for v in vals):
                yield Report(node, f"`{m.code(node)}` makes one copy of the same dataset per device: each replica "
                                   f"reads the same data; distribute it with the strategy instead")
        # for device in devices: with tf.device(device): next(iter(ds))
        for cs in m.calls:
            f = cs.node.func
            if not (isinstance(f, cst.Name) and f.value == "iter") or not cs.loops or m.lookup("iter", cs.scope, cs.order):
                continue
            device_items = [w for w in cs.withs if m.qualified_name(
                w.item.func if isinstance(w.item, cst.Call) else w.item, cs.scope, cs.order)[0] == "tensorflow.device"]
            if not device_items:
                continue
            vals = m.infer_at(arg(cs.node, 0), cs)
            if not vals or not all(v.kind == api.DATASET for v in vals):
                continue
            # the dataset must be one object shared by the iterations (created outside the device block)
            if any(v.site is None or any(w in v.site.withs for w in device_items) for v in vals):
                continue
            yield Report(cs.node, f"`{m.code(cs.node)}` under `{m.code(device_items[-1].item)}` in a loop iterates the "
                                  f"same dataset once per device: every device reads the same batches; distribute it "
                                  f"with the strategy instead")
        yield from self._appended_per_replica()
        yield from self._towers_share_one_batch()
        # experimental_distribute_values_from_function(lambda ctx: batch)
        for cs, recv, meth, strat in m.strategy_method_calls(api.DISTRIBUTE_VALUES_METHODS):
            fns = m.resolve_function(arg(cs.node, 0, "value_fn"), cs.scope, cs.order)
            if fns and all(m.param_used(fn, 0) is False and not self._returns_constant(fn) for fn in fns):
                yield Report(cs.node, f"the function passed to `{meth}` ignores its context argument: every "
                                      f"replica receives the same value; select the replica's part with "
                                      f"`ctx.replica_id_in_sync_group`")

    def _data_api_inputs(self) -> set[int]:
        """ids of the expressions that become the input of a tf.data API (``Dataset.zip``,
        ``sample_from_datasets``, ...): its arguments, and what reaches them through ``tuple(...)``
        / ``list(...)``, star-arguments, tuple and list displays, sequences joined with ``+`` or
        repeated with ``*`` (``Dataset.zip(features + (labels,))``) and local names
        (``copies = [ds] * 6; Dataset.zip(tuple(copies))``).  Datasets combined into one example
        (six columns zipped together) are not copies for replicas."""
        m = self.module
        out: set[int] = set()
        for cs in m.calls:
            q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
            if not q.startswith("tensorflow.data"):
                continue
            work = [(a.value, cs.scope, cs.order) for a in cs.node.args]
            budget = 200
            while work and budget:
                budget -= 1
                e, scope, order = work.pop()
                if id(e) in out:
                    continue
                out.add(id(e))
                if isinstance(e, (cst.Tuple, cst.List)):
                    work += [(el.value, scope, order) for el in e.elements]
                elif isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value in ("tuple", "list") \
                        and not m.lookup(e.func.value, scope, order):
                    work += [(a.value, scope, order) for a in e.args]
                elif isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.Add, cst.Multiply)):
                    # tuple(copies) + (labels,), (ds,) * 3: a sequence built of its operands
                    work += [(e.left, scope, order), (e.right, scope, order)]
                elif isinstance(e, cst.GeneratorExp):
                    out.add(id(e))
                elif isinstance(e, cst.Name):
                    for fe, fs, fo in m.feeding_exprs(e, scope, order):
                        if fe is not e:
                            work.append((fe, fs, fo))
        return out

    def _appended_per_replica(self) -> Iterator[Report]:
        """``for _ in range(strategy.num_replicas_in_sync): its += [iter(ds)]`` (or ``.append``): a
        list filled with the same dataset once per replica or device."""
        m = self.module
        loops: dict[int, cst.For] = {}  # the for statements (from their target bindings: no tree walk)
        for scope in [m.scope] + [f.scope for f in m.functions] + [c.scope for c in m.classes]:
            for bs in scope.bindings.values():
                for b in bs:
                    if b.kind == "for" and isinstance(b.node, cst.For):
                        loops[id(b.node)] = b.node
        for loop in loops.values():
            if not any(a in m.code(loop.iter) for a in PER_REPLICA_APIS):
                continue
            targets = _names(loop.target)
            for elem, site in self._list_additions(loop.body):
                if elem is None or site is None or targets & _names(elem):
                    continue
                vals = m.infer_at(elem, site)
                if vals and all(v.kind in DATA for v in vals):
                    yield Report(elem, f"`{m.code(elem)}` is added once per replica in the loop over "
                                       f"`{m.code(loop.iter)}`: every replica gets the same data; distribute "
                                       f"the dataset with the strategy instead")

    def _list_additions(self, body: cst.CSTNode):
        """(element, call site to infer it at) for ``x += [e, ...]`` and ``x.append(e)`` in ``body``."""
        m = self.module
        found: list = []

        class V(cst.CSTVisitor):
            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                if isinstance(node.operator, cst.AddAssign) and isinstance(node.value, (cst.List, cst.Tuple)):
                    for el in node.value.elements:
                        e = el.value
                        found.append((e, m.site_of_call.get(id(e)) if isinstance(e, cst.Call) else None))

            def visit_Call(self, node: cst.Call) -> None:
                if isinstance(node.func, cst.Attribute) and node.func.attr.value == "append" and node.args:
                    found.append((node.args[0].value, m.site_of_call.get(id(node))))

        body.visit(V())
        return found

    def _towers_share_one_batch(self) -> Iterator[Report]:
        """A tower loop (``for i ...: with tf.device(<device i>):``) whose towers all use one batch
        drawn before the loop (``x = iterator.get_next()`` outside it): every tower trains on it."""
        m = self.module
        reported: set[int] = set()
        for cs, _ in m.calls_to(api.DEVICE_SCOPE):
            dev = arg(cs.node, 0, "device_name")
            if not cs.loops or dev is None or isinstance(dev, cst.SimpleString):
                continue
            per_tower = _names(dev)  # the names that tell the towers apart
            for inner in calls_inside(m, cs.node):
                for a in inner.node.args:
                    if per_tower & _names(a.value):
                        continue
                    vals = m.infer_at(a.value, inner)
                    if not vals or not all(v.kind == api.ELEMENT and v.site is not None for v in vals):
                        continue
                    if not all(v.site.func is cs.func and v.site.loops < cs.loops for v in vals):
                        continue
                    origin = vals[0].origin
                    if id(origin) in reported:
                        continue
                    reported.add(id(origin))
                    yield Report(origin, f"`{m.code(origin)}` is drawn once, before the loop of `{m.code(cs.node)}` "
                                         f"towers, and every tower uses it: all towers train on the same batch; "
                                         f"draw one batch per tower (or distribute the dataset with a strategy)")

    def _returns_constant(self, fn) -> bool:
        """Every return is a literal or ``tf.constant(<literal>)``: a value meant to be the same on every
        replica (broadcasting a scalar), not a batch of data."""
        m = self.module
        if not fn.returns:
            return False
        for expr, order in fn.returns:
            if is_constant(expr):
                continue
            if isinstance(expr, cst.Call) and m.qualified_name(expr.func, fn.scope, order)[0] in (
                    "tensorflow.constant", "tensorflow.convert_to_tensor") and is_constant(arg(expr, 0, "value")):
                continue
            return False
        return True
