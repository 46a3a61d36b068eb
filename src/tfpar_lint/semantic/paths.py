"""Paths a run can take: whether a set of ``if`` branches can all be taken in one run.

The one place every rule asks whether two pieces of code (an object made here and used there, a
value that reaches a call only when some branch was not taken) can run together.  A path is a
tuple of ``(If, taken the body?)``; it cannot be taken when

* it takes both arms of one ``if``;
* two of its tests read the same value (the same name with the same bindings reaching both tests,
  an attribute of ``self`` only the constructor sets, a module-level name bound once) and ask of
  it what no value can be at once: ``if strategy is None:`` and ``if strategy:``,
  ``args.mode == "tpu"`` and ``args.mode == "gpu"``, ``n_gpus > 1`` and ``n_gpus <= 1``;
* a test asks of a name what none of the assignments that can reach it on this path gives:
  ``strategy = None`` then ``if use_dist: strategy = MirroredStrategy()``; on the path through
  the ``else`` of ``if use_dist:`` only ``None`` reaches a later ``if strategy:``.

Tests are split into facts about one value each: ``not``, ``and`` in a taken body, ``or`` in an
``else`` (a disjunction tells nothing alone and is skipped), truthiness, ``is (not) None``,
comparisons and ``in`` with literals.  Each fact is judged on a few sample values (None, False,
0, 1, ..., "", the literals the tests name, an object that is none of these): a value that
satisfies them all is a witness that the path can run.  Anything else reads as "can hold"."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Iterable, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import Binding, ClassInfo, Scope, Value

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


class _Object:
    """A sample value that is an object: true, not None, equal only to itself, not ordered."""

    def __repr__(self) -> str:  # pragma: no cover (debugging)
        return "<object>"


OBJECT = _Object()
_OTHER_STR = "\x00another string"
_BASE = (None, False, True, 0, 1, 2, 3, 4, 8, 64, -1, 0.5, "", _OTHER_STR, OBJECT)
# kinds of made objects that are always true (no __bool__ / __len__): `if strategy:`
_TRUE_KINDS = frozenset({api.STRATEGY, api.MODEL, api.OPTIMIZER})
_OPS = {cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
        cst.LessThanEqual: operator.le, cst.GreaterThan: operator.gt, cst.GreaterThanEqual: operator.ge,
        cst.Is: lambda a, b: a is b, cst.IsNot: lambda a, b: a is not b,
        cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b}
_NO_LITERAL = object()
_MAX_CONDS = 64


def _literal(e: cst.BaseExpression):
    """The Python value of a literal (None, True, 3, -1, "tpu", a tuple of literals), or _NO_LITERAL."""
    if isinstance(e, cst.Name) and e.value in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[e.value]
    if isinstance(e, cst.Integer):
        try:
            return int(e.value.replace("_", ""), 0)
        except ValueError:
            return _NO_LITERAL
    if isinstance(e, cst.Float):
        try:
            return float(e.value.replace("_", ""))
        except ValueError:
            return _NO_LITERAL
    if isinstance(e, cst.SimpleString):
        text = e.value
        if text[:1] in "bBrRuU" or text[:3] in ('"""', "'''"):
            return _NO_LITERAL
        return text[1:-1] if "\\" not in text else _NO_LITERAL
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
        v = _literal(e.expression)
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else _NO_LITERAL
    if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
        out = []
        for el in e.elements:
            if isinstance(el, cst.StarredElement):
                return _NO_LITERAL
            v = _literal(el.value)
            if v is _NO_LITERAL:
                return _NO_LITERAL
            out.append(v)
        return tuple(out)
    return _NO_LITERAL


def _dotted(e: cst.BaseExpression) -> Optional[tuple[str, ...]]:
    """``a.b.c`` -> ("a", "b", "c"); None for anything else (``None``, ``True``, calls, subscripts)."""
    parts: list[str] = []
    while isinstance(e, cst.Attribute):
        parts.append(e.attr.value)
        e = e.value
    if not isinstance(e, cst.Name) or e.value in ("None", "True", "False"):
        return None
    parts.append(e.value)
    return tuple(reversed(parts))


def _atoms(test: cst.BaseExpression, taken: bool, depth: int = 0) -> list[tuple[tuple[str, ...], object, object, bool]]:
    """Facts a branch of ``test`` gives, each about one value: (dotted subject, operator, literal,
    holds?); operator None: the subject's truth."""
    if depth > 12:
        return []
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _atoms(test.expression, not taken, depth + 1)
    if isinstance(test, cst.BooleanOperation):
        both = isinstance(test.operator, cst.And) if taken else isinstance(test.operator, cst.Or)
        if not both:
            return []  # a disjunction: no fact about either side alone
        return _atoms(test.left, taken, depth + 1) + _atoms(test.right, taken, depth + 1)
    subject = _dotted(test)
    if subject is not None:
        return [(subject, None, None, taken)]
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comp = test.comparisons[0]
        op = _OPS.get(type(comp.operator))
        if op is None:
            return []
        left, right = test.left, comp.comparator
        subject, lit = _dotted(left), _literal(right)
        if subject is None or lit is _NO_LITERAL:
            flipped = {cst.LessThan: operator.gt, cst.LessThanEqual: operator.ge, cst.GreaterThan: operator.lt,
                       cst.GreaterThanEqual: operator.le}.get(type(comp.operator), op)
            if isinstance(comp.operator, (cst.In, cst.NotIn)):
                return []
            subject, lit, op = _dotted(right), _literal(left), flipped
            if subject is None or lit is _NO_LITERAL:
                return []
        if isinstance(comp.operator, (cst.In, cst.NotIn)) and not isinstance(lit, tuple):
            return []
        return [(subject, op, lit, taken)]
    return []


def _holds(sample, op, lit) -> bool:
    if op is None:
        return sample is OBJECT or bool(sample)
    if sample is OBJECT:
        if op in (operator.lt, operator.le, operator.gt, operator.ge):
            return False
    try:
        return bool(op(sample, lit))
    except TypeError:
        return False


class Paths:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._facts: dict[tuple[int, bool], list] = {}
        self._samples: dict[tuple, Optional[frozenset]] = {}

    # ------------------------------------------------------------------ the question rules ask
    def together(self, *paths: Iterable[tuple[cst.If, bool]], given: Optional[dict] = None) -> bool:
        """Can every branch of ``paths`` be taken in one run?  False only when the tests cannot
        all hold at once (see the module's docstring); True otherwise, and whenever it cannot be
        told.  ``given``: id(parameter binding) -> what one call passes it (:meth:`call_arguments`),
        instead of what every caller passes."""
        taken: dict[int, bool] = {}
        conds: list[tuple[cst.If, bool]] = []
        for path in paths:
            for node, branch in path:
                got = taken.get(id(node))
                if got is None:
                    taken[id(node)] = branch
                    conds.append((node, branch))
                elif got != branch:
                    return False  # both arms of one `if`
        if not conds or len(conds) > _MAX_CONDS:
            return True
        by_subject: dict[tuple, list] = {}
        restrict: dict[tuple, Optional[list]] = {}
        for node, branch in conds:
            for key, op, lit, holds, values in self._branch_facts(node, branch):
                by_subject.setdefault(key, []).append((op, lit, holds))
                if key not in restrict:
                    restrict[key] = self._value_samples(values, taken, given)
        for key, facts in by_subject.items():
            alts = restrict.get(key)
            if alts is None:
                if len(facts) < 2:
                    continue
                pool: Iterable = _universe(facts)
            else:
                pool = set()
                for samples, extra in alts:
                    # `a if c else None`: the arm whose test contradicts the path is not taken
                    if all(_satisfiable(by_subject.get(k, []) + [(op, lit, holds)])
                           for k, op, lit, holds in extra):
                        pool |= samples
            if not any(all(_holds(s, op, lit) == holds for op, lit, holds in facts) for s in pool):
                return False
        return True

    def exclusive(self, a, b) -> bool:
        """Two sites (call or store sites, or anything with ``ifs``) that no run reaches both of."""
        return not self.together(a.ifs, b.ifs)

    def value_path(self, v: Optional[Value]) -> tuple:
        """The branches a value was made and carried on: its site's, the branches its name was
        bound under and the rebinding branches it survived (``Value.path``), along its sources."""
        out: list = []
        seen = 0
        while v is not None and seen < 30:
            out.extend(v.path)
            if v.site is not None:
                out.extend(v.site.ifs)
            v, seen = v.source, seen + 1
        return tuple(out)

    def reaches_with(self, v: Value, site) -> bool:
        """The value ``v`` can be what a name holds at ``site`` (a call or store site) on some path."""
        return self.together(self.value_path(v), site.ifs)

    # ------------------------------------------------------------------ a binding's own branches
    def binding_path(self, b: Binding, others: list[Binding]) -> tuple:
        """The branches on which ``b`` (one of ``others``, the bindings that may reach one use,
        all of one scope) is the one that reaches it: the branches ``b`` is bound under, and the
        other arm of the ``if`` of each later binding of the list one ``if`` deeper
        (``ds = plain; if strategy: ds = distributed``: ``plain`` reaches only where ``strategy``
        is false)."""
        ctx, nodes = self.m.if_context, self.m.if_nodes
        mine = ctx.get(b.order, ())
        out = [(nodes[i], br) for i, br in mine if i in nodes]
        for b2 in others:
            if b2 is b or b2.order <= b.order or b2.scope is not b.scope:
                continue
            theirs = ctx.get(b2.order, ())
            k = 0
            while k < len(mine) and k < len(theirs) and mine[k] == theirs[k]:
                k += 1
            rest = theirs[k:]
            if len(rest) == 1 and rest[0][0] in nodes and k == len(mine):
                out.append((nodes[rest[0][0]], not rest[0][1]))
        return tuple(out)

    # ------------------------------------------------------------------ facts
    def _branch_facts(self, node: cst.If, branch: bool) -> list:
        key = (id(node), branch)
        got = self._facts.get(key)
        if got is None:
            got = self._facts[key] = self._compute_facts(node, branch)
        return got

    def _owner(self, node: cst.If) -> Optional["Module"]:
        """The module whose code holds the ``if`` (this one, or another module of the project a
        value came from)."""
        if id(node) in self.m.if_where:
            return self.m
        project = self.m.project
        if project is None:
            return None
        for mod in list(project.modules.values()):
            if mod is not None and mod.if_nodes.get(id(node)) is node:
                return mod
        return None

    def _compute_facts(self, node: cst.If, branch: bool) -> list:
        owner = self._owner(node)
        if owner is None:
            return []
        if owner is not self.m:
            return owner.paths._branch_facts(node, branch)
        scope, order, loops = self.m.if_where[id(node)]
        out = []
        for subject, op, lit, holds in _atoms(node.test, branch):
            ident = self._identity(subject, scope, order, loops)
            if ident is not None:
                out.append((ident[0], op, lit, holds, ident[1]))
        return out

    def _identity(self, subject: tuple[str, ...], scope: Scope, order: int, loops: int):
        """(a key equal for every test that reads the same value, the bindings whose values it can
        be (None: not told)); None when the value may differ from one reading to the next."""
        root, attrs = subject[0], subject[1:]
        meth = self.m.values._method_of(scope)
        if attrs and meth is not None and meth.cls is not None and meth.params \
                and meth.params[0].name.value == root and not self.m.lookup(root, scope, order)[1:]:
            return self._self_identity(meth.cls, attrs, scope, order)
        bs = self.m.lookup(root, scope, order)
        if not bs:
            return (("free", subject), None)  # bound nowhere (a notebook's earlier cell): one value
        if any(b.kind in ("for", "comp", "with", "aug", "walrus") for b in bs):
            return None
        home = bs[0].scope
        if any(b.scope is not home for b in bs):
            return None
        if home is self.m.scope:
            # a module-level name: the same value wherever it is read, unless a function rebinds it
            if any(root in f.scope.globals for f in self.m.functions):
                return None
            if home is not scope and len(bs) != len(home.bindings.get(root, ())):
                return None
        if loops and any(b.order > order for b in home.bindings.get(root, ())):
            return None  # rebound later in a loop around the test: the next pass may read another value
        if attrs and self._stores_under(root, attrs, None):
            return None  # `args.gpus = 2` somewhere: not one value
        key = ("name", subject, tuple(sorted(id(b) for b in bs)))
        return key, (bs if not attrs else None)

    def _self_identity(self, cls: ClassInfo, attrs: tuple[str, ...], scope: Scope, order: int):
        """``self.a.b`` read in a method: one value in every method when only the constructor
        binds ``self.a`` (and nothing stores below ``self.a``), read after the constructor bound it."""
        bs = cls.attrs.get(attrs[0]) or []
        if not bs or any(b.scope.func is None or b.scope.func.name != "__init__" or b.scope.func.cls is not cls
                         for b in bs):
            return None
        meth = self.m.values._method_of(scope)
        if meth is not None and meth.name == "__init__" and any(b.order > order for b in bs):
            return None  # read in the constructor before it binds the attribute
        if len(attrs) > 1 and self._stores_under(None, attrs, cls):
            return None
        return ("self", id(cls), attrs), (bs if len(attrs) == 1 else None)

    def _stores_under(self, root: Optional[str], attrs: tuple[str, ...], cls: Optional[ClassInfo]) -> bool:
        """Some ``x.a.b = ...`` stores into the attribute chain (or below it): ``root.attrs`` of a
        name, or ``self.attrs`` in a method of ``cls``."""
        for target, _value, scope, _order in self.m.attr_assigns:
            parts = _dotted(target)
            if parts is None:
                continue
            if cls is not None:
                meth = self.m.values._method_of(scope)
                if meth is None or meth.cls is not cls or not meth.params \
                        or parts[0] != meth.params[0].name.value:
                    continue
            elif parts[0] != root:
                continue
            tail = parts[1:]
            n = min(len(tail), len(attrs))
            if tail[:n] == attrs[:n] and (cls is None or len(tail) > 1):
                return True
        return False

    # ------------------------------------------------------------------ what a value can be
    def _value_samples(self, bindings: Optional[list[Binding]], taken: dict[int, bool],
                       given: Optional[dict] = None) -> Optional[list]:
        """What the bindings that can reach a test on this path give: [(samples, the facts under
        which the binding gives them), ...]; None: any value."""
        if not bindings:
            return None
        out: list = []
        ctx = self.m.if_context
        for b in bindings:
            if any(taken.get(i, br) != br for i, br in ctx.get(b.order, ())):
                continue  # bound in the other arm of an `if` this path takes: not on it
            got = given[id(b)] if given and id(b) in given else self._binding_samples(b)
            if got is None:
                return None
            out.extend(got)
        return out

    def call_arguments(self, fn, call: cst.Call, scope: Scope, order: int) -> dict:
        """id(parameter binding of ``fn``) -> the samples the argument of this one call gives it (the
        default where the call passes none); parameters it cannot tell are left out."""
        out: dict = {}
        if any(a.star for a in call.args):
            return out
        params = [p for p in fn.params if not p.star]
        bound = fn.cls is not None and params and isinstance(call.func, cst.Attribute)
        positional = [a.value for a in call.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        for i, p in enumerate(params):
            if bound and i == 0:
                continue
            j = i - 1 if bound else i
            b = next((x for x in fn.scope.bindings.get(p.name.value, ()) if x.kind == "param" and x.node is p), None)
            if b is None:
                continue
            if p.name.value in keywords:
                got = self._expr_samples(keywords[p.name.value], scope, order, 1)
            elif j < len(positional):
                got = self._expr_samples(positional[j], scope, order, 1)
            elif p.default is not None:
                got = self._expr_samples(p.default, fn.parent, fn.order, 1)
            else:
                continue
            if got is not None:
                out[id(b)] = [(samples, ()) for samples, _facts in got]
        return out

    def _binding_samples(self, b: Binding) -> Optional[list]:
        key = ("b", id(b))
        if key in self._samples:
            return self._samples[key]
        self._samples[key] = None
        got = None
        if b.kind in ("assign", "annassign") and not b.path and b.value is not None:
            got = self._expr_samples(b.value, b.scope, b.order, 0)
        elif b.kind == "param":
            # what every caller passes (``load(strategy=strategy)`` with a strategy object): the
            # ``else`` of ``if strategy:`` inside the callee is not taken
            owner = b.scope.module or self.m
            args = owner.values.param_args(b)
            if args:
                got = []
                for e, s, o, _site in args:
                    one = self._expr_samples(e, s, o, 1) if e is not None else None
                    if one is None:
                        got = None
                        break
                    got.extend((samples, ()) for samples, _facts in one)  # the caller's facts are its own
        self._samples[key] = got
        return got

    def _expr_samples(self, e: cst.BaseExpression, scope: Scope, order: int, depth: int) -> Optional[list]:
        if depth > 4:
            return None
        lit = _literal(e)
        if lit is not _NO_LITERAL and not isinstance(lit, tuple):
            return [(frozenset({lit}), ())]
        if isinstance(e, cst.IfExp):
            out = []
            for arm, taken in ((e.body, True), (e.orelse, False)):
                got = self._expr_samples(arm, scope, order, depth + 1)
                if got is None:
                    return None
                facts = []
                for subject, op, lit_, holds in _atoms(e.test, taken):
                    ident = self._identity(subject, scope, order, 1)
                    if ident is not None:
                        facts.append((ident[0], op, lit_, holds))
                out.extend((samples, extra + tuple(facts)) for samples, extra in got)
            return out
        if isinstance(e, cst.Name):
            bs = self.m.lookup(e.value, scope, order)
            if not bs:
                return None
            out = []
            for b in bs:
                got = self._binding_samples(b)
                if got is None:
                    return None
                out.extend((samples, ()) for samples, _facts in got)  # facts of another place: dropped
            return out
        if isinstance(e, cst.Call):
            vals = self.m.infer(e, scope, order)
            if vals and all(v.kind in _TRUE_KINDS and v.origin is not None for v in vals):
                return [(frozenset({OBJECT}), ())]
        return None


def _universe(facts: list) -> list:
    pool = list(_BASE)
    for _op, lit, _holds_ in facts:
        lits = lit if isinstance(lit, tuple) else (lit,)
        for x in lits:
            pool.append(x)
            if isinstance(x, int) and not isinstance(x, bool):
                pool.extend((x - 1, x + 1))
    return pool


def _satisfiable(facts: list) -> bool:
    """Some value satisfies every fact (about one value)."""
    return any(all(_holds(s, op, lit) == holds for op, lit, holds in facts) for s in _universe(facts))
