"""Data a parameter-server coordinator hands to its workers inside scheduled functions.

``ClusterCoordinator.schedule(fn, args=...)`` runs ``fn`` on some worker.  Its input should come
from a per-worker dataset (``coordinator.create_per_worker_dataset``); a NumPy array, an eager
tensor or an iterator made on the coordinator, captured by ``fn`` (or by the replica function it
runs) or passed in ``args``, is the same data on every worker, sent from the coordinator.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, FunctionInfo, NameRef, Scope
from tfpar_lint.semantic.nodes import arg, call_method

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

EAGER_TENSORS = frozenset({"tensorflow.constant", "tensorflow.convert_to_tensor"})


def schedule_calls(m: "Module") -> Iterator[CallSite]:
    """``coordinator.schedule(...)`` calls whose receiver is a ``ClusterCoordinator``."""
    for cs, recv, _meth in m.method_calls(("schedule",)):
        vals = m.infer_at(recv, cs)
        if vals and all(v.qname.endswith("coordinator.ClusterCoordinator") for v in vals):
            yield cs


def coordinator_data(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> Optional[str]:
    """What coordinator-side data ``expr`` holds ("a NumPy array from `np.load(...)`", ...), or None."""
    if _depth > 6:
        return None
    vals = m.infer(expr, scope, order)
    if vals and all(v.kind == api.ITERATOR for v in vals):
        return "an iterator of a dataset made on the coordinator"
    if vals and all(v.kind == api.ELEMENT for v in vals):
        return "an element of a dataset read on the coordinator"
    origins = m.origin_exprs(expr, scope, order)
    if not origins:
        return None
    whys = []
    for e, sc, od in origins:
        why = None
        if isinstance(e, cst.Call):
            q, _ = m.qualified_name(e.func, sc, od)
            if q.startswith("numpy.") and not q.startswith("numpy.random.default_rng"):
                why = f"a NumPy array (`{m.code(e)}`)"
            elif q in EAGER_TENSORS:
                why = f"an eager tensor (`{m.code(e)}`)"
            else:
                cm = call_method(e)
                if cm is not None and cm[1] == "astype":
                    why = coordinator_data(m, cm[0], sc, od, _depth + 1)
        elif isinstance(e, cst.Subscript):  # labels[train_mask]: a slice of one
            why = coordinator_data(m, e.value, sc, od, _depth + 1)
        if why is None:
            return None
        whys.append(why)
    return whys[0] if whys else None


def scheduled_functions(m: "Module", cs: CallSite, _depth: int = 0) -> list[FunctionInfo]:
    """The functions a schedule call runs: ``fn``, the local functions it calls and the replica
    functions it runs with ``strategy.run`` (a few calls deep)."""
    out: list[FunctionInfo] = []
    work = [(f, 0) for f in m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order)]
    seen: set[int] = set()
    while work:
        fn, depth = work.pop()
        if id(fn) in seen or depth > 3:
            continue
        seen.add(id(fn))
        out.append(fn)
        for inner in m.calls_within(fn):
            for callee in m.callees(inner):
                work.append((callee, depth + 1))
            cm = call_method(inner.node)
            if cm is not None and cm[1] in api.RUN_METHODS:
                for target in m.resolve_function(arg(inner.node, 0, "fn"), inner.scope, inner.order):
                    work.append((target, depth + 1))
    return out


def captured_refs(m: "Module", fn: FunctionInfo) -> Iterator[NameRef]:
    """References in ``fn`` to names bound outside it (closures and module globals)."""
    for r in m.function_refs(fn):
        bs = m.lookup(r.node.value, r.scope, r.order)
        if not bs:
            continue
        inside = False
        for b in bs:
            s: Optional[Scope] = b.scope
            while s is not None:
                if s is fn.scope:
                    inside = True
                    break
                s = s.parent
        if not inside:
            yield r
