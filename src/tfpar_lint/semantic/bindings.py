"""Scopes and bindings: which binding a name refers to at a point, and the qualified API
name an imported reference stands for (every import spelling reduced to one canonical name)."""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Union

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import Binding, Scope
from tfpar_lint.semantic.nodes import dotted_name

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


class Bindings:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._qn_memo: dict[tuple[int, int, int], tuple[str, str]] = {}
        self._orders: dict[int, tuple[list[Binding], Optional[list[int]]]] = {}  # see _last_before
        self._tl_orders: Optional[list[int]] = None

    def lookup(self, name: str, scope: Scope, order: int) -> list[Binding]:
        s: Optional[Scope] = scope
        first = True
        while s is not None:
            if s.kind == "class" and not first:
                s = s.parent
                continue
            if name in s.globals:
                s = self.m.scope
                first = False
                continue
            bs = s.bindings.get(name)
            if bs and name not in s.nonlocals:
                if first:
                    before = self._last_before(bs, order)
                    if before is not None:
                        return self._reaching(bs, before, order) if before.ifs else [before]
                return list(bs)
            s = s.parent
            first = False
        return []

    def ifs_at_order(self, order: int) -> tuple:
        """The if branches in force at ``order`` (in the function being walked then)."""
        tl = self.m.ifs_timeline
        if self._tl_orders is None or len(self._tl_orders) != len(tl):
            self._tl_orders = [o for o, _ in tl]
        i = bisect.bisect_right(self._tl_orders, order) - 1
        return tl[i][1] if i >= 0 else ()

    def _reaching(self, bs: list[Binding], last: Binding, order: int) -> list[Binding]:
        """Every binding of ``bs`` that may reach ``order``: the last one before it, and, while
        that one sits in an ``if`` branch the point is not in, the ones before it (the other
        branch's, or the one before the ``if``), skipping those in a branch excluded at the point
        (``if a: x = 1 / else: x = 2`` then ``use(x)``: both)."""
        at = self.ifs_at_order(order)
        out: list[Binding] = []
        seen = 0
        for b in reversed(bs):  # in source order, as the traversal bound them
            if b.order >= order:
                continue
            seen += 1
            if seen > 64:
                break
            if _excluded(b.ifs, at):
                continue
            out.append(b)
            if b.ifs == at[:len(b.ifs)]:
                break  # it runs on every way to the point (as far as ifs go): earlier ones are overwritten
        return list(reversed(out)) or [last]

    def _last_before(self, bs: list[Binding], order: int) -> Optional[Binding]:
        """The last of ``bs`` (in list order) bound before ``order``.  A name bound 20,000 times in
        one scope (``x = x + 1`` in a long module) made a scan per lookup quadratic: the orders of
        a list sorted by order are searched by bisection instead."""
        if len(bs) < 8:
            for b in reversed(bs):
                if b.order < order:
                    return b
            return None
        got = self._orders.get(id(bs))
        if got is None or got[0] is not bs or len(got[1] or bs) != len(bs):
            orders = [b.order for b in bs]
            sorted_ = all(orders[i] <= orders[i + 1] for i in range(len(orders) - 1))
            got = self._orders[id(bs)] = (bs, orders if sorted_ else None)
        orders = got[1]
        if orders is None:  # not in order: the last one in list order that is before
            for b in reversed(bs):
                if b.order < order:
                    return b
            return None
        i = bisect.bisect_left(orders, order)
        return bs[i - 1] if i > 0 else None

    def qualified_name(self, expr: cst.BaseExpression, scope: Scope, order: int) -> tuple[str, str]:
        """(canonical, raw) qualified name of an imported API reference, or ("", "")."""
        key = (id(expr), id(scope), order)
        got = self._qn_memo.get(key)
        if got is None:
            got = self._qn_memo[key] = self._qualified_name(expr, scope, order)
        return got

    def _qualified_name(self, expr: cst.BaseExpression, scope: Scope, order: int,
                        _depth: int = 0) -> tuple[str, str]:
        """A module alias made by assignment counts as an import: ``tf1 = tf.compat.v1`` then
        ``tf1.get_variable``."""
        d = dotted_name(expr)
        if not d:
            return "", ""
        head, _, rest = d.partition(".")
        bs = self.lookup(head, scope, order)
        if len(bs) == 1 and bs[0].kind == "assign" and not bs[0].path and _depth < 4 \
                and isinstance(bs[0].value, (cst.Name, cst.Attribute)):
            q, raw_head = self._qualified_name(bs[0].value, bs[0].scope, bs[0].order, _depth + 1)
            if not q:
                return "", ""
            raw = f"{raw_head}.{rest}" if rest else raw_head
            return api.canonical(raw), raw
        if not bs or any(b.kind != "import" or not b.qname for b in bs):
            return "", ""
        q = bs[0].qname
        if any(b.qname != q for b in bs) or q.startswith("."):
            return "", ""  # ambiguous, or a relative import (the project's own module, never an API)
        raw = f"{q}.{rest}" if rest else q
        return api.canonical(raw), raw


def _excluded(b_ifs: tuple, at: tuple) -> bool:
    """A binding made under the branches ``b_ifs`` cannot run on a way to a point under ``at``: they
    take different branches of one ``if``."""
    taken = {id(node): branch for node, branch in at}
    return any(id(node) in taken and taken[id(node)] != branch for node, branch in b_ifs)
