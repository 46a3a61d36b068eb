"""Per-module summaries: what one project module can do to another, read without a libcst parse.

Whole-project analysis asks two kinds of questions about the project's *other* modules, and
today answered both by building their full semantic model (a libcst parse, the costly part):

* backward: which modules that import ``M`` run or call ``M``'s functions (``strategy.run``,
  ``Thread(target=...)``, executors, direct calls: callers, replica functions, thread targets);
* forward: what a name imported from ``M`` holds.

A summary is a small JSON record computed from one module's text alone, with Python's ``ast``
(about ten times cheaper than libcst), and cached on disk by content (:class:`SummaryStore`), so
that every worker process, the flake8 plugin and later runs share it.  It holds:

* ``defs``: the names of every function and class the module defines (methods and nested ones
  too), i.e. the names another module's call must use to reach one of them;
* ``calls``: the last name of every call's callee (``f`` of ``f(x)``, ``build`` of
  ``models.build()``, ``__init__`` of ``super().__init__()``);
* ``hands_over``: whether some callable handed to ``strategy.run`` (or ``experimental_run_v2``,
  ``extended.call_for_each_replica``), ``Thread``/``Timer`` or an executor-style method
  (``submit``, ``map``, ``apply_async``...) may be another module's: anything but a lambda, a name
  the module binds only by ``def``/``class``, or ``functools.partial``/``tf.function`` of those;
  ``handed``: the first few such callables, as written (for people reading the cache);
* ``inert``: module-level names whose value is unknown to inference whatever the rest of the
  project holds: bound exactly once, by ``NAME = <expression>`` where the expression is none of
  the forms value inference follows (a name, an attribute, a call, a subscript, a lambda,
  ``await``) nor ``None`` (``BATCH = 64``, ``LOG_DIR = "/tmp/run"``, ``SHAPES = {"a": (1, 2)}``);
* ``bound``: every name bound at module level (or declared ``global`` anywhere), and
  ``star_import``: whether a ``from x import *`` may bind more.

How :class:`~tfpar_lint.semantic.project.Project` uses them (each use answers exactly what the
full model would, or the module is parsed as before):

* an importer ``I`` of ``M`` with ``not hands_over`` and no name of ``calls`` among ``M``'s
  ``defs`` cannot make any of ``M``'s functions a callee, a replica function or a thread target
  (those all start at a call whose callee's last name is the function's, or at a handed-over
  callable): it is not parsed for ``M``'s callers, replica functions and thread targets;
* ``from M import BATCH`` / ``M.BATCH`` (and ``M.BATCH.attr``) with ``BATCH`` inert, or bound
  nowhere in ``M`` (``M.__file__``, a submodule missing from the project), is the unknown value
  without parsing ``M``.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
from typing import Optional

from tfpar_lint import tfapi as api

FORMAT = 1
# Set to 0 to turn summaries off (every question about another module parses it, as before).
ENV = "TFPAR_LINT_SUMMARIES"

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
_RUN = api.RUN_METHODS | {"call_for_each_replica"}
_POOL = frozenset({"submit", "apply", "apply_async", "map", "imap", "imap_unordered", "starmap",
                   "map_async", "starmap_async"})
_WRAPPERS = frozenset({"partial", "function", "do_not_convert"})  # functools.partial, tf.function
_WRAPPER_MODULES = frozenset({"functools", "tensorflow"})
# value forms inference follows (libcst Name, Attribute, Call, Subscript, Lambda, Await)
_FOLLOWED = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Lambda, ast.Await, ast.NamedExpr,
             ast.Starred, ast.Yield, ast.YieldFrom)
_MAX_HANDED = 8


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def summarise(text: str) -> Optional[dict]:
    """The summary of a module's text, or None when Python cannot parse it."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    try:
        v = _Visitor()
        v.visit(tree)
        handed = []
        for call in v.handovers:
            for target in call:
                if not v.safe_target(target):
                    handed.append(ast.unparse(target)[:80] if target is not None else "*")
        inert = []
        for name, binds in v.module_binds.items():
            if len(binds) == 1 and name not in v.declared_global and _inert_value(name, binds[0]):
                inert.append(name)
    except RecursionError:  # a tree too deep to walk: no summary, the module is parsed
        return None
    return {"format": FORMAT, "defs": sorted(v.defs), "calls": sorted(v.calls),
            "hands_over": bool(handed), "handed": handed[:_MAX_HANDED], "inert": sorted(inert),
            "bound": sorted(set(v.module_binds) | v.declared_global), "star_import": v.star_import}


def may_reach(importer: dict, names: frozenset) -> bool:
    """Whether the module summarised by ``importer`` may call, run or start a function or class
    named in ``names`` (another module's ``defs``)."""
    return bool(importer.get("hands_over")) or not names.isdisjoint(importer.get("calls", ()))


# the words a handed-over callable's call needs (``strategy.run``, ``Thread``, ``ex.submit``...)
_HANDOVER_WORDS = re.compile(r"\b(?:" + "|".join(sorted(_RUN | _POOL | {"Thread", "Timer"})) + r")\b")


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def words_of(text: str) -> Optional[frozenset]:
    """The identifiers a text may use (every word; None when the text is not ASCII: identifiers
    are then compared after normalisation, which a text search cannot do)."""
    return frozenset(_WORD.findall(text)) if text.isascii() else None


def may_reach_text(text: str, words: Optional[frozenset], names: frozenset) -> bool:
    """:func:`may_reach` answered from the text alone when it can be (no summary needed): a module
    whose text (its ``words``) holds none of ``names`` and no word of a hand-over call cannot
    reach them.  True: ask the summary."""
    if words is None:
        return True
    return not names.isdisjoint(words) or bool(_HANDOVER_WORDS.search(text))


def _inert_value(name: str, node: Optional[ast.AST]) -> bool:
    """``name = <expression>`` (one plain target, or an annotated assignment with a value) whose
    expression inference never follows."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and node.targets[0].id == name:
        value = node.value
    elif isinstance(node, ast.AnnAssign) and node.simple and node.value is not None \
            and isinstance(node.target, ast.Name) and node.target.id == name:
        value = node.value
    else:
        return False
    if isinstance(value, ast.Constant) and value.value is None:
        return False  # None has a value of its own
    return not isinstance(value, _FOLLOWED)


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.defs: set[str] = set()
        self.calls: set[str] = set()
        self.binds: dict[str, set[str]] = {}  # every scope: name -> kinds of its bindings
        self.module_binds: dict[str, list[Optional[ast.AST]]] = {}  # module scope: the binding statements
        self.declared_global: set[str] = set()
        self.import_heads: dict[str, set[str]] = {}  # local name -> top-level modules it imports
        self.star_import = False
        self.handovers: list[list[Optional[ast.AST]]] = []
        self._depth = 0  # 0: module level (comprehensions count as module level: conservative)
        self._stmt: Optional[ast.AST] = None

    # ---------------------------------------------------------------- bindings
    def _bind(self, name: str, kind: str, stmt: Optional[ast.AST] = None) -> None:
        self.binds.setdefault(name, set()).add(kind)
        if self._depth == 0:
            self.module_binds.setdefault(name, []).append(stmt if kind == "assign" else None)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self._bind(node.id, "assign", self._stmt)
        elif isinstance(node.ctx, ast.Del):
            self._bind(node.id, "del")

    def _assign(self, node, targets: list) -> None:
        """``NAME = value``: the statement is the binding's (other stores have none)."""
        for t in targets:
            self._stmt = node if isinstance(t, ast.Name) else None
            self.visit(t)
        self._stmt = None
        for e in (node.value, getattr(node, "annotation", None)):
            if e is not None:
                self.visit(e)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign(node, node.targets)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign(node, [node.target])

    def _function(self, node, name: Optional[str]) -> None:
        if name is not None:
            self.defs.add(name)
            self._bind(name, "def")
        for d in getattr(node, "decorator_list", ()):
            self.visit(d)
        args = node.args
        for a in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(a)
        if getattr(node, "returns", None) is not None:
            self.visit(node.returns)
        for a in args.posonlyargs + args.args + args.kwonlyargs + [x for x in (args.vararg, args.kwarg) if x]:
            if a.annotation is not None:
                self.visit(a.annotation)
        self._depth += 1
        for a in args.posonlyargs + args.args + args.kwonlyargs + [x for x in (args.vararg, args.kwarg) if x]:
            self._bind(a.arg, "param")
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            self.visit(stmt)
        self._depth -= 1

    def visit_FunctionDef(self, node) -> None:
        self._function(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node, None)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.defs.add(node.name)
        self._bind(node.name, "class")
        for e in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(e)
        self._depth += 1
        for stmt in node.body:
            self.visit(stmt)
        self._depth -= 1

    def visit_Global(self, node: ast.Global) -> None:
        self.declared_global.update(node.names)
        for n in node.names:
            self._bind(n, "global")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        for n in node.names:
            self._bind(n, "global")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            name = a.asname or a.name.split(".")[0]
            self._bind(name, "import")
            self.import_heads.setdefault(name, set()).add(a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        head = "." if node.level else (node.module or "").split(".")[0]
        for a in node.names:
            if a.name == "*":
                self.star_import = True
                continue
            name = a.asname or a.name
            self._bind(name, "import")
            self.import_heads.setdefault(name, set()).add(head)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind(node.name, "other")
        self.generic_visit(node)

    def _match_name(self, node) -> None:
        for attr in ("name", "rest"):
            n = getattr(node, attr, None)
            if isinstance(n, str):
                self._bind(n, "other")
        self.generic_visit(node)

    visit_MatchAs = visit_MatchStar = visit_MatchMapping = _match_name

    # ---------------------------------------------------------------- calls
    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        last = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if last is not None:
            self.calls.add(last)
        star = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        targets: Optional[list[Optional[ast.AST]]] = None
        if isinstance(f, ast.Attribute) and f.attr in _RUN:
            targets = self._args(node, 0, ("fn",))
        elif isinstance(f, ast.Attribute) and f.attr in _POOL:
            targets = self._args(node, 0, ("fn", "func"))
        elif last in ("Thread", "Timer"):
            targets = self._args(node, 1, ("target", "function"))
        if targets is not None:
            self.handovers.append([None] if star else targets)
        self.generic_visit(node)

    @staticmethod
    def _args(node: ast.Call, pos: int, kws: tuple[str, ...]) -> list[Optional[ast.AST]]:
        out: list[Optional[ast.AST]] = [k.value for k in node.keywords if k.arg in kws]
        if len(node.args) > pos:
            out.append(node.args[pos])
        return out

    # ---------------------------------------------------------------- handed-over callables
    def safe_target(self, node: Optional[ast.AST], _depth: int = 0) -> bool:
        """The callable is certainly this module's own (or nothing): a lambda, a name bound only
        by ``def``/``class`` here (or bound nowhere, without star imports), a constant, or
        ``functools.partial``/``tf.function`` of one."""
        if node is None or _depth > 8:
            return False
        if isinstance(node, (ast.Lambda, ast.Constant)):
            return True
        if isinstance(node, ast.Name):
            kinds = self.binds.get(node.id)
            if kinds is None:
                return not self.star_import
            return kinds <= {"def", "class"}
        if isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Starred):
            f = node.func
            parts = []
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if not isinstance(f, ast.Name):
                return False
            last = parts[0] if parts else f.id
            heads = self.import_heads.get(f.id, set())
            if last in _WRAPPERS and heads and heads <= _WRAPPER_MODULES \
                    and self.binds.get(f.id, set()) <= {"import"}:
                return self.safe_target(node.args[0], _depth + 1)
            return False
        return False


# ==================================================================== the on-disk store
class SummaryStore:
    """Summaries by content: memoised in this process, and kept in ``directory`` (the result
    cache's folder) when one is given.  A summary file is named by the SHA-256 of tfpar-lint's
    code fingerprint and the module's text, holds that key, and is written atomically; a file
    that cannot be read or does not hold the key is recomputed and overwritten."""

    def __init__(self, directory: Optional[str] = None) -> None:
        self.root = os.path.abspath(directory) if directory else None
        self.folder = os.path.join(self.root, "summaries", f"v{FORMAT}") if self.root else None
        self._memo: dict[str, Optional[dict]] = {}
        self.computed = 0  # summaries computed (an ast parse each)
        self.loaded = 0  # summaries read from the folder
        self.written = 0

    @staticmethod
    def key(text: str) -> str:
        from tfpar_lint.cache import code_fingerprint

        h = hashlib.sha256(f"{FORMAT}\0{code_fingerprint()}\0".encode())
        h.update(text.encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def _file(self, key: str) -> Optional[str]:
        return os.path.join(self.folder, key[:2], key[2:] + ".json") if self.folder else None

    def get(self, text: str) -> Optional[dict]:
        key = self.key(text)
        if key in self._memo:
            return self._memo[key]
        got = self._load(key)
        if got is None:
            got = summarise(text)
            self.computed += 1
            if got is not None:
                self._store(key, got)
        else:
            self.loaded += 1
        self._memo[key] = got
        return got

    def _load(self, key: str) -> Optional[dict]:
        path = self._file(key)
        if path is None:
            return None
        from tfpar_lint.cache import _checksum, read_entry

        data = read_entry(path)  # a regular file of this user's, not a link, of bounded size
        if data is None:
            return None
        try:
            entry = json.loads(data)
            if not isinstance(entry, dict) or entry.get("key") != key:
                return None
            if entry.get("checksum") != _checksum({"key": key, "summary": entry.get("summary")}):
                return None
            summary = entry["summary"]
            if not isinstance(summary, dict) or summary.get("format") != FORMAT \
                    or not isinstance(summary.get("hands_over"), bool) \
                    or not isinstance(summary.get("star_import"), bool) \
                    or not all(isinstance(summary.get(k), list) and all(isinstance(x, str) for x in summary[k])
                               for k in ("defs", "calls", "inert", "bound")):
                return None
            return summary
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None

    def _store(self, key: str, summary: dict) -> None:
        path = self._file(key)
        if path is None:
            return
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            from tfpar_lint.cache import _ensure_root

            _ensure_root(self.root)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            from tfpar_lint.cache import _checksum

            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with open(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": key, "summary": summary, "checksum": _checksum({"key": key, "summary": summary})},
                          fh, separators=(",", ":"))
            os.replace(tmp, path)
            self.written += 1
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
