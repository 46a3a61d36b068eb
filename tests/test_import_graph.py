"""The import graph of ``src/tfpar_lint`` has no cycle.

Every ``import`` / ``from ... import`` of a tfpar_lint module is an edge, at module level and inside
functions alike (a function-level import hides a cycle; it does not remove it).  Imports under
``if TYPE_CHECKING:`` are left out: they are never run; they name, for annotations only, the
``semantic.Module`` class the analysis parts are mixed into.
"""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# Edges of cycles that are not broken yet: none.  (Were one ever listed, the test would fail when a
# cycle appears that does not use one of them, and when one of them is gone.)
NOT_YET_BROKEN: set[tuple[str, str]] = set()


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for p in (SRC / "tfpar_lint").rglob("*.py"):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        mods[".".join(parts)] = (p, is_pkg)
    return mods


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            out.update(id(c) for c in ast.walk(n))
    return out


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported tfpar_lint module: line}."""
    mods = _modules()

    def resolve(name: str):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {name: {} for name in mods}
    for name, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        pkg = name if is_pkg else name.rpartition(".")[0]
        for n in ast.walk(tree):
            if id(n) in skip:
                continue
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                if n.level:
                    base = pkg.split(".")[:len(pkg.split(".")) - (n.level - 1)]
                    mod = ".".join(base + ([n.module] if n.module else []))
                else:
                    mod = n.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in n.names]
            else:
                continue
            for t in targets:
                if t == "tfpar_lint" or t.startswith("tfpar_lint."):
                    r = resolve(t)
                    if r and r != name:
                        graph[name].setdefault(r, n.lineno)
    return graph


def find_cycle(graph: dict[str, dict[str, int]]):
    """One cycle as a list of modules (first == last), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {v: WHITE for v in graph}
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        colour[start] = GREY
        while stack:
            v, it = stack[-1]
            w = next(it, None)
            if w is None:
                colour[v] = BLACK
                stack.pop()
                path.pop()
                continue
            if colour.get(w) == GREY:
                return path[path.index(w):] + [w]
            if colour.get(w) == WHITE:
                colour[w] = GREY
                stack.append((w, iter(sorted(graph[w]))))
                path.append(w)
    return None


def test_graph_is_read():
    g = import_graph()
    assert "tfpar_lint.engine" in g and "tfpar_lint.semantic" in g["tfpar_lint.engine"]
    # function-level imports count: the engine imports the registry inside a function
    assert "tfpar_lint.registry" in g["tfpar_lint.engine"]


def test_no_import_cycle():
    g = import_graph()
    for a, b in NOT_YET_BROKEN:
        assert b in g.get(a, {}), f"{a} -> {b} is gone: delete it from NOT_YET_BROKEN"
        del g[a][b]
    cycle = find_cycle(g)
    assert cycle is None, "import cycle: " + " -> ".join(
        f"{a} (line {g[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1}, "b": {}}) is None


def test_the_semantic_model_is_below_the_version_logic():
    """``versions`` reads the semantic model (the APIs a module uses tell its TensorFlow); the model
    never asks ``versions`` (no module of ``tfpar_lint.semantic`` imports it, at any level, even for
    type checking), so the two never call each other in a circle."""
    import ast

    for name, (path, _is_pkg) in _modules().items():
        if not name.startswith("tfpar_lint.semantic"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module:
                names = [f"{n.module}.{a.name}" for a in n.names]
            elif isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            else:
                continue
            assert not any(x == "tfpar_lint.versions" or x.startswith("tfpar_lint.versions.") for x in names), \
                f"{name} imports tfpar_lint.versions (line {n.lineno})"
