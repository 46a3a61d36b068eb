"""Shared logic of the multi-worker lifecycle rules (TFP601-TFP606): which strategy is a
MultiWorkerMirroredStrategy, chief tests, save calls and the paths they write to.

Names are resolved only through :class:`tfpar_lint.semantic.Module`; what is here reads
the syntax of ``if`` tests and of path expressions.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Optional, Union

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, Module, Scope, StoreSite, Value, arg, attr_name

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
    return False


# ------------------------------------------------------------------ chief tests

_CHIEF_NAME = re.compile(r"^_*(is_)?(chief|master)(_worker|_task|_process)?$|^should_checkpoint$|^should_save_summary$")
_INDEX_NAMES = frozenset({"task_id", "task_index", "worker_index", "worker_id", "worker_rank", "rank",
                          "global_rank", "process_index", "process_id"})
_TYPE_NAMES = frozenset({"task_type", "job_name"})
_CHIEF_TYPES = frozenset({"chief", "master"})


def _last_name(expr: cst.BaseExpression) -> Optional[str]:
    """``a.b.task_id`` -> task_id; ``cfg['task']['index']`` -> task_index; ``int(x)`` -> x's."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("int", "str") \
            and len(expr.args) == 1:
        return _last_name(expr.args[0].value)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        key = expr.slice[0].slice.value
        if isinstance(key, cst.SimpleString):
            k = key.evaluated_value
            if k in ("index", "type") and isinstance(expr.value, cst.Subscript):
                outer = _last_name(expr.value)
                if outer == "task":
                    return "task_" + k
            return k.lower() if isinstance(k, str) else None
        return None
    name = attr_name(expr)
    return name.lower() if name else None


def _literal(expr: cst.BaseExpression):
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    if isinstance(expr, cst.Name) and expr.value == "None":
        return None
    return ...  # not a literal


NEUTRAL = "neutral"  # e.g. `task_type is None`: true only in a single-process run


def chief_test(expr: cst.BaseExpression) -> Union[bool, str, None]:
    """What an ``if`` test says about the task: True when it holds only on the chief,
    False when it holds only on non-chief tasks, ``NEUTRAL`` for ``task_type is None`` and
    ``task_type == 'worker'`` (parts of the usual chief test), None when it is not a task test."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = chief_test(expr.expression)
        if inner is True:
            return False
        if inner is False:
            return True
        if _last_name(expr.expression) in _INDEX_NAMES:
            return True  # `not task_id`: task 0
        return None
    if isinstance(expr, cst.BooleanOperation):
        parts = [chief_test(p) for p in _flatten(expr, type(expr.operator))]
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
    if isinstance(expr, (cst.Name, cst.Attribute)):
        name = _last_name(expr)
        return True if name and _CHIEF_NAME.match(name) else None
    if isinstance(expr, cst.Call):
        name = attr_name(expr.func)
        return True if name and _CHIEF_NAME.match(name.lower()) else None
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        left, comp = expr.left, expr.comparisons[0]
        right, op = comp.comparator, comp.operator
        if isinstance(op, (cst.In, cst.NotIn)) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            return _membership_test(left, right, isinstance(op, cst.In))
        lname, rname = _last_name(left), _last_name(right)
        if _literal(left) is not ... and _literal(right) is ...:
            left, right, lname, rname = right, left, rname, lname
        value = _literal(right)
        if value is ...:
            return None
        eq = isinstance(op, (cst.Equal, cst.Is))
        ne = isinstance(op, (cst.NotEqual, cst.IsNot))
        if lname in _INDEX_NAMES and isinstance(value, int):
            if eq:
                return True if value == 0 else False
            if ne and value == 0:
                return False
            if isinstance(op, cst.GreaterThan) and value >= 0:
                return False
            if isinstance(op, cst.GreaterThanEqual) and value >= 1:
                return False
            return None
        if lname in _TYPE_NAMES or (lname == "type" and isinstance(left, cst.Attribute)):
            if value is None:
                return NEUTRAL if eq else None
            if isinstance(value, str):
                if value in _CHIEF_TYPES:
                    return True if eq else (False if ne else None)
                if value == "worker":
                    return NEUTRAL if eq else None
        return None
    return None


def _membership_test(left: cst.BaseExpression, options: cst.BaseExpression, positive: bool) -> Union[bool, None]:
    """``task_id in (None, 0)`` / ``task_type not in ("chief", "master")``: the literal options
    say which tasks pass (``None`` only matches a single-process run, as in the ``==`` tests)."""
    values = [_literal(el.value) for el in options.elements]
    if not values or any(v is ... for v in values):
        return None
    name = _last_name(left)
    rest = [v for v in values if v is not None]
    if not rest:
        return None
    if name in _INDEX_NAMES and all(isinstance(v, int) for v in rest):
        if rest == [0] * len(rest):
            return positive  # only task 0 (the chief) passes `in`, only the others pass `not in`
        if 0 not in rest and all(v > 0 for v in rest):
            return not positive
        return None
    if name in _TYPE_NAMES and all(isinstance(v, str) for v in rest):
        if all(v in _CHIEF_TYPES for v in rest):
            return positive
        return None
    return None


def _flatten(expr: cst.BaseExpression, op_type: type) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, op_type):
        return _flatten(expr.left, op_type) + _flatten(expr.right, op_type)
    return [expr]


@dataclass
class Guard:
    node: cst.CSTNode  # the `if` statement
    chief_only: bool  # True: only the chief runs the guarded code; False: only non-chief tasks


def _exits(block: cst.BaseSuite) -> bool:
    """The block ends by leaving the function / loop / program."""
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
            f = s.value.func
            name = attr_name(f)
            if name in ("exit", "_exit", "quit", "abort"):
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
        t = chief_test(if_node.test)
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
        if isinstance(s, cst.If) and _exits(s.body):
            t = chief_test(s.test)
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
    if any(chief_test(i.test) is not None for i, _ in site.ifs):
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


_PATH_FUNCTIONS = frozenset({"os.path.join", "os.path.expanduser", "os.path.abspath", "os.path.normpath",
                             "os.path.dirname", "tempfile.gettempdir", "pathlib.Path", "os.getcwd",
                             "os.path.realpath"})


def constant_path(m: Module, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
                  _depth: int = 0) -> bool:
    """``expr`` is the same string on every worker: literals, module constants, f-strings,
    ``+`` and ``os.path.join`` of those.  Anything read at run time (flags, task id, a helper's
    result) makes it unknown (False)."""
    if expr is None or _depth > 12:
        return False
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.FormattedString):
        return all(constant_path(m, p.expression, scope, order, _depth + 1)
                   for p in expr.parts if isinstance(p, cst.FormattedStringExpression))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Divide)):
        return constant_path(m, expr.left, scope, order, _depth + 1) and \
            constant_path(m, expr.right, scope, order, _depth + 1)
    if isinstance(expr, cst.Call):
        q, _ = m.qualified_name(expr.func, scope, order)
        if q in _PATH_FUNCTIONS:
            return all(not a.star and constant_path(m, a.value, scope, order, _depth + 1) for a in expr.args)
        return False
    if isinstance(expr, cst.Name):
        reaching = m.reaching_exprs(expr, scope, order)
        if not reaching:
            return False
        return all(constant_path(m, e, s, o, _depth + 1) for e, s, o in reaching)
    return False


def path_text(m: Module, expr: Optional[cst.BaseExpression]) -> str:
    return m.code(expr) if expr is not None else "its directory"

