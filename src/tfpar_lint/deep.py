"""The one parse of the engine: libcst, guarded against expressions too deep for it.

libcst's parser is fast on ordinary code but super-linear on deep expressions
(``z = a + a + ...`` with 5,000 terms: 5.7 s; ``a.b.b...`` 20,000 deep: SIGSEGV).
Every libcst parse of the engine (the CLI's workers, ``--fix``, the flake8
plugin, the project's other modules) goes through :func:`parse_module`:

1. :func:`suspicious` is a cheap text test (no parse): files under
   ``MIN_SIZE`` bytes never trigger; otherwise the text is cut into approximate
   logical lines (a line continues while more brackets are open than closed, or
   after a trailing backslash) and the test triggers when, on one logical line,
   the operator and attribute characters plus the deepest bracket nesting are
   more than ``TRIGGER_OPS``; on long logical lines the keywords ``and or not
   lambda if await`` and the string literals count too.
2. A suspicious file is parsed by Python first (:func:`python_tree`, C speed).
   If Python rejects it (SyntaxError such as "too many nested parentheses",
   RecursionError, MemoryError) that is the verdict: :class:`PythonRejects`,
   reported as E999, and libcst never sees the file.  Otherwise the height of
   every expression is computed without recursion (:func:`heights`, measured in
   libcst's nesting: ``a and b and c`` is two levels, as are two adjacent string
   literals), and every maximal expression higher than ``MAX_HEIGHT`` is made
   *opaque*: replaced in the text by a same-shape placeholder, ``(`` + the name
   ``OPAQUE`` + spaces + ``)`` with every line break kept in place, so every
   line and column outside it is unchanged.  The analysis sees an unbound name:
   an unknown value.
3. When libcst still raises a parser or tokenizer error on code Python accepts
   (e.g. 3,001 adjacent string literals), the expressions of the statement at
   the error are made opaque too and libcst gets one more try; if that fails the
   original error stands (E903 "libcst cannot parse this file, though Python
   can").

``TFPAR_LINT_DEEP=off`` turns steps 1-3 off (libcst gets every file as it is:
for measuring libcst itself, and for the tests of the worker supervision).
"""
from __future__ import annotations

import _thread
import ast
import io
import os
import re
import tokenize
from typing import Any, Optional

import libcst as cst

# Files smaller than this never trigger (libcst parses 1,000-deep chains in well under a second).
MIN_SIZE = 2048
# The trigger: operator, attribute and bracket characters kept, everything else dropped
# (str.translate, then characters outside ASCII dropped).
_KEPT = "-+*/%@&|^~<>.()[]{}\\\n"
_OPS_ONLY = {i: (i if chr(i) in _KEPT else None) for i in range(128)}
TRIGGER_OPS = 80
# Chains of keywords (``a and a and ...``, ``x if c else x if ...``, ``not not ...``) hold no
# operator characters; they are counted on long logical lines only (one physical line of at least
# LONG_LINE characters, or a logical line over LONG_LOGICAL physical lines).
_KEYWORDS = re.compile(r"\b(?:and|or|not|lambda|if|await)\b")
LONG_LINE = 2000
LONG_LOGICAL = 50
# Expressions higher than this (libcst's nesting) are made opaque.
MAX_HEIGHT = 60
# The placeholder's name: an identifier no real code uses (one character, so it fits any span).
OPAQUE = "\u1401"  # CANADIAN SYLLABICS E, a letter (Lo): a valid Python identifier


class PythonRejects(ValueError):
    """Python's own parser rejects the file: ``message``, ``line`` and 1-based ``col``."""

    def __init__(self, message: str, line: int = 0, col: int = 0) -> None:
        super().__init__(message)
        self.message, self.line, self.col = message, line, col


def suspicious(source: str) -> bool:
    """Whether one logical line of ``source`` holds more than TRIGGER_OPS operators (see the module doc)."""
    return bool(flagged_lines(source, first_only=True))


def flagged_lines(source: str, first_only: bool = False) -> list[tuple[int, int]]:
    """The (first, last) line numbers (1-based, lines split at ``\\n``) of the logical lines that
    make ``source`` suspicious; only the first one found with ``first_only``."""
    if len(source) < MIN_SIZE:
        return []
    out: list[tuple[int, int]] = []
    reduced = _reduce(source)
    lines = reduced.split("\n")
    raw = source.split("\n")
    if len(reduced) - len(lines) > TRIGGER_OPS:  # else no line can hold that many
        depth = ops = top = 0
        first = 0
        hit = False
        for k, line in enumerate(lines):
            if line:
                opens = line.count("(") + line.count("[") + line.count("{")
                closes = line.count(")") + line.count("]") + line.count("}")
                ops += len(line) - opens - closes
                if depth + opens > top:
                    top = depth + opens  # the nesting this line can reach
                if ops + top > TRIGGER_OPS and not hit:
                    if first_only:
                        return [(first + 1, k + 1)]
                    hit = True
                depth += opens - closes
                if line[-1] == "\\":
                    continue
            if depth > 0:
                continue
            if hit or (k - first >= LONG_LOGICAL and _keywords(ops + top, "\n".join(raw[first:k + 1]))):
                out.append((first + 1, k + 1))
                if first_only:
                    return out
            depth = ops = top = 0
            first = k + 1
            hit = False
        if hit:
            out.append((first + 1, len(lines)))
    if max(map(len, raw)) >= LONG_LINE:  # one long physical line: its keywords count too
        for k, text in enumerate(raw):
            if len(text) >= LONG_LINE and _keywords(len(_reduce(text)), text):
                out.append((k + 1, k + 1))
                if first_only:
                    return out
    return out


def _reduce(text: str) -> str:
    """``text`` with only the characters of _KEPT."""
    reduced = text.translate(_OPS_ONLY)
    if not reduced.isascii():  # the table keeps the characters it does not list
        reduced = reduced.encode("ascii", "ignore").decode("ascii")
    return reduced


def _keywords(ops: int, text: str) -> bool:
    """Whether ``ops`` plus the keywords and string literals of ``text`` exceed TRIGGER_OPS."""
    return ops + len(_KEYWORDS.findall(text)) + (text.count("'") + text.count('"')) // 2 > TRIGGER_OPS


def _compile(source: str) -> ast.Module:
    return compile(source, "<unknown>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)


def _compile_at_depth_0(source: str) -> ast.Module:
    """:func:`_compile` on a new thread, which starts at recursion depth 0."""
    box: dict = {}
    done = _thread.allocate_lock()
    done.acquire()

    def run() -> None:  # the thread's only frame (threading.Thread would add three)
        try:
            box["tree"] = _compile(source)
        except BaseException as exc:  # handed to the caller's thread
            box["exc"] = exc
        finally:
            done.release()

    _thread.start_new_thread(run, ())
    done.acquire()
    if "exc" in box:
        raise box.pop("exc")
    return box["tree"]


def python_tree(source: str) -> ast.Module:
    """``ast.parse(source)``, or :class:`PythonRejects` with Python's message and place.

    Python's limit on nesting (RecursionError, about 3,000 levels with the default recursion
    limit) counts the caller's stack too: a RecursionError is confirmed on a new thread, which
    starts at depth 0 as ``python file.py`` compiles a file, so the verdict does not depend on
    where the engine was called from."""
    try:
        try:
            return _compile(source)
        except RecursionError:
            return _compile_at_depth_0(source)
    except SyntaxError as exc:
        raise PythonRejects(exc.msg, exc.lineno or 0, (exc.offset or 1) if exc.lineno else 0) from None
    except RecursionError as exc:
        raise PythonRejects(f"Python cannot compile it (RecursionError: {exc})") from None
    except MemoryError as exc:
        raise PythonRejects(f"Python cannot compile it (MemoryError{': ' + str(exc) if str(exc) else ''}: "
                            f"nested too deeply for its parser, or out of memory)") from None
    except ValueError as exc:  # e.g. a null byte
        raise PythonRejects(str(exc)) from None


def check_syntax(source: str) -> None:
    """:func:`python_tree`'s verdict without building the tree where it can be had cheaper: Python's
    ``symtable`` runs the same parser and keeps no ``ast`` objects (about half the time).  Anything
    it refuses (a ``nonlocal`` at module level is its own error; a nesting past the recursion limit,
    which both reach at the same depth) gets :func:`python_tree`'s verdict: raises
    :class:`PythonRejects` exactly when that does."""
    import symtable

    try:
        symtable.symtable(source, "<unknown>", "exec")
        return
    except Exception:  # SyntaxError, RecursionError, MemoryError, ValueError: Python decides
        pass
    python_tree(source)


# -- heights -----------------------------------------------------------------------

def _string_parts(node: ast.AST, lines: "_Lines") -> int:
    """How many string literals make the constant or f-string ``node`` (adjacent literals are one node)."""
    if node.end_lineno == node.lineno and (node.end_col_offset or 0) - node.col_offset <= 2 * MAX_HEIGHT:
        return 1
    text = lines.segment(node)
    if (text.count("'") + text.count('"')) // 2 <= MAX_HEIGHT:
        return 1
    n = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO("(" + text + ")").readline):
            if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_START", -1):
                n += 1
    except (tokenize.TokenError, SyntaxError):
        return (text.count("'") + text.count('"')) // 2
    return max(n, 1)


# Children that are no level of their own (``Load``, ``+``, ``and``...).
_LEAVES = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)


def heights(tree: ast.AST, lines: "_Lines") -> dict[int, int]:
    """id(node) -> height of every node of ``tree`` in libcst's nesting, computed without recursion."""
    order: list[ast.AST] = [tree]
    parent: list[int] = [-1]
    i = 0
    while i < len(order):
        for child in ast.iter_child_nodes(order[i]):
            if not isinstance(child, _LEAVES):
                order.append(child)
                parent.append(i)
        i += 1
    h = [1] * len(order)
    for k in range(len(order) - 1, -1, -1):
        node = order[k]
        if isinstance(node, ast.BoolOp):
            h[k] += len(node.values) - 1  # libcst: ((a and b) and c) and d
        elif ((isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)))
              or isinstance(node, ast.JoinedStr)) and not isinstance(order[parent[k]], ast.JoinedStr):
            h[k] += _string_parts(node, lines) - 1  # libcst nests adjacent literals too
        p = parent[k]
        if p >= 0 and h[k] + 1 > h[p]:
            h[p] = h[k] + 1
    return {id(n): v for n, v in zip(order, h)}


# -- positions ---------------------------------------------------------------------

_NEWLINE = re.compile(r"\r\n?|\n")


class _Lines:
    """Line starts of ``source`` as Python numbers lines, and ast's UTF-8 columns as string offsets."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(source)]

    def offset(self, line: int, byte_col: int) -> int:
        if line < 1:
            return 0
        if line > len(self.starts):
            return len(self.source)
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.source)
        text = self.source[start:end]
        if text.isascii():
            return start + min(byte_col, len(text))
        return start + len(text.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))

    def char_offset(self, line: int, col: int) -> int:
        """Offset of a libcst position (1-based line, 0-based character column)."""
        if line < 1:
            return 0
        if line > len(self.starts):
            return len(self.source)
        return min(self.starts[line - 1] + col, len(self.source))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno or node.lineno, node.end_col_offset or 0))

    def segment(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.source[a:b]


def _replaceable(node: ast.AST) -> bool:
    """An expression a parenthesised name can stand for without changing the syntax around it."""
    if not isinstance(node, ast.expr) or isinstance(node, (ast.Starred, ast.Slice)):
        return False
    ctx = getattr(node, "ctx", None)
    return ctx is None or isinstance(ctx, ast.Load)


def _top_expressions(root: ast.AST, keep, into_statements: bool) -> list[ast.AST]:
    """The outermost replaceable expressions under ``root`` for which ``keep(node)`` holds; descends
    into a node only while ``keep`` holds for it; never into patterns, nor into statements other
    than ``root`` unless ``into_statements``."""
    out = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node is not root:
            if isinstance(node, ast.pattern) or (isinstance(node, ast.stmt) and not into_statements):
                continue
            if not keep(node):
                continue
            if _replaceable(node):
                out.append(node)
                continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def deep_spans(tree: ast.Module, lines: _Lines,
               only: Optional[list[tuple[int, int]]] = None) -> list[tuple[int, int]]:
    """The text spans of the maximal expressions higher than MAX_HEIGHT (with ``only``: in the
    top-level statements that overlap those line ranges)."""
    roots: list[ast.AST] = [tree]
    if only is not None:
        roots = [st for st in tree.body
                 if any(a <= (st.end_lineno or st.lineno) and st.lineno <= b for a, b in only)]
    nodes: list[ast.AST] = []
    for root in roots:
        h = heights(root, lines)
        nodes.extend(_top_expressions(root, lambda n: h[id(n)] > MAX_HEIGHT, into_statements=True))
    return sorted(lines.span(n) for n in nodes)


def error_spans(tree: ast.Module, lines: _Lines, line: int, col: int) -> list[tuple[int, int]]:
    """The spans of the outermost expressions of the statement at libcst's error position (the
    innermost statement around it, else the last one before it)."""
    at = lines.char_offset(line, col)
    best = None
    best_key = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        a, b = lines.span(node)
        if a <= at <= b:
            key = (1, a - b)  # containing: the smallest
        elif b <= at:
            key = (0, b, a)  # before: the one that ends last, innermost on a tie
        else:
            continue
        if best_key is None or key > best_key:
            best, best_key = node, key
    if best is None:
        return []
    return sorted(lines.span(n) for n in _top_expressions(best, lambda n: True, into_statements=False))


def opaque_text(source: str, spans: list[tuple[int, int]]) -> str:
    """``source`` with each span replaced by ``(OPAQUE   )``, line breaks kept in place."""
    parts = []
    last = 0
    for a, b in sorted(spans):
        if b - a < 3 or a < last:
            continue
        seg = source[a:b]
        fill = ["\r" if c == "\r" else "\n" if c == "\n" else " " for c in seg]
        fill[0] = "("
        fill[-1] = ")"
        for k in range(1, len(fill) - 1):
            if fill[k] == " ":
                fill[k] = OPAQUE
                break
        else:
            continue  # no room (cannot happen for a deep expression)
        parts.append(source[last:a])
        parts.append("".join(fill))
        last = b
    parts.append(source[last:])
    return "".join(parts)


def _outermost(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
        if out and a < out[-1][1]:
            continue  # inside the previous one
        out.append((a, b))
    return out


def enabled() -> bool:
    return os.environ.get("TFPAR_LINT_DEEP", "").strip().lower() not in ("off", "0", "no", "false")


_TABBED_INDENT = re.compile(r"^[ \f]*\t", re.M)  # a line whose indentation holds a tab


class Normalised:
    """A source whose indentation was rewritten for libcst: ``text`` is what was parsed; columns on
    the lines in ``indents`` (line -> (original indent length, new indent length)) are mapped
    back with :meth:`column`."""

    def __init__(self, text: str, indents: dict[int, tuple[int, int]]) -> None:
        self.text = text
        self.indents = indents

    def column(self, line: int, col: int) -> int:
        """The 1-based column ``col`` of ``line`` in the parsed text, in the original text."""
        got = self.indents.get(line)
        if got is None:
            return col
        old, new = got
        if col - 1 >= new:
            return col - new + old
        return min(col, old + 1) if old else 1


def normalise_indentation(source: str) -> Optional[Normalised]:
    """``source`` with the indentation of every line that starts a token written with spaces only,
    tabs expanded to multiples of 8 (the tab size CPython compares indentation with, having checked
    that tab size 1 gives the same blocks).  libcst refuses some mixes CPython accepts (an inner
    block indented ``8 spaces + tab`` under a tab); the rewritten text has the same blocks.  Lines
    inside strings are left alone.  None when the text cannot be tokenized or nothing changes."""
    import io
    import tokenize

    starts: set[int] = set()
    covered: set[int] = set()  # lines inside a token (a multi-line string)
    skip = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in skip:
                continue
            starts.add(tok.start[0])
            if tok.end[0] > tok.start[0]:
                covered.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    starts -= covered
    lines = source.splitlines(keepends=True)
    indents: dict[int, tuple[int, int]] = {}
    for n in starts:
        text = lines[n - 1] if n - 1 < len(lines) else ""
        body = text.lstrip(" \t\f")
        lead = text[:len(text) - len(body)]
        if "\t" not in lead:
            continue
        new = lead.expandtabs(8)
        lines[n - 1] = new + body
        indents[n] = (len(lead), len(new))
    if not indents:
        return None
    return Normalised("".join(lines), indents)


def parse(source: str, key: Optional[str] = None) -> tuple[cst.Module, int, Optional[Normalised]]:
    """:func:`parse_module` (``key``: see there), and the rewritten source when libcst needed its indentation normalised
    (mixed tabs and spaces that CPython accepts): then the tree is that text's."""
    exc: Optional[cst.ParserSyntaxError] = None
    try:
        tree, opaque = parse_module(source, key)
        if opaque or not _mixed_indentation(source) or tree.code == source:
            return tree, opaque, None
        # libcst took the mix but rewrote it (a line indented `8 spaces + tab` in a block indented
        # `tab + 8 spaces`): its columns would not be the file's
    except cst.ParserSyntaxError as e:
        if "\t" not in source or not _TABBED_INDENT.search(source):
            raise
        exc = e
    python_tree(source)  # PythonRejects: CPython refuses the mix too (TabError)
    fixed = normalise_indentation(source)
    if fixed is None:
        if exc is not None:
            raise exc
        return tree, opaque, None
    try:
        tree, opaque = parse_module(fixed.text)
    except cst.ParserSyntaxError:
        if exc is not None:
            raise exc from None
        raise
    return tree, opaque, fixed


def _mixed_indentation(source: str) -> bool:
    """Some line's indentation mixes tabs and spaces, or some lines indent with tabs and others
    with spaces."""
    if "\t" not in source or not _TABBED_INDENT.search(source):
        return False
    return bool(_MIXED_LINE.search(source)) or bool(re.search(r"^ ", source, re.M))


_MIXED_LINE = re.compile(r"^(?: +\t|\t+ )", re.M)


# Large modules are parsed by libcst in pieces of about this many characters, cut between top-level
# statements, and the pieces' statements joined into one tree (the same tree: its code is the
# source).  libcst's native parser holds its tokens and an intermediate tree for the whole text
# while it builds the Python one: about 540 bytes per source byte at the peak for a 3 MB module,
# against about 80 for the finished tree.  In pieces, that overhead is a piece's.
CHUNK_CHARS = 64 * 1024
# A top-level statement's first line: not indented, not a comment, a decorator's target, a
# continuation of a compound statement (else/elif/except/finally) or closing brackets.
_TOP_START = re.compile(r"^(?![ \t\f#@)\]}\r\n]|(?:else|elif|except|finally)\b)", re.M)


def _chunks(source: str) -> Optional[list[str]]:
    """``source`` cut into pieces of at least CHUNK_CHARS at the start of top-level statements
    (a cut inside a string or brackets makes the piece before it fail to parse: then the caller
    parses the whole text); None when the text is too small to cut."""
    if len(source) < 2 * CHUNK_CHARS:
        return None
    cuts = [0]
    pos = CHUNK_CHARS
    while pos < len(source) - CHUNK_CHARS // 2:
        m = _TOP_START.search(source, pos)
        if m is None:
            break
        at = m.start()
        k = at - 1  # the last non-blank character before the cut, and its line
        while k >= 0 and source[k] in " \t\f\r\n":
            k -= 1
        prev_line = source[source.rfind("\n", 0, k + 1) + 1:k + 1]
        if prev_line.startswith("@") or prev_line.endswith("\\"):
            pos = at + 1  # a decorated definition, or a backslash continuation: cut further on
            continue
        cuts.append(at)
        pos = at + CHUNK_CHARS
    if len(cuts) < 2:
        return None
    cuts.append(len(source))
    return [source[a:b] for a, b in zip(cuts, cuts[1:])]


def _parse_in_pieces(source: str) -> Optional[tuple[cst.Module, int]]:
    """:func:`parse_module` of a large module, piece by piece (see CHUNK_CHARS); None when it cannot
    be done so (a piece does not parse alone, or the pieces disagree on the module's indentation or
    line ending): then the whole text is parsed."""
    pieces = _chunks(source)
    if pieces is None:
        return None
    first: Optional[cst.Module] = None
    body: list = []
    pending: list = []  # the last piece's trailing comments: the next statement's leading lines
    opaque = 0
    carry = ""
    starts: list[tuple[int, int]] = []  # per piece: (its first statement's index, the line its code starts on)
    line = 1  # the line the current piece's text starts on
    for k, text in enumerate(pieces):
        if not carry:
            text_line = line
        text = carry + text
        line += pieces[k].count("\n")
        try:
            piece, n = _parse_whole(text)
        except (cst.ParserSyntaxError, PythonRejects):
            if k == len(pieces) - 1:
                return None
            carry = text  # cut inside a string or brackets: join it to the next piece
            continue
        carry = ""
        opaque += n
        stmts = list(piece.body)
        if stmts:
            # the line its first statement's code starts on: after the module's header for the first
            # piece; else at the trailing comments of the pieces before, which become its leading lines
            starts.append((len(body), 1 + len(piece.header) if first is None else text_line - len(pending)))
        if first is None:
            first = piece
        else:
            if (piece.default_indent != first.default_indent and _has_blocks(piece)) \
                    or piece.default_newline != first.default_newline or piece.encoding != first.encoding:
                return None
            if stmts:
                s0 = stmts[0]
                stmts[0] = s0.with_changes(leading_lines=[*pending, *piece.header, *s0.leading_lines])
                pending = []
            else:
                pending += list(piece.header)
        pending += list(piece.footer)
        body += stmts
        del piece
        _trim()
    assert first is not None
    tree = first.with_changes(body=body, footer=pending, has_trailing_newline=source.endswith(("\n", "\r")))
    _PIECES[id(tree)] = (tree, starts)
    return tree, opaque


# Trees parsed in pieces -> where their pieces start (see take_pieces); popped by the engine right
# after the parse (the entry holds the tree).
_PIECES: dict[int, tuple[cst.Module, list[tuple[int, int]]]] = {}


def take_pieces(tree: cst.Module) -> Optional[list[tuple[int, int]]]:
    """For a tree :func:`parse_module` made in pieces: ``[(index of the piece's first top-level
    statement, the line its code (leading lines included) starts on), ...]``; else None."""
    got = _PIECES.pop(id(tree), None)
    return got[1] if got is not None and got[0] is tree else None


def _has_blocks(module: cst.Module) -> bool:
    return any(isinstance(getattr(s, "body", None), cst.IndentedBlock) for s in module.body)


def _trim() -> None:
    """Give the native parser's freed memory back to the system (glibc), so that the next piece's
    does not add to the peak."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes

            _MALLOC_TRIM = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):  # pragma: no cover - not glibc
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = None


def parse_module(source: str, key: Optional[str] = None) -> tuple[cst.Module, int]:
    """libcst's tree of ``source`` and the number of expressions made opaque (see the module doc).
    A large module is parsed in pieces (CHUNK_CHARS).

    With ``key`` (a file's path) and :data:`INCREMENTAL` set (the language server), the tree of
    the key's last text is reused: only the top-level statements whose text changed are parsed
    again (:class:`Incremental`).

    Raises :class:`PythonRejects` (Python's verdict on a suspicious file) or
    ``libcst.ParserSyntaxError``."""
    if key is not None and INCREMENTAL is not None:
        return INCREMENTAL.parse(key, source)
    return _parse_module(source)


def _parse_module(source: str) -> tuple[cst.Module, int]:
    if enabled() and len(source) >= 2 * CHUNK_CHARS:
        got = _parse_in_pieces(source)
        if got is not None:
            return got
    return _parse_whole(source)


def _parse_whole(source: str) -> tuple[cst.Module, int]:
    if not enabled():
        return cst_parse(source), 0
    tree: Optional[ast.Module] = None
    lines: Optional[_Lines] = None
    spans: list[tuple[int, int]] = []
    flagged = flagged_lines(source)
    if flagged:
        tree = python_tree(source)
        lines = _Lines(source)
        # Python numbers lines at \r too: with a lone \r the flagged line numbers would not match
        only = None if source.count("\r") != source.count("\r\n") else flagged
        spans = deep_spans(tree, lines, only)
    try:
        return cst_parse(opaque_text(source, spans) if spans else source), len(spans)
    except cst.ParserSyntaxError as exc:
        if tree is None:
            tree = python_tree(source)  # PythonRejects: the user's syntax error, in Python's words
            lines = _Lines(source)
        assert lines is not None
        more = error_spans(tree, lines, exc.raw_line, exc.raw_column)
        if not more:
            raise
        spans = _outermost(spans + more)
        try:
            return cst_parse(opaque_text(source, spans)), len(spans)
        except cst.ParserSyntaxError:
            raise exc from None


def _unvalidated() -> Optional[tuple[type, Any]]:
    """libcst's node base class and its ``__post_init__`` (which only validates the node), or None
    with a libcst whose internals are not these."""
    try:
        from libcst._nodes.base import CSTNode
    except ImportError:  # pragma: no cover - another libcst
        return None
    post = CSTNode.__dict__.get("__post_init__")
    return (CSTNode, post) if post is not None else None


_VALIDATION = _unvalidated()


def _no_check(self: Any) -> None:
    pass


def cst_parse(text: str) -> cst.Module:
    """``libcst.parse_module`` without libcst validating each node its parser builds (about a quarter
    of the parse).  ``CSTNode.__post_init__`` does nothing but validate (libcst's own comment there:
    validating a parsed tree is wasted work); the parser builds only valid nodes, so the tree is the
    same.  Validation is back on as soon as the parse returns (nodes built later are checked)."""
    if _VALIDATION is None:  # pragma: no cover - another libcst
        return cst.parse_module(text)
    base, post = _VALIDATION
    base.__post_init__ = _no_check
    try:
        return cst.parse_module(text)
    finally:
        base.__post_init__ = post


def note(count: int) -> str:
    """The note a file with ``count`` opaque expressions gets."""
    what = "expression" if count == 1 else "expressions"
    return (f"{count} {what} too deep for libcst's parser (more than {MAX_HEIGHT} levels, or refused by it) "
            f"analysed as unknown values; findings inside {'it' if count == 1 else 'them'} may be missing")


# -- incremental parse (the language server) ------------------------------------------------

class Incremental:
    """Trees of files edited again and again (an editor's buffers), by key: a new text is parsed
    only where it changed.

    The text is cut at the top-level statements (where each starts: its first decorator or its
    first line; a statement's *chunk* runs from there to the next one's start, the first chunk
    from the top of the file).  An edit changes a run of chunks; those, and the chunk before them
    (an indented line added at a chunk's start belongs to the statement before), are parsed alone
    as one module, and the tree is assembled from the new statements and the unchanged ones, as
    libcst's full parse would build it: the comment and blank lines at the end of a chunk that
    are not in its statement's block belong to the next statement (``leading_lines``), or to the
    module's footer after the last one; those at the top of the file are the module's header.
    The code the new statements generate in the assembled module must be the text that was
    parsed, and the module's indentation and line ending must stay those of the whole text;
    anything else (the edit is not a run of whole statements, a syntax error, a file the deep
    guard rewrites, a line ending Python counts differently) is a full parse.  The findings do
    not depend on which way the tree was made (tests/test_incremental.py compares both)."""

    MAX_KEYS = 256

    def __init__(self) -> None:
        self._states: dict[str, _State] = {}
        self.full = 0  # full parses
        self.partial = 0  # parses of a changed run of statements only
        self.check = os.environ.get("TFPAR_LINT_INCREMENTAL_CHECK", "") not in ("", "0")

    def forget(self, key: Optional[str] = None) -> None:
        if key is None:
            self._states.clear()
        else:
            self._states.pop(key, None)

    def parse(self, key: str, source: str) -> tuple[cst.Module, int]:
        state = self._states.get(key)
        if state is not None:
            if state.text == source:
                return state.tree, 0
            tree = _reparse(state, source)
            if tree is not None:
                if self.check and tree.code != source:  # pragma: no cover - a bug of _reparse
                    raise AssertionError("incremental parse: the tree's code is not the text")
                self.partial += 1
                return tree, 0
        self._states.pop(key, None)
        tree, opaque = _parse_module(source)
        self.full += 1
        if not opaque:
            new = _State.of(source, tree)
            if new is not None:
                if len(self._states) >= self.MAX_KEYS:
                    self._states.pop(next(iter(self._states)))
                self._states[key] = new
        return tree, opaque


# Set by the language server: parse_module(source, key) reuses the key's last tree.
INCREMENTAL: Optional[Incremental] = None


def statement_offsets(key: Optional[str], source: str, tree: cst.Module) -> Optional[list[int]]:
    """Where each top-level statement of ``tree`` starts in ``source`` (``[0, ...]``: the first one
    from the top of the file), when the incremental parser keeps them for this very text and tree;
    else None."""
    state = INCREMENTAL._states.get(key) if INCREMENTAL is not None and key is not None else None
    if state is None or state.text is not source and state.text != source or state.tree is not tree \
            or len(state.starts) != len(tree.body):
        return None
    return list(state.starts)


class _State:
    """A text, its tree, and where each top-level statement's chunk starts (``starts[0]`` is 0:
    the first chunk holds the module's header)."""

    __slots__ = ("text", "tree", "starts", "blocks")

    def __init__(self, text: str, tree: cst.Module, starts: list[int], blocks: list[bool]) -> None:
        self.text, self.tree, self.starts, self.blocks = text, tree, starts, blocks

    @classmethod
    def of(cls, text: str, tree: cst.Module) -> "Optional[_State]":
        starts = _statement_starts(text)
        if starts is None or len(starts) != len(tree.body) or not tree.body:
            return None
        starts[0] = 0
        return cls(text, tree, starts, [_has_block(st) for st in tree.body])


def _line_offsets(text: str) -> list[int]:
    """Offset of each line's start (line 1 at index 0), lines ended by \n (\r\n included)."""
    out = [0]
    find = text.find
    i = find("\n")
    while i >= 0:
        out.append(i + 1)
        i = find("\n", i + 1)
    return out


def _statement_starts(text: str) -> Optional[list[int]]:
    """Offsets where the top-level statements of ``text`` start (a decorated definition at its
    first decorator; statements sharing a line are one, as in libcst), or None when Python cannot
    parse it or counts lines otherwise (a lone \r)."""
    if "\r" in text and text.count("\r") != text.count("\r\n"):
        return None
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning ("invalid escape sequence"...): not ours to print
            tree = _compile(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    offsets = _line_offsets(text)
    out: list[int] = []
    last = 0
    for node in tree.body:
        line = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        if line == last:
            continue
        if line < last or line > len(offsets):
            return None
        last = line
        out.append(offsets[line - 1])
    return out


def _first_block(stmt: cst.CSTNode) -> Optional[cst.IndentedBlock]:
    """The first indented block (in source order) of the top-level statement ``stmt``: libcst
    takes the module's indentation from the first one of the file."""
    if not isinstance(stmt, cst.BaseCompoundStatement):
        return None
    stack: list = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.IndentedBlock):
            return node
        stack.extend(child for child in reversed(node.children) if not isinstance(
            child, (cst.BaseExpression, cst.BaseParenthesizableWhitespace, cst.EmptyLine, cst.Comment,
                    cst.Newline, cst.BaseSmallStatement, cst.BaseStatement)) or isinstance(child, cst.BaseCompoundStatement))
    return None


def _has_block(stmt: cst.CSTNode) -> bool:
    return _first_block(stmt) is not None


def _common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # bisection over slices compared at C speed
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, limit
    la, lb = len(a), len(b)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid:] == b[lb - mid:]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _reparse(state: _State, text: str) -> Optional[cst.Module]:
    """The tree of ``text`` made from ``state`` (see :class:`Incremental`), or None: parse it all.
    On success ``state`` describes ``text``."""
    import bisect

    old = state.text
    if "\r" in text and text.count("\r") != text.count("\r\n"):
        return None
    if len(text) >= MIN_SIZE and flagged_lines(text, first_only=True):
        return None  # the deep guard's business
    pre = _common_prefix(old, text)
    suf = _common_suffix(old, text, min(len(old), len(text)) - pre)
    old_end = len(old) - suf  # the edit replaced old[pre:old_end] by text[pre:len(text) - suf]
    delta = len(text) - len(old)
    starts, body, n = state.starts, state.tree.body, len(state.tree.body)
    first = max(bisect.bisect_right(starts, pre) - 1, 0)
    last = max(bisect.bisect_left(starts, old_end) - 1, first)  # the chunk holding old_end - 1
    first = max(first - 1, 0)  # and the chunk before (an indented line added at a chunk's start)
    lo = starts[first]
    at_end = last + 1 >= n
    hi = (starts[last + 1] if not at_end else len(old)) + delta
    if hi < lo:  # pragma: no cover - the edit lies inside [lo, hi) by construction
        return None
    region = text[lo:hi]
    try:
        part = cst_parse(region)
    except (cst.ParserSyntaxError, RecursionError, MemoryError, ValueError):
        return None
    if not part.body or (first > 0 and (part.header or part.body[0].leading_lines)):
        return None
    module = state.tree
    if part.default_newline != module.default_newline:
        return None
    # the module's indentation is its first indented block's (libcst); the statements kept were
    # built against the old one
    before, after = state.blocks[:first], state.blocks[last + 1:]
    part_blocks = [_has_block(st) for st in part.body]
    if any(before):
        indent = module.default_indent
    elif any(part_blocks):
        indent = part.default_indent
    elif any(after):
        block = _first_block(body[last + 1 + after.index(True)])
        indent = block.indent if block is not None and block.indent is not None else module.default_indent
    else:
        indent = part.default_indent
    if (any(before) or any(after)) and indent != module.default_indent:
        return None
    if any(part_blocks) and part.default_indent != indent:
        return None
    tree = module.with_changes(default_indent=indent)
    # the new statements must generate, in the assembled module, exactly the text they came from
    generated = "".join([tree.code_for_node(x) for x in part.header] if first == 0 else [])
    generated += "".join(tree.code_for_node(x) for x in part.body)
    generated += "".join(tree.code_for_node(x) for x in part.footer)
    if at_end and not part.has_trailing_newline and generated.endswith(module.default_newline):
        generated = generated[:-len(module.default_newline)]
    if generated != region:
        return None
    part_starts = _statement_starts(region)
    if part_starts is None or len(part_starts) != len(part.body):
        return None
    new_stmts = list(part.body)
    if first > 0:  # its leading lines are the end of the chunk before, which is unchanged
        new_stmts[0] = new_stmts[0].with_changes(leading_lines=body[first].leading_lines)
    following = list(body[last + 1:])
    if following and not _same_lines(following[0].leading_lines, part.footer):
        following[0] = following[0].with_changes(leading_lines=part.footer)
    tree = tree.with_changes(
        header=part.header if first == 0 else module.header,
        body=list(body[:first]) + new_stmts + following,
        footer=part.footer if at_end else module.footer,
        has_trailing_newline=part.has_trailing_newline if at_end else module.has_trailing_newline)
    if first == 0:
        part_starts[0] = 0
    state.starts = starts[:first] + [lo + x for x in part_starts] + [x + delta for x in starts[last + 1:]]
    state.blocks = before + part_blocks + after
    state.text, state.tree = text, tree
    return tree


def _same_lines(a, b) -> bool:
    return len(a) == len(b) and all(x.deep_equals(y) for x, y in zip(a, b))
