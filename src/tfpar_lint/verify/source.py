"""Line markers: know whether a flagged line ran, without a tracer.

The child runs a copy of the script text in which the statement holding each
flagged line calls ``__tfpar_mark__(N)`` first.  Markers are inserted on the
statement's own first line so every line number stays the same (tracebacks,
``inspect.getsource`` and AutoGraph's re-parsing all see the same numbering;
AutoGraph converts the marked text too, so a marker inside a ``tf.function``
fires when the function is traced).

* simple statement at line L, column C  -> ``__tfpar_mark__(L); <stmt>``
* ``if``/``elif``/``while`` test          -> ``(__tfpar_mark__(L) or (<test>))``
* ``for ... in <iter>``                   -> ``for ... in __tfpar_mark__(L, (<iter>))``
* ``with <expr> ...``                     -> ``with __tfpar_mark__(L, (<expr>)) ...``

No TensorFlow import here.
"""
from __future__ import annotations

import ast
from typing import Optional

# the largest script the verifier reads and runs
SCRIPT_MAX_BYTES = 10 * 1024 * 1024

MARK = "__tfpar_mark__"


def _stmt_span(node: ast.stmt) -> tuple[int, int]:
    start = node.lineno
    for d in getattr(node, "decorator_list", []) or []:
        start = min(start, d.lineno)
    return start, (node.end_lineno or node.lineno)


def _child_bodies(node: ast.stmt) -> list[list[ast.stmt]]:
    out = []
    for name in ("body", "orelse", "finalbody"):
        v = getattr(node, name, None)
        if isinstance(v, list) and v and isinstance(v[0], ast.stmt):
            out.append(v)
    for h in getattr(node, "handlers", []) or []:
        out.append(h.body)
    for c in getattr(node, "cases", []) or []:
        out.append(c.body)
    return out


def _innermost(body: list[ast.stmt], line: int) -> Optional[ast.stmt]:
    for st in body:
        a, b = _stmt_span(st)
        if a <= line <= b:
            for sub in _child_bodies(st):
                inner = _innermost(sub, line)
                if inner is not None:
                    return inner
            return st
    return None


def _char_col(src_line: str, byte_col: int) -> int:
    return len(src_line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def instrument(text: str, lines: list[int]) -> tuple[str, dict[int, int]]:
    """Insert markers for ``lines``; returns the new text and, for every
    requested line that could be marked, the marker id (= the statement's
    first line) that will fire when that line's statement starts."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # compiling it fails the same way: the script's error
        return text, {}
    src = text.splitlines(keepends=True)
    # (line index, char col) -> list of insertions; applied right to left.
    inserts: dict[tuple[int, int], str] = {}
    marked: dict[int, int] = {}
    done: set[int] = set()
    for line in sorted(set(lines)):
        st = _innermost(tree.body, line)
        if st is None:
            continue
        mid = st.lineno
        if mid in done:
            marked[line] = mid
            continue
        ok = _mark_stmt(st, mid, src, inserts)
        if ok:
            done.add(mid)
            marked[line] = mid
    if not inserts:
        return text, marked
    for (li, col), s in sorted(inserts.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        ln = src[li]
        src[li] = ln[:col] + s + ln[col:]
    new = "".join(src)
    try:
        ast.parse(new)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # pragma: no cover - defensive: never break the script
        return text, {}
    return new, marked


def _add(inserts, li: int, col: int, s: str) -> None:
    key = (li, col)
    inserts[key] = inserts.get(key, "") + s


def _mark_stmt(st: ast.stmt, mid: int, src: list[str], inserts) -> bool:
    if isinstance(st, ast.ImportFrom) and st.module == "__future__":
        return False
    if isinstance(st, (ast.If, ast.While)):
        return _wrap_expr(st.test, f"({MARK}({mid}) or (", "))", src, inserts)
    if isinstance(st, (ast.For, ast.AsyncFor)):
        return _wrap_expr(st.iter, f"{MARK}({mid}, (", "))", src, inserts)
    if isinstance(st, (ast.With, ast.AsyncWith)):
        return _wrap_expr(st.items[0].context_expr, f"{MARK}({mid}, (", "))", src, inserts)
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
        return False
    if hasattr(ast, "TryStar") and isinstance(st, getattr(ast, "TryStar")):
        return False
    if hasattr(ast, "Match") and isinstance(st, getattr(ast, "Match")):
        return _wrap_expr(st.subject, f"{MARK}({mid}, (", "))", src, inserts)
    li = st.lineno - 1
    col = _char_col(src[li], st.col_offset)
    _add(inserts, li, col, f"{MARK}({mid}); ")
    return True


def _wrap_expr(e: ast.expr, pre: str, post: str, src: list[str], inserts) -> bool:
    if e.end_lineno is None or e.end_col_offset is None:
        return False
    a_li, b_li = e.lineno - 1, e.end_lineno - 1
    a = _char_col(src[a_li], e.col_offset)
    b = _char_col(src[b_li], e.end_col_offset)
    _add(inserts, b_li, b, post)
    _add(inserts, a_li, a, pre)
    return True
