"""An iterative traversal of a libcst tree that calls a visitor's ``visit_X``/``leave_X``.

libcst's own traversal (``node.visit(visitor)``) rebuilds every node it passes
(``_visit_and_replace_children`` constructs and validates a copy, even for a
read-only ``CSTVisitor``), calls four hooks per field, and recurses on the
Python stack (deep expressions such as ``a + a + ...`` with a few hundred
terms exhaust it).  :class:`TaskVisitor` walks the same nodes in the same
order with an explicit stack: it reads children straight from the node's
fields and skips subtrees that cannot contain a node the visitor has a method
for (whitespace, commas, operators, literals...).

A ``visit_X`` method returns
* ``None`` / ``True``: visit the children (libcst's order), then ``leave_X``;
* ``False``: skip the children;
* a list of *tasks* to run instead of the children, in order: a node is
  walked, a callable is called (to open or close a context), ``None`` is
  skipped, and a nested list/tuple is run in order.

The same visitor also runs on libcst's recursive traversal (``tree.visit(v)``,
see :meth:`TaskVisitor.on_visit`); tests/test_fastwalk.py checks that both
build the same model.  benchmarks/optimisations.md has the speed numbers.
"""
from __future__ import annotations

from typing import Any, Callable

import libcst as cst

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


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children (every node held by one of its fields), in libcst's visiting order."""
    out: list[cst.CSTNode] = []
    cls = type(node)
    for f in _FIELD_ORDER.get(cls) or _field_order(cls, node):
        v = getattr(node, f)
        if isinstance(v, cst.CSTNode):
            out.append(v)
        elif type(v) is tuple or type(v) is list:
            out.extend(c for c in v if isinstance(c, cst.CSTNode))
    return out


# Nodes that are only tokens (whitespace, punctuation, operators): no analysis or fix asks for
# their parent, and they are more than half of a tree's nodes.
TOKEN_CLASSES: tuple[type, ...] = (
    cst.BaseParenthesizableWhitespace, cst.Newline, cst.TrailingWhitespace, cst.EmptyLine, cst.Comment,
    cst.Dot, cst.Comma, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
    cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseAugOp, cst.BaseUnaryOp,
)
_SYNTAX_FIELDS: dict[type, tuple[str, ...]] = {}  # node class -> fields that may hold a non-token node
_SKIP: dict[type, bool] = {}  # class -> not a node, or a token node (isinstance on libcst's ABCs is slow)


def _skip(cls: type) -> bool:
    got = _SKIP.get(cls)
    if got is None:
        got = _SKIP[cls] = not issubclass(cls, cst.CSTNode) or issubclass(cls, TOKEN_CLASSES)
    return got


def syntax_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """:func:`child_nodes` without the token nodes (:data:`TOKEN_CLASSES`)."""
    cls = type(node)
    fields = _SYNTAX_FIELDS.get(cls)
    if fields is None:
        types = _field_classes(cls)
        fields = _SYNTAX_FIELDS[cls] = tuple(
            f for f in _field_order(cls, node)
            if any(not issubclass(t, TOKEN_CLASSES) for t in types.get(f, (cst.CSTNode,))))
    out: list[cst.CSTNode] = []
    skip = _SKIP
    for f in fields:
        v = getattr(node, f)
        tv = type(v)
        if tv is tuple or tv is list:
            for c in v:
                t = skip.get(type(c))
                if t is None:
                    t = _skip(type(c))
                if not t:
                    out.append(c)
        else:
            t = skip.get(tv)
            if t is None:
                t = _skip(tv)
            if not t:
                out.append(v)
    return out


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


class TaskVisitor(cst.CSTVisitor):
    """A read-only visitor walked iteratively (see the module doc); no attribute hooks."""

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

    def walk(self, root: cst.CSTNode) -> None:
        """Visit ``root`` and its subtree without recursion."""
        rel, entries, _ = self._fast_plan()
        stack: list[Any] = [root]
        push = stack.append
        pop = stack.pop
        while stack:
            item = pop()
            if type(item) is tuple:  # (leave hook, node) or (None, task callable)
                hook, x = item
                if hook is None:
                    x()
                else:
                    hook(self, x)
                continue
            visit, leave, fields = entries.get(type(item)) or self._fast_entry(item)
            res = visit(self, item) if visit is not None else None
            if leave is not None:
                push((leave, item))
            if res is None or res is True:
                if not fields:
                    continue
                children: list[cst.CSTNode] = []
                for f in fields:
                    v = getattr(item, f)
                    tv = type(v)
                    if tv is tuple or tv is list:
                        for c in v:
                            if type(c) in rel:
                                children.append(c)
                    elif tv in rel:
                        children.append(v)
                children.reverse()
                stack.extend(children)
            elif res is not False:
                tasks: list[Any] = []
                _flatten(res, tasks)
                for t in reversed(tasks):
                    push(t if isinstance(t, cst.CSTNode) else (None, t))

    # libcst's recursive traversal (``tree.visit(v)``): the same hooks and tasks
    def on_visit(self, node: cst.CSTNode) -> bool:
        visit = _hook(type(self), "visit_" + type(node).__name__)
        res = visit(self, node) if visit is not None else None
        if res is None or res is True:
            return True
        if res is not False:
            tasks: list[Any] = []
            _flatten(res, tasks)
            for t in tasks:
                if isinstance(t, cst.CSTNode):
                    t.visit(self)
                else:
                    t()
        return False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        leave = _hook(type(self), "leave_" + type(original_node).__name__)
        if leave is not None:
            leave(self, original_node)


def _flatten(tasks: Any, out: list) -> None:
    work = [tasks]
    while work:
        t = work.pop()
        if t is None:
            continue
        if isinstance(t, (list, tuple)):
            work.extend(reversed(t))
        else:
            out.append(t)


Task = Callable[[], None]


def contains(outer: cst.CSTNode, node: cst.CSTNode) -> bool:
    """``node`` is ``outer`` or lies in its subtree (tokens aside: :func:`syntax_children`)."""
    stack: list[cst.CSTNode] = [outer]
    while stack:
        n = stack.pop()
        if n is node:
            return True
        stack.extend(syntax_children(n))
    return False
