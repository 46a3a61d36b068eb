"""The census of lost values: the questions the rules need answered about a value, asked of one
module, and for each one that got no kind, why (``tfpar-lint --explain-silence``,
``benchmarks/census.py``).

The questions are the ones every rule family rests on (not the ones a use answers by itself):

* ``replica function``: which function ``strategy.run(fn, ...)`` runs;
* ``replica input``: what each argument handed to the replicas (``args=``, ``kwargs=``) that the
  replica function feeds to a model is (not a step number or a flag);
* ``strategy``: that the receiver of ``run`` / ``experimental_run_v2`` / ``scope()`` is a strategy;
* ``object in replica function``: what the objects a replica function trains, steps, updates,
  calls or takes the variables of are (a model, an optimizer, a metric, a variable...);
* ``thread target``: which function a thread runs;
* ``object in thread``: the same for the functions a thread runs (and the sessions they run).

An answer is lost when no possible value has a kind.  Its reason is where the analysis lost it
(``Value.why`` of a value that is no value at all, see :data:`model.LOSS_REASONS`), or, for an
object of unknown kind that has an origin, how it came in: a parameter whose callers are not seen,
``**kwargs``, a call of code the analysis does not read.  An object made by TensorFlow, Keras or
NumPy whose kind no rule tracks (a tensor, an array) is known, not lost."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import (CALLEE, DECORATOR, KWARGS, MODULE_CAP, PARAMETER, UNBOUND, CallSite,
                                       FunctionInfo, Value)
from tfpar_lint.semantic.nodes import arg, call_method, keyword
from tfpar_lint.semantic.values import BUILTINS

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

OTHER = "other"
# roles
REPLICA_FUNCTION = "replica function"
REPLICA_INPUT = "replica input"
STRATEGY = "strategy"
REPLICA_OBJECT = "object in replica function"
THREAD_TARGET = "thread target"
THREAD_OBJECT = "object in thread"

# libraries whose calls make no object a rule tracks when their kind is unknown (a tensor, an array)
_KNOWN_ROOTS = frozenset({"tensorflow", "keras", "numpy", "pandas", "scipy", "tensorflow_datasets",
                          "tensorflow_addons", "tensorflow_probability", "math", "random"}) \
    | frozenset(getattr(sys, "stdlib_module_names", ()))
_KINDLESS = (api.UNKNOWN, api.NONE, api.API, api.MODULE)
_RUNS = api.RUN_METHODS | {"call_for_each_replica"}


@dataclass
class Question:
    role: str
    node: cst.CSTNode  # the expression asked about
    reason: str  # why it got no kind
    module: "Module"


ANSWERED = "answered"


def questions(m: "Module", answered: bool = False) -> list[Question]:
    """Every lost answer to the module's census questions, in source order of the calls
    (``answered``: the questions that got a kind too, with the reason :data:`ANSWERED`; the census
    benchmark compares runs of two versions on the questions both ask)."""
    out: list[Question] = []
    seen: set[tuple[int, str]] = set()

    def add(role: str, node: cst.CSTNode, reason: Optional[str]) -> None:
        if reason is None and answered:
            reason = ANSWERED
        if reason is not None and (id(node), role) not in seen:
            seen.add((id(node), role))
            out.append(Question(role, node, reason, m))

    for cs in m.calls:
        cm = call_method(cs.node)
        if cm is None or cm[1] not in _RUNS:
            continue
        recv, meth = cm
        if meth == "call_for_each_replica" and isinstance(recv, cst.Attribute) and recv.attr.value == "extended":
            recv = recv.value
        strat = m.strategies(recv, cs)
        if not strat and not (meth != "run" or keyword(cs.node, "args") is not None
                              or keyword(cs.node, "kwargs") is not None):
            continue  # `t.run()`, `sess.run(ops)`: no strategy's run
        add(STRATEGY, recv, reason(m, recv, cs) if not strat else None)
        fn = arg(cs.node, 0, "fn")
        fns = m.resolve_function(fn, cs.scope, cs.order) if fn is not None else []
        if fn is not None:
            add(REPLICA_FUNCTION, fn, _function_reason(m, fn, cs) if not fns else None)
        for i, e in enumerate(_handed(cs.node)):
            if fns and not _fed(m, fns, i, cs.node):
                continue  # a step number, a flag, `self`: no rule asks what it is
            add(REPLICA_INPUT, e, reason(m, e, cs))
    for cs in m.calls:
        for target, _a, _k, how in m.handed_over(cs):
            if how == "thread":
                add(THREAD_TARGET, target, None if m.resolve_function(target, cs.scope, cs.order)
                    else _function_reason(m, target, cs))
    table = m.replica_functions()
    for fid in table:
        for cs, recv in _receivers(m, m.replica_fn_infos[fid]):
            add(REPLICA_OBJECT, recv, reason(m, recv, cs))
    for fid in m.thread_targets():
        for cs, recv in _receivers(m, m.thread_fn_infos[fid]):
            add(THREAD_OBJECT, recv, reason(m, recv, cs))
    return out


def _fed(m: "Module", fns: list, index: int, call: cst.Call) -> bool:
    """Argument ``index`` of ``call``'s ``args=`` reaches a model's forward pass in some function it
    runs (the input the rules ask about); kwargs count as fed."""
    args = arg(call, 1, "args")
    n = len(args.elements) if isinstance(args, (cst.Tuple, cst.List)) else (1 if args is not None else 0)
    if index >= n:
        return True
    for fn in fns:
        params = [p for p in fn.params if not p.star]
        if fn.cls is not None and params and not fn.is_lambda:
            params = params[1:]
        if index < len(params) and m.feeds_model(fn, params[index].name.value) is not None:
            return True
    return False


def _handed(call: cst.Call) -> Iterator[cst.BaseExpression]:
    """The argument expressions ``strategy.run`` hands each replica."""
    args = arg(call, 1, "args")
    if isinstance(args, (cst.Tuple, cst.List)):
        yield from (el.value for el in args.elements if not isinstance(el, cst.StarredElement))
    elif args is not None:
        yield args
    kwargs = arg(call, 2, "kwargs")
    if isinstance(kwargs, cst.Dict):
        yield from (el.value for el in kwargs.elements if isinstance(el, cst.DictElement))


# the methods whose receiver a rule asks about inside a replica function or a thread (a model's
# training calls, an optimizer's step, a metric's update, a variable's update, a session's run, a
# save); and every ``X(...)`` of an object (a model's forward pass, a training function)
ASKED_METHODS = frozenset({"apply_gradients", "minimize", "get_updates", "update_state", "reset_states", "reset_state",
                           "result", "assign", "assign_add", "assign_sub", "fit", "fit_generator", "train_on_batch",
                           "predict", "evaluate", "save", "save_weights", "run"})
_VARIABLE_OWNERS = ("trainable_variables", "trainable_weights", "variables", "weights", "losses")


def _receivers(m: "Module", fn: FunctionInfo) -> Iterator[tuple[CallSite, cst.BaseExpression]]:
    """``(call, X)`` for the objects a rule asks about in ``fn``: the receiver of ``X.meth(...)`` for
    the methods above, ``X`` of ``X(...)``, the owner of ``X.trainable_variables`` handed to a call;
    X a local name, an attribute of one (``self.model``) or a subscript of one: not a module's API,
    not a function the module defines."""
    for cs in m.calls_within(fn):
        f = cs.node.func
        cm = call_method(cs.node)
        cands: list[cst.BaseExpression] = []
        if cm is not None and cm[1] in ASKED_METHODS:
            cands.append(cm[0])
        elif cm is None or (isinstance(cm[0], cst.Name) and cm[0].value == "self"):
            cands.append(f)  # model(x), self.net(x), steps[0]([x])
        for a in cs.node.args:
            if isinstance(a.value, cst.Attribute) and a.value.attr.value in _VARIABLE_OWNERS:
                cands.append(a.value.value)
        for x in cands:
            if isinstance(x, cst.Name) and x.value == "self":
                continue
            if isinstance(x, cst.Name) and x.value in BUILTINS and not m.lookup(x.value, cs.scope, cs.order):
                continue
            if not isinstance(x, (cst.Name, cst.Attribute, cst.Subscript)):
                continue
            if m.qualified_name(x, cs.scope, cs.order)[0]:
                continue  # an API (tf.reduce_mean)
            if x is f and m.resolve_function(x, cs.scope, cs.order):
                continue  # a function of the module
            yield cs, x


def reason(m: "Module", expr: cst.BaseExpression, cs: CallSite) -> Optional[str]:
    """Why ``expr`` has no kind at ``cs`` (None: some possible value has one, or it is an object of a
    known library)."""
    vals = m.infer_at(expr, cs)
    if any(v.kind not in _KINDLESS for v in vals):
        return None
    if any(v.kind == api.API for v in vals):
        return None  # a module or an API function
    reasons = [r for r in (_value_reason(m, v) for v in vals) if r is not None]
    if not reasons:
        return None
    for r in reasons:
        if r != OTHER:
            return r
    return OTHER


def _value_reason(m: "Module", v: Value) -> Optional[str]:
    if v.kind == api.NONE:
        return None
    if v.why:
        return v.why
    if v.origin is None:
        return None  # no why: a literal, a Python container, arithmetic, an implicit None
    if isinstance(v.info, FunctionInfo) or v.info is not None and v.kind == api.UNKNOWN and not isinstance(v.info, str):
        return None  # an instance of the module's own class, a function
    o = v.origin
    if isinstance(o, cst.Param):
        return KWARGS if o.star in ("*", "**") else PARAMETER
    q = v.qname or ""
    if q:
        root = q.split(".", 1)[0]
        if root in _KNOWN_ROOTS:
            return None  # a tensor, an array
        project = m.project
        if project is not None and any(True for _ in project._candidates(m, v.raw_qname or q)):
            return MODULE_CAP  # a module of the project that was not read (over a cap)
        return CALLEE
    if isinstance(v.info, str):
        return None  # told by its use
    return CALLEE


def _function_reason(m: "Module", expr: cst.BaseExpression, cs: CallSite) -> Optional[str]:
    """Why the function ``expr`` denotes is not known: the parameter of a decorator's wrapper, a
    parameter of unseen callers, a name bound nowhere..."""
    if isinstance(expr, cst.Name):
        bs = m.lookup(expr.value, cs.scope, cs.order)
        if not bs:
            return UNBOUND
        if len(bs) == 1 and bs[0].kind == "param" and bs[0].func is not None:
            deco = bs[0].func
            for f in m.enclosing_functions(deco.scope):
                if any(_names(d, f.name) for g in m.functions for d in g.decorators):
                    return DECORATOR
    if any(v.kind == api.API for v in m.infer_at(expr, cs)):
        return None  # a library's function (strategy.run(tf.compat.v1.metrics.mean, ...)): known
    got = reason(m, expr, cs)
    return got if got is not None else CALLEE


def _names(d: cst.BaseExpression, name: str) -> bool:
    target = d.func if isinstance(d, cst.Call) else d
    return (isinstance(target, cst.Name) and target.value == name) or \
        (isinstance(target, cst.Attribute) and target.attr.value == name)
