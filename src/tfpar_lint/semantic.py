"""Bindings and contexts of one module: the only place where names are resolved.

One libcst traversal (:class:`_Builder`) records scopes, bindings, call sites
(with the ``with`` items, ``if`` tests and ``try`` handlers around them),
name references and function returns.  Everything else is computed lazily
and memoised on the :class:`Module`:

* :meth:`Module.infer` - what an expression holds (a strategy, a Keras model,
  a plain or distributed dataset, a ``tf.Variable``, ...), following
  assignments, imports, module-local functions' returns, parameters
  (annotations and every local call site), ``self.attr`` and ``for`` targets.
* :meth:`Module.scope_strategies` - the strategies whose ``scope()`` is open
  around a call site (lexically, or because the enclosing function is called
  only from inside a scope).
* :meth:`Module.replica_functions` - functions run by ``strategy.run`` (and
  the local functions they call).
* :meth:`Module.thread_targets` - functions run by Python threads.

Unknown stays unknown: a receiver that cannot be resolved yields
``UNKNOWN`` values and rules stay silent on it.

We deliberately do not use libcst's ``ScopeProvider``/``QualifiedNameProvider``:
they cost ~7.5x the parse (see ../shared/design/performance-notes.md); the
handful of names the rules need are resolved here, on demand.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

import libcst as cst

from tfpar_lint import tfapi as api

# ============================================================================ data


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
    node: cst.Name
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

    def is_(self, *kinds: str) -> bool:
        return self.kind in kinds


UNKNOWN = Value(api.UNKNOWN)

# ============================================================================ helpers


def dotted_name(expr: cst.BaseExpression) -> Optional[str]:
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
        parts.append(expr.value)
        return ".".join(reversed(parts))
    return None


def attr_name(expr: cst.BaseExpression) -> Optional[str]:
    """``x.foo`` -> ``foo``; ``foo`` -> ``foo``."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Name):
        return expr.value
    return None


def call_method(call: cst.Call) -> Optional[tuple[cst.BaseExpression, str]]:
    """``recv.meth(...)`` -> (recv, "meth")."""
    f = call.func
    if isinstance(f, cst.Attribute):
        return f.value, f.attr.value
    return None


def arg(call: cst.Call, pos: Optional[int], kw: Optional[str] = None) -> Optional[cst.BaseExpression]:
    """The argument at position ``pos`` or keyword ``kw``."""
    i = 0
    for a in call.args:
        if a.star:
            return None if pos is not None and i <= pos and a.star == "*" else None
        if a.keyword is not None:
            if kw is not None and a.keyword.value == kw:
                return a.value
            continue
        if pos is not None and i == pos:
            return a.value
        i += 1
    return None


def keyword(call: cst.Call, kw: str) -> Optional[cst.BaseExpression]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == kw:
            return a.value
    return None


def param_names(fn: FunctionInfo) -> list[str]:
    return [p.name.value for p in fn.params]


def is_constant(expr: Optional[cst.BaseExpression]) -> bool:
    """A literal (number, string, tuple/list of literals, unary minus of a literal)."""
    if expr is None:
        return False
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return is_constant(expr.expression)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return all(is_constant(e.value) for e in expr.elements)
    return False


# ============================================================================ strategy facts
SINGLE_REPLICA = frozenset({"tensorflow.distribute.OneDeviceStrategy"}) | api.PARAMETER_SERVER_STRATEGIES


def replicated(strategies: list["Value"]) -> bool:
    """Every strategy may run several replicas in sync (not OneDevice / parameter server,
    not ``get_strategy()`` (the default strategy unless called in a scope), not
    ``MirroredStrategy(devices=["/gpu:0"])``)."""
    if not strategies:
        return False
    for v in strategies:
        if v.qname in SINGLE_REPLICA or v.qname in api.STRATEGY_GETTERS:
            return False
        o = v.origin
        if isinstance(o, cst.Call):
            devs = keyword(o, "devices")
            if isinstance(devs, (cst.List, cst.Tuple)) and len(devs.elements) <= 1:
                return False
    return True


# ============================================================================ fast traversal
#
# libcst's own traversal (``node.visit(visitor)``) rebuilds every node it
# passes (``_visit_and_replace_children`` constructs and validates a copy, even
# for a read-only ``CSTVisitor``) and calls four hooks per field; that costs
# more than the parse.  ``_FastVisitor`` walks the same nodes in the same order
# and calls the same ``visit_X``/``leave_X`` methods, but reads the children
# straight from the node's fields and skips subtrees that cannot contain a
# node the visitor has a method for (whitespace, commas, parentheses,
# operators, number and string literals, ...).  Explicit ``child.visit(self)``
# calls inside visit methods keep working: they enter through ``on_visit``.
# benchmarks/optimisations.md has the numbers; tests/test_fastwalk.py checks
# that the model built this way equals the one built by libcst's traversal.

_FIELD_ORDER: dict[type, tuple[str, ...]] = {}  # node class -> fields in libcst's visiting order
_FIELD_CLASSES: dict[type, dict[str, tuple[type, ...]]] = {}  # node class -> field -> node classes it may hold
_WALK_PLANS: dict[type, tuple[frozenset, dict, frozenset]] = {}  # visitor class -> (relevant classes, plan, types)


class _FieldOrderRecorder(cst.CSTVisitor):
    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self.root = root
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if node is self.root:
            self.fields.append(attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


def _field_order(cls: type, node: cst.CSTNode) -> tuple[str, ...]:
    order = _FIELD_ORDER.get(cls)
    if order is None:
        import dataclasses

        rec = _FieldOrderRecorder(node)
        node._visit_and_replace_children(rec)  # once per class: records the order libcst visits fields in
        names = list(dict.fromkeys(rec.fields))
        # a field libcst skipped on this instance because it was None (e.g. an
        # f-string's format_spec) is visited last when present
        names += [f.name for f in dataclasses.fields(cls) if f.name not in names]
        order = _FIELD_ORDER[cls] = tuple(names)
    return order


def _node_classes_in(tp: Any, acc: set) -> set:
    import typing

    if isinstance(tp, type):
        acc.add(tp)
    elif isinstance(tp, (str, typing.ForwardRef)):
        name = tp if isinstance(tp, str) else tp.__forward_arg__
        acc.add(getattr(cst, name, cst.CSTNode))  # unknown: assume anything
    else:
        for a in typing.get_args(tp):
            _node_classes_in(a, acc)
    return acc


def _field_classes(cls: type) -> dict[str, tuple[type, ...]]:
    out = _FIELD_CLASSES.get(cls)
    if out is None:
        import dataclasses

        out = {}
        for f in dataclasses.fields(cls):
            out[f.name] = tuple(c for c in _node_classes_in(f.type, set())
                                if isinstance(c, type) and issubclass(c, cst.CSTNode))
        _FIELD_CLASSES[cls] = out
    return out


def _hook(visitor_cls: type, name: str) -> Any:
    """The visitor's own ``visit_X``/``leave_X`` (libcst's base classes define no-op stubs for all)."""
    f = getattr(visitor_cls, name, None)
    return None if f is None or f is getattr(cst.CSTVisitor, name, None) else f


def _relevant_classes(visitor_cls: type) -> tuple[frozenset, frozenset]:
    """Node classes with a visit/leave method, and those whose fields may (transitively) hold one;
    and the field types (annotations) that may hold a relevant node."""
    import dataclasses

    classes, work = set(), [cst.CSTNode]
    while work:
        for sub in work.pop().__subclasses__():
            if sub not in classes:
                classes.add(sub)
                work.append(sub)
    classes = {c for c in classes if dataclasses.is_dataclass(c)}
    field_types = {c: frozenset(t for ts in _field_classes(c).values() for t in ts) for c in classes}
    all_types = set().union(*field_types.values()) | {cst.CSTNode}
    subclasses: dict[type, set] = {t: set() for t in all_types}  # annotation -> node classes it admits
    for c in classes:
        for base in c.__mro__:
            if base in subclasses:
                subclasses[base].add(c)
    rel = {c for c in classes
           if _hook(visitor_cls, "visit_" + c.__name__) or _hook(visitor_cls, "leave_" + c.__name__)}
    while True:
        rel_types = {t for t, subs in subclasses.items() if not subs.isdisjoint(rel)}
        new = {c for c in classes - rel if not field_types[c].isdisjoint(rel_types)}
        if not new:
            return frozenset(rel), frozenset(rel_types)
        rel |= new


class _FastVisitor(cst.CSTVisitor):
    """A read-only visitor with a faster traversal (see above); no attribute hooks."""

    def _fast_plan(self) -> tuple[frozenset, dict, frozenset]:
        cls = type(self)
        plan = _WALK_PLANS.get(cls)
        if plan is None:
            hooks = [n for n in dir(cls)
                     if n.startswith(("visit_", "leave_")) and n.count("_") > 1 and _hook(cls, n)]
            if hooks:  # visit_Call_func & co. need libcst's traversal
                raise TypeError(f"{cls.__name__}: attribute hooks are not supported: {hooks}")
            rel, rel_types = _relevant_classes(cls)
            plan = _WALK_PLANS[cls] = (rel, {}, rel_types)
        return plan

    def _fast_entry(self, node: cst.CSTNode) -> tuple:
        cls = type(node)
        _rel, plan, rel_types = self._fast_plan()
        types = _field_classes(cls)
        fields = tuple(f for f in _field_order(cls, node)
                       if any(t in rel_types for t in types.get(f, (cst.CSTNode,))))
        name = cls.__name__
        entry = plan[cls] = (_hook(type(self), "visit_" + name), _hook(type(self), "leave_" + name), fields)
        return entry

    def _fast_children(self, node: cst.CSTNode, fields: tuple[str, ...]) -> None:
        rel = self._fast_rel
        walk = self._fast_walk
        for f in fields:
            v = getattr(node, f)
            tv = type(v)
            if tv is tuple or tv is list:
                for c in v:
                    if type(c) in rel:
                        walk(c)
            elif tv in rel:
                walk(v)

    def _fast_walk(self, node: cst.CSTNode) -> None:
        entry = self._fast_entries.get(type(node)) or self._fast_entry(node)
        visit, leave, fields = entry
        if (visit is None or visit(self, node) is not False) and fields:
            self._fast_children(node, fields)
        if leave is not None:
            leave(self, node)

    # libcst's entry points: ``tree.visit(v)`` / ``child.visit(self)``
    def on_visit(self, node: cst.CSTNode) -> bool:
        if "_fast_entries" not in self.__dict__:
            self._fast_rel, self._fast_entries, _ = self._fast_plan()
        entry = self._fast_entries.get(type(node)) or self._fast_entry(node)
        visit, _leave, fields = entry
        if (visit is None or visit(self, node) is not False) and fields:
            self._fast_children(node, fields)
        return False  # children done here; libcst then calls on_leave

    def on_leave(self, original_node: cst.CSTNode) -> None:
        leave = self._fast_entries[type(original_node)][1]
        if leave is not None:
            leave(self, original_node)


# ============================================================================ builder


class _Builder(_FastVisitor):
    """The one traversal: records scopes, bindings, call sites and references."""

    def __init__(self, mod: "Module") -> None:
        super().__init__()
        self.m = mod
        self.counter = itertools.count(1)
        self.scope = mod.scope
        self.func: Optional[FunctionInfo] = None
        self.cls: Optional[ClassInfo] = None
        # per-function context stacks (reset when entering a function)
        self.withs: list[cst.WithItem] = []
        self.ifs: list[tuple[cst.If, bool]] = []
        self.trys: list[cst.Try] = []
        self.loops = 0
        self.stack: list[tuple] = []
        self.skip_names: set[int] = set()
        self.stmt: Optional[cst.CSTNode] = None

    # ---------------------------------------------------------------- utilities
    def _order(self) -> int:
        return next(self.counter)

    def _bind(self, name: str, kind: str, node: cst.CSTNode, **kw: Any) -> Binding:
        scope = self.scope
        if name in scope.globals:
            scope = self.m.scope
        b = Binding(name=name, kind=kind, scope=scope, order=self._order(), node=node, **kw)
        scope.add(b)
        if scope is self.m.scope and kind in ("assign", "annassign", "aug", "import", "def", "class", "for", "with"):
            self.m.module_bindings_in_order.append(b)
        return b

    def _bind_target(self, target: cst.BaseExpression, kind: str, node: cst.CSTNode, value, path=()) -> None:
        if isinstance(target, cst.Name):
            self.skip_names.add(id(target))
            self._bind(target.value, kind, node, value=value, path=path)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for i, el in enumerate(target.elements):
                t = el.value
                if isinstance(t, cst.StarredElement):
                    t = t.value
                self._bind_target(t, kind, node, value, path + (i,))
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, kind, node, value, path + (-1,))
        elif isinstance(target, cst.Attribute) and self.cls is not None and self.func is not None:
            # self.attr = value inside a method
            base = target.value
            if isinstance(base, cst.Name) and self.func.params and base.value == self.func.params[0].name.value:
                b = Binding(name=target.attr.value, kind=kind, scope=self.scope, order=self._order(),
                            node=node, value=value, path=path, cls=self.cls)
                self.cls.attrs.setdefault(target.attr.value, []).append(b)

    def _push_function(self, node, name: str, params: cst.Parameters, decorators) -> FunctionInfo:
        parent = self.scope
        scope = Scope("lambda" if isinstance(node, cst.Lambda) else "function", node, parent)
        all_params = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
        if isinstance(params.star_arg, cst.Param):
            all_params.append(params.star_arg)
        if params.star_kwarg is not None:
            all_params.append(params.star_kwarg)
        info = FunctionInfo(node=node, name=name, scope=scope, parent=parent,
                            cls=self.cls if parent.kind == "class" else None,
                            decorators=[d.decorator for d in decorators], params=all_params,
                            order=self._order())
        scope.func = info
        self.m.functions.append(info)
        self.m.function_of_node[id(node)] = info
        if info.cls is not None and not isinstance(node, cst.Lambda):
            info.cls.methods[name] = info
        self.stack.append((self.scope, self.func, self.cls, self.withs, self.ifs, self.trys, self.loops))
        self.scope = scope
        self.func = info
        if parent.kind == "class":
            self.cls = None
        self.withs, self.ifs, self.trys, self.loops = [], [], [], 0
        for p in all_params:
            self.skip_names.add(id(p.name))
            ann = p.annotation.annotation if p.annotation is not None else None
            self._bind(p.name.value, "param", p, value=p.default, annotation=ann, func=info)
        return info

    def _pop(self) -> None:
        (self.scope, self.func, self.cls, self.withs, self.ifs, self.trys, self.loops) = self.stack.pop()

    # ---------------------------------------------------------------- imports
    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._bind(alias.asname.name.value, "import", alias, qname=full)
            else:
                head = full.split(".", 1)[0]
                self._bind(head, "import", alias, qname=head)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or node.module is None:
            mod = None
        else:
            mod = dotted_name(node.module)
        if isinstance(node.names, cst.ImportStar):
            return False
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            self._bind(local, "import", alias, qname=f"{mod}.{name}" if mod else "")
        return False

    # ---------------------------------------------------------------- defs
    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        for d in node.decorators:
            d.visit(self)
        if node.returns is not None:
            node.returns.visit(self)
        for p in list(node.params.params) + list(node.params.kwonly_params) + list(node.params.posonly_params):
            if p.default is not None:
                p.default.visit(self)
            if p.annotation is not None:
                p.annotation.visit(self)
        self.skip_names.add(id(node.name))
        b = self._bind(node.name.value, "def", node)
        info = self._push_function(node, node.name.value, node.params, node.decorators)
        b.func = info
        node.body.visit(self)
        self._pop()
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self._push_function(node, "<lambda>", node.params, ())
        order = self._order()
        self.func.returns.append((node.body, order))
        node.body.visit(self)
        self._pop()
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        for d in node.decorators:
            d.visit(self)
        for a in node.bases:
            a.visit(self)
        self.skip_names.add(id(node.name))
        scope = Scope("class", node, self.scope)
        info = ClassInfo(node=node, name=node.name.value, scope=scope, bases=[a.value for a in node.bases])
        scope.cls = info
        self._bind(node.name.value, "class", node, cls=info)
        self.m.classes.append(info)
        self.stack.append((self.scope, self.func, self.cls, self.withs, self.ifs, self.trys, self.loops))
        self.scope, self.cls = scope, info
        node.body.visit(self)
        self._pop()
        return False

    def visit_Return(self, node: cst.Return) -> None:
        if self.func is not None and node.value is not None:
            self.func.returns.append((node.value, self._order()))

    def visit_Global(self, node: cst.Global) -> None:
        for n in node.names:
            self.scope.globals.add(n.name.value)
            self.skip_names.add(id(n.name))

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for n in node.names:
            self.scope.nonlocals.add(n.name.value)
            self.skip_names.add(id(n.name))

    # ---------------------------------------------------------------- bindings
    def visit_SimpleStatementLine(self, node) -> None:
        self.stmt = node

    def visit_Assign(self, node: cst.Assign) -> bool:
        node.value.visit(self)  # the value is evaluated before the targets are bound
        for t in node.targets:
            if isinstance(t.target, cst.Attribute):
                self.m.attr_assigns.append((t.target, node.value, self.scope, self._order()))
            elif isinstance(t.target, cst.Subscript):
                self._store(node, t.target, node.value)
            self._bind_target(t.target, "assign", node, node.value)
            t.target.visit(self)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        if node.value is not None:
            node.value.visit(self)
        node.annotation.visit(self)
        if isinstance(node.target, cst.Name):
            self.skip_names.add(id(node.target))
            self._bind(node.target.value, "annassign", node, value=node.value, annotation=node.annotation.annotation)
        else:
            if isinstance(node.target, cst.Subscript):
                self._store(node, node.target, node.value)
            self._bind_target(node.target, "annassign", node, node.value)
        node.target.visit(self)
        return False

    def _store(self, node: cst.CSTNode, target: cst.Subscript, value: Optional[cst.BaseExpression],
               deleted: bool = False) -> None:
        self.m.stores.append(StoreSite(node=node, target=target, value=value, scope=self.scope, func=self.func,
                                       order=self._order(), withs=tuple(self.withs), ifs=tuple(self.ifs),
                                       trys=tuple(self.trys), loops=self.loops, deleted=deleted))

    def visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else None
        for t in [e.value for e in targets] if targets is not None else [node.target]:
            if isinstance(t, cst.Subscript):
                self._store(node, t, None, deleted=True)

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        node.value.visit(self)
        node.target.visit(self)  # an aug-assigned name is also read
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, "aug", node, value=None)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        node.value.visit(self)
        if isinstance(node.target, cst.Name):
            self.skip_names.add(id(node.target))
            self._bind(node.target.value, "walrus", node, value=node.value)
        return False

    def visit_For(self, node: cst.For) -> bool:
        node.iter.visit(self)
        self._bind_target(node.target, "for", node, node.iter)
        node.target.visit(self)
        self.loops += 1
        node.body.visit(self)
        self.loops -= 1
        if node.orelse is not None:
            node.orelse.visit(self)
        return False

    def visit_While(self, node: cst.While) -> bool:
        node.test.visit(self)
        self.loops += 1
        node.body.visit(self)
        self.loops -= 1
        if node.orelse is not None:
            node.orelse.visit(self)
        return False

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        node.iter.visit(self)
        self._bind_target(node.target, "comp", node, node.iter)
        node.target.visit(self)
        for i in node.ifs:
            i.visit(self)
        if node.inner_for_in is not None:
            node.inner_for_in.visit(self)
        return False

    def visit_With(self, node: cst.With) -> bool:
        for item in node.items:
            item.item.visit(self)
            if item.asname is not None:
                self._bind_target(item.asname.name, "with", item, item.item)
        self.withs = self.withs + list(node.items)
        node.body.visit(self)
        self.withs = self.withs[: len(self.withs) - len(node.items)]
        return False

    def visit_If(self, node: cst.If) -> bool:
        node.test.visit(self)
        self.ifs.append((node, True))
        node.body.visit(self)
        self.ifs.pop()
        if node.orelse is not None:
            self.ifs.append((node, False))
            node.orelse.visit(self)
            self.ifs.pop()
        return False

    def visit_Try(self, node: cst.Try) -> bool:
        self.trys.append(node)
        node.body.visit(self)
        self.trys.pop()
        for h in node.handlers:
            if h.name is not None and isinstance(h.name.name, cst.Name):
                self._bind(h.name.name.value, "except", h)
                self.skip_names.add(id(h.name.name))
            h.visit(self)
        if node.orelse is not None:
            node.orelse.visit(self)
        if node.finalbody is not None:
            node.finalbody.visit(self)
        return False

    # ---------------------------------------------------------------- uses
    def visit_Call(self, node: cst.Call) -> None:
        site = CallSite(node=node, scope=self.scope, func=self.func, order=self._order(),
                        withs=tuple(self.withs), ifs=tuple(self.ifs), trys=tuple(self.trys),
                        loops=self.loops, stmt=self.stmt)
        self.m.calls.append(site)
        self.m.site_of_call[id(node)] = site
        if self.func is not None:
            self.func.calls.append(site)
        for a in node.args:
            if a.keyword is not None:
                self.skip_names.add(id(a.keyword))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip_names.add(id(node.attr))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Multiply) and (
            isinstance(node.left, (cst.List, cst.Tuple)) or isinstance(node.right, (cst.List, cst.Tuple))
        ):
            self.m.sequence_repeats.append((node, self.scope, self._order()))

    # a comprehension is a loop: calls in it run once per item
    def visit_ListComp(self, node: cst.ListComp) -> None:
        self.m.comprehensions.append((node, self.scope, self._order()))
        self.loops += 1

    def leave_ListComp(self, node: cst.ListComp) -> None:
        self.loops -= 1

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.m.comprehensions.append((node, self.scope, self._order()))
        self.loops += 1

    def leave_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.loops -= 1

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self.loops += 1

    def leave_SetComp(self, node: cst.SetComp) -> None:
        self.loops -= 1

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self.loops += 1

    def leave_DictComp(self, node: cst.DictComp) -> None:
        self.loops -= 1

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        self.m.fstring_exprs.append((node, self.scope, self._order()))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self.skip_names:
            return
        self.m.refs.append(NameRef(node, self.scope, self._order(), self.func))


# ============================================================================ module


class Module:
    """The semantic model of one parsed module."""

    def __init__(self, tree: cst.Module, source: str = "", path: str = "<string>",
                 strategy_factories: Sequence[str] = (), dataset_distributors: Sequence[str] = ()) -> None:
        self.tree = tree
        self.source = source
        self.path = path
        self.strategy_factories = frozenset(strategy_factories)
        self.dataset_distributors = frozenset(dataset_distributors)
        self.scope = Scope("module", tree, None)
        self.functions: list[FunctionInfo] = []
        self.classes: list[ClassInfo] = []
        self.calls: list[CallSite] = []
        self.refs: list[NameRef] = []
        self.site_of_call: dict[int, CallSite] = {}
        self.function_of_node: dict[int, FunctionInfo] = {}
        self.module_bindings_in_order: list[Binding] = []
        # [x] * n  and  [f(x) for ...]: (node, scope, order)
        self.sequence_repeats: list[tuple[cst.BinaryOperation, Scope, int]] = []
        self.comprehensions: list[tuple[cst.BaseExpression, Scope, int]] = []
        # obj.attr = value (any receiver): (target, value, scope, order)
        self.attr_assigns: list[tuple[cst.Attribute, cst.BaseExpression, Scope, int]] = []
        # {expr[:spec]} inside f-strings: (FormattedStringExpression, scope, order)
        self.fstring_exprs: list[tuple[cst.FormattedStringExpression, Scope, int]] = []
        # x[key] = value, del x[key]
        self.stores: list[StoreSite] = []
        tree.visit(_Builder(self))
        # memo tables
        self._infer_memo: dict[int, list[Value]] = {}
        self._binding_memo: dict[int, list[Value]] = {}
        self._in_progress: set[int] = set()
        self._callers: Optional[dict[int, list[CallSite]]] = None
        self._fn_refs: Optional[dict[int, list[NameRef]]] = None
        self._replica: Optional[dict[int, list[Value]]] = None
        self._threads: Optional[dict[int, list[CallSite]]] = None
        self._traces: Optional[list[list[TraceEvent]]] = None
        self._traced_memo: dict[int, Optional[bool]] = {}
        self._fn_scope_memo: dict[int, tuple[list[Value], bool]] = {}

    # ------------------------------------------------------------------ lookup
    def lookup(self, name: str, scope: Scope, order: int) -> list[Binding]:
        s: Optional[Scope] = scope
        first = True
        while s is not None:
            if s.kind == "class" and not first:
                s = s.parent
                continue
            if name in s.globals:
                s = self.scope
                first = False
                continue
            bs = s.bindings.get(name)
            if bs and name not in s.nonlocals:
                if first:
                    before = [b for b in bs if b.order < order]
                    if before:
                        return [before[-1]]
                return list(bs)
            s = s.parent
            first = False
        return []

    # ------------------------------------------------------------------ qualified names
    def qualified_name(self, expr: cst.BaseExpression, scope: Scope, order: int) -> tuple[str, str]:
        """(canonical, raw) qualified name of an imported API reference, or ("", "")."""
        d = dotted_name(expr)
        if not d:
            return "", ""
        head, _, rest = d.partition(".")
        bs = self.lookup(head, scope, order)
        if not bs or any(b.kind != "import" or not b.qname for b in bs):
            return "", ""
        q = bs[0].qname
        if any(b.qname != q for b in bs):
            return "", ""
        raw = f"{q}.{rest}" if rest else q
        return api.canonical(raw), raw

    # ------------------------------------------------------------------ inference
    def infer_at(self, expr: Optional[cst.BaseExpression], site: CallSite) -> list[Value]:
        return self.infer(expr, site.scope, site.order, site)

    def infer(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
              site: Optional[CallSite] = None) -> list[Value]:
        """Possible values of ``expr`` (never empty; [UNKNOWN] when unknown)."""
        if expr is None:
            return [UNKNOWN]
        key = id(expr)
        memo = self._infer_memo.get(key)
        if memo is not None:
            return memo
        if key in self._in_progress:
            return [UNKNOWN]
        self._in_progress.add(key)
        try:
            vals = self._infer(expr, scope, order, site) or [UNKNOWN]
        finally:
            self._in_progress.discard(key)
        self._infer_memo[key] = vals
        return vals

    def infer_one(self, expr, scope, order, site=None) -> Value:
        """The value when every possibility has the same kind and origin, else UNKNOWN."""
        vals = self.infer(expr, scope, order, site)
        first = vals[0]
        if all(v.kind == first.kind and v.origin is first.origin for v in vals[1:]):
            return first
        return UNKNOWN

    def kinds(self, expr, scope, order) -> set[str]:
        return {v.kind for v in self.infer(expr, scope, order)}

    def _infer(self, expr, scope: Scope, order: int, site) -> list[Value]:
        if isinstance(expr, cst.Name):
            bs = self.lookup(expr.value, scope, order)
            if not bs:
                return [UNKNOWN]
            out: list[Value] = []
            for b in bs:
                out.extend(self.binding_values(b))
            return out
        if isinstance(expr, cst.Attribute):
            q, raw = self.qualified_name(expr, scope, order)
            if q:
                return [Value(api.API, q, raw_qname=raw)]
            # self.attr inside a method
            fn = scope.func
            if (fn is not None and fn.cls is None and isinstance(expr.value, cst.Name)):
                fn = self._method_of(scope)
            if fn is not None and fn.cls is not None and isinstance(expr.value, cst.Name) \
                    and fn.params and expr.value.value == fn.params[0].name.value:
                attr = expr.attr.value
                if attr in fn.cls.methods:
                    m = fn.cls.methods[attr]
                    return [Value(api.FUNCTION, info=m, origin=m.node)]
                bs = fn.cls.attrs.get(attr)
                if bs:
                    out = []
                    for b in bs:
                        out.extend(self.binding_values(b))
                    return out
            return [UNKNOWN]
        if isinstance(expr, cst.Call):
            return self._infer_call(expr, scope, order)
        if isinstance(expr, cst.Lambda):
            info = self.function_of_node.get(id(expr))
            return [Value(api.FUNCTION, info=info, origin=expr)] if info else [UNKNOWN]
        if isinstance(expr, cst.Subscript):
            base = self.infer(expr.value, scope, order)
            if all(v.kind in (api.ELEMENT, api.DIST_VALUES) for v in base):
                return list(base)
            return [UNKNOWN]
        if isinstance(expr, cst.Await):
            return [UNKNOWN]
        return [UNKNOWN]

    def _method_of(self, scope: Scope) -> Optional[FunctionInfo]:
        """Innermost enclosing method (for ``self`` inside nested functions)."""
        s: Optional[Scope] = scope
        while s is not None:
            if s.func is not None and s.func.cls is not None:
                return s.func
            s = s.parent
        return None

    def created_within(self, node: Optional[cst.CSTNode], fn: FunctionInfo) -> bool:
        site = self.site_of_call.get(id(node)) if node is not None else None
        s = site.scope if site is not None else None
        while s is not None:
            if s is fn.scope:
                return True
            s = s.parent
        return False

    def _infer_call(self, call: cst.Call, scope: Scope, order: int) -> list[Value]:
        site = self.site_of_call.get(id(call))
        func = call.func
        q, raw = self.qualified_name(func, scope, order)
        if q:
            return self._infer_api_call(q, raw, call, scope, order, site)
        # builtins and local callables
        if isinstance(func, cst.Name) and not self.lookup(func.value, scope, order):
            return self._infer_builtin(func.value, call, scope, order, site)
        if isinstance(func, cst.Attribute):
            recv_vals = self.infer(func.value, scope, order)
            out = []
            for rv in recv_vals:
                out.append(self._infer_method(rv, func.attr.value, call, scope, order, site))
            return out
        callee_vals = self.infer(func, scope, order)
        out = []
        for cv in callee_vals:
            if cv.kind == api.FUNCTION and cv.info is not None:
                out.extend(self._returns_of(cv.info, call, site))
            elif cv.kind == api.CLASS and cv.info is not None:
                out.append(self._instance_of(cv.info, call, site))
            elif cv.kind == api.API:
                out.extend(self._infer_api_call(cv.qname, cv.raw_qname, call, scope, order, site))
            else:
                out.append(UNKNOWN)
        return out

    def _returns_of(self, fn: FunctionInfo, call: cst.Call, site: Optional[CallSite]) -> list[Value]:
        if not fn.returns:
            return [UNKNOWN]
        out = []
        for expr, order in fn.returns:
            for v in self.infer(expr, fn.scope, order):
                if v.kind != api.UNKNOWN and self.created_within(v.origin, fn):
                    # created by the call: the creation context is the caller's
                    v = Value(v.kind, v.qname, origin=call, site=site, raw_qname=v.raw_qname,
                              info=v.info, source=v.source)
                out.append(v)
        return out

    def _instance_of(self, cls: ClassInfo, call: cst.Call, site) -> Value:
        kind = self.class_kind(cls)
        if kind:
            return Value(kind, cls.name, origin=call, site=site, info=cls)
        return Value(api.UNKNOWN, cls.name, origin=call, site=site, info=cls)

    def class_kind(self, cls: ClassInfo, _depth: int = 0) -> Optional[str]:
        """MODEL / LAYER / ... for a local class by its bases."""
        if _depth > 8:
            return None
        for base in cls.bases:
            q, _ = self.qualified_name(base, cls.scope.parent or self.scope, 10**9)
            if q in api.MODEL_BASES:
                return api.MODEL
            if q in api.LAYER_BASES:
                return api.LAYER
            if q.startswith("keras.metrics.") and q[len("keras.metrics."):][:1].isupper():
                return api.METRIC
            if q.startswith("keras.optimizers.") and q[len("keras.optimizers."):][:1].isupper():
                return api.OPTIMIZER
            if not q:
                for v in self.infer(base, cls.scope.parent or self.scope, 10**9):
                    if v.kind == api.CLASS and v.info is not cls:
                        k = self.class_kind(v.info, _depth + 1)
                        if k:
                            return k
        return None

    def _infer_api_call(self, q: str, raw: str, call, scope, order, site) -> list[Value]:
        if q in self.strategy_factories:
            return [Value(api.STRATEGY, q, origin=call, site=site, raw_qname=raw)]
        if q in self.dataset_distributors:
            return [Value(api.DIST_DATASET, q, origin=call, site=site, raw_qname=raw)]
        if q in api.TF_FUNCTION:
            target = arg(call, 0, "func")
            if target is not None:
                return self.infer(target, scope, order)
            return [UNKNOWN]
        kind = api.kind_of_constructor(q)
        if kind is not None:
            return [Value(kind, q, origin=call, site=site, raw_qname=raw)]
        # tf.data.Dataset.from_tensor_slices(...).batch(...) handled via methods
        return [Value(api.UNKNOWN, q, origin=call, site=site, raw_qname=raw)]

    def _infer_builtin(self, name: str, call, scope, order, site) -> list[Value]:
        if name == "iter":
            src = arg(call, 0)
            out = []
            for v in self.infer(src, scope, order):
                if v.kind == api.DATASET:
                    out.append(Value(api.ITERATOR, origin=call, site=site, source=v))
                elif v.kind == api.DIST_DATASET:
                    out.append(Value(api.DIST_ITERATOR, origin=call, site=site, source=v))
                elif v.kind in (api.ITERATOR, api.DIST_ITERATOR):
                    out.append(v)
                else:
                    out.append(UNKNOWN)
            return out
        if name == "next":
            src = arg(call, 0)
            return [self._element_of(v, call, site) for v in self.infer(src, scope, order)]
        if name in ("enumerate", "zip", "list", "tuple", "reversed", "sorted"):
            return [UNKNOWN]
        return [UNKNOWN]

    def _element_of(self, v: Value, node, site) -> Value:
        if v.kind in (api.DATASET, api.ITERATOR):
            return Value(api.ELEMENT, origin=node, site=site, source=v)
        if v.kind in (api.DIST_DATASET, api.DIST_ITERATOR):
            return Value(api.DIST_VALUES, origin=node, site=site, source=v)
        if v.kind in (api.ELEMENT, api.DIST_VALUES):
            return v
        return UNKNOWN

    def _infer_method(self, rv: Value, meth: str, call, scope, order, site) -> Value:
        k = rv.kind
        if k == api.API:
            # e.g. tf.data.Dataset.from_tensor_slices reached through an alias of a class
            vals = self._infer_api_call(f"{rv.qname}.{meth}", f"{rv.raw_qname}.{meth}", call, scope, order, site)
            return vals[0]
        if k == api.STRATEGY:
            if meth in api.DISTRIBUTE_DATASET_METHODS or meth in api.DISTRIBUTE_FN_METHODS:
                return Value(api.DIST_DATASET, origin=call, site=site, source=rv)
            if meth in api.DISTRIBUTE_VALUES_METHODS:
                return Value(api.DIST_VALUES, origin=call, site=site, source=rv)
            if meth in api.RUN_METHODS:
                return Value(api.PER_REPLICA, origin=call, site=site, source=rv)
            return UNKNOWN
        if k == api.DATASET:
            if meth in api.DATASET_METHODS:
                return Value(api.DATASET, origin=call, site=site, source=rv)
            if meth in ("__iter__",):
                return Value(api.ITERATOR, origin=call, site=site, source=rv)
            if meth in ("as_numpy_iterator",):
                return Value(api.ITERATOR, origin=call, site=site, source=rv)
            if meth in ("get_single_element",):
                return Value(api.ELEMENT, origin=call, site=site, source=rv)
            return UNKNOWN
        if k == api.ITERATOR and meth in ("get_next", "__next__", "next"):
            return Value(api.ELEMENT, origin=call, site=site, source=rv)
        if k == api.DIST_DATASET and meth == "__iter__":
            return Value(api.DIST_ITERATOR, origin=call, site=site, source=rv)
        if k == api.DIST_ITERATOR and meth in ("get_next", "__next__"):
            return Value(api.DIST_VALUES, origin=call, site=site, source=rv)
        if k == api.GENERATOR and meth in ("split",):
            return Value(api.UNKNOWN)
        return UNKNOWN

    def binding_values(self, b: Binding) -> list[Value]:
        key = id(b)
        memo = self._binding_memo.get(key)
        if memo is not None:
            return memo
        if key in self._in_progress:
            return [UNKNOWN]
        self._in_progress.add(key)
        try:
            vals = self._binding_values(b) or [UNKNOWN]
        finally:
            self._in_progress.discard(key)
        self._binding_memo[key] = vals
        return vals

    def _binding_values(self, b: Binding) -> list[Value]:
        k = b.kind
        if k == "import":
            if not b.qname:
                return [UNKNOWN]
            q = api.canonical(b.qname)
            return [Value(api.API, q, raw_qname=b.qname, origin=b.node)]
        if k == "def":
            return [Value(api.FUNCTION, info=b.func, origin=b.node)]
        if k == "class":
            return [Value(api.CLASS, b.cls.name if b.cls else "", info=b.cls, origin=b.node)]
        if k in ("assign", "annassign", "walrus"):
            if b.value is None:
                return self._from_annotation(b.annotation, b.scope)
            if len(b.path) == 1 and b.path[0] >= 0:
                elems = self._element_values(b.value, b.scope, b.order, b.path[0])
                if elems is not None:
                    return elems
            vals = self.infer(b.value, b.scope, b.order)
            if b.path:
                vals = [self._unpack(v, b) for v in vals]
            return vals
        if k in ("for", "comp"):
            it = b.value
            if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" \
                    and not self.lookup("enumerate", b.scope, b.order):
                if b.path[:1] == (1,):
                    src = self.infer(arg(it, 0), b.scope, b.order)
                    return [self._element_of(v, b.node, None) for v in src]
                return [UNKNOWN]
            src = self.infer(it, b.scope, b.order)
            return [self._element_of(v, b.node, None) for v in src]
        if k == "with":
            return self.infer(b.value, b.scope, b.order)
        if k == "param":
            return self._param_values(b)
        return [UNKNOWN]

    def _element_values(self, value: cst.BaseExpression, scope: Scope, order: int,
                        index: int) -> Optional[list[Value]]:
        """Element ``index`` of a tuple being unpacked: ``a, b = x, y``, or ``a, b = f()`` where
        every ``return`` of the local function ``f`` is a tuple literal.  None otherwise.
        (Values keep their own origin: two elements of one call stay distinct objects.)"""
        def element(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
            if not isinstance(expr, (cst.Tuple, cst.List)) or index >= len(expr.elements):
                return None
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                return None
            return expr.elements[index].value

        if isinstance(value, (cst.Tuple, cst.List)):
            el = element(value)
            return None if el is None else self.infer(el, scope, order)
        if not isinstance(value, cst.Call):
            return None
        fns = self.resolve_function(value.func, scope, order)
        if not fns or any(not fn.returns for fn in fns):
            return None
        out: list[Value] = []
        for fn in fns:
            for expr, ret_order in fn.returns:
                el = element(expr)
                if el is None:
                    return None
                out.extend(self.infer(el, fn.scope, ret_order))
        return out

    def _unpack(self, v: Value, b: Binding) -> Value:
        if v.kind in (api.ELEMENT, api.DIST_VALUES):
            return v
        return UNKNOWN

    def _from_annotation(self, ann: Optional[cst.BaseExpression], scope: Scope) -> list[Value]:
        if ann is None:
            return [UNKNOWN]
        if isinstance(ann, cst.SimpleString):
            return [UNKNOWN]
        q, raw = self.qualified_name(ann, scope, 10**9)
        if not q:
            return [UNKNOWN]
        if q in api.STRATEGY_CLASSES:
            return [Value(api.STRATEGY, q, raw_qname=raw)]
        if q in api.MODEL_BASES:
            return [Value(api.MODEL, q, raw_qname=raw)]
        if q in ("tensorflow.data.Dataset",):
            return [Value(api.DATASET, q, raw_qname=raw)]
        if q in ("tensorflow.distribute.DistributedDataset",):
            return [Value(api.DIST_DATASET, q, raw_qname=raw)]
        if q in ("tensorflow.distribute.InputContext",):
            return [Value(api.INPUT_CONTEXT, q, raw_qname=raw)]
        if q in ("tensorflow.Variable",):
            return [Value(api.VARIABLE, q, raw_qname=raw)]
        return [UNKNOWN]

    def _param_values(self, b: Binding) -> list[Value]:
        fn = b.func
        ann = self._from_annotation(b.annotation, fn.parent if fn else b.scope)
        if ann and ann[0].kind != api.UNKNOWN:
            return ann
        if fn is None:
            return [UNKNOWN]
        # every local call site must pass a known value
        params = fn.params
        idx = next((i for i, p in enumerate(params) if p is b.node), None)
        if idx is None or b.node.star:  # *args / **kwargs
            return [UNKNOWN]
        offset = 1 if (fn.cls is not None and not self._is_static(fn)) else 0
        callers = self.callers(fn)
        if not callers or self.is_passed_around(fn):
            return [UNKNOWN]
        out: list[Value] = []
        for cs in callers:
            pos = idx - offset
            a = arg(cs.node, pos if pos >= 0 else None, b.name)
            if a is None:
                if any(x.star for x in cs.node.args):
                    return [UNKNOWN]
                if b.node.default is not None:
                    out.extend(self.infer(b.node.default, fn.parent, fn.order))
                    continue
                return [UNKNOWN]
            out.extend(self.infer_at(a, cs))
        return out or [UNKNOWN]

    @staticmethod
    def _is_static(fn: FunctionInfo) -> bool:
        for d in fn.decorators:
            if dotted_name(d) in ("staticmethod",):
                return True
        return False

    # ------------------------------------------------------------------ call graph
    def resolve_function(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int) -> list[FunctionInfo]:
        """Local functions an expression may denote (through tf.function, partial, lambdas)."""
        if expr is None:
            return []
        if isinstance(expr, cst.Call):
            q, _ = self.qualified_name(expr.func, scope, order)
            if q in api.TF_FUNCTION or q == "functools.partial":
                return self.resolve_function(arg(expr, 0, "func"), scope, order)
        out = []
        for v in self.infer(expr, scope, order):
            if v.kind == api.FUNCTION and v.info is not None:
                out.append(v.info)
        return out

    def callers(self, fn: FunctionInfo) -> list[CallSite]:
        """Call sites in this module whose callee resolves to ``fn``."""
        if self._callers is None:
            table: dict[int, list[CallSite]] = {}
            for cs in self.calls:
                f = cs.node.func
                if isinstance(f, cst.Name) or (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name)):
                    for target in self._callee_functions(cs):
                        table.setdefault(id(target), []).append(cs)
            self._callers = table
        return self._callers.get(id(fn), [])

    def _callee_functions(self, cs: CallSite) -> list[FunctionInfo]:
        f = cs.node.func
        names = {fi.name for fi in self.functions}
        if isinstance(f, cst.Name):
            if f.value not in names:
                return []
        elif isinstance(f, cst.Attribute):
            if f.attr.value not in names:
                return []
        out = []
        for v in self.infer(f, cs.scope, cs.order):
            if v.kind == api.FUNCTION and v.info is not None:
                out.append(v.info)
        return out

    def function_refs(self, fn: FunctionInfo) -> list[NameRef]:
        """Name references inside ``fn`` (including nested functions and lambdas)."""
        if self._fn_refs is None:
            table: dict[int, list[NameRef]] = {}
            for r in self.refs:
                s: Optional[Scope] = r.scope
                while s is not None:
                    if s.func is not None:
                        table.setdefault(id(s.func), []).append(r)
                    s = s.parent
            self._fn_refs = table
        return self._fn_refs.get(id(fn), [])

    def is_passed_around(self, fn: FunctionInfo) -> bool:
        """True when ``fn`` is referenced other than by a direct call (a callback)."""
        if isinstance(fn.node, cst.Lambda):
            return True
        name = fn.name
        direct = {id(cs.node.func) for cs in self.callers(fn)}
        for r in self.refs:
            if r.node.value == name and id(r.node) not in direct:
                for v in self.infer(r.node, r.scope, r.order):
                    if v.info is fn:
                        return True
        if fn.cls is not None:
            # self.method referenced without call (e.g. strategy.run(self.step))
            for cs in self.calls:
                for a in cs.node.args:
                    if isinstance(a.value, cst.Attribute) and a.value.attr.value == name:
                        return True
        return False

    def enclosing_functions(self, scope: Scope) -> Iterator[FunctionInfo]:
        s: Optional[Scope] = scope
        while s is not None:
            if s.func is not None:
                yield s.func
            s = s.parent

    # ------------------------------------------------------------------ contexts
    def scope_items(self, site: CallSite) -> tuple[list[Value], bool]:
        """Strategies whose ``scope()`` is lexically open at ``site`` and whether an
        unresolved ``X.scope()`` is open too (then the site may be in a scope)."""
        known: list[Value] = []
        maybe = False
        for item in site.withs:
            e = item.item
            if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "scope":
                vals = self.infer(e.func.value, site.scope, site.order)
                strat = [v for v in vals if v.kind == api.STRATEGY]
                if strat and len(strat) == len(vals):
                    known.extend(strat)
                else:
                    maybe = True
        return known, maybe

    def scope_strategies(self, site: CallSite) -> tuple[list[Value], bool]:
        """Strategies in scope at ``site``: lexical ones plus, when the enclosing
        function is only ever called from inside a scope, that scope's.
        Second item: True when it cannot be decided (unknown scope / callers)."""
        known, maybe = self.scope_items(site)
        if site.func is not None:
            fk, fmaybe = self.function_scope(site.func)
            known = known + fk
            maybe = maybe or fmaybe
        return known, maybe

    def function_scope(self, fn: FunctionInfo, _seen: Optional[set] = None) -> tuple[list[Value], bool]:
        """Strategies in scope for the whole body of ``fn`` (from its callers)."""
        key = id(fn)
        if key in self._fn_scope_memo:
            return self._fn_scope_memo[key]
        _seen = _seen or set()
        if key in _seen:
            return [], True
        _seen.add(key)
        if self.is_passed_around(fn):
            res: tuple[list[Value], bool] = ([], True)
        else:
            callers = self.callers(fn)
            if not callers:
                # defined but never called here: judge the body as written
                res = ([], False)
            else:
                per_caller = []
                maybe = False
                for cs in callers:
                    k, m = self.scope_items(cs)
                    if cs.func is not None:
                        fk, fm = self.function_scope(cs.func, _seen)
                        k, m = k + fk, m or fm
                    per_caller.append(k)
                    maybe = maybe or m
                if all(per_caller):
                    res = (per_caller[0], maybe)
                else:
                    # some callers are outside every scope
                    res = ([], maybe or any(per_caller))
        self._fn_scope_memo[key] = res
        return res

    def replica_functions(self) -> dict[int, list[Value]]:
        """id(FunctionInfo) -> strategies whose ``run`` executes it (transitively
        including local functions called from a replica function)."""
        if self._replica is not None:
            return self._replica
        table: dict[int, list[Value]] = {}
        self.replica_fn_infos: dict[int, FunctionInfo] = {}
        work: list[FunctionInfo] = []
        for cs in self.calls:
            cm = call_method(cs.node)
            if cm is None:
                continue
            recv, meth = cm
            fn_expr = None
            if meth in api.RUN_METHODS:
                fn_expr = arg(cs.node, 0, "fn")
            elif meth == "call_for_each_replica":
                fn_expr = arg(cs.node, 0, "fn")
                if isinstance(recv, cst.Attribute) and recv.attr.value == "extended":
                    recv = recv.value
            else:
                continue
            strat = [v for v in self.infer(recv, cs.scope, cs.order) if v.kind == api.STRATEGY]
            if not strat:
                continue
            for fn in self.resolve_function(fn_expr, cs.scope, cs.order):
                table.setdefault(id(fn), []).extend(strat)
                self.replica_fn_infos[id(fn)] = fn
                work.append(fn)
        seen = set()
        while work:
            fn = work.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            for cs in self.calls_within(fn):
                for callee in self._callee_functions(cs):
                    if id(callee) not in table:
                        table[id(callee)] = list(table[id(fn)])
                        self.replica_fn_infos[id(callee)] = callee
                        work.append(callee)
        self._replica = table
        return table

    def calls_within(self, fn: FunctionInfo) -> Iterator[CallSite]:
        """Call sites in ``fn`` and in functions nested in it."""
        yield from fn.calls
        for other in self.functions:
            if other is not fn and any(f is fn for f in self.enclosing_functions(other.parent)):
                yield from other.calls

    def replica_strategies(self, scope: Scope) -> list[Value]:
        """Strategies whose replica function contains ``scope`` (empty if none)."""
        table = self.replica_functions()
        for f in self.enclosing_functions(scope):
            if id(f) in table:
                return table[id(f)]
        return []

    def in_replica_fn(self, scope: Scope) -> bool:
        return bool(self.replica_strategies(scope))

    def thread_targets(self) -> dict[int, list[CallSite]]:
        """id(FunctionInfo) -> call sites that start it in a Python thread."""
        if self._threads is not None:
            return self._threads
        table: dict[int, list[CallSite]] = {}
        self.thread_fn_infos: dict[int, FunctionInfo] = {}
        for cs in self.calls:
            target = None
            q, _ = self.qualified_name(cs.node.func, cs.scope, cs.order)
            if q in api.THREAD_CLASSES:
                target = keyword(cs.node, "target")
                if target is None:
                    target = arg(cs.node, 1)
            else:
                cm = call_method(cs.node)
                if cm is not None and cm[1] in ("submit", "map", "apply_async", "apply", "imap",
                                                "imap_unordered", "starmap", "map_async", "starmap_async"):
                    recv_vals = self.infer(cm[0], cs.scope, cs.order)
                    if recv_vals and all(v.kind == api.EXECUTOR for v in recv_vals):
                        target = arg(cs.node, 0, "fn") or arg(cs.node, 0, "func")
            if target is None:
                continue
            for fn in self.resolve_function(target, cs.scope, cs.order):
                table.setdefault(id(fn), []).append(cs)
                self.thread_fn_infos[id(fn)] = fn
        self._threads = table
        return table

    def in_tf_function(self, scope: Scope) -> bool:
        for f in self.enclosing_functions(scope):
            for d in f.decorators:
                target = d.func if isinstance(d, cst.Call) else d
                q, _ = self.qualified_name(target, f.parent, f.order)
                if q in api.TF_FUNCTION:
                    return True
        return False

    # ------------------------------------------------------------------ convenience
    def calls_to(self, qnames: Iterable[str]) -> Iterator[tuple[CallSite, str]]:
        """Call sites whose callee is one of the canonical API names."""
        wanted = frozenset(qnames)
        lasts = {q.rsplit(".", 1)[-1] for q in wanted}
        for cs in self.calls:
            last = attr_name(cs.node.func)
            if last not in lasts:
                continue
            q, _ = self.qualified_name(cs.node.func, cs.scope, cs.order)
            if q in wanted:
                yield cs, q

    def strategies(self, expr: Optional[cst.BaseExpression], site: CallSite) -> list[Value]:
        """The strategy values ``expr`` holds at ``site``; [] unless every possibility is a strategy."""
        vals = self.infer_at(expr, site)
        return vals if vals and all(v.kind == api.STRATEGY for v in vals) else []

    def strategy_method_calls(self, names: Iterable[str]) -> Iterator[tuple[CallSite, cst.BaseExpression, str, list[Value]]]:
        """``strategy.<name>(...)`` calls whose receiver is certainly a strategy, with its values."""
        for cs, recv, meth in self.method_calls(names):
            strat = self.strategies(recv, cs)
            if strat:
                yield cs, recv, meth, strat

    def method_calls(self, names: Iterable[str]) -> Iterator[tuple[CallSite, cst.BaseExpression, str]]:
        wanted = frozenset(names)
        for cs in self.calls:
            cm = call_method(cs.node)
            if cm is not None and cm[1] in wanted:
                yield cs, cm[0], cm[1]

    def code(self, node: cst.CSTNode) -> str:
        """Source text of a node, on one line, shortened for messages."""
        text = " ".join(self.tree.code_for_node(node).split())
        return text if len(text) <= 60 else text[:57] + "..."

    def param_used(self, fn: FunctionInfo, index: int = 0) -> Optional[bool]:
        """Whether ``fn``'s parameter ``index`` is referenced in its body (None: no such param)."""
        if len(fn.params) <= index:
            return None
        pname = fn.params[index].name.value
        return any(r.node.value == pname for r in self.function_refs(fn))

    def refs_to(self, value_origin: cst.CSTNode, within: FunctionInfo) -> list[NameRef]:
        """References inside ``within`` whose every possible value was created at ``value_origin``."""
        out = []
        for r in self.function_refs(within):
            vals = self.infer(r.node, r.scope, r.order)
            if vals and all(v.origin is value_origin for v in vals):
                out.append(r)
        return out

    def reaching_exprs(self, name: cst.Name, scope: Scope, order: int,
                       _depth: int = 0) -> Optional[list[tuple[cst.BaseExpression, Scope, int]]]:
        """Right-hand sides whose value may reach ``name`` here, as (expr, scope, order):
        ``x = e`` -> e; ``x += e`` -> e plus what reached ``x`` before.  None when a
        binding is anything else (parameter, import, unpacking, loop target, ``x /= e``, ...)."""
        if _depth > 20:
            return None
        bs = self.lookup(name.value, scope, order)
        if not bs:
            return None
        out: list[tuple[cst.BaseExpression, Scope, int]] = []
        for b in bs:
            if b.kind in ("assign", "annassign", "walrus") and b.value is not None and not b.path:
                out.append((b.value, b.scope, b.order))
            elif b.kind == "aug" and isinstance(b.node, cst.AugAssign) \
                    and isinstance(b.node.operator, cst.AddAssign):
                out.append((b.node.value, b.scope, b.order))
                prev = self.reaching_exprs(name, b.scope, b.order, _depth + 1)
                if prev is None:
                    return None
                out.extend(prev)
            else:
                return None
        return out

    def sets_env(self, var: str) -> Optional[str]:
        """The literal value this module assigns to environment variable ``var``
        (``os.environ[var] = "1"``, ``os.environ.setdefault(var, "1")``, ``os.putenv``), or None."""
        import re

        if var not in self.source:
            return None
        v = re.escape(var)
        pats = (rf"environ\s*\[\s*['\"]{v}['\"]\s*\]\s*=\s*['\"]([^'\"]*)['\"]",
                rf"(?:setdefault|putenv|update)\s*\(\s*(?:{{\s*)?['\"]{v}['\"]\s*[,:]\s*['\"]([^'\"]*)['\"]",
                rf"environ\.update\s*\(\s*{v}\s*=\s*['\"]([^'\"]*)['\"]")
        for p in pats:
            mt = re.search(p, self.source)
            if mt:
                return mt.group(1)
        return None

    # ------------------------------------------------------------------ environment, run order
    def env_writes(self, var: str) -> list[tuple[Union[CallSite, StoreSite], Optional[cst.BaseExpression]]]:
        """Writes of the environment variable ``var`` (a literal name), in source order:
        ``os.environ[var] = v``, ``os.environ.update({var: v})`` / ``update(var=v)``,
        ``os.environ.setdefault(var, v)``, ``os.putenv(var, v)``; with the value written
        (None when it cannot be picked out)."""
        if var not in self.source:
            return []
        out: list[tuple[Union[CallSite, StoreSite], Optional[cst.BaseExpression]]] = []
        for st in self._env_stores(var):
            if not st.deleted:
                out.append((st, st.value))
        for cs, q in self.calls_to(("os.environ.update", "os.environ.setdefault", "os.putenv",
                                    "os.environ.__setitem__")):
            if q == "os.environ.update":
                d = arg(cs.node, 0)
                if isinstance(d, cst.Dict):
                    for el in d.elements:
                        if isinstance(el, cst.DictElement) and _literal_str(el.key) == var:
                            out.append((cs, el.value))
                elif keyword(cs.node, var) is not None:
                    out.append((cs, keyword(cs.node, var)))
            elif _literal_str(arg(cs.node, 0)) == var:
                out.append((cs, arg(cs.node, 1)))
        out.sort(key=lambda e: e[0].order)
        return out

    def env_unsets(self, var: str) -> list[Union[CallSite, StoreSite]]:
        """Removals of the environment variable ``var``: ``del os.environ[var]``,
        ``os.environ.pop(var[, default])``, ``os.unsetenv(var)``; in source order."""
        if var not in self.source:
            return []
        out: list[Union[CallSite, StoreSite]] = [st for st in self._env_stores(var) if st.deleted]
        for cs, _q in self.calls_to(("os.environ.pop", "os.unsetenv", "os.environ.__delitem__")):
            if _literal_str(arg(cs.node, 0)) == var:
                out.append(cs)
        out.sort(key=lambda e: e.order)
        return out

    def _env_stores(self, var: str) -> Iterator[StoreSite]:
        for st in self.stores:
            if len(st.target.slice) != 1 or not isinstance(st.target.slice[0].slice, cst.Index):
                continue
            if _literal_str(st.target.slice[0].slice.value) != var:
                continue
            if self.qualified_name(st.target.value, st.scope, st.order)[0] == "os.environ":
                yield st

    def traces(self, max_events: int = 50000) -> list[list[TraceEvent]]:
        """Calls and subscript stores in the order a run executes them.  A call of a module-local
        function is followed by the callee's body (``C()`` of a local class by ``C.__init__``);
        loops count once; every ``if`` branch is included, its condition recorded in
        ``TraceEvent.conds``.  The first trace starts at module level; every function that no
        local code calls (``main`` handed to ``app.run``, callbacks, methods called from
        elsewhere) starts a trace of its own.  Events of different traces are not ordered."""
        if self._traces is not None:
            return self._traces
        by_fn: dict[Optional[int], list[Union[CallSite, StoreSite]]] = {}
        for site in itertools.chain(self.calls, self.stores):
            by_fn.setdefault(id(site.func) if site.func is not None else None, []).append(site)
        for sites in by_fn.values():
            sites.sort(key=lambda e: e.order)
        names = {f.name for f in self.functions} | {c.name for c in self.classes}
        reached: set[int] = set()
        budget = [max_events]

        def callees(cs: CallSite) -> list[FunctionInfo]:
            if attr_name(cs.node.func) not in names:
                return []
            out = []
            for v in self.infer(cs.node.func, cs.scope, cs.order):
                if v.kind == api.FUNCTION and v.info is not None:
                    out.append(v.info)
                elif v.kind == api.CLASS and v.info is not None and "__init__" in v.info.methods:
                    out.append(v.info.methods["__init__"])
            return out

        def walk(key: Optional[int], conds, via, stack: frozenset, out: list[TraceEvent]) -> None:
            for site in by_fn.get(key, ()):
                if budget[0] <= 0:
                    return
                budget[0] -= 1
                c = conds + site.ifs
                out.append(TraceEvent(site, c, via))
                if isinstance(site, CallSite) and len(stack) < 10:
                    for callee in callees(site):
                        if id(callee) not in stack:
                            reached.add(id(callee))
                            walk(id(callee), c, via + (site,), stack | {id(callee)}, out)

        traces: list[list[TraceEvent]] = [[]]
        walk(None, (), (), frozenset(), traces[0])
        for fn in self.functions:
            if id(fn) not in reached and not self.callers(fn):
                t: list[TraceEvent] = []
                reached.add(id(fn))
                walk(id(fn), (), (), frozenset({id(fn)}), t)
                traces.append(t)
        for fn in self.functions:  # only reached through a cycle of calls
            if id(fn) not in reached:
                t = []
                reached.add(id(fn))
                walk(id(fn), (), (), frozenset({id(fn)}), t)
                traces.append(t)
        self._traces = traces
        return traces

    def keras_flavor(self, v: Value) -> str:
        """Which Keras created ``v`` (an API-created object or an instance of a local subclass):
        "tf_keras" (Keras 2: ``tf_keras``, or ``tf.keras`` when this module sets
        ``TF_USE_LEGACY_KERAS=1``), "keras" (Keras 3: ``import keras``, or ``tf.keras`` on
        TF >= 2.16), or "" when it is not a Keras object or cannot be told."""
        raw = v.raw_qname
        if not raw and isinstance(v.info, ClassInfo):
            raw = self._keras_base_raw(v.info)
        if not raw or not (api.canonical(raw) + ".").startswith("keras."):
            return ""
        flavor = api.keras_flavor(raw)
        if flavor == "tf.keras":
            legacy = self.sets_env("TF_USE_LEGACY_KERAS")
            return "tf_keras" if legacy is not None and legacy.strip().lower() in ("1", "true") else "keras"
        return flavor

    def _keras_base_raw(self, cls: ClassInfo, _depth: int = 0) -> str:
        if _depth > 8:
            return ""
        for base in cls.bases:
            scope = cls.scope.parent or self.scope
            q, raw = self.qualified_name(base, scope, 10**9)
            if q and (q + ".").startswith("keras."):
                return raw
            if not q:
                for bv in self.infer(base, scope, 10**9):
                    if bv.kind == api.CLASS and isinstance(bv.info, ClassInfo) and bv.info is not cls:
                        r = self._keras_base_raw(bv.info, _depth + 1)
                        if r:
                            return r
        return ""

    def runs_traced(self, fn: FunctionInfo, _seen: Optional[set] = None) -> Optional[bool]:
        """Whether the body of ``fn`` runs inside a ``tf.function`` trace.  True: ``fn`` or an
        enclosing function is decorated with ``tf.function``, wrapped by ``tf.function(f)`` in
        this module, or is a ``train_step``/``test_step``/``predict_step``/``call`` method of a
        Keras model or layer class; or every local caller runs traced.  False: every local
        caller runs eagerly (module-level code or eager functions).  None: cannot be told
        (no local caller, passed around as a callback, or mixed)."""
        key = id(fn)
        if key in self._traced_memo:
            return self._traced_memo[key]
        _seen = _seen or set()
        if key in _seen:
            return None
        _seen.add(key)
        wrapped = self._tf_function_wrapped()
        res: Optional[bool] = None
        for f in self.enclosing_functions(fn.scope):
            if id(f) in wrapped or self.in_tf_function(f.scope):
                res = True
                break
            if f.cls is not None and f.name in ("train_step", "test_step", "predict_step", "call") \
                    and self.class_kind(f.cls) in (api.MODEL, api.LAYER):
                res = True
                break
        else:
            callers = self.callers(fn)
            if callers and not self.is_passed_around(fn):
                kinds = set()
                for cs in callers:
                    kinds.add(False if cs.func is None else self.runs_traced(cs.func, _seen))
                res = kinds.pop() if len(kinds) == 1 else None
        self._traced_memo[key] = res
        return res

    def _tf_function_wrapped(self) -> set[int]:
        """ids of local functions passed to ``tf.function(...)`` as a call (not as a decorator)."""
        memo = getattr(self, "_tf_wrapped_memo", None)
        if memo is None:
            memo = set()
            for cs, _q in self.calls_to(api.TF_FUNCTION):
                for f in self.resolve_function(arg(cs.node, 0, "func"), cs.scope, cs.order):
                    memo.add(id(f))
            self._tf_wrapped_memo = memo
        return memo


def _literal_str(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """The value of a plain string literal, else None."""
    if isinstance(expr, cst.SimpleString):
        try:
            v = expr.evaluated_value
        except Exception:  # pragma: no cover - malformed literal
            return None
        return v if isinstance(v, str) else None
    return None
