"""Keras callbacks that change the training state, given to some workers only (the TFP609 rule
asks it).

A callback changes the training state when it sets the optimizer's learning rate
(``LearningRateScheduler``, ``ReduceLROnPlateau``, a ``Callback`` subclass whose methods assign
``optimizer.learning_rate`` / ``lr``, ``assign`` to it or ``keras.backend.set_value`` it) or stops
training (``EarlyStopping``, a subclass setting ``model.stop_training``).  It is given to some
workers only when it is created, or added to the callbacks list, under a chief test
(``lifecycle.task_guard``), or chosen by a conditional expression whose test is one
(``[sched, board] if is_chief else [board]``).

Names are resolved only through :class:`tfpar_lint.semantic.Module`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, ClassInfo, Module, Scope, arg, call_method, keyword
from tfpar_lint.semantic.lifecycle import Guard, chief_test, mwms_state, task_guard
from tfpar_lint.semantic.walk import syntax_children

LEARNING_RATE = "learning rate"
STOPS = "stops training"
# Keras callbacks (canonical names: tf.keras, keras and tf_keras spell them alike)
STATE_CALLBACKS = {"keras.callbacks.LearningRateScheduler": LEARNING_RATE,
                   "keras.callbacks.ReduceLROnPlateau": LEARNING_RATE,
                   "keras.callbacks.EarlyStopping": STOPS}
CALLBACK_BASE = "keras.callbacks.Callback"
_LR_ATTRS = frozenset({"learning_rate", "lr"})
_SET_VALUE = frozenset({"keras.backend.set_value"})
_LIST_ADD = frozenset({"append", "insert", "extend"})


def _class_of(m: Module, call: cst.Call, site: CallSite) -> Optional[ClassInfo]:
    for v in m.infer_at(call, site):
        if isinstance(v.info, ClassInfo):
            return v.info
    for v in m.infer(call.func, site.scope, site.order):
        if isinstance(v.info, ClassInfo):
            return v.info
    return None


def _class_changes(m: Module, cls: ClassInfo, depth: int = 0) -> Optional[str]:
    """What a local ``Callback`` subclass changes: the learning rate or training's end (its bases'
    changes count), None when it changes neither or is no callback."""
    if depth > 4:
        return None
    outer = cls.scope.parent or cls.scope
    is_callback = False
    for base in cls.bases:
        q, _ = m.qualified_name(base, outer, 0)
        if q in STATE_CALLBACKS:
            return STATE_CALLBACKS[q]
        if q == CALLBACK_BASE:
            is_callback = True
            continue
        for v in m.infer(base, outer, 10 ** 9):
            if isinstance(v.info, ClassInfo) and v.info is not cls:
                got = _class_changes(m, v.info, depth + 1)
                if got:
                    return got
                is_callback = is_callback or _is_callback_class(m, v.info, depth + 1)
    if not is_callback:
        return None
    methods = list(cls.methods.values())
    for target, _value, sc, _od in m.attr_assigns:
        if any(f is g for g in m.enclosing_functions(sc) for f in methods):
            if target.attr.value in _LR_ATTRS:
                return LEARNING_RATE
            if target.attr.value == "stop_training":
                return STOPS
    for f in methods:
        for cs in m.calls_within(f):
            cm = call_method(cs.node)
            if cm is not None and cm[1] in ("assign", "assign_add", "assign_sub") \
                    and isinstance(cm[0], cst.Attribute) and cm[0].attr.value in _LR_ATTRS:
                return LEARNING_RATE
            q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
            target = arg(cs.node, 0, "x")
            if q in _SET_VALUE and isinstance(target, cst.Attribute) and target.attr.value in _LR_ATTRS:
                return LEARNING_RATE
    return None


def _is_callback_class(m: Module, cls: ClassInfo, depth: int) -> bool:
    if depth > 4:
        return False
    outer = cls.scope.parent or cls.scope
    for base in cls.bases:
        if m.qualified_name(base, outer, 0)[0] == CALLBACK_BASE:
            return True
        for v in m.infer(base, outer, 10 ** 9):
            if isinstance(v.info, ClassInfo) and v.info is not cls and _is_callback_class(m, v.info, depth + 1):
                return True
    return False


def state_change(m: Module, call: cst.Call, site: CallSite) -> Optional[str]:
    """What the callback ``call`` creates changes in training (``LEARNING_RATE``, ``STOPS``), or None."""
    q, _ = m.qualified_name(call.func, site.scope, site.order)
    if q in STATE_CALLBACKS:
        return STATE_CALLBACKS[q]
    if q:
        return None
    cls = _class_of(m, call, site)
    return _class_changes(m, cls) if cls is not None else None


@dataclass
class OneSidedCallback:
    node: cst.CSTNode  # the callback's creation, or its addition to the list
    what: str  # LEARNING_RATE / STOPS
    callback: str  # its source text
    test: cst.CSTNode  # the chief test
    chief_only: bool  # True: only the chief gets it; False: only the other workers
    fit: CallSite


def _mwms_fits(m: Module) -> list[CallSite]:
    """``model.fit(..., callbacks=...)`` of a model holding MultiWorkerMirroredStrategy variables,
    run by every worker (no task test around it)."""
    out = []
    for cs, recv, _meth in m.method_calls(("fit",)):
        if keyword(cs.node, "callbacks") is None:
            continue
        vals = m.infer_at(recv, cs)
        if vals and all(v.kind == api.MODEL for v in vals) and any(mwms_state(m, v) for v in vals) \
                and task_guard(m, cs) is None:
            out.append(cs)
    return out


def _added_under(m: Module, call: cst.Call, site: CallSite) -> Optional[tuple[CallSite, Guard]]:
    """The guard of the ``callbacks.append(<the callback>)`` that adds it to a list, when the
    callback is bound to a name first (``sched = LearningRateScheduler(...)``)."""
    for cs, _recv, meth in m.method_calls(_LIST_ADD):
        item = arg(cs.node, 1 if meth == "insert" else 0)
        if item is None:
            continue
        made = m.reaching_exprs(item, cs.scope, cs.order) if isinstance(item, cst.Name) else None
        if made and any(e is call for e, _s, _o in made):
            g = task_guard(m, cs)
            if g is not None:
                return cs, g
    return None


_LIST_SHAPES = (cst.Name, cst.List, cst.Tuple, cst.BinaryOperation, cst.IfExp)


def _given_to(m: Module, fit: CallSite) -> Optional[set[int]]:
    """ids of the calls that make the callbacks ``fit`` gets (list literals, ``+``, conditional
    choices, items appended to the list's names), through local names; None when some part of the
    list cannot be followed (a helper's result)."""
    out: set[int] = set()
    for e, s, o in m.feeding_exprs(keyword(fit.node, "callbacks"), fit.scope, fit.order):
        if not isinstance(e, _LIST_SHAPES):
            return None
        work: list[cst.CSTNode] = [e]
        while work:
            n = work.pop()
            if isinstance(n, cst.Call):
                out.add(id(n))
            elif isinstance(n, cst.Name):
                for item, i_s, i_o in m.container_items(n, s, o) or ():
                    made = m.reaching_exprs(item, i_s, i_o) if isinstance(item, cst.Name) else [(item, i_s, i_o)]
                    out.update(id(c) for c, _s, _o in made or () if isinstance(c, cst.Call))
            elif isinstance(n, (cst.List, cst.Tuple, cst.BinaryOperation, cst.IfExp, cst.Element, cst.StarredElement)):
                work.extend(syntax_children(n))
    return out


def one_sided_callbacks(m: Module) -> Iterator[OneSidedCallback]:
    """Callbacks that change the training state, given to some workers of a
    MultiWorkerMirroredStrategy ``fit`` only (see the module's docstring)."""
    fits = _mwms_fits(m)
    if not fits:
        return
    given = [_given_to(m, fit) for fit in fits]
    known = None if any(g is None for g in given) else set().union(*given)
    seen: set[int] = set()
    for cs in m.calls:
        what = state_change(m, cs.node, cs)
        if what is None or (known is not None and id(cs.node) not in known):
            continue  # not a callback that changes training, or one no multi-worker fit gets
        g = task_guard(m, cs)
        node: cst.CSTNode = cs.node
        if g is None:
            added = _added_under(m, cs.node, cs)
            if added is not None:
                node, g = added[0].node, added[1]
        if g is not None and id(node) not in seen:
            seen.add(id(node))
            yield OneSidedCallback(node, what, m.code(cs.node), g.node, g.chief_only, fits[0])
    # [sched, board] if is_chief else [board]
    for fit in fits:
        for e, s, o in _choices(m, keyword(fit.node, "callbacks"), fit.scope, fit.order):
            t = chief_test(m, e.test, s, o)
            if t is not True and t is not False:
                continue
            for branch, only_chief in ((e.body, t), (e.orelse, not t)):
                other = e.orelse if branch is e.body else e.body
                for item, _is, _io in m.container_items(branch, s, o) or ():
                    made = m.reaching_exprs(item, s, o) if isinstance(item, cst.Name) else [(item, s, o)]
                    for c, cs_, co in made or ():
                        site = m.site_of_call.get(id(c)) if isinstance(c, cst.Call) else None
                        what = state_change(m, c, site) if site is not None else None
                        if what is None or id(e) in seen or _in_branch(m, c, other, s, o):
                            continue
                        seen.add(id(e))
                        yield OneSidedCallback(item, what, m.code(c), e.test, only_chief, fit)


def _choices(m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> list:
    """The conditional expressions (``a if test else b``) that feed ``expr`` through local names,
    ``+`` and list literals, as (IfExp, scope, order)."""
    out = []
    for e, s, o in m.feeding_exprs(expr, scope, order):
        work: list[cst.CSTNode] = [e]
        while work:
            n = work.pop()
            if isinstance(n, cst.IfExp):
                out.append((n, s, o))
            elif isinstance(n, (cst.BinaryOperation, cst.List, cst.Tuple, cst.Element, cst.StarredElement)):
                work.extend(syntax_children(n))
    return out


def _in_branch(m: Module, call: cst.Call, branch: cst.BaseExpression, scope: Scope, order: int) -> bool:
    """The callback made at ``call`` is also an item of the other branch."""
    for item, s, o in m.container_items(branch, scope, order) or ():
        made = m.reaching_exprs(item, s, o) if isinstance(item, cst.Name) else [(item, s, o)]
        if any(e is call for e, _s, _o in made or ()):
            return True
    return False
