"""Chief tests, evaluated: on which tasks of a cluster does a condition over the task type and index
hold, compared with the task TensorFlow itself makes the chief?

TensorFlow's rule (``multi_worker_util.is_chief``, ``strategy.extended.should_checkpoint``): the
``chief`` task when the cluster has one, else worker 0; a single process (no ``TF_CONFIG``) is its
own chief.  A hand-written test is evaluated on three clusters:

* one process: ``task_type`` and ``task_id`` are None;
* a cluster with a chief: chief 0, worker 0, worker 1;
* a worker-only cluster: worker 0, worker 1;

by substituting the task fields into its comparisons (three-valued: anything else in the test, a
look at the cluster spec for example, makes it unknown and the test is left alone).  A test that
holds on chief 0 and worker 0 of the cluster with a chief picks two chiefs; one that holds on the
chief task only picks none in a worker-only cluster.

The task fields are told by where their values come from (``semantic/lifecycle.task_source``: a
cluster resolver, ``TF_CONFIG``), and also by an ``isinstance(strategy, MultiWorkerMirroredStrategy)``
test around ``strategy.cluster_resolver`` (the branch narrows an annotated or unknown parameter).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.lifecycle import (TaskReading, holds_on, mwms_state, save_calls, task_source, task_tests,
                                           worker_zero_as_chief)
from tfpar_lint.semantic.model import Scope
from tfpar_lint.semantic.walk import contains, syntax_children  # noqa: F401 (contains: used by rules)

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

TASKS_ONE = ((None, None),)
TASKS_WITH_CHIEF = (("chief", 0), ("worker", 0), ("worker", 1))
TASKS_WORKERS = (("worker", 0), ("worker", 1))
_UNKNOWN = object()
UNKNOWN = "unknown"  # a task on which a partially evaluated test cannot be told


@dataclass
class BoolExpr:
    """A maximal boolean expression of the module with where it is."""

    node: cst.BaseExpression
    scope: Scope
    order: int
    ifs: tuple = ()  # enclosing (If, in_body) from the module down
    strategy_guard: Optional[str] = None  # "mwms" / "ps" / "other" when an isinstance test narrows


@dataclass
class Facts:
    exprs: list[BoolExpr] = field(default_factory=list)
    # id(Attribute ``X.cluster_resolver``) -> narrowing ("mwms" / "ps" / "other") by an enclosing isinstance
    narrowed: dict[int, str] = field(default_factory=dict)
    cluster_jobs: list[set[str]] = field(default_factory=list)  # literal clusters written in the module
    # break / return statements inside loops: (statement, enclosing ifs, innermost loop, scope, order)
    exits: list[tuple] = field(default_factory=list)


def _is_bool(node: cst.CSTNode) -> bool:
    # type() tests: libcst's node classes have no subclasses, and isinstance on them goes through ABCMeta
    t = type(node)
    return t is cst.BooleanOperation or t is cst.Comparison or (
        t is cst.UnaryOperation and type(node.operator) is cst.Not)


def _strategy_family(m: "Module", expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
    q, _ = m.qualified_name(expr, scope, 10**9)
    if not q:
        return None
    if q in api.MULTI_WORKER_STRATEGIES:
        return "mwms"
    if q in api.PARAMETER_SERVER_STRATEGIES:
        return "ps"
    if q in api.STRATEGY_CLASSES:
        return "other"
    return None


def facts(m: "Module") -> Facts:
    """The module's boolean expressions (with their ``if`` branches), ``break`` / ``return``
    statements inside loops, isinstance-narrowed ``cluster_resolver`` reads and literal clusters,
    in one iterative walk (no Python recursion: generated modules nest deeply)."""
    memo = m.rule_memo.setdefault("chieftests", {})
    if "facts" in memo:
        return memo["facts"]
    f = Facts()
    order_of = {id(r.node): r.order for r in m.refs}
    fn_of = m.function_of_node
    # (node, parent, scope, ifs, guards, loops, last order seen)
    stack: list[tuple] = [(m.tree, None, m.scope, (), (), ())]
    last_order = 0
    while stack:
        node, parent, scope, ifs, guards, loops = stack.pop()
        t = type(node)  # (type() tests: see _is_bool)
        if t is cst.Name:
            if id(node) in order_of:
                last_order = order_of[id(node)]
            continue  # a name has no syntax children
        if (t is cst.FunctionDef or t is cst.Lambda) and id(node) in fn_of:
            scope, loops = fn_of[id(node)].scope, ()
        if (t is cst.Break or t is cst.Return) and loops:
            f.exits.append((node, ifs, loops[-1], scope, last_order + 1))
        if _is_bool(node) and not _is_bool(parent) and type(parent) is not cst.IfExp:
            first = _first_name(node)
            f.exprs.append(BoolExpr(node, scope, order_of.get(id(first), 10**9) if first is not None else 10**9, ifs))
        if t is cst.IfExp and _is_bool(node.test):
            first = _first_name(node.test)
            f.exprs.append(BoolExpr(node.test, scope, order_of.get(id(first), 10**9) if first is not None else 10**9,
                                    ifs))
        if t is cst.Attribute and node.attr.value == "cluster_resolver":
            text = _EMPTY.code_for_node(node.value)
            for recv, fam in reversed(guards):
                if recv == text:
                    f.narrowed[id(node)] = fam
                    break
        if t is cst.Dict:
            for el in node.elements:
                if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) \
                        and el.key.evaluated_value == "cluster" and isinstance(el.value, cst.Dict):
                    f.cluster_jobs.append({e.key.evaluated_value for e in el.value.elements
                                           if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)})
        if t is cst.If:
            g = _isinstance_guard(m, node.test, scope)
            tasks = [(node.test, node, scope, ifs, guards, loops),
                     (node.body, node, scope, ifs + ((node, True),), guards + ((g,) if g else ()), loops)]
            if node.orelse is not None:
                tasks.append((node.orelse, node, scope, ifs + ((node, False),), guards, loops))
            stack.extend(reversed(tasks))
            continue
        inner_loops = loops + (node,) if t is cst.For or t is cst.While else loops
        stack.extend((c, node, scope, ifs, guards, inner_loops) for c in reversed(syntax_children(node)))
    memo["facts"] = f
    return f


_EMPTY = cst.Module(body=[])


def _first_name(node: cst.CSTNode) -> Optional[cst.Name]:
    """The first Name of ``node``'s subtree in source order (a stack, not a visitor: cheaper)."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            return n
        stack.extend(reversed(syntax_children(n)))
    return None


def _isinstance_guard(m: "Module", test: cst.BaseExpression, scope: Scope) -> Optional[tuple[str, str]]:
    """``isinstance(x, tf.distribute.MultiWorkerMirroredStrategy)`` -> ("x", "mwms")."""
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance"
            and len(test.args) == 2):
        return None
    fam = _strategy_family(m, test.args[1].value, scope)
    if fam is None:
        return None
    return _EMPTY.code_for_node(test.args[0].value), fam


# ------------------------------------------------------------------ task fields


def task_field(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> Optional[str]:
    """"type" / "index" when ``expr`` holds the task type / index of this process."""
    if _depth > 8:
        return None
    src = task_source(m, expr, scope, order)
    if src in ("type", "index"):
        return src
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("task_type", "task_id") \
            and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "cluster_resolver":
        if id(expr.value) in facts(m).narrowed:
            return "type" if expr.attr.value == "task_type" else "index"
        return None
    if isinstance(expr, cst.Subscript) and _config_key(expr) in ("type", "index"):
        inner = expr.value
        if isinstance(inner, cst.Subscript) and _config_key(inner) == "task" and _is_config_dict(m, inner.value, scope, order):
            return _config_key(expr)
    if isinstance(expr, cst.Name):
        bs = m.lookup(expr.value, scope, order)
        if len(bs) != 1:
            return None
        b = bs[0]
        if b.kind in ("assign", "annassign") and b.value is not None:
            val = b.value
            if b.path:
                if len(b.path) != 1 or not isinstance(val, (cst.Tuple, cst.List)) \
                        or b.path[0] >= len(val.elements):
                    return None
                val = val.elements[b.path[0]].value
            return task_field(m, val, b.scope, b.order, _depth + 1)
    return None


def _config_key(e: cst.Subscript) -> Optional[str]:
    if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
            and isinstance(e.slice[0].slice.value, cst.SimpleString):
        v = e.slice[0].slice.value.evaluated_value
        return v if isinstance(v, str) else None
    return None


def _is_config_dict(m: "Module", e: cst.BaseExpression, scope: Scope, order: int) -> bool:
    """``e`` holds a dict literal with "cluster" and "task" keys: a TF_CONFIG the module builds."""
    if not isinstance(e, cst.Name):
        return False
    origins = m.origin_exprs(e, scope, order)
    if not origins:
        return False
    for o, _s, _o in origins:
        if not isinstance(o, cst.Dict):
            return False
        keys = {el.key.evaluated_value for el in o.elements
                if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)}
        if not {"cluster", "task"} <= keys:
            return False
    return True


def narrowed_family(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> Optional[str]:
    """For a task field read through ``X.cluster_resolver``: the strategy family X is known to be
    ("mwms", "ps", "other"), by inference or by an isinstance test around it; None if unknown."""
    if _depth > 8:
        return None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Attribute) \
            and expr.value.attr.value == "cluster_resolver":
        fam = facts(m).narrowed.get(id(expr.value))
        if fam:
            return fam
        vals = m.infer(expr.value.value, scope, order)
        if vals and all(v.kind == api.STRATEGY for v in vals):
            fams = {"mwms" if v.qname in api.MULTI_WORKER_STRATEGIES else
                    "ps" if v.qname in api.PARAMETER_SERVER_STRATEGIES else "other" for v in vals}
            return fams.pop() if len(fams) == 1 else None
        return None
    if isinstance(expr, cst.Name):
        bs = m.lookup(expr.value, scope, order)
        if len(bs) == 1 and bs[0].kind in ("assign", "annassign") and bs[0].value is not None:
            b = bs[0]
            val = b.value
            if b.path:
                if len(b.path) != 1 or not isinstance(val, (cst.Tuple, cst.List)) or b.path[0] >= len(val.elements):
                    return None
                val = val.elements[b.path[0]].value
            return narrowed_family(m, val, b.scope, b.order, _depth + 1)
    return None


# ------------------------------------------------------------------ evaluation


def _literal(m: "Module", e: cst.BaseExpression, scope: Scope, order: int):
    if isinstance(e, cst.Integer):
        return int(e.value, 0)
    if isinstance(e, cst.SimpleString):
        v = e.evaluated_value
        return v if isinstance(v, str) else _UNKNOWN
    if isinstance(e, cst.Name) and e.value == "None":
        return None
    if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
        vals = [_literal(m, el.value, scope, order) for el in e.elements]
        return _UNKNOWN if any(v is _UNKNOWN for v in vals) else tuple(vals)
    return _UNKNOWN


@dataclass
class Evaluation:
    fields: list[tuple[cst.BaseExpression, str]]  # the task fields read (expr, "type"/"index")
    comparisons: list[cst.Comparison]


class _FieldReading(TaskReading):
    """How a hand-written chief test is read here (one evaluator: :func:`lifecycle.holds_on`): the
    task fields only (:func:`task_field`), literal operands, names bound once to a boolean
    expression; it records the fields and the comparisons it read."""

    def __init__(self, expr: BoolExpr):
        self.expr = expr
        self.ev = Evaluation([], [])
        self.memo: dict[int, Optional[str]] = {}

    def source(self, m: "Module", e: cst.BaseExpression, scope: Scope, order: int) -> Optional[str]:
        if id(e) not in self.memo:
            self.memo[id(e)] = task_field(m, e, self.expr.scope, self.expr.order)
            if self.memo[id(e)]:
                self.ev.fields.append((e, self.memo[id(e)]))
        return self.memo[id(e)]

    def const(self, m: "Module", e: cst.BaseExpression, scope: Scope, order: int):
        v = _literal(m, e, scope, order)
        return ... if v is _UNKNOWN else v

    def literals(self, options: cst.BaseExpression) -> list:
        return [... if v is _UNKNOWN else v for v in (_literal(None, el.value, None, 0) for el in options.elements)]

    def compared(self, e: cst.Comparison) -> None:
        if e not in self.ev.comparisons:
            self.ev.comparisons.append(e)

    def bool_call(self, m: "Module", e: cst.Call, scope: Scope, order: int) -> bool:
        return False

    def if_exp(self, e: cst.IfExp) -> bool:
        return isinstance(e.body, cst.Name) and isinstance(e.orelse, cst.Name) \
            and {e.body.value, e.orelse.value} == {"True", "False"}

    def followed(self, m: "Module", e: cst.BaseExpression, scope: Scope, order: int, depth: int):
        """A name bound once to a boolean test (``is_chief = task_type == "chief"``)."""
        if isinstance(e, cst.Name) and e.value not in ("True", "False", "None"):
            bs = m.lookup(e.value, self.expr.scope, self.expr.order)
            if len(bs) == 1 and bs[0].kind in ("assign", "annassign") and bs[0].value is not None \
                    and not bs[0].path and (_is_bool(bs[0].value) or isinstance(bs[0].value, cst.IfExp)):
                return [(bs[0].value, self.expr.scope, self.expr.order)]
        return None


def evaluate(m: "Module", expr: BoolExpr, partial: bool = False) -> Optional[tuple[dict, Evaluation]]:
    """{(type, id): bool} over the three clusters' tasks, or None when the test is not a pure test
    of the task fields (or reads none).  ``partial``: the test may also read other things; a task
    where it cannot be told is ``UNKNOWN`` in the table (``task_id == 0 and epoch > 3`` is False
    on worker 1, unknown on worker 0)."""
    reading = _FieldReading(expr)
    out = {}
    for task in TASKS_ONE + TASKS_WITH_CHIEF + TASKS_WORKERS:
        v = holds_on(m, expr.node, expr.scope, expr.order, task, reading=reading)
        if v is None and not partial:
            return None
        out[task] = UNKNOWN if v is None else v
    if not reading.ev.fields:
        return None
    return out, reading.ev


def verdict(m: "Module", expr: BoolExpr) -> Optional[tuple[str, Evaluation]]:
    """"two-chiefs" (holds on the chief task and on worker 0 of a cluster with a chief, or on
    neither), "no-chief" (holds on the chief task only, or on every task but it: no task in a
    worker-only cluster), or None (a right test, not a chief test, or unknown)."""
    got = evaluate(m, expr)
    if got is None:
        return None
    table, ev = got
    in_chief = {t for t in TASKS_WITH_CHIEF if table[t]}
    in_workers = {t for t in TASKS_WORKERS if table[t]}
    types = {f for _, f in ev.fields}
    if in_chief == {("chief", 0), ("worker", 0)} or in_chief == {("worker", 1)}:
        if "type" in types and any(mentions_chief(c) for c in ev.comparisons):
            return "two-chiefs", ev
    if in_chief == {("chief", 0)} and not in_workers or in_chief == {("worker", 0), ("worker", 1)} \
            and in_workers == set(TASKS_WORKERS):
        return "no-chief", ev
    return None


def mentions_chief(c: cst.Comparison) -> bool:
    for node in (c.left, c.comparisons[0].comparator):
        if isinstance(node, cst.SimpleString) and node.evaluated_value in ("chief", "master"):
            return True
        if isinstance(node, (cst.Tuple, cst.List)) and any(
                isinstance(el.value, cst.SimpleString) and el.value.evaluated_value in ("chief", "master")
                for el in node.elements):
            return True
    return False


def branch_tasks(m: "Module", if_node: cst.If, in_body: bool, scope: Scope, order: int) -> Optional[set]:
    """The tasks of a worker-only cluster that take this branch of ``if_node`` (None: the test is
    not a test of the task, or unknown)."""
    got = evaluate(m, BoolExpr(if_node.test, scope, order), partial=True)
    if got is None:
        return None
    table, _ev = got
    # the tasks that may take the branch (the test holds, or cannot be told there)
    return {t for t in TASKS_WORKERS if table[t] == in_body or table[t] == UNKNOWN}


def task_dependent_guard(m: "Module", ifs: tuple, scope: Scope, order: int) -> Optional[tuple[cst.If, set]]:
    """The innermost enclosing ``if`` branch that some workers of a worker-only cluster take and
    others do not: (the if, the tasks that take it)."""
    for if_node, in_body in reversed(ifs):
        tasks = branch_tasks(m, if_node, in_body, scope, order)
        if tasks is not None and 0 < len(tasks) < len(TASKS_WORKERS):
            return if_node, tasks
    return None


def save_path_worker_zero_parts(m: "Module") -> list[cst.CSTNode]:
    """The parts of chief tests that let worker 0 in next to a chief task and decide where a
    MultiWorkerMirroredStrategy save writes (what TFP604 reports, :func:`lifecycle.worker_zero_as_chief`)."""
    memo = m.rule_memo.setdefault("chieftests", {})
    if "save_parts" in memo:
        return memo["save_parts"]
    out: list[cst.CSTNode] = []
    for sc in save_calls(m):
        if not mwms_state(m, sc.obj):
            continue
        for test, scope, order in task_tests(m, sc):
            part = worker_zero_as_chief(m, test, scope, order)
            if part is not None:
                out.append(part)
    memo["save_parts"] = out
    return out
