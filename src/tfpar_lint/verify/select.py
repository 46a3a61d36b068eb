"""What ``--verify`` runs (no TensorFlow import; the CLI calls it before the verifier starts).

* Files named on the command line always run.
* Files found in folders run when they use a ``tf.distribute`` strategy (flagged or not: a mistake
  the linter missed is reported RUNTIME) or carry a finding, and are an entry point.  Skipped, and
  listed with the reason: ``setup.py``, tests (``test_*.py``, ``*_test.py``, ``conftest.py``, files
  under ``tests/`` or ``test/``), and modules that are not an entry point (``__init__.py``; a
  module another file of the run imports and that has no ``if __name__ == "__main__":``; a module
  whose top level only defines things).  Files that use no strategy are counted, not listed.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Optional, Sequence

# Names whose presence in the code means the file drives a strategy (constructors and the
# strategy-only methods a script calls on one it got from elsewhere).
_STRATEGY_NAMES = frozenset({
    "MirroredStrategy", "MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy", "CentralStorageStrategy",
    "OneDeviceStrategy", "TPUStrategy", "ParameterServerStrategy", "experimental_distribute_dataset",
    "distribute_datasets_from_function", "experimental_distribute_datasets_from_function",
    "experimental_distribute_values_from_function", "experimental_run_v2", "num_replicas_in_sync",
    "experimental_local_results",
})
_TEST_DIRS = {"tests", "test", "testing"}


@dataclass
class Selection:
    run: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why) of files that use a strategy
    no_strategy: int = 0  # files found in folders that use no strategy (not run)


def _tree(path: str) -> Optional[ast.Module]:
    """The file's syntax tree: a regular file only, read without blocking and without bound (a FIFO
    named ``*.py`` or a link to ``/dev/zero`` in a folder given to ``--verify`` is not read)."""
    from tfpar_lint.files import read_regular
    from tfpar_lint.verify.source import SCRIPT_MAX_BYTES

    try:
        return ast.parse(read_regular(path, SCRIPT_MAX_BYTES).decode("utf-8", "replace"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _names(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.name.rsplit(".", 1)[-1])
    return out


def _main_guard(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            parts = [node.test.left] + list(node.test.comparators)
            if any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts) and any(
                    isinstance(p, ast.Constant) and p.value == "__main__" for p in parts):
                return True
    return False


_DEFINES = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _does_work(tree: ast.Module) -> bool:
    """The module's top level does more than define things (imports, functions, classes, constants,
    the docstring): it runs when executed as a script."""
    for node in tree.body:
        if isinstance(node, _DEFINES):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstring
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(getattr(node, "value", None), (
                ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.Set)):
            continue  # a constant
        return True
    return False


def _imported_stems(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """module stem -> the files that import a module of that name (``import x``, ``from x import``,
    ``from .x import``, ``from pkg.x import``, ``from pkg import x``)."""
    out: dict[str, set[str]] = {}
    for path, tree in trees.items():
        for node in ast.walk(tree):
            mods: list[str] = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                mods = [base] + [f"{base}.{a.name}" if base else a.name for a in node.names]
            for m in mods:
                if m:
                    out.setdefault(m.rsplit(".", 1)[-1], set()).add(path)
    return out


def _why_not(path: str, tree: Optional[ast.Module], importers: dict[str, set[str]], folders: list[str]) -> Optional[str]:
    name = os.path.basename(path)
    stem = os.path.splitext(name)[0]
    ab = os.path.abspath(path)
    top = max((d for d in folders if ab.startswith(d + os.sep)), key=len, default=os.path.dirname(ab))
    parts = {p.lower() for p in os.path.relpath(os.path.dirname(ab), top).split(os.sep)}
    if name == "setup.py":
        return "setup script"
    if name == "conftest.py" or stem.startswith("test_") or stem.endswith("_test") or parts & _TEST_DIRS:
        return "test"
    if name == "__init__.py":
        return "package module, not an entry point"
    if tree is None:
        return None  # cannot tell: run it (the verifier reports what it saw)
    if _main_guard(tree):
        return None
    users = sorted(p for p in importers.get(stem, ()) if os.path.realpath(p) != os.path.realpath(path))
    if users:
        return f"module imported by {os.path.basename(users[0])}, no __main__ entry point"
    if not _does_work(tree):
        return "module that only defines things, no entry point"
    return None


def select(files: Sequence[str], paths: Sequence[str], flagged: Sequence[str]) -> Selection:
    """What ``--verify`` runs of the ``files`` found under ``paths`` (see the module docstring);
    ``flagged``: files with a static finding."""
    named = {os.path.realpath(p) for p in paths if p != "-" and not os.path.isdir(p)}
    folders = [os.path.abspath(p) for p in paths if p != "-" and os.path.isdir(p)]
    flagged_set = {os.path.realpath(p) for p in flagged}
    sel = Selection()
    found = [f for f in files if os.path.realpath(f) not in named and not f.endswith(".ipynb")]
    trees = {f: t for f in found if (t := _tree(f)) is not None}
    importers = _imported_stems(trees)
    for f in files:
        rp = os.path.realpath(f)
        if rp in named:
            sel.run.append(f)
            continue
        tree = trees.get(f)
        uses = rp in flagged_set or (tree is not None and bool(_names(tree) & _STRATEGY_NAMES))
        if f.endswith(".ipynb"):
            uses = rp in flagged_set
        if not uses:
            sel.no_strategy += 1
            continue
        why = None if f.endswith(".ipynb") else _why_not(f, tree, importers, folders)
        if why:
            sel.skipped.append((f, why))
        else:
            sel.run.append(f)
    return sel


__all__ = ["Selection", "select"]
