"""The facts the thread analysis (semantic/threads.py and its parts) shares: what an object
is to the threads (LOCAL, PER_THREAD, SHARED), the API facts it reads, a thread start, a step
a thread takes, a variable update."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, ClassInfo, FunctionInfo, Value

LOCAL = "local"  # made by the thread itself (while it runs)
PER_THREAD = "per-thread"  # made once for each thread, before it starts
SHARED = "shared"  # one object that every thread reaches

# API facts the thread analysis uses (canonical names, see tfapi.canonical)
SESSION_CLASSES = frozenset({"tensorflow.Session", "tensorflow.InteractiveSession"})
SESSION_GETTERS = frozenset({"keras.backend.get_session", "tensorflow.get_default_session"})
KERAS_FUNCTION = frozenset({"keras.backend.function"})
# TF1 optimizers: tf.compat.v1.train.<Name>Optimizer (canonical tensorflow.train.<Name>Optimizer)
TF1_OPTIMIZER_PREFIX = "tensorflow.train."
# Keras model methods that run optimizer steps on the model's variables
TRAINING_METHODS = frozenset({"fit", "fit_generator", "train_on_batch"})
OPTIMIZER_STEPS = frozenset({"apply_gradients", "minimize"})
# update ops of the graph that write a variable given as the receiver / first argument
ASSIGN_METHODS = frozenset({"assign", "assign_add", "assign_sub", "scatter_update", "scatter_add", "scatter_sub",
                            "scatter_nd_update", "scatter_nd_add", "scatter_nd_sub", "scatter_max", "scatter_min",
                            "scatter_mul", "scatter_div"})
ASSIGN_FUNCTIONS = frozenset({"tensorflow.assign", "tensorflow.assign_add", "tensorflow.assign_sub",
                              "tensorflow.scatter_update", "tensorflow.scatter_add", "tensorflow.scatter_sub",
                              "keras.backend.update", "keras.backend.update_add", "keras.backend.update_sub"})
GROUPS = frozenset({"tensorflow.group", "tensorflow.tuple"})
# context managers that are certainly not locks (a ``with`` of anything unknown may be one)
NOT_LOCKS = frozenset({"tensorflow.device", "tensorflow.name_scope", "tensorflow.variable_scope",
                       "tensorflow.GradientTape", "tensorflow.control_dependencies", "tensorflow.Session",
                       "tensorflow.Graph", "keras.backend.name_scope", "tensorflow.compat.v1.variable_scope",
                       "tensorflow.summary.record_if", "tensorflow.init_scope"})
NOT_LOCK_METHODS = frozenset({"as_default", "scope", "name_scope", "control_dependencies", "device", "record_if"})

MAX_STEPS = 400  # functions followed from one thread target
MAX_DEPTH = 40  # nested status questions


def _combine(statuses) -> Optional[str]:
    """One status for several possible objects: SHARED only when every one is shared, PER_THREAD
    (or LOCAL) when none is; None when unknown or mixed."""
    s = set(statuses)
    if not s or None in s:
        return None
    if s == {SHARED}:
        return SHARED
    if SHARED in s:
        return None
    return LOCAL if s == {LOCAL} else PER_THREAD


def reads(expr: cst.CSTNode, target: cst.BaseExpression) -> bool:
    """``expr`` mentions ``target`` (``v - lr * g`` reads ``v``); attribute names are not reads."""
    found = False

    class V(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if found:
                return False
            if isinstance(node, cst.BaseExpression) and node.deep_equals(target):
                found = True
                return False
            if isinstance(node, cst.Attribute):
                node.value.visit(self)
                return False
            return True

    expr.visit(V())
    return found


def _not_none(vals: list[Value]) -> list[Value]:
    """``None`` placeholders (a parameter's default, ``x = None`` until set) hold no variable."""
    rest = [v for v in vals if v.kind != api.NONE]
    return rest if rest else vals


@dataclass(eq=False)
class ThreadRun:
    """One place that starts threads running ``target``."""

    start: CallSite
    target: FunctionInfo
    self_status: Optional[str]  # status of ``self`` when the target is a method
    concurrent: bool  # several threads run the target at once


@dataclass(frozen=True)
class Ctx:
    """What a method's ``self`` is, on the path a thread took to reach it."""

    self_status: Optional[str] = None
    self_cls: Optional[ClassInfo] = None
    # a local function's ``return`` being followed for one call: what the function makes is made
    # at that call (status of the call site)
    made_in: Optional[FunctionInfo] = None
    made_status: Optional[str] = None


@dataclass(eq=False)
class Step:
    """A call a thread makes: ``site`` in ``fn``, reached through ``via`` (the calls leading
    there from the target, outermost first), under ``guards`` (the ``with``/``acquire`` locks held
    on the way, as (expression, its call site or with-site, status))."""

    site: CallSite
    fn: FunctionInfo
    ctx: Ctx
    via: tuple[CallSite, ...]
    guards: tuple[tuple[cst.BaseExpression, CallSite, Optional[str]], ...]


@dataclass(eq=False)
class Write:
    """A variable update a call performs."""

    site: CallSite
    what: str  # "optimizer step", "session run", "training function", "training call"
    op: Optional[cst.Call]  # the update op / optimizer call / K.function call
    targets: list[tuple[str, Optional[str]]] = field(default_factory=list)  # (code, status)

    @property
    def shared(self) -> bool:
        return any(st == SHARED for _c, st in self.targets)
