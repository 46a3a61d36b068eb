"""Automatic fixes: what a rule proposes, and how ``--fix`` applies it.

A rule proposes a fix from its :meth:`tfpar_lint.rule.Rule.fix` method (next to
its detection code, in the rule's own file).  The method builds a :class:`Fix`
out of libcst nodes of the parsed module: replace a node's code, insert text
before a node, delete or move whole statements.  Everything outside the edited
ranges is left byte for byte as it was, so formatting and comments survive;
replacement code is written with libcst (``module.code_for_node`` of new or
existing nodes).

The engine turns the node edits into text edits (1-based row/column ranges, as
ruff's JSON writes them) on the finding, so the fix travels with the finding
into the cache, JSON and SARIF.  :func:`apply_fixes` applies the fixes of one
file's findings (skipping a fix that overlaps one already applied, like ruff);
:func:`tfpar_lint.engine.fix_source` re-lints and repeats until nothing is left
to fix (at most :data:`MAX_PASSES` passes).

Applicability follows ruff: a **safe** fix keeps the meaning the code was
meant to have and is applied by ``--fix``; an **unsafe** fix may change
behaviour beyond the mistake (or needs a human look) and is applied only with
``--unsafe-fixes``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import libcst as cst

SAFE = "safe"
UNSAFE = "unsafe"
MAX_PASSES = 10


@dataclass
class _NodeEdit:
    kind: str  # replace | insert_before | delete_lines | insert_lines
    node: cst.CSTNode
    text: str = ""


@dataclass
class Fix:
    """A fix proposed by a rule: a message, its applicability, and node edits."""

    message: str
    applicability: str = SAFE
    edits: list[_NodeEdit] = field(default_factory=list)

    # -- building (rules call these) ---------------------------------------------
    def replace(self, node: cst.CSTNode, new: "str | cst.CSTNode") -> "Fix":
        """Replace the code of ``node`` by ``new`` (code text, or a libcst node)."""
        self.edits.append(_NodeEdit("replace", node, new if isinstance(new, str) else _code(new)))
        return self

    def insert_before(self, node: cst.CSTNode, text: str) -> "Fix":
        """Insert ``text`` right before the first character of ``node``."""
        self.edits.append(_NodeEdit("insert_before", node, text))
        return self

    def delete_statement(self, stmt: cst.CSTNode, keep_comment: bool = True) -> "Fix":
        """Delete the whole lines a statement occupies; its end-of-line comment stays on a line of
        its own (``keep_comment=False`` when the statement, comment included, moves elsewhere)."""
        comment = ""
        if keep_comment and isinstance(stmt, cst.SimpleStatementLine) and stmt.trailing_whitespace.comment:
            comment = stmt.trailing_whitespace.comment.value
        self.edits.append(_NodeEdit("delete_lines", stmt, comment))
        return self

    def insert_lines_before(self, stmt: cst.CSTNode, text: str) -> "Fix":
        """Insert full lines (``text`` ends with a newline) before the first line of ``stmt``."""
        self.edits.append(_NodeEdit("insert_lines", stmt, text))
        return self

    def nodes(self) -> list[cst.CSTNode]:
        return [e.node for e in self.edits]


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


# -- turning node edits into text edits -------------------------------------------

class LineTable:
    """Offsets of line starts in a source text (lines split like libcst splits them)."""

    def __init__(self, source: str) -> None:
        self.source = source
        starts = [0]
        for m in re.finditer(r"\r\n|\r|\n", source):
            starts.append(m.end())
        self.starts = starts

    def offset(self, row: int, col: int) -> int:
        """1-based row, 0-based column -> offset."""
        if row - 1 >= len(self.starts):
            return len(self.source)
        return min(self.starts[row - 1] + col, len(self.source))

    def line_end(self, row: int) -> int:
        """Offset just after the newline that ends ``row`` (1-based)."""
        return self.starts[row] if row < len(self.starts) else len(self.source)

    def row_col(self, offset: int) -> tuple[int, int]:
        """offset -> (1-based row, 0-based column)."""
        import bisect

        i = bisect.bisect_right(self.starts, offset) - 1
        return i + 1, offset - self.starts[i]


def resolve(fix: Fix, positions: Any, table: LineTable) -> Optional[dict[str, Any]]:
    """The JSON form of ``fix`` (ruff's shape), or None if a node has no position."""
    edits: list[tuple[int, int, str]] = []
    for e in fix.edits:
        rng = positions.get(e.node)
        if rng is None:
            return None
        start = table.offset(rng.start.line, rng.start.column)
        end = table.offset(rng.end.line, rng.end.column)
        if e.kind == "replace":
            edits.append((start, end, e.text))
        elif e.kind == "insert_before":
            edits.append((start, start, e.text))
        elif e.kind == "delete_lines":
            line_start = table.offset(rng.start.line, 0)
            kept = ""
            if e.text:  # the comment stays, at the statement's indentation
                indent = table.source[line_start:start]
                seg = table.source[line_start:table.line_end(rng.end.line)]
                nl = seg[len(seg.rstrip("\r\n")):] or "\n"
                kept = (indent if not indent.strip() else "") + e.text + nl
            edits.append((line_start, table.line_end(rng.end.line), kept))
        elif e.kind == "insert_lines":
            at = table.offset(rng.start.line, 0)
            edits.append((at, at, e.text))
    edits.sort(key=lambda t: (t[0], t[1]))
    for (s1, e1, _), (s2, _e2, _) in zip(edits, edits[1:]):
        if s2 < e1:
            return None  # a rule built overlapping edits: offer no fix rather than a broken one
    out = []
    for s, e, text in edits:
        r1, c1 = table.row_col(s)
        r2, c2 = table.row_col(e)
        out.append({"content": text, "location": {"row": r1, "column": c1 + 1},
                    "end_location": {"row": r2, "column": c2 + 1}})
    return {"applicability": fix.applicability, "message": fix.message, "edits": out}


def applicable(fix: Optional[dict[str, Any]], unsafe: bool) -> bool:
    return bool(fix) and (fix["applicability"] == SAFE or (unsafe and fix["applicability"] == UNSAFE))


def apply_fixes(source: str, fixes: Sequence[dict[str, Any]]) -> tuple[str, list[int]]:
    """Apply ``fixes`` (JSON form) to ``source``; returns the new text and the indexes applied.

    Fixes are taken in the order of their first edit; one whose edits overlap
    an edit already taken is left for the next pass (ruff does the same).
    """
    table = LineTable(source)
    spans = []
    for i, fx in enumerate(fixes):
        edits = [(table.offset(e["location"]["row"], e["location"]["column"] - 1),
                  table.offset(e["end_location"]["row"], e["end_location"]["column"] - 1), e["content"])
                 for e in fx["edits"]]
        if edits:
            spans.append((min(s for s, _, _ in edits), i, edits))
    spans.sort(key=lambda t: (t[0], t[1]))
    taken: list[tuple[int, int, str]] = []
    applied: list[int] = []
    for _, i, edits in spans:
        if any(_overlaps(a, b) for a in edits for b in taken):
            continue
        taken.extend(edits)
        applied.append(i)
    taken.sort(key=lambda t: (t[0], t[1]))
    parts = []
    last = 0
    for s, e, text in taken:
        parts.append(source[last:s])
        parts.append(text)
        last = max(last, e)
    parts.append(source[last:])
    return "".join(parts), sorted(applied)


def _overlaps(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    (s1, e1, _), (s2, e2, _) = a, b
    if s1 == e1 and s2 == e2:
        return s1 == s2  # two insertions at one place: order would be arbitrary
    return s1 < e2 and s2 < e1 or (s1 == e1 and s2 < s1 < e2) or (s2 == e2 and s1 < s2 < e1)


# -- helpers for rules ------------------------------------------------------------

def parents(module: Any) -> dict[int, cst.CSTNode]:
    """id(node) -> parent node, for the module's tree (built once per module, on demand)."""
    got = getattr(module, "_fix_parents", None)
    if got is not None:
        return got
    # an explicit stack over the nodes' fields: libcst's own traversal rebuilds every node it
    # passes (seconds on a large module) and recurses on the Python stack.  Token nodes
    # (whitespace, commas, operators) are left out: nothing asks for their parent.
    from tfpar_lint.semantic.walk import syntax_children

    table: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module.tree]
    while stack:
        node = stack.pop()
        for child in syntax_children(node):
            table[id(child)] = node
            stack.append(child)
    module._fix_parents = table
    return table


def parent(module: Any, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    return parents(module).get(id(node))


def statement_of(module: Any, node: cst.CSTNode) -> Optional[cst.SimpleStatementLine]:
    """The one-statement line holding ``node`` (None if it shares its line with ``;``)."""
    p: Optional[cst.CSTNode] = node
    while p is not None and not isinstance(p, cst.SimpleStatementLine):
        if isinstance(p, (cst.BaseCompoundStatement, cst.Lambda, cst.FunctionDef)):
            return None
        p = parent(module, p)
    if p is None or len(p.body) != 1:
        return None
    return p


def block_of(module: Any, stmt: cst.CSTNode) -> tuple[Optional[cst.CSTNode], int]:
    """(the block holding ``stmt`` — an IndentedBlock or the Module — and its index there)."""
    p = parent(module, stmt)
    if isinstance(p, (cst.IndentedBlock, cst.Module)):
        # the block's index, built once per block (a module of 10,000 statements with a finding
        # on each: one pass over the block, not one per finding)
        indexes = module.__dict__.setdefault("_fix_block_index", {})
        index = indexes.get(id(p))
        if index is None:
            index = indexes[id(p)] = {id(s): i for i, s in enumerate(p.body)}
        i = index.get(id(stmt))
        if i is not None:
            return p, i
    return None, -1


def next_statement(module: Any, stmt: cst.CSTNode) -> Optional[cst.CSTNode]:
    block, i = block_of(module, stmt)
    if block is None or i + 1 >= len(block.body):
        return None
    return block.body[i + 1]


def line_indent(module: Any, node: cst.CSTNode) -> str:
    """The indentation of the line where statement ``node`` starts (from the nesting)."""
    parts: list[str] = []
    p = parent(module, node)
    while p is not None:
        if isinstance(p, cst.IndentedBlock):
            parts.append(p.indent if p.indent is not None else module.tree.default_indent)
        p = parent(module, p)
    return "".join(reversed(parts))


def statement_text(module: Any, stmt: cst.CSTNode) -> str:
    """The statement's code without its leading blank/comment lines, without indentation."""
    if isinstance(stmt, cst.SimpleStatementLine):
        stmt = stmt.with_changes(leading_lines=())
    return module.tree.code_for_node(stmt)


def reindent(text: str, indent: str) -> Optional[str]:
    """``text`` (a statement's code at column 0) indented by ``indent``; None if it holds a multi-line string."""
    if '"""' in text or "'''" in text:
        return None
    lines = text.splitlines(keepends=True)
    return "".join((indent + ln) if ln.strip() else ln for ln in lines)


def tf_alias(module: Any) -> Optional[str]:
    """The name this module imports TensorFlow as (``import tensorflow as tf`` -> ``tf``)."""
    for stmt in module.tree.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if module.code(alias.name) == "tensorflow":
                        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                            return alias.asname.name.value
                        return "tensorflow"
    return None


def scope_with_after(module: Any, stmt: cst.CSTNode) -> Optional[cst.With]:
    """The ``with X.scope():`` statement right after ``stmt`` (same block), if any."""
    nxt = next_statement(module, stmt)
    if not isinstance(nxt, cst.With):
        return None
    for item in nxt.items:
        e = item.item
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "scope":
            return nxt
    return None


def move_into_with(module: Any, stmt: cst.SimpleStatementLine, with_node: cst.With, fix: Fix) -> Optional[Fix]:
    """Move ``stmt`` to the top of ``with_node``'s body (same block, right before it)."""
    body = with_node.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    first = body.body[0]
    indent = line_indent(module, first)
    moved = reindent(statement_text(module, stmt), indent)
    if moved is None:
        return None
    return fix.delete_statement(stmt, keep_comment=False).insert_lines_before(first, moved)


def names_in(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class _N(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

    node.visit(_N())
    return out




def add_keyword(call: cst.Call, name: str, value_code: str) -> cst.Call:
    """``call`` with one more keyword argument ``name=value_code`` (the other arguments untouched)."""
    args = list(call.args)
    if args and args[-1].comma == cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(value=cst.parse_expression(value_code), keyword=cst.Name(name),
                        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                              whitespace_after=cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


__all__ = ["Fix", "SAFE", "UNSAFE", "MAX_PASSES", "apply_fixes", "applicable", "resolve", "add_keyword"]
