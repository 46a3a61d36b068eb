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


# Names that stand for a module when the code never binds them (``tf.distribute...`` in a snippet
# whose ``import tensorflow as tf`` was left out, or came from ``from helpers import *``).
FREE_ALIASES = {"tf": "tensorflow"}


class Bindings:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._qn_memo: dict[tuple[int, int, int], tuple[str, str]] = {}
        self._orders: dict[int, tuple[list[Binding], Optional[list[int]]]] = {}  # see _last_before

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
                        return self._reaching(bs, before, order)
                return list(bs)
            s = s.parent
            first = False
        return []

    def _reaching(self, bs: list[Binding], before: Binding, order: int) -> list[Binding]:
        """The bindings of one scope that may reach a use at ``order``, given ``before``, the last
        one bound before it: ``before`` alone, unless it sits in an ``if`` branch the use is not
        in; then also the earlier ones, back to one that is on every path to the use or until
        both branches of one ``if`` bound the name (``if gpus > 1: s = Mirrored() else: s =
        OneDevice()`` reaches the use below as either)."""
        ctx = self.m.if_context
        b_ifs = ctx.get(before.order, ())
        use = ctx.get(order, ())
        if use[:len(b_ifs)] == b_ifs:
            return [before]  # on every path from its block to the use
        out = [before]
        covered: dict[int, set[bool]] = {}

        def diverge(ifs: tuple) -> Optional[tuple[int, bool]]:
            k = 0
            while k < len(ifs) and k < len(use) and ifs[k] == use[k]:
                k += 1
            return ifs[k] if k < len(ifs) else None

        first = diverge(b_ifs)
        if first is not None:
            covered.setdefault(first[0], set()).add(first[1])
        earlier = [x for x in bs if x.order < before.order]
        if any(earlier[i].order > earlier[i + 1].order for i in range(len(earlier) - 1)):
            earlier.sort(key=lambda x: x.order)
        for b in reversed(earlier[-64:]):  # a name rebound many times: the last 64 are enough
            ifs = ctx.get(b.order, ())
            if ifs[:len(b_ifs)] == b_ifs:
                continue  # bound in ``before``'s block (or an if inside it) earlier: ``before`` rebinds it
            if use[:len(ifs)] == ifs:
                out.append(b)  # on every path: nothing earlier reaches
                break
            d = diverge(ifs)
            if d is None:
                continue
            k = next((i for i, e in enumerate(use) if e[0] == d[0]), None)
            if k is not None and use[k][1] != d[1]:
                continue  # the other branch of an `if` the use is in: does not reach it
            out.append(b)
            got = covered.setdefault(d[0], set())
            got.add(d[1])
            if len(got) == 2:
                break  # both branches of one `if` bound the name: nothing earlier reaches
        return out

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
        if not bs and head in FREE_ALIASES:
            # `tf` bound nowhere: a snippet from a bug report, a notebook cell run after the import
            # cell, a star import (`from utils import *`); TensorFlow's documented alias
            q = FREE_ALIASES[head]
            raw = f"{q}.{rest}" if rest else q
            return api.canonical(raw), raw
        if not bs or any(b.kind != "import" or not b.qname for b in bs):
            return "", ""
        q = bs[0].qname
        if any(b.qname != q for b in bs) or q.startswith("."):
            return "", ""  # ambiguous, or a relative import (the project's own module, never an API)
        raw = f"{q}.{rest}" if rest else q
        return api.canonical(raw), raw
