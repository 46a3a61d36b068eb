"""Local data flow: which right-hand sides may feed an expression through the names it reads.

``x = v.value(); x += 1.0; v.assign(x)``: the argument ``x`` is fed by ``v.value()`` and by
``1.0``.  Followed bindings: assignments (plain, annotated, walrus, unpacking), augmented
assignments (the new operand and whatever reached the name before), ``for``/comprehension
targets and ``with ... as`` names.  Everything is iterative and bounded."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, Optional

import libcst as cst

from tfpar_lint.semantic.containers import _subscript_key
from tfpar_lint.semantic.model import Binding, Scope
from tfpar_lint.semantic.nodes import is_constant
from tfpar_lint.semantic.walk import syntax_children

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

FOLLOWED = frozenset({"assign", "annassign", "walrus", "for", "comp", "with"})
LIMIT = 400  # expressions visited per question


def names_read(expr: cst.CSTNode) -> Iterator[cst.Name]:
    """Names an expression reads (not attribute names, keyword names or lambda parameters)."""
    work: list[cst.CSTNode] = [expr]
    while work:
        n = work.pop()
        if isinstance(n, cst.Name):
            yield n
        elif isinstance(n, cst.Attribute):
            work.append(n.value)
        elif isinstance(n, cst.Arg):
            work.append(n.value)
        elif isinstance(n, cst.Lambda):
            continue  # a lambda's body runs later, with its own names
        else:
            work.extend(syntax_children(n))


class Flow:
    def __init__(self, m: "Module") -> None:
        self.m = m

    def feeding_exprs(self, expr: cst.BaseExpression, scope: Scope, order: int,
                      within: Optional[Callable[[Binding], bool]] = None) -> list[tuple[cst.BaseExpression, Scope, int]]:
        """``expr`` and every right-hand side that may flow into it through local names, as
        (expr, scope, order).  ``within`` limits the bindings followed (e.g. to one function)."""
        out: list[tuple[cst.BaseExpression, Scope, int]] = []
        seen: set[tuple[int, int]] = set()
        work = [(expr, scope, order)]
        while work and len(out) < LIMIT:
            e, s, o = work.pop()
            key = (id(e), o)
            if key in seen:
                continue
            seen.add(key)
            out.append((e, s, o))
            for name in names_read(e):
                for b in self.m.lookup(name.value, s, o):
                    if within is not None and not within(b):
                        continue
                    if b.kind in FOLLOWED and b.value is not None:
                        work.append((b.value, b.scope, b.order))
                    elif b.kind == "aug" and isinstance(b.node, cst.AugAssign):
                        work.append((b.node.value, b.scope, b.order))
                        work.append((b.node.target, b.scope, b.order))  # what reached the name before
        return out

    def depends_on_replica_id(self, expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
        """``expr`` is computed, through local names, from the replica's id
        (``tf.distribute.get_replica_context().replica_id_in_sync_group``)."""
        for e, _s, _o in self.feeding_exprs(expr, scope, order):
            work: list[cst.CSTNode] = [e]
            while work:
                n = work.pop()
                if isinstance(n, cst.Attribute) and n.attr.value == "replica_id_in_sync_group":
                    return True
                if not isinstance(n, cst.Lambda):
                    work.extend(syntax_children(n))
        return False

    def constant_exprs(self, expr: Optional[cst.BaseExpression], scope: Scope,
                       order: int) -> Optional[list[cst.BaseExpression]]:
        """The literals ``expr`` can hold (``seed=SEED`` with ``SEED = 42``; ``CONFIG["seed"]``;
        a parameter every caller passes a literal to; ``self.seed`` set to one; ``[a, b]`` of
        constants), or None when some value is not a literal or cannot be told."""
        out: list[cst.BaseExpression] = []
        work = [(expr, scope, order, 0)]
        seen: set[tuple[int, int]] = set()
        while work:
            e, s, o, depth = work.pop()
            if e is None or depth > 20 or len(seen) > LIMIT:
                return None
            if (id(e), o) in seen:
                continue
            seen.add((id(e), o))
            if is_constant(e):
                out.append(e)
                continue
            if isinstance(e, (cst.Tuple, cst.List)):
                if any(isinstance(el, cst.StarredElement) for el in e.elements):
                    return None
                work.extend((el.value, s, o, depth + 1) for el in e.elements)
                continue
            if isinstance(e, cst.Name):
                bs = self.m.lookup(e.value, s, o)
                if not bs:
                    return None
                for b in bs:
                    nxt = self._binding_exprs(b)
                    if nxt is None:
                        return None
                    work.extend((x, xs, xo, depth + 1) for x, xs, xo in nxt)
                continue
            if isinstance(e, cst.Subscript):
                key = _subscript_key(e)
                items = self.m.container_items(e.value, s, o, key) if key is not None else None
                if items is None:
                    return None
                work.extend((x, xs, xo, depth + 1) for x, xs, xo in items)
                continue
            if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name):
                bs = self._self_attr_bindings(e, s)
                if not bs:
                    return None
                for b in bs:
                    if b.value is None or b.path:
                        return None
                    work.append((b.value, b.scope, b.order, depth + 1))
                continue
            return None
        return out

    def origin_exprs(self, expr: Optional[cst.BaseExpression], scope: Scope,
                     order: int) -> Optional[list[tuple[cst.BaseExpression, Scope, int]]]:
        """The expressions that make the value ``expr`` holds, followed through local names:
        assignments (one-level unpacking of literals included), a parameter's arguments from
        every caller (or its default), ``self.attr`` set in the class's methods.  ``b = a`` with
        ``a = 8`` -> ``8``.  Anything else (a call, arithmetic, another object's attribute) is an
        origin itself.  None when some name's value cannot be told (a loop target, an import,
        a function handed to unknown code)."""
        out: list[tuple[cst.BaseExpression, Scope, int]] = []
        work = [(expr, scope, order, 0)]
        seen: set[tuple[int, int]] = set()
        while work:
            e, s, o, depth = work.pop()
            if e is None or depth > 20 or len(seen) > LIMIT:
                return None
            if (id(e), o) in seen:
                continue
            seen.add((id(e), o))
            if isinstance(e, cst.Name) and e.value not in ("None", "True", "False"):
                bs = self.m.lookup(e.value, s, o)
                if not bs:
                    return None
                for b in bs:
                    nxt = [(b.value, b.scope, b.order)] if b.kind == "walrus" and b.value is not None \
                        else self._binding_exprs(b)
                    if nxt is None:
                        return None
                    work.extend((x, xs, xo, depth + 1) for x, xs, xo in nxt)
                continue
            if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name):
                bs = self._self_attr_bindings(e, s)
                if bs:
                    for b in bs:
                        if b.value is None or b.path:
                            return None
                        work.append((b.value, b.scope, b.order, depth + 1))
                    continue
            out.append((e, s, o))
        return out

    def _binding_exprs(self, b: Binding) -> Optional[list[tuple[cst.BaseExpression, Scope, int]]]:
        if b.kind in ("assign", "annassign") and b.value is not None:
            if not b.path:
                return [(b.value, b.scope, b.order)]
            if len(b.path) == 1 and isinstance(b.value, (cst.Tuple, cst.List)) \
                    and 0 <= b.path[0] < len(b.value.elements) \
                    and not any(isinstance(el, cst.StarredElement) for el in b.value.elements):
                return [(b.value.elements[b.path[0]].value, b.scope, b.order)]
            return None
        if b.kind == "param":
            args = self.m.values.param_args(b)
            return None if args is None else [(e, s, o) for e, s, o, _site in args]
        return None

    def self_attr_bindings(self, e: cst.Attribute, scope: Scope) -> Optional[list[Binding]]:
        """``self.x`` read inside a method: the bindings the class's methods make of ``x``
        (None when ``e`` is not an attribute of the method's first parameter, or none is made)."""
        return self._self_attr_bindings(e, scope) if isinstance(e.value, cst.Name) else None

    def _self_attr_bindings(self, e: cst.Attribute, scope: Scope) -> Optional[list[Binding]]:
        s: Optional[Scope] = scope
        while s is not None:
            fn = s.func
            if fn is not None and fn.cls is not None:
                if fn.params and fn.params[0].name.value == e.value.value:
                    return fn.cls.attrs.get(e.attr.value) or fn.cls.scope.bindings.get(e.attr.value)
                return None
            s = s.parent
        return None
