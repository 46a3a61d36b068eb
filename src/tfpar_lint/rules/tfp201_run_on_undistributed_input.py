from __future__ import annotations

from typing import Iterator

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import Value, arg, is_constant, one_local_replica, one_replica, replicated
from tfpar_lint.semantic.kinds import Kinds


def _path(m, vals: list[Value]) -> str:
    """" (on the path where `cond`)": the branch a plain value was made on, or the other branch
    of the innermost ``if`` a distributed one was made on (its chain of sources, nearest first);
    "" when it cannot be told."""
    for v in vals:
        plain = v.kind in PLAIN
        seen = 0
        while v is not None and seen < 30:
            if v.site is not None and v.site.ifs:
                ifs = v.site.ifs if plain else v.site.ifs[:-1] + ((v.site.ifs[-1][0], not v.site.ifs[-1][1]),)
                return f" (on the path where {m.path_text(ifs)})"
            v, seen = v.source, seen + 1
    return ""


def _array(v: Value) -> bool:
    """An array a data library made (``np.load(...)``, ``pd.read_csv(...)``): whole, on the host."""
    return Kinds.is_array(v)


def _maker(v: Value):
    """The expression that made the object a batch ``v`` was drawn from (``train_generator``'s
    ``flow_from_directory(...)``)."""
    seen = 0
    while v is not None and seen < 20 and v.kind in (api.BATCH, api.PLAIN_ITERATOR) and v.source is not None:
        v, seen = v.source, seen + 1
    if v is not None and v.kind == api.BATCH and isinstance(v.origin, cst.Param):
        return v.origin  # host data a parameter receives (train_on_batch's x)
    return v.origin if v is not None else None

def _host_method(m, src):
    """The Keras model method whose parameter ``src`` is (``train_on_batch``'s ``x``), or None."""
    if not isinstance(src, cst.Param):
        return None
    return next((fn for fn in m.functions if any(p is src for p in fn.params)), None)


PLAIN = (api.ELEMENT, api.ITERATOR, api.DATASET)


class RunOnUndistributedInput(Rule):
    CODE = "TFP201"
    NAME = "run-on-undistributed-input"
    SUMMARY = "`strategy.run` fed input no distribution API made (a plain tf.data dataset, a generator's batches, captured arrays)"
    FIX_HINT = ("Iterate `strategy.experimental_distribute_dataset(ds)` (or "
                "`distribute_datasets_from_function`) and pass its elements to `strategy.run`.")
    PROBE = "input"
    MARKERS = (STRATEGY_MARKERS, (".run(", "experimental_run", "call_for_each_replica"))
    # the relevance stage (tfpar_lint.relevance): a function run by strategy.run, or its result
    NEEDS = (("strategy",), ("replica_run",))

    def check(self) -> Iterator[Report]:
        m = self.module
        for cs, recv, _meth, _strat in m.replica_runs():
            strat = m.strategies(recv, cs)  # every possible receiver is a strategy
            if not strat or one_replica(strat) or one_local_replica(m, strat):
                continue  # one replica (OneDeviceStrategy, one device, one visible GPU) cannot duplicate data
            args = arg(cs.node, 1, "args")
            exprs: list[cst.BaseExpression] = []
            if isinstance(args, (cst.Tuple, cst.List)):
                exprs = [el.value for el in args.elements if not isinstance(el, cst.StarredElement)]
            elif args is not None:
                exprs = [args]
            kwargs = arg(cs.node, 2, "kwargs")
            if isinstance(kwargs, cst.Dict):
                exprs += [el.value for el in kwargs.elements if isinstance(el, cst.DictElement)]
            fns = m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order)
            for i, e in enumerate(exprs):
                vals = [v for v in m.infer_at(e, cs) if not m.contexts.contradicts(v, cs)]
                if isinstance(e, (cst.Tuple, cst.List)) and not vals[0].kind in PLAIN + (api.BATCH,):
                    # args=((x, y), lr): the items of a literal (the nested loop targets of a dataset)
                    for el in e.elements:
                        got = m.infer_at(el.value, cs)
                        if got and all(v.kind in PLAIN + (api.BATCH,) or _array(v) for v in got):
                            vals = got
                            break
                if vals and any(v.kind in PLAIN for v in vals):  # on every path: one plain path is enough
                    hosts = self._host_calls(cs, e, lambda got: any(v.kind in PLAIN for v in got))
                    for h, he, hvals in hosts:
                        path = "" if all(v.kind in PLAIN for v in hvals) else _path(m, hvals)
                        yield Report(
                            h.node,
                            f"`{m.code(h.node.func)}` passes `{m.code(he)}`, drawn from a tf.data dataset that was "
                            f"never distributed{path}, to `{m.code(cs.node.func)}` ({{line}}) in the `tf.function` "
                            f"`{cs.func.name}`: every replica gets the same full batch (N-times updates, no "
                            f"speed-up); iterate `{m.code(recv)}.experimental_distribute_dataset(...)` instead",
                            {"argument": m.code(he), "host": True},
                            related=cs.node,
                        )
                    if hosts or self._hosts_all_told(cs, e):
                        break  # at the hosts; or every host passes distributed data on its own path
                    path = "" if all(v.kind in PLAIN for v in vals) else _path(m, vals)
                    yield Report(
                        cs.node,
                        f"`{m.code(cs.node.func)}` receives `{m.code(e)}`, drawn from a tf.data dataset that was "
                        f"never distributed{path}: every replica gets the same full batch (N-times updates, no "
                        f"speed-up); iterate `{m.code(recv)}.experimental_distribute_dataset(...)` instead",
                        {"argument": m.code(e)},
                    )
                    break
                if vals and all(v.kind == api.BATCH or _array(v) for v in vals) \
                        and not any(m.made_with_strategy(v) for v in vals) \
                        and isinstance(args, (cst.Tuple, cst.List)) and self._fed_to_model(fns, i):
                    src = _maker(vals[0])
                    what = "a batch drawn from" if vals[0].kind == api.BATCH else "an array made by"
                    made = f"`{m.code(src) if src is not None else m.code(e)}`"
                    host = _host_method(m, src)
                    if host is not None:
                        what, made = "the host data", f"`{host.name}` gets as `{src.name.value}`"
                    yield Report(
                        cs.node,
                        f"`{m.code(cs.node.func)}` receives `{m.code(e)}`, {what} "
                        f"{made}, which no distribution API made: "
                        f"every replica gets the same full batch (N-times updates, no speed-up); feed a "
                        f"`tf.data.Dataset` through `{m.code(recv)}.experimental_distribute_dataset(...)` "
                        f"(or `distribute_datasets_from_function`)",
                        {"argument": m.code(e)},
                    )
                    break
            else:
                if not [e for e in exprs if not is_constant(e)]:
                    captured = self._captured(fns)
                    if captured is not None:
                        node, expr, v = captured
                        how = m.code(v.origin) if v.origin is not None else m.code(expr)
                        yield Report(
                            node,
                            f"the function run by `{m.code(cs.node.func)}` ({{line}}) gets no input from the "
                            f"strategy and feeds `{m.code(expr)}` (made by `{how}` outside it) to the model: every "
                            f"replica{' and worker' if not replicated(strat) else ''} computes on the same data "
                            f"(N-times the work, no speed-up); distribute it "
                            f"(`{m.code(recv)}.experimental_distribute_dataset(...)`, "
                            f"`distribute_datasets_from_function`, or the coordinator's per-worker dataset) and "
                            f"pass it in `args=`",
                            {"argument": m.code(expr)},
                            related=cs.node,
                        )
                        continue
                read = self._closure_read(cs)
                if read is not None:
                    yield Report(
                        cs.node,
                        f"the function run by `{m.code(cs.node.func)}` draws `{m.code(read)}` from a tf.data "
                        f"dataset that was never distributed (through a closure or global, not `args=`): every "
                        f"replica gets the same batch (N-times updates, no speed-up); iterate "
                        f"`{m.code(recv)}.experimental_distribute_dataset(...)` and pass its elements in `args=`",
                        {"argument": m.code(read)},
                    )

    def _host_calls(self, cs, e, plain) -> list:
        """When ``e``, an argument of the run at ``cs``, is a parameter of the ``tf.function`` that
        makes the run (a wrapper the host code calls with each batch), the calls of that wrapper in
        this module that pass it a plain value: (call site, argument, its values) each.  The user
        acts there; the run is named as the related place."""
        m = self.module
        fn = cs.func
        if fn is None or not isinstance(e, cst.Name) or m.runs_traced(fn) is not True:
            return []
        bs = m.lookup(e.value, cs.scope, cs.order)
        if len(bs) != 1 or bs[0].kind != "param" or bs[0].func is not fn:
            return []
        params = [p for p in fn.params if not p.star]
        if fn.cls is not None and params:
            params = params[1:]  # self
        idx = next((i for i, p in enumerate(params) if p is bs[0].node), None)
        if idx is None:
            return []
        out = []
        for h in m.callers(fn):
            if h.scope.module is not m:
                continue
            he = arg(h.node, idx, e.value)
            if he is None:
                continue
            got = [v for v in m.infer_at(he, h) if not m.contexts.contradicts(v, h)]
            if got and plain(got):
                out.append((h, he, got))
        return out

    def _hosts_all_told(self, cs, e) -> bool:
        """Every call of the ``tf.function`` wrapper that runs ``cs`` (and passes ``e``) is in this
        module: what reaches the run is what they pass (judged at each of them, on its path)."""
        m = self.module
        fn = cs.func
        if fn is None or not isinstance(e, cst.Name) or m.runs_traced(fn) is not True:
            return False
        bs = m.lookup(e.value, cs.scope, cs.order)
        if len(bs) != 1 or bs[0].kind != "param" or bs[0].func is not fn:
            return False
        callers = m.callers(fn)
        return bool(callers) and all(h.scope.module is m for h in callers) and not m.is_passed_around(fn)

    def _fed_to_model(self, fns, index: int) -> bool:
        """Argument ``index`` of the run goes, in every function it runs, into a model's forward
        pass (input, not a learning rate or a step number every replica should get)."""
        m = self.module
        if not fns:
            return False
        for fn in fns:
            params = [p for p in fn.params if not p.star]
            if fn.cls is not None and params and not fn.is_lambda:
                params = params[1:]  # a bound method (self.step): self is not an argument
            if index >= len(params) or m.feeds_model(fn, params[index].name.value) is None:
                return False
        return True

    def _captured(self, fns):
        """(the model call, the data expression, its value) where a function run with no input
        feeds data from outside it to a model."""
        for fn in fns:
            got = self.module.captured_data(fn)
            if got is not None:
                cs, expr, v = got
                return cs.node, expr, v
        return None

    def _closure_read(self, cs) -> "cst.Call | None":
        """A ``next(it)`` / ``it.get_next()`` inside the replica function on an iterator of a plain
        dataset created outside it (a closure or global): every replica draws the same element."""
        m = self.module
        for fn in m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order):
            for inner in m.calls_within(fn):
                vals = m.infer_at(inner.node, inner)
                if vals and all(v.kind == api.ELEMENT and v.source is not None
                                and v.source.kind in (api.ITERATOR, api.DATASET)
                                and v.source.origin is not None and not m.created_within(v.source.origin, fn)
                                for v in vals):
                    return inner.node
        return None

    # -- fix (unsafe: every other use of the dataset now sees distributed values): wrap the
    #    dataset where it is built, `ds = strategy.experimental_distribute_dataset(<dataset>)`
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        from tfpar_lint.fix import UNSAFE, Fix, statement_of

        m = self.module
        cs = m.site_of_call.get(id(report.node))
        call = report.node
        if report.data.get("host"):
            # reported at the host call: the strategy is the related run's, the data the host's argument
            call = report.related
            exprs = [a.value for a in report.node.args]
        else:
            e = arg(call, 1, "args") if isinstance(call, cst.Call) else None
            exprs = [el.value for el in e.elements] if isinstance(e, (cst.Tuple, cst.List)) else [e]
        if cs is None or not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return None
        recv = call.func.value
        if not isinstance(recv, cst.Name):
            return None
        wanted = report.data.get("argument")
        datasets = set()
        for ex in exprs:
            if ex is None or m.tree.code_for_node(ex) != wanted:
                continue
            for v in m.infer_at(ex, cs):
                while v is not None and v.kind != api.DATASET:
                    v = v.source
                if v is None or v.origin is None or v.site is None:
                    return None
                datasets.add((id(v.origin), v))
        if len(datasets) != 1:
            return None
        (_, ds), = datasets
        stmt = statement_of(m, ds.origin)
        if stmt is None or not isinstance(stmt.body[0], cst.Assign) or stmt.body[0].value is not ds.origin:
            return None
        if ds.site.scope is not cs.scope and ds.site.scope is not m.scope:
            return None
        if not m.lookup(recv.value, ds.site.scope, ds.site.order):
            return None  # the strategy is not bound yet where the dataset is built
        return Fix(f"Distribute the dataset with `{recv.value}.experimental_distribute_dataset`", UNSAFE).replace(
            ds.origin, f"{recv.value}.experimental_distribute_dataset({m.tree.code_for_node(ds.origin)})")
