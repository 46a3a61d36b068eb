"""Local data flow: which right-hand sides may feed an expression through the names it reads.

``x = v.value(); x += 1.0; v.assign(x)``: the argument ``x`` is fed by ``v.value()`` and by
``1.0``.  Followed bindings: assignments (plain, annotated, walrus, unpacking), augmented
assignments (the new operand and whatever reached the name before), ``for``/comprehension
targets and ``with ... as`` names.  Everything is iterative and bounded."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, Optional

import libcst as cst

from tfpar_lint.semantic.model import Binding, Scope

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
            work.extend(n.children)


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
