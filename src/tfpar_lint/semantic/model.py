"""The records the one traversal produces: scopes, bindings, functions, classes, call sites,
stores, references; and :class:`Value`, what an expression is inferred to hold."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import libcst as cst

from tfpar_lint import tfapi as api


@dataclass(eq=False)
class Scope:
    kind: str  # "module" | "function" | "class" | "lambda" | "comprehension"
    node: cst.CSTNode
    parent: Optional["Scope"]
    bindings: dict[str, list["Binding"]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    func: Optional["FunctionInfo"] = None
    cls: Optional["ClassInfo"] = None
    module: Any = None  # the semantic Module this scope belongs to (values cross files)

    def add(self, b: "Binding") -> None:
        self.bindings.setdefault(b.name, []).append(b)


@dataclass(eq=False)
class Binding:
    name: str
    kind: str  # assign | annassign | aug | import | def | class | param | for | with | walrus | comp | del
    scope: Scope
    order: int
    node: cst.CSTNode  # the statement / parameter / alias that binds
    value: Optional[cst.BaseExpression] = None
    path: tuple[int, ...] = ()  # position inside an unpacking target
    qname: str = ""  # imports: the raw qualified name
    annotation: Optional[cst.BaseExpression] = None
    func: Optional["FunctionInfo"] = None  # def / param: the function
    cls: Optional["ClassInfo"] = None


@dataclass(eq=False)
class FunctionInfo:
    node: Union[cst.FunctionDef, cst.Lambda]
    name: str
    scope: Scope  # the function's own scope
    parent: Scope  # where it is defined
    cls: Optional["ClassInfo"]
    decorators: list[cst.BaseExpression]
    params: list[cst.Param]
    returns: list[tuple[cst.BaseExpression, int]] = field(default_factory=list)
    order: int = 0
    calls: list["CallSite"] = field(default_factory=list)  # call sites in its own body

    @property
    def is_lambda(self) -> bool:
        return isinstance(self.node, cst.Lambda)


@dataclass(eq=False)
class ClassInfo:
    node: cst.ClassDef
    name: str
    scope: Scope
    bases: list[cst.BaseExpression]
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    # self.<attr> = value inside the methods: attr -> bindings
    attrs: dict[str, list[Binding]] = field(default_factory=dict)


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    scope: Scope
    func: Optional[FunctionInfo]  # innermost enclosing function (None: module/class level)
    order: int
    withs: tuple[cst.WithItem, ...]  # enclosing with-items, outermost first (same function only)
    ifs: tuple[tuple[cst.If, bool], ...]  # enclosing if statements and whether in the body (True) or else
    trys: tuple[cst.Try, ...]  # enclosing try statements (same function only)
    loops: int  # number of enclosing for/while loops (same function only)
    stmt: Optional[cst.CSTNode] = None  # the simple statement containing the call


@dataclass(eq=False)
class IndirectCall:
    """A call of a local function made by an API it was handed to (``strategy.run(fn, args=...)``,
    ``Thread(target=fn, args=...)``): where, through which reference, and the arguments it gets
    (None: cannot be told)."""

    site: CallSite
    via: cst.CSTNode  # the expression that names the function in the call (``fn``, ``self.step``)
    args: Optional[list[cst.BaseExpression]]
    kwargs: Optional[dict[str, cst.BaseExpression]]


@dataclass(eq=False)
class StoreSite:
    """``x[key] = value`` (a subscript assignment), with the same context as a :class:`CallSite`."""

    node: cst.CSTNode  # the Assign / AnnAssign statement
    target: cst.Subscript
    value: Optional[cst.BaseExpression]
    scope: Scope
    func: Optional[FunctionInfo]
    order: int
    withs: tuple[cst.WithItem, ...]
    ifs: tuple[tuple[cst.If, bool], ...]
    trys: tuple[cst.Try, ...]
    loops: int
    deleted: bool = False  # ``del x[key]``


@dataclass(eq=False)
class TraceEvent:
    """One step of :meth:`Module.traces`: a call or a subscript store, the ``if`` branches it
    depends on along the way from the trace's root (outermost first), and the local calls that
    led to it."""

    site: Union[CallSite, StoreSite]
    conds: tuple[tuple[cst.If, bool], ...]
    via: tuple[CallSite, ...] = ()


@dataclass(eq=False)
class NameRef:
    node: Union[cst.Name, cst.Attribute]  # an Attribute only in Module.attr_refs (``self.model``)
    scope: Scope
    order: int
    func: Optional[FunctionInfo]


@dataclass(eq=False)
class Value:
    """What an expression holds.  ``origin`` is the call that created it."""

    kind: str
    qname: str = ""  # canonical API name of the creator, or of the imported thing
    origin: Optional[cst.CSTNode] = None
    site: Optional[CallSite] = None  # context of ``origin`` (where it was created)
    raw_qname: str = ""
    info: Any = None  # FunctionInfo / ClassInfo / extra payload
    source: Optional["Value"] = None  # datasets/iterators/elements: what they were drawn from
    # an unknown value: why the analysis could not follow it (one of LOSS_REASONS; "" when nothing
    # was lost: a literal, arithmetic, a function's implicit None).  With no origin, it is no value
    # at all; with one (an identity the kinds module gave it), its uses may still tell its kind
    why: str = ""
    # the branches of tests that hold the same in every method (``if self.strategy is not None:``,
    # an attribute only the constructor sets) under which the object was stored where it was read:
    # ((test text, in the body?), ...)
    conds: tuple = ()
    # the ``if`` branches under which the value reached where it was read, beyond its site's: the
    # branches of the binding it came through and the other arms of the rebindings it survived
    # (``ds = plain; if strategy: ds = distributed``: the plain one only where ``strategy`` is false);
    # ((If, in the body?), ...), judged by semantic/paths.py
    path: tuple = ()

    def is_(self, *kinds: str) -> bool:
        return self.kind in kinds


UNKNOWN = Value(api.UNKNOWN)

# Why a question about a value got no value (the census of lost values, semantic/census.py)
UNBOUND = "unbound name"
CALLEE = "unknown callee"
CONTAINER = "container"
KWARGS = "**kwargs"
ATTRIBUTE = "attribute of unknown class"
DECORATOR = "decorator"
PATH_CAP = "path cap"
MODULE_CAP = "module cap"
DEPTH_CAP = "depth cap"
PARAMETER = "parameter of unseen callers"
LOSS_REASONS = (UNBOUND, CALLEE, CONTAINER, KWARGS, ATTRIBUTE, DECORATOR, PATH_CAP, MODULE_CAP, DEPTH_CAP, PARAMETER)
_LOST = {r: Value(api.UNKNOWN, why=r) for r in LOSS_REASONS}


def lost(reason: str) -> Value:
    """The unknown value a question gets when the analysis lost the value for ``reason``."""
    return _LOST[reason]



_NESTED = threading.local()  # value questions open on this thread, in every module (semantic/values.py)


def open_questions() -> int:
    """How many value questions are open now on this thread (0: between questions)."""
    return getattr(_NESTED, "n", 0)
