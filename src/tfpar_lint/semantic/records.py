"""Records: named tuples and dataclasses, whose fields hold what their constructor was given.

``Settings = collections.namedtuple("Settings", "strategy hosts")`` (also ``typing.NamedTuple``'s
functional form, a ``class S(NamedTuple)`` with annotated fields, a ``@dataclass``): an instance
made by ``Settings(strategy, hosts=...)`` holds, in ``settings.strategy``, ``settings[0]`` and the
first target of ``strategy, hosts = settings``, whatever was passed for that field (by position or
by name; a class's default when nothing was).  A helper that returns ``Settings(TPUStrategy(r),
...)`` on one path and ``Settings(OneDeviceStrategy(d), ...)`` on another gives its callers a
strategy of either class through the field, not an object of unknown class."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint.semantic.model import CallSite, ClassInfo, Scope, Value
from tfpar_lint.semantic.nodes import arg, literal_str

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

NAMEDTUPLE_FACTORIES = frozenset({"collections.namedtuple", "typing.NamedTuple"})
_RECORD_BASES = frozenset({"typing.NamedTuple"})
_DATACLASS_DECORATORS = frozenset({"dataclasses.dataclass"})


@dataclass(frozen=True)
class RecordType:
    """``Value.info`` of a named-tuple type made by a factory call, and of its instances (told
    apart by their origin: the factory call, or a call of the type)."""

    names: tuple[str, ...]
    indexable: bool = True  # a tuple (``x[0]``, unpacking); a dataclass is not
    instance: bool = False  # an instance (made by calling the type), not the type
    # an instance: the call that made it (kept when a helper returns it: the value's origin is
    # then the helper's call)
    made: Optional[CallSite] = field(default=None, repr=False, compare=False)


def is_record(v: Value) -> bool:
    """``v`` is an instance of a record type (a named tuple the analysis saw made, or a local
    ``NamedTuple`` / ``@dataclass`` class) made by a call."""
    if isinstance(v.info, RecordType):
        return v.info.instance and v.info.made is not None
    return isinstance(v.info, ClassInfo) and v.kind != "class" and isinstance(v.origin, cst.Call) \
        and v.site is not None and v.info.scope.module is not None \
        and class_fields(v.info.scope.module, v.info) is not None


def namedtuple_fields(m: "Module", call: cst.Call, scope: Scope, order: int) -> Optional[tuple[str, ...]]:
    """The field names of ``namedtuple("N", "a b")`` / ``namedtuple("N", ["a", "b"])`` /
    ``NamedTuple("N", [("a", T), ...])``; None when they are not literals."""
    spec = arg(call, 1, "field_names")
    if spec is None:
        spec = arg(call, 1, "fields")
    text = literal_str(spec) if spec is not None else None
    if text is not None:
        return tuple(n for n in text.replace(",", " ").split() if n)
    if isinstance(spec, (cst.List, cst.Tuple)):
        out = []
        for el in spec.elements:
            v = el.value
            if isinstance(v, cst.Tuple) and v.elements:
                v = v.elements[0].value
            name = literal_str(v)
            if name is None:
                return None
            out.append(name)
        return tuple(out)
    return None


def class_fields(m: "Module", cls: ClassInfo) -> Optional[RecordType]:
    """The fields of a local ``class C(NamedTuple)`` or ``@dataclass`` class: its annotated class
    attributes in order (not ``ClassVar``); None for any other class."""
    memo = m.rule_memo.setdefault("record_fields", {})
    if id(cls) not in memo:
        memo[id(cls)] = (cls, _class_fields(m, cls))
    return memo[id(cls)][1]


def _class_fields(m: "Module", cls: ClassInfo) -> Optional[RecordType]:
    parent = cls.scope.parent or m.scope
    tuple_like = any(m.qualified_name(b, parent, 10**9)[0] in _RECORD_BASES for b in cls.bases)
    data = False
    for d in cls.node.decorators:
        e = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if m.qualified_name(e, parent, 10**9)[0] in _DATACLASS_DECORATORS:
            data = True
    if not tuple_like and not data:
        return None
    names = []
    for stmt in cls.node.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                ann = m.code(small.annotation.annotation)
                if "ClassVar" not in ann:
                    names.append(small.target.value)
    return RecordType(tuple(names), indexable=tuple_like)


def field_values(m: "Module", v: Value, key: object) -> Optional[list[Value]]:
    """What the field ``key`` (a name, or a position) of the record instance ``v`` holds: the
    argument its constructor call got for it, or the class's default; None when ``v`` is not a
    record instance made by a call the analysis sees, or ``key`` is not one of its fields."""
    if not is_record(v):
        return None
    if isinstance(v.info, RecordType):
        rt, site = v.info, v.info.made
        call = site.node
        owner = site.scope.module or m
    else:
        call, site = v.origin, v.site
        owner = site.scope.module or m
        if not any(x.info is v.info for x in owner.infer(call.func, site.scope, site.order)):
            return None  # returned by a helper: the call that made it is not at hand
        rt = class_fields(owner, v.info)
    if rt is None or not rt.names:
        return None
    if isinstance(key, int):
        if not rt.indexable or not -len(rt.names) <= key < len(rt.names):
            return None
        name = rt.names[key]
    elif isinstance(key, str) and key in rt.names:
        name = key
    else:
        return None
    pos = rt.names.index(name)
    expr = None
    for i, a in enumerate(call.args):
        if a.star:
            return None  # Settings(*parts): the positions cannot be told
        if a.keyword is not None:
            if a.keyword.value == name:
                expr = a.value
        elif i == pos:
            expr = a.value
    if expr is not None:
        return owner.infer(expr, site.scope, site.order)
    if isinstance(v.info, ClassInfo):  # the class's default
        for b in v.info.scope.bindings.get(name, ()):
            if b.value is not None:
                return (v.info.scope.module or owner).infer(b.value, b.scope, b.order)
    return None
