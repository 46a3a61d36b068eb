"""Multi-worker lifecycle analysis (the TFP6xx rules ask it): which strategy is a
MultiWorkerMirroredStrategy, chief tests, save calls and the paths they write to.

Names are resolved only through :class:`tfpar_lint.semantic.Module`; what is here reads
the syntax of ``if`` tests and of path expressions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.loss import unpacked_items
from tfpar_lint.semantic import CallSite, Module, Scope, StoreSite, Value, arg, call_method, keyword, literal_str
from tfpar_lint.semantic.kinds import constructor_builds

# ------------------------------------------------------------------ strategies


def is_mwms(v: Value) -> bool:
    return v.kind == api.STRATEGY and v.qname in api.MULTI_WORKER_STRATEGIES


def mwms_ctor_nodes(m: Module) -> set[int]:
    """ids of the ``MultiWorkerMirroredStrategy(...)`` calls of the module."""
    return {id(cs.node) for cs, _ in m.calls_to(api.MULTI_WORKER_STRATEGIES)}


def created_under_mwms(m: Module, v: Value) -> bool:
    """``v`` was created under the ``scope()`` of a MultiWorkerMirroredStrategy."""
    if v.site is None:
        return False
    known, _ = m.scope_strategies(v.site)
    return any(is_mwms(s) for s in known)


def mwms_state(m: Module, v: Value, _depth: int = 0) -> bool:
    """``v`` (a model, checkpoint or checkpoint manager) holds variables of a
    MultiWorkerMirroredStrategy: created under its scope, or (checkpoint / manager)
    tracking such an object."""
    if _depth > 3:
        return False
    if created_under_mwms(m, v):
        return True
    call = v.origin
    if not isinstance(call, cst.Call) or v.site is None:
        return False
    if v.kind == api.CHECKPOINT:
        exprs = [a.value for a in call.args if a.keyword is not None]
    elif v.kind == api.CHECKPOINT_MANAGER:
        exprs = [e for e in (arg(call, 0, "checkpoint"),) if e is not None]
    else:
        return False
    for e in exprs:
        vals = m.infer_at(e, v.site)
        if vals and all(x.kind in (api.MODEL, api.OPTIMIZER, api.CHECKPOINT, api.VARIABLE, api.METRIC)
                        for x in vals) and any(mwms_state(m, x, _depth + 1) for x in vals):
            return True
        if vals and all(x.kind == api.UNKNOWN for x in vals) and _made_under_mwms(m, e, v.site):
            return True  # a checkpoint tracks only trackables: what it tracks was made in the scope
    return False


def _made_under_mwms(m: Module, expr: cst.BaseExpression, site: CallSite) -> bool:
    """Every value ``expr`` may hold is made by a call under a MultiWorkerMirroredStrategy's
    ``scope()`` (``with strategy.scope(): model = models.build()``, the maker unknown)."""
    exprs = m.reaching_exprs(expr, site.scope, site.order)
    if not exprs:
        return False
    for e, _s, _o in exprs:
        cs = m.site_of_call.get(id(e)) if isinstance(e, cst.Call) else None
        if cs is None or not any(is_mwms(x) for x in m.scope_strategies(cs)[0]):
            return False
    return True


# ------------------------------------------------------------------ runtime initialisation

# Keras model methods that run the model (and so TensorFlow ops)
_KERAS_RUNS = frozenset({"fit", "evaluate", "predict", "train_on_batch", "test_on_batch", "predict_on_batch"})
# keywords only Keras' fit/evaluate/predict take (scikit-learn style ``fit(X, y)`` takes none of them)
_KERAS_RUN_KEYWORDS = frozenset({"epochs", "steps_per_epoch", "validation_steps", "initial_epoch",
                                 "validation_freq", "validation_data"})


def _runs_keras_model(m: Module, cs: CallSite) -> bool:
    """``model.fit(...)`` / ``evaluate`` / ``predict`` / ``train_on_batch``...: the receiver is a Keras
    model, or an object the module cannot resolve called with keywords only Keras' training methods
    take (``epochs=``, ``steps_per_epoch=``: a model by its use)."""
    cm = call_method(cs.node)
    if cm is None or cm[1] not in _KERAS_RUNS:
        return False
    vals = m.infer_at(cm[0], cs)
    if vals and all(v.kind == api.MODEL for v in vals):
        return True
    return all(v.kind in (api.UNKNOWN, api.API) for v in vals) and any(
        a.keyword is not None and a.keyword.value in _KERAS_RUN_KEYWORDS for a in cs.node.args)


def initialiser(m: Module, cs: CallSite) -> Optional[str]:
    """Source text of ``cs`` when the call initialises the TensorFlow runtime: a tensor op, variable,
    dataset, optimizer, metric, built model (``tfapi.initializes_runtime``), or a Keras model trained
    or run (``model.fit(...)``).  Other strategies are not counted (see below)."""
    if _runs_keras_model(m, cs):
        return m.code(cs.node)
    q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
    if not q:
        return None
    if api.kind_of_constructor(q) == api.STRATEGY:
        # several strategies in one program: guide notebooks create them one after another as
        # alternatives (measured: two false positives in the real-code development set)
        return None
    if api.initializes_runtime(q):
        return m.code(cs.node)
    if api.kind_of_constructor(q) == api.MODEL and constructor_builds(m, cs.node, cs.scope, cs.order, q):
        return m.code(cs.node)
    return None


# ------------------------------------------------------------------ chief tests

# A task test is told by where its value comes from, never by a variable's name: the task type /
# index of a cluster resolver (``strategy.cluster_resolver``, ``TFConfigClusterResolver()``), the
# ``task`` entry of ``json.loads(os.environ["TF_CONFIG"])``, or ``strategy.extended.should_checkpoint``
# / ``should_save_summary``; followed through names, tuple unpacking, local helpers' returns,
# parameters (every local caller's argument) and ``self`` attributes.

_CHIEF_TYPES = frozenset({"chief", "master"})
_RESOLVER_PREFIX = "tensorflow.distribute.cluster_resolver."
_ENV_GETTERS = frozenset({"os.environ.get", "os.getenv"})
_CHIEF_FLAGS = frozenset({"should_checkpoint", "should_save_summary"})
# (what the receiver is, the key read) -> what the result is
_STEPS = {("config", "task"): "task", ("task", "type"): "type", ("task", "index"): "index",
          ("config", "cluster"): "spec"}
_MAX_DEPTH = 14
Exprs = list[tuple[cst.BaseExpression, Scope, int]]


def _literal(expr: cst.BaseExpression):
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    if isinstance(expr, cst.Name) and expr.value == "None":
        return None
    return ...  # not a literal


def _is_bool(expr: cst.BaseExpression, value: bool) -> bool:
    return isinstance(expr, cst.Name) and expr.value == ("True" if value else "False")


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _key(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    v = _literal(expr) if expr is not None else ...
    return v if isinstance(v, str) else None


def _unpacked(m: Module, b) -> Optional[Exprs]:
    """``a, b = <value>`` (one level): the item bound to ``b.path`` - of a tuple literal, or of
    every tuple a local function returns."""
    items = unpacked_items(m, b)
    return None if items is None else [(e, s, o) for e, s, o, _via in items]


def _name_exprs(m: Module, name: cst.Name, scope: Scope, order: int) -> Optional[Exprs]:
    """What may reach ``name`` here: assigned values, unpacked items, a parameter's arguments."""
    bs = m.lookup(name.value, scope, order)
    if not bs:
        return None
    out: Exprs = []
    for b in bs:
        if b.kind in ("assign", "annassign", "walrus") and b.value is not None and not b.path:
            out.append((b.value, b.scope, b.order))
        elif b.kind in ("assign", "annassign") and b.path:
            items = _unpacked(m, b)
            if items is None:
                return None
            out.extend(items)
        elif b.kind == "param":
            args = m.values.param_args(b)
            if args is None:
                return None
            out.extend((e, sc, od) for e, sc, od, _site in args)
        else:
            return None
    return out


def _followed(m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[Exprs]:
    """One step back along the value of ``expr``: a name's reaching values, a ``self`` attribute's
    assignments, a helper call's returns (a helper of this module or of another project module);
    None when ``expr`` is none of these or unknown."""
    if isinstance(expr, cst.Name):
        return _name_exprs(m, expr, scope, order)
    if isinstance(expr, cst.Attribute):
        bs = m.self_attr_bindings(expr, scope)
        if not bs or any(b.value is None or b.path for b in bs):
            return None
        return [(b.value, b.scope, b.order) for b in bs]
    if isinstance(expr, cst.Call):
        # a helper of this module or of another project module (``dist.is_chief(strategy)``,
        # ``from .dist import is_chief``: resolved through the project's imports); an API call
        # resolves to no function
        fns = m.resolve_function(expr.func, scope, order)
        if not fns or not all(f.returns for f in fns):
            return None
        return [(e, f.scope, od) for f in fns for e, od in f.returns]
    return None


def _agree(results: list) -> object:
    """The one answer all the values give, or None."""
    if results and all(r is not None and r == results[0] for r in results):
        return results[0]
    return None


def _is_builtin(m: Module, call: cst.Call, scope: Scope, order: int, *names: str) -> bool:
    f = call.func
    return isinstance(f, cst.Name) and f.value in names and not m.lookup(f.value, scope, order)


def _memoised(name: str):
    """Memoise ``f(m, expr, scope, order, _depth)`` per module on (expr, order); a value asked for
    again while it is being worked out (a cycle through parameters) is None."""
    def wrap(f):
        def g(m: Module, expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0):
            memo = m.rule_memo.setdefault(name, {})
            key = (id(expr), order)
            if key in memo:
                return memo[key]
            memo[key] = None
            memo[key] = got = f(m, expr, scope, order, _depth)
            return got
        g.__name__, g.__doc__ = f.__name__, f.__doc__
        return g
    return wrap


@_memoised("task_source")
def task_source(m: Module, expr: cst.BaseExpression, scope: Scope, order: int, _depth: int = 0) -> Optional[str]:
    """Where the value of ``expr`` comes from, as far as the task is concerned: "type" / "index"
    (the task type / index), "chief" (true on the chief only), "resolver", "config" (the parsed
    TF_CONFIG), "task" (its task entry), "spec" (the cluster's tasks: ``resolver.cluster_spec()``,
    ``config["cluster"]``), "env" (the TF_CONFIG string); None otherwise."""
    if _depth > _MAX_DEPTH:
        return None
    rec = lambda e, sc=scope, od=order: task_source(m, e, sc, od, _depth + 1)  # noqa: E731
    if isinstance(expr, cst.Attribute):
        attr = expr.attr.value
        if attr in ("task_type", "task_id"):
            return ("type" if attr == "task_type" else "index") if rec(expr.value) == "resolver" else None
        if attr == "cluster_resolver":
            vals = m.infer(expr.value, scope, order)
            return "resolver" if all(v.kind == api.STRATEGY for v in vals) else None
        if attr in _CHIEF_FLAGS and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "extended":
            vals = m.infer(expr.value.value, scope, order)
            return "chief" if all(v.kind == api.STRATEGY for v in vals) else None
    if isinstance(expr, cst.Dict):
        # a TF_CONFIG written by the program: {"cluster": {...}, "task": {"type": ..., "index": ...}}
        keys = {_key(el.key) for el in expr.elements if isinstance(el, cst.DictElement)}
        return "config" if {"cluster", "task"} <= keys else None
    if isinstance(expr, cst.Subscript):
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return None
        key = _key(expr.slice[0].slice.value)
        if key is None:
            return None
        q, _ = m.qualified_name(expr.value, scope, order)
        if q == "os.environ":
            return "env" if key == "TF_CONFIG" else None
        return _STEPS.get((rec(expr.value), key))
    if isinstance(expr, cst.Call):
        q, _ = m.qualified_name(expr.func, scope, order)
        if q.startswith(_RESOLVER_PREFIX) and q.endswith("ClusterResolver"):
            return "resolver"
        if q in _ENV_GETTERS:
            return "env" if _key(arg(expr, 0, "key")) == "TF_CONFIG" else None
        if q == "json.loads":
            a = arg(expr, 0, "s")
            return "config" if a is not None and rec(a) == "env" else None
        if _is_builtin(m, expr, scope, order, "int", "str") and len(expr.args) == 1:
            return rec(expr.args[0].value)
        if isinstance(expr.func, cst.Attribute) and not expr.args:
            meth = expr.func.attr.value  # resolver.cluster_spec(), spec.as_dict(): the cluster's tasks
            if meth == "cluster_spec" and rec(expr.func.value) == "resolver":
                return "spec"
            if meth == "as_dict" and rec(expr.func.value) == "spec":
                return "spec"
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "get" and expr.args:
            key = _key(expr.args[0].value)
            return _STEPS.get((rec(expr.func.value), key)) if key is not None else None
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        # `os.environ.get("TF_CONFIG") or "{}"`: a literal default beside it reads nothing else
        parts = [p for p in (expr.left, expr.right) if not isinstance(p, (cst.SimpleString, cst.Dict))]
        return _agree([rec(p) for p in parts]) if parts else None
    nxt = _followed(m, expr, scope, order)
    if nxt is None:
        return None
    return _agree([rec(e, sc, od) for e, sc, od in nxt if not _is_none(e)])


NEUTRAL = "neutral"  # e.g. `task_type is None`: true only in a single-process run


@_memoised("chief_test")
def chief_test(m: Module, expr: cst.BaseExpression, scope: Scope, order: int,
               _depth: int = 0) -> Union[bool, str, None]:
    """What a condition says about the task, from where its value comes from: True when it holds
    only on the chief, False when it holds only on non-chief tasks, ``NEUTRAL`` for ``task_type is
    None`` and ``task_type == 'worker'`` (parts of the usual chief test), None when it is not a
    task test (or its value cannot be followed)."""
    if _depth > _MAX_DEPTH:
        return None
    rec = lambda e, sc=scope, od=order: chief_test(m, e, sc, od, _depth + 1)  # noqa: E731
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = rec(expr.expression)
        if inner is True:
            return False
        if inner is False:
            return True
        src = task_source(m, expr.expression, scope, order)
        if src == "index":
            return True  # `not task_id`: task 0
        if src in ("env", "config"):
            return NEUTRAL  # `not tf_config`: no TF_CONFIG, a single-process run
        return None
    if isinstance(expr, cst.IfExp):
        # `True if <test> else False` (and the reverse)
        t = rec(expr.test)
        if _is_bool(expr.body, True) and _is_bool(expr.orelse, False):
            return t
        if _is_bool(expr.body, False) and _is_bool(expr.orelse, True):
            return {True: False, False: True}.get(t) if t in (True, False) else None
        return None
    if isinstance(expr, cst.BooleanOperation):
        parts = [rec(p) for p in _flatten(expr, type(expr.operator))]
        if isinstance(expr.operator, cst.And):
            if True in parts and False not in parts:
                return True
            if False in parts and True not in parts:
                return False
            return NEUTRAL if parts and all(p == NEUTRAL for p in parts) else None
        if all(p in (True, NEUTRAL) for p in parts) and True in parts:
            return True
        if all(p is False for p in parts):
            return False
        return None
    if isinstance(expr, cst.Comparison):
        if len(expr.comparisons) != 1:
            return None
        return _comparison(m, expr, scope, order)
    if task_source(m, expr, scope, order) == "chief":
        return True
    if isinstance(expr, cst.Call) and _is_builtin(m, expr, scope, order, "bool") and len(expr.args) == 1:
        return rec(expr.args[0].value)
    nxt = _followed(m, expr, scope, order)
    if nxt is None:
        return None
    return _agree([rec(e, sc, od) for e, sc, od in nxt])


def _const(m: Module, expr: cst.BaseExpression, scope: Scope, order: int):
    """The literal ``expr`` is (directly, or a name every value of which is that literal)."""
    v = _literal(expr)
    if v is not ... or not isinstance(expr, cst.Name):
        return v
    consts = m.constant_exprs(expr, scope, order)
    vals = {_literal(c) for c in consts or ()}
    return vals.pop() if len(vals) == 1 else ...


def _comparison(m: Module, expr: cst.Comparison, scope: Scope, order: int) -> Union[bool, str, None]:
    left, comp = expr.left, expr.comparisons[0]
    right, op = comp.comparator, comp.operator
    if isinstance(op, (cst.In, cst.NotIn)):
        if not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            return None
        return _membership_test(task_source(m, left, scope, order), right, isinstance(op, cst.In))
    if _const(m, left, scope, order) is not ... and _const(m, right, scope, order) is ...:
        left, right = right, left
    value = _const(m, right, scope, order)
    if value is ...:
        return None
    src = task_source(m, left, scope, order)
    eq = isinstance(op, (cst.Equal, cst.Is))
    ne = isinstance(op, (cst.NotEqual, cst.IsNot))
    if src == "resolver" and value is None and isinstance(op, cst.Is):
        return NEUTRAL  # `cluster_resolver is None`: never under a multi-worker strategy
    if src == "index" and isinstance(value, int) and not isinstance(value, bool):
        if eq:
            return True if value == 0 else False
        if ne and value == 0:
            return False
        if isinstance(op, cst.GreaterThan) and value >= 0:
            return False
        if isinstance(op, cst.GreaterThanEqual) and value >= 1:
            return False
        return None
    if src == "type":
        if value is None:
            return NEUTRAL if eq else None
        if isinstance(value, str):
            if value in _CHIEF_TYPES:
                return True if eq else (False if ne else None)
            if value == "worker":
                return NEUTRAL if eq else None
    return None


def _membership_test(src: Optional[str], options: cst.BaseExpression, positive: bool) -> Union[bool, None]:
    """``task_id in (None, 0)`` / ``task_type not in ("chief", "master")``: the literal options
    say which tasks pass (``None`` only matches a single-process run, as in the ``==`` tests)."""
    values = [_literal(el.value) for el in options.elements]
    if not values or any(v is ... for v in values):
        return None
    rest = [v for v in values if v is not None]
    if not rest:
        return None
    if src == "index" and all(isinstance(v, int) for v in rest):
        if all(v == 0 for v in rest):
            return positive  # only task 0 (the chief) passes `in`, only the others pass `not in`
        if all(v > 0 for v in rest):
            return not positive
        return None
    if src == "type" and all(isinstance(v, str) for v in rest):
        if all(v in _CHIEF_TYPES for v in rest):
            return positive
        return None
    return None


def _flatten(expr: cst.BaseExpression, op_type: type) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, op_type):
        return _flatten(expr.left, op_type) + _flatten(expr.right, op_type)
    return [expr]


# ------------------------------------------------------------------ tests evaluated per task

# A task of a cluster, as (task type, task index); (None, None) is a run without TF_CONFIG.
Task = tuple[Optional[str], Optional[int]]
CHIEF0: Task = ("chief", 0)
CHIEF1: Task = ("chief", 1)  # no such task: tells a test that reads the type from one that reads the index
WORKER0: Task = ("worker", 0)
WORKER1: Task = ("worker", 1)


class TaskReading:
    """How :func:`holds_on` reads a task test: where a value comes from (:func:`task_source`), what
    literal an operand is (:func:`_const`), and what a name or call stands for (:func:`_followed`:
    names, unpacked items, parameters and the helpers called).  ``semantic/chieftests`` reads
    tests its own way (task fields only, literal operands, names bound to a boolean) and records
    what it read."""

    def source(self, m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[str]:
        return task_source(m, expr, scope, order)

    def const(self, m: Module, expr: cst.BaseExpression, scope: Scope, order: int):
        return _const(m, expr, scope, order)

    def literals(self, options: cst.BaseExpression) -> list:
        return [_literal(el.value) for el in options.elements]

    def compared(self, expr: cst.Comparison) -> None:
        """A comparison of a task field with a literal was read."""

    def bool_call(self, m: Module, expr: cst.Call, scope: Scope, order: int) -> bool:
        return _is_builtin(m, expr, scope, order, "bool") and len(expr.args) == 1

    def if_exp(self, expr: cst.IfExp) -> bool:
        """An ``x if t else y`` this reading evaluates (when the branch taken is a bool literal)."""
        return True

    def followed(self, m: Module, expr: cst.BaseExpression, scope: Scope, order: int, depth: int) -> Optional[Exprs]:
        return _followed(m, expr, scope, order)


TASK_SOURCES = TaskReading()


def holds_on(m: Module, expr: cst.BaseExpression, scope: Scope, order: int, task: Task,
             _depth: int = 0, reading: TaskReading = TASK_SOURCES) -> Optional[bool]:
    """Whether the task test ``expr`` holds on ``task`` (a task of a cluster whose TF_CONFIG is
    set; ``(None, None)``: no TF_CONFIG), from where its values come from (:func:`task_source`,
    or as ``reading`` reads them); None when it is not a task test or cannot be told."""
    if _depth > _MAX_DEPTH:
        return None
    rec = lambda e, sc=scope, od=order: holds_on(m, e, sc, od, task, _depth + 1, reading)  # noqa: E731
    source = reading.source
    ttype, tindex = task
    if isinstance(expr, cst.BooleanOperation):
        parts = [rec(p) for p in _flatten(expr, type(expr.operator))]
        if isinstance(expr.operator, cst.And):
            return False if False in parts else (True if all(p is True for p in parts) else None)
        return True if True in parts else (False if all(p is False for p in parts) else None)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        src = source(m, expr.expression, scope, order)
        if src in ("env", "config"):
            return ttype is None  # `not tf_config`: no TF_CONFIG
        if src == "index":
            return None if tindex is None else tindex == 0
        inner = rec(expr.expression)
        return None if inner is None else not inner
    if isinstance(expr, cst.IfExp):
        if not reading.if_exp(expr):
            return None
        t = rec(expr.test)
        if t is None:
            return None
        branch = expr.body if t else expr.orelse
        return True if _is_bool(branch, True) else (False if _is_bool(branch, False) else None)
    if isinstance(expr, cst.Comparison):
        if len(expr.comparisons) != 1:
            return None
        left, comp = expr.left, expr.comparisons[0]
        right, op = comp.comparator, comp.operator
        if isinstance(op, (cst.In, cst.NotIn)):
            if _literal(left) in _CHIEF_TYPES and source(m, right, scope, order) == "spec":
                # `"chief" in cluster_spec`: the clusters judged here have a chief task
                return (ttype is not None) == isinstance(op, cst.In)
            if not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
                return None
            values = reading.literals(right)
            actual = _task_value(source(m, left, scope, order), task)
            if actual is ... or any(v is ... for v in values):
                return None
            reading.compared(expr)
            return (actual in values) == isinstance(op, cst.In)
        const = reading.const
        if const(m, left, scope, order) is not ... and const(m, right, scope, order) is ...:
            left, right = right, left
        if isinstance(op, (cst.Is, cst.IsNot)) and _is_none(right) and source(m, left, scope, order) == "resolver":
            # a multi-worker strategy always has its cluster resolver (TF_CONFIG set or not):
            # `strategy.cluster_resolver is None` is false on every task
            return isinstance(op, cst.IsNot)
        value = const(m, right, scope, order)
        actual = _task_value(source(m, left, scope, order), task)
        if value is ... or actual is ...:
            return None
        reading.compared(expr)
        if isinstance(op, (cst.Equal, cst.Is)):
            return actual == value
        if isinstance(op, (cst.NotEqual, cst.IsNot)):
            return actual != value
        if isinstance(actual, int) and isinstance(value, int):
            if isinstance(op, cst.GreaterThan):
                return actual > value
            if isinstance(op, cst.GreaterThanEqual):
                return actual >= value
            if isinstance(op, cst.LessThan):
                return actual < value
            if isinstance(op, cst.LessThanEqual):
                return actual <= value
        return None
    src = source(m, expr, scope, order)
    if src == "chief":  # strategy.extended.should_checkpoint
        return ttype in (None, "chief")
    if src == "index":  # `if task_id:`
        return None if tindex is None else tindex != 0
    if isinstance(expr, cst.Call) and reading.bool_call(m, expr, scope, order):
        return rec(expr.args[0].value)
    nxt = reading.followed(m, expr, scope, order, _depth)
    if nxt is None:
        return None
    return _agree([holds_on(m, e, sc, od, task, _depth + 1, reading) for e, sc, od in nxt])


def _task_value(src: Optional[str], task: Task):
    if src == "type":
        return task[0]
    if src == "index":
        return task[1]
    return ...


def worker_zero_as_chief(m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> Optional[cst.CSTNode]:
    """``expr`` is a task test that puts worker 0 with the chief: it tells the chief by its type
    (any ``chief`` task passes) and also passes ``worker`` 0, so in a cluster that has a ``chief``
    task two tasks take the chief's side (``task_type == "chief" or (task_type == "worker" and
    task_id == 0)``; TensorFlow counts worker 0 as the chief only when there is no chief task).
    Returns the part of the test that admits worker 0 (the ``or`` operand, in the helper the test
    calls), or None."""
    t = [holds_on(m, expr, scope, order, task) for task in (CHIEF0, CHIEF1, WORKER0, WORKER1)]
    if any(x is None for x in t) or not (t[0] == t[1] == t[2] != t[3]):
        return None
    return _worker_zero_part(m, expr, scope, order, 0) or expr


def _worker_zero_part(m: Module, node: cst.BaseExpression, sc: Scope, od: int, depth: int) -> Optional[cst.CSTNode]:
    """The ``or`` operand that lets worker 0 in, found through negations, names and the helpers
    called (the first one, when a helper is defined twice)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _worker_zero_part(m, node.expression, sc, od, depth + 1)
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
        for part in _flatten(node, cst.Or):
            if holds_on(m, part, sc, od, WORKER0) is True and holds_on(m, part, sc, od, CHIEF0) is not True:
                return part
        return node
    if not isinstance(node, (cst.Name, cst.Call, cst.Attribute)):
        return None
    for e, s, o in _followed(m, node, sc, od) or ():
        got = _worker_zero_part(m, e, s, o, depth + 1)
        if got is not None:
            return got
    return None


def task_tests(m: Module, sc: "SaveCall") -> list[tuple[cst.BaseExpression, Scope, int]]:
    """The task tests that decide where ``sc`` writes: the ``if`` tests it runs under (and its
    callers'), and the tests inside the local helpers that compute its path
    (``write_filepath(path, task_type, task_id)``)."""
    out: list[tuple[cst.BaseExpression, Scope, int]] = []
    seen: set[int] = set()

    def add(test: cst.BaseExpression, scope: Scope, order: int) -> None:
        if id(test) not in seen:
            seen.add(id(test))
            out.append((test, scope, order))

    for if_node, _in_body in sc.site.ifs:
        add(if_node.test, sc.site.scope, sc.site.order)
    g = task_guard(m, sc.site)
    if g is not None and isinstance(g.node, cst.If):
        add(g.node.test, sc.site.scope, sc.site.order)
    if sc.path is not None and sc.path_site is not None:
        ps = sc.path_site
        made = m.reaching_exprs(sc.path, ps.scope, ps.order) if isinstance(sc.path, cst.Name) \
            else [(sc.path, ps.scope, ps.order)]
        for e, s, o in made or ():
            if not isinstance(e, cst.Call):
                continue
            for fn in m.resolve_function(e.func, s, o):
                for cs in m.calls_within(fn):
                    for if_node, _in_body in cs.ifs:
                        add(if_node.test, cs.scope, cs.order)
    return out


@dataclass
class Guard:
    node: cst.CSTNode  # the `if` statement
    chief_only: bool  # True: only the chief runs the guarded code; False: only non-chief tasks


_EXIT_FUNCTIONS = frozenset({"sys.exit", "os._exit", "os.abort"})


def _exits(m: Module, block: cst.BaseSuite, scope: Scope, order: int) -> bool:
    """The block ends by leaving the function / loop / program (``return``, ``raise``, ...,
    ``sys.exit()``, ``os._exit()``, ``os.abort()``, the ``exit()`` / ``quit()`` builtins)."""
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    if not body:
        return False
    last = body[-1]
    stmts = last.body if isinstance(last, cst.SimpleStatementLine) else [last]
    if isinstance(block, cst.SimpleStatementSuite):
        stmts = block.body
    for s in stmts:
        if isinstance(s, (cst.Return, cst.Continue, cst.Break, cst.Raise)):
            return True
        if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call):
            q, _ = m.qualified_name(s.value.func, scope, order)
            if q in _EXIT_FUNCTIONS or _is_builtin(m, s.value, scope, order, "exit", "quit"):
                return True
    return False


def _block_of(root: cst.CSTNode, stmt: cst.CSTNode) -> Optional[list[cst.CSTNode]]:
    """The statement list (module / indented block) that holds ``stmt``, searched under ``root``."""
    found: list = []

    class V(cst.CSTVisitor):
        def visit_Module(self, node: cst.Module) -> Optional[bool]:
            if any(s is stmt for s in node.body):
                found.append(list(node.body))
                return False
            return None

        def visit_IndentedBlock(self, node: cst.IndentedBlock) -> Optional[bool]:
            if any(s is stmt for s in node.body):
                found.append(list(node.body))
                return False
            return None

        def visit_FunctionDef(self, node: cst.FunctionDef) -> Optional[bool]:
            return None if node is root else False

        def visit_ClassDef(self, node: cst.ClassDef) -> Optional[bool]:
            return False

    root.visit(V())
    return found[0] if found else None


def _statement_of(m: Module, site: Union[CallSite, StoreSite]) -> Optional[cst.CSTNode]:
    if isinstance(site, StoreSite):
        return None
    return site.stmt


def lexical_guard(m: Module, site: Union[CallSite, StoreSite]) -> Optional[Guard]:
    """The innermost task test around ``site`` in its own function: an enclosing ``if``, or an
    earlier ``if <test>: return`` in the same block."""
    for if_node, in_body in reversed(site.ifs):
        t = chief_test(m, if_node.test, site.scope, site.order)
        if t is True or t is False:
            return Guard(if_node, t if in_body else not t)
    stmt = _statement_of(m, site)
    if stmt is None:
        return None
    root = site.func.node if site.func is not None and isinstance(site.func.node, cst.FunctionDef) else m.tree
    block = _block_of(root, stmt)
    if not block:
        return None
    for s in block:
        if s is stmt:
            break
        if isinstance(s, cst.If) and _exits(m, s.body, site.scope, site.order):
            t = chief_test(m, s.test, site.scope, site.order)
            if t is True or t is False:
                return Guard(s, not t)  # the code after runs on the other tasks
    return None


def task_guard(m: Module, site: Union[CallSite, StoreSite], _depth: int = 0) -> Optional[Guard]:
    """A task test the code at ``site`` runs under: lexically, or because every local caller
    of its function does."""
    g = lexical_guard(m, site)
    if g is not None or site.func is None or _depth > 4:
        return g
    fn = site.func
    if m.is_passed_around(fn):
        return None
    callers = m.callers(fn)
    if not callers:
        return None
    guards = [task_guard(m, cs, _depth + 1) for cs in callers]
    if all(g is not None for g in guards) and len({g.chief_only for g in guards}) == 1:
        return guards[0]
    return None


def mentions_task(m: Module, site: Union[CallSite, StoreSite]) -> bool:
    """Some ``if`` around ``site`` tests the task at all (chief, worker index, task type)."""
    if any(chief_test(m, i.test, site.scope, site.order) is not None for i, _ in site.ifs):
        return True
    return task_guard(m, site) is not None


# ------------------------------------------------------------------ saving

MODEL_SAVE_METHODS = ("save", "save_weights", "export")
CHECKPOINT_SAVE_METHODS = ("save", "write")
MANAGER_SAVE_METHODS = ("save",)
SAVE_FUNCTIONS = frozenset({"tensorflow.saved_model.save", "keras.models.save_model", "keras.saving.save_model"})
# plain trackables ``tf.saved_model.save`` exports (a ``tf.Module`` holding the variables)
SAVED_MODEL_OBJECTS = frozenset({"tensorflow.Module"})


@dataclass
class SaveCall:
    site: CallSite
    obj: Value  # the model / checkpoint / manager being saved
    what: str  # "model.save", "checkpoint.write", ...
    path: Optional[cst.BaseExpression]  # the path written (None: not given / cannot be told)
    path_site: Optional[CallSite]  # where ``path`` is evaluated


def save_calls(m: Module) -> Iterator[SaveCall]:
    """TensorFlow / Keras saves whose object is certain (one value)."""
    methods = set(MODEL_SAVE_METHODS) | set(CHECKPOINT_SAVE_METHODS) | set(MANAGER_SAVE_METHODS)
    for cs, recv, meth in m.method_calls(methods):
        vals = m.infer_at(recv, cs)
        if not vals or any(v.origin is not vals[0].origin or v.origin is None for v in vals):
            continue
        v = vals[0]
        if v.kind == api.MODEL and meth in MODEL_SAVE_METHODS:
            yield SaveCall(cs, v, f"{m.code(recv)}.{meth}", arg(cs.node, 0, "filepath"), cs)
        elif v.kind == api.CHECKPOINT and meth in CHECKPOINT_SAVE_METHODS:
            yield SaveCall(cs, v, f"{m.code(recv)}.{meth}", arg(cs.node, 0, "file_prefix"), cs)
        elif v.kind == api.CHECKPOINT_MANAGER and meth in MANAGER_SAVE_METHODS and isinstance(v.origin, cst.Call):
            yield SaveCall(cs, v, f"{m.code(recv)}.{meth}", arg(v.origin, 1, "directory"), v.site)
    for cs, q in m.calls_to(SAVE_FUNCTIONS):
        obj = arg(cs.node, 0, "obj") if q == "tensorflow.saved_model.save" else arg(cs.node, 0, "model")
        vals = m.infer_at(obj, cs)
        if not vals or any(v.origin is not vals[0].origin or v.origin is None for v in vals):
            continue
        if vals[0].kind not in (api.MODEL, api.CHECKPOINT) and not (
                q == "tensorflow.saved_model.save" and vals[0].qname in SAVED_MODEL_OBJECTS):
            continue
        path = arg(cs.node, 1, "export_dir" if q == "tensorflow.saved_model.save" else "filepath")
        yield SaveCall(cs, vals[0], m.code(cs.node.func), path, cs)


def others_save(m: Module, sc: SaveCall, saves: list[SaveCall]) -> bool:
    """The same chief test that keeps ``sc`` to the chief sends the other tasks to another save
    of the same object (``if chief: model.save(path) else: model.save(tmp)``): every task
    saves, at the same point."""
    guard = task_guard(m, sc.site)
    if guard is None:
        return False
    for other in saves:
        if other is sc or other.obj.origin is not sc.obj.origin:
            continue
        g = task_guard(m, other.site)
        if g is not None and g.node is guard.node and not g.chief_only:
            return True
    return False


_PATH_FUNCTIONS = frozenset({"os.path.join", "os.path.expanduser", "os.path.abspath", "os.path.normpath",
                             "os.path.dirname", "tempfile.gettempdir", "pathlib.Path", "os.getcwd",
                             "os.path.realpath"})


def constant_path(m: Module, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
                  _depth: int = 0, env: frozenset[str] = frozenset(),
                  leaf: Optional[Callable[[cst.BaseExpression, Scope, int], bool]] = None) -> bool:
    """``expr`` is the same string on every worker: literals, module constants, f-strings,
    ``+`` and ``os.path.join`` of those, reads of the environment variables ``env`` (ones a
    platform sets alike on every worker), and the values ``leaf`` accepts.  Anything else read at
    run time (flags, task id, a helper's result) makes it unknown (False)."""
    if expr is None or _depth > 12:
        return False
    if leaf is not None and leaf(expr, scope, order):
        return True
    if env:
        if isinstance(expr, cst.Subscript) and m.qualified_name(expr.value, scope, order)[0] == "os.environ" \
                and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) \
                and literal_str(expr.slice[0].slice.value) in env:
            return True
        if isinstance(expr, cst.Call) and m.qualified_name(expr.func, scope, order)[0] in (
                "os.environ.get", "os.getenv") and literal_str(arg(expr, 0)) in env:
            return True
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.FormattedString):
        return all(constant_path(m, p.expression, scope, order, _depth + 1, env, leaf)
                   for p in expr.parts if isinstance(p, cst.FormattedStringExpression))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Divide)):
        return constant_path(m, expr.left, scope, order, _depth + 1, env, leaf) and \
            constant_path(m, expr.right, scope, order, _depth + 1, env, leaf)
    if isinstance(expr, cst.Call):
        q, _ = m.qualified_name(expr.func, scope, order)
        if q in _PATH_FUNCTIONS:
            return all(not a.star and constant_path(m, a.value, scope, order, _depth + 1, env, leaf) for a in expr.args)
        return False
    if isinstance(expr, cst.Name):
        reaching = m.reaching_exprs(expr, scope, order)
        if not reaching:
            return False
        return all(constant_path(m, e, s, o, _depth + 1, env, leaf) for e, s, o in reaching)
    return False


def path_text(m: Module, expr: Optional[cst.BaseExpression]) -> str:
    return m.code(expr) if expr is not None else "its directory"
