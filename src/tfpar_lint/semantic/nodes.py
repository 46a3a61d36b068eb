"""Syntax helpers over libcst nodes: names, arguments, literals.  No resolution here."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic.model import FunctionInfo

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
    work = [expr]
    while work:
        e = work.pop()
        if isinstance(e, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            continue
        if isinstance(e, cst.UnaryOperation):
            work.append(e.expression)
        elif isinstance(e, (cst.Tuple, cst.List)):
            work.extend(el.value for el in e.elements)
        else:
            return False
    return True


def literal_str(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """The value of a plain string literal, else None."""
    if isinstance(expr, cst.SimpleString):
        try:
            v = expr.evaluated_value
        except Exception:  # pragma: no cover - malformed literal
            return None
        return v if isinstance(v, str) else None
    return None
