from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic.placement import MIRRORING, calls_inside, device_calls, device_calls_formatted
from tfpar_lint.semantic import arg
from tfpar_lint.semantic.scope_use import uses_with_strategy

CREATED = (api.MODEL, api.LAYER, api.VARIABLE, api.OPTIMIZER, api.METRIC, api.GENERATOR, api.CHECKPOINT)
# outside the scope: state the replicas would read (a random generator pinned on purpose is left
# alone: the random numbers guide does that)
PINNED = (api.MODEL, api.LAYER, api.VARIABLE, api.OPTIMIZER, api.METRIC)
# tf.compat.v1 graph code creates its variables with get_variable (tower loops under tf.device)
V1_VARIABLE_FACTORIES = frozenset({"tensorflow.get_variable", "tensorflow.compat.v1.get_variable"})


class DevicePinnedInScope(Rule):
    CODE = "TFP107"
    NAME = "device-pinned-in-scope"
    SUMMARY = "`tf.device(...)` inside `strategy.scope()` (ignored for variables) or inside a replica function (moves every replica's ops to one device)"
    FIX_HINT = ("Let the strategy place things: drop the `tf.device` block, or give the strategy the devices "
                "(`MirroredStrategy(devices=[...])`).")
    SEVERITY = "warning"
    PROBE = "scope"
    MARKERS = (STRATEGY_MARKERS, ("device(",))
    # the relevance stage (tfpar_lint.relevance): tf.device, and a mirroring strategy made here (in scope, or beside it) or a replica function
    NEEDS = (("strategy",), ("tf_device",), ("mirroring", "replica_run"))

    def check(self) -> Iterator[Report]:
        yield from self._in_scope_or_replica()
        yield from self._outside_scope()

    def _outside_scope(self) -> Iterator[Report]:
        """``with tf.device(...):`` outside every ``strategy.scope()`` building a model, layer,
        variable, optimizer or metric, in a module that runs a mirroring strategy (or one the
        module cannot resolve but uses as a strategy): the objects sit on that one device, not
        mirrored, and the strategy's replicas read them across devices."""
        m = self.module
        strategies = [s for s in self._module_strategies() if s.qname in MIRRORING or not s.qname]
        if not strategies:
            return
        for cs, _q in m.calls_to(api.DEVICE_SCOPE):
            if m.in_replica_fn(cs.scope) or m.scope_strategies(cs)[0]:
                continue  # the other shapes' ground
            made = [inner for inner in calls_inside(m, cs.node)
                    if self._makes_state(inner) and not self._dead(inner) and self._used_with_strategy(inner)]
            if not made:
                continue
            name = strategies[0].qname.rsplit(".", 1)[-1] or "strategy"
            yield Report(
                cs.node,
                f"`{m.code(cs.node)}` pins `{m.code(made[0].node)}` (line {{line}}) to one device, outside "
                f"`strategy.scope()`, in a program that trains with a {name}: the object is not mirrored, "
                f"so every replica reads it from that one device (a cross-device copy each step) and the "
                f"replicas' updates of it are not synchronised (unless the caller holds the scope); create "
                f"it under the strategy's scope without `tf.device`",
                {"device": m.code(arg(cs.node, 0, "device_name")) if arg(cs.node, 0, "device_name") else "",
                 "context": "outside"},
                related=made[0].node,
            )

    def _used_with_strategy(self, inner) -> bool:
        """The object made at ``inner`` is used with the strategy (:func:`uses_with_strategy`: under
        its scope, built into a model there, or read in a function that ``strategy.run`` runs, here
        or in a project module it is handed to).  A per-host object never touched there (a step
        counter on the host's CPU, read by the host's loop) is placement, not a mistake."""
        m = self.module
        for v in m.infer(inner.node, inner.scope, inner.order):
            if v.origin is None:
                return True  # not told: as before
            if next(uses_with_strategy(m, v), None) is not None:
                return True
            for fid in m.replica_functions():
                fn = m.replica_fn_infos[fid]
                if m.refs_to(v.origin, fn) or self._item_read_in(v.origin, fn):
                    return True  # read on every replica (a model only evaluated there too)
        return False

    def _item_read_in(self, origin, fn) -> bool:
        """An item of a container read in ``fn`` (``counters[0].assign_add(1)``) is the object made
        at ``origin``: the container's element values, as the analysis infers them."""
        m = self.module
        refs = {id(r.node): r for r in m.function_refs(fn)}
        subs = [n for n in _subscripts(fn.node) if id(n.value) in refs]
        for sub in subs:
            r = refs[id(sub.value)]
            if any(v.origin is origin for v in m.infer(sub, r.scope, r.order)):
                return True
            # a function reads its container when it runs, after the module's code filled it
            for item, i_scope, i_order in m.container_items(sub.value, r.scope, _LATE) or ():
                if any(v.origin is origin for v in m.infer(item, i_scope, i_order)):
                    return True
        return False

    def _module_strategies(self) -> list:
        m = self.module
        out = [v for cs, _q in m.calls_to(api.STRATEGY_CLASSES) for v in m.infer_at(cs.node, cs)
               if v.kind == api.STRATEGY]
        out += [strat[0] for _cs, _recv, _meth, strat in m.replica_runs()]
        return out

    def _dead(self, inner) -> bool:
        """``x = tf.Variable(...)`` whose name is bound again before anything reads it (a control
        case next to the real one: ``with tf.device("cpu"): v = tf.Variable(1.)`` then the same
        under the scope)."""
        m = self.module
        for bs in inner.scope.bindings.values():
            for b in bs:
                if b.value is not inner.node or b.path or b.kind != "assign":
                    continue
                later = [x.order for x in bs if x.order > b.order]
                if not later:
                    return False
                nxt = min(later)
                return not any(r.node.value == b.name and r.scope is inner.scope and b.order < r.order < nxt
                               for r in m.refs)
        return False

    def _makes_state(self, inner) -> bool:
        m = self.module
        if m.qualified_name(inner.node.func, inner.scope, inner.order)[0] in V1_VARIABLE_FACTORIES:
            return True
        vals = m.infer(inner.node, inner.scope, inner.order)
        return bool(vals) and all(v.kind in PINNED for v in vals)

    def _in_scope_or_replica(self) -> Iterator[Report]:
        m = self.module
        calls = [(cs, text, kind) for cs, text, kind, _ in device_calls(m)] + list(device_calls_formatted(m))
        for cs, text, kind in calls:
            strategies = m.replica_strategies(cs.scope)
            if strategies:
                if kind in ("GPU", "TPU") and all(s.qname in MIRRORING for s in strategies):
                    yield Report(
                        cs.node,
                        f"`{m.code(cs.node)}` inside a function run by `strategy.run` pins every replica's ops to "
                        f"`{text}`: the replicas no longer run on their own devices (all compute lands on one "
                        f"device); drop the `tf.device` block",
                        {"device": text, "context": "replica"},
                    )
                continue
            known, _ = m.scope_strategies(cs)
            if not known or not all(s.qname in MIRRORING for s in known):
                continue
            made = []
            for inner in calls_inside(m, cs.node):
                if m.qualified_name(inner.node.func, inner.scope, inner.order)[0] in V1_VARIABLE_FACTORIES:
                    made.append(inner)
                    continue
                vals = m.infer(inner.node, inner.scope, inner.order)
                if vals and all(v.kind in CREATED for v in vals):
                    made.append(inner)
            if made:
                yield Report(
                    cs.node,
                    f"`{m.code(cs.node)}` inside `strategy.scope()` is ignored for the variables created in it "
                    f"(`{m.code(made[0].node)}`, line {{line}}): the strategy still mirrors them on all its devices; "
                    f"drop the `tf.device` block or choose the devices with `MirroredStrategy(devices=[...])`",
                    {"device": text, "context": "scope"},
                    related=made[0].node,
                )

    # -- fix (unsafe: every op in the block moves to the strategy's placement): drop the
    #    `with tf.device(...):` line and dedent its body; a comment on that line stays, on a line of its own
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        import libcst as cst

        from tfpar_lint.fix import UNSAFE, Fix, line_indent, parent, reindent

        m = self.module
        item = parent(m, report.node)
        with_node = parent(m, item) if isinstance(item, cst.WithItem) else None
        if not isinstance(with_node, cst.With) or len(with_node.items) != 1 or item.asname is not None \
                or with_node.asynchronous is not None or not isinstance(with_node.body, cst.IndentedBlock):
            return None
        body = "".join(m.tree.code_for_node(s) for s in with_node.body.body)
        indent = line_indent(m, with_node)
        text = reindent(body, indent)
        if text is None:
            return None  # a multi-line string would change
        comment = with_node.body.header.comment
        if comment is not None:
            text = f"{indent}{comment.value}{m.tree.default_newline}" + text
        return (Fix("Drop the `tf.device` block (the strategy places its ops)", UNSAFE)
                .delete_statement(with_node, keep_comment=False).insert_lines_before(with_node, text))


_LATE = 1 << 60  # an order after every statement of the module


def _subscripts(node) -> list:
    """Every ``x[...]`` inside ``node``."""
    out: list = []

    class _Walk(cst.CSTVisitor):
        def visit_Subscript(self, n: cst.Subscript) -> None:
            out.append(n)

    node.visit(_Walk())
    return out
