"""The iterative walker (semantic.walk.TaskVisitor) visits exactly like libcst's own recursive
traversal: the semantic model built both ways is the same."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import libcst as cst
import pytest

from tfpar_lint import semantic
from tfpar_lint.semantic import builder
from tfpar_lint.semantic.walk import TaskVisitor

ROOT = Path(__file__).resolve().parents[1]

# Many constructs in one module (each kind of node the builder has a method for,
# and the places names hide in: decorators, defaults, annotations, keywords,
# f-string format specs, match patterns, except handlers, ...).
KITCHEN_SINK = '''\
"""Docstring."""
from __future__ import annotations
import os, sys as system
from a.b import (c as d, e)
from . import rel
from .. import *
import tensorflow as tf
X: int = 1
Y: "tf.Variable"
x, *ys = 1, 2, 3
[p, (q, r)] = [1, (2, 3)]
z = w = tf.constant(1)
z += 1
obj.attr = obj.attr2 = 3
seq[0] = seq[1:2]
del seq[0]
print(f"{x!r:>{width}} {y=} {z:{spec}}", end="")
lam = lambda a, b=z, *c, d=1, **e: (a, b, c, d, e)
nums = [i * 2 for i in range(3) if i for j in range(i)]
gen = (k for k in nums)
st = {k for k in nums}
dc = {k: v for k, v in zip(nums, nums)}
rep = [z] * 3 + 2 * (z,)
if (n := len(nums)) > 1 and not x or y:
    pass
elif x:
    ...
else:
    pass
while x:
    break
else:
    pass
for i, (a, b) in enumerate(zip(nums, nums)):
    continue
try:
    pass
except (ValueError, TypeError) as exc:
    raise RuntimeError("x") from exc
else:
    pass
finally:
    pass
try:
    pass
except* OSError as eg:
    pass
with open("f") as fh, tf.device("/cpu:0"):
    data = fh.read()
assert x, "msg"
global_var = 0


@decorator(arg=z)
@other.decorator
class C(Base, metaclass=Meta):
    """Class doc."""
    attr: int = 0

    def __init__(self, a: int = X, *args: str, k: "T" = None, **kw) -> None:
        global global_var
        self.a = a
        self.b: int = a

        def inner(q=self.a):
            nonlocal a
            a = q
            return a
        return None

    @staticmethod
    async def coro(x, /, y, *, z):
        async with lock:
            await thing(x)
        async for item in aiter_:
            yield item
        return [await f() for f in fs]


match command.split():
    case [action]:
        pass
    case [action, obj] if obj:
        pass
    case Point(x=0, y=yy) | {"k": kk, **rest}:
        pass
    case [1, 2, *others] as whole:
        pass
    case str() | None:
        pass
    case _:
        pass
'''
PY312 = '''\
type Alias = list[int]
def generic[T](x: T = default) -> T:
    return helper(x)
class Box[T](Base[T]):
    item: T
'''


def _fingerprint(m: semantic.Module) -> list:
    def scope_fp(s: semantic.Scope):
        return (s.kind, id(s.node), sorted((k, [(b.kind, b.order, id(b.node), b.qname, b.path) for b in v])
                                           for k, v in s.bindings.items()), sorted(s.globals), sorted(s.nonlocals))

    out: list = [
        [(c.order, id(c.node), id(c.scope.node), id(c.func.node) if c.func else 0, tuple(map(id, c.withs)),
          tuple((id(a), b) for a, b in c.ifs), tuple(map(id, c.trys)), c.loops, id(c.stmt)) for c in m.calls],
        [(r.order, id(r.node), id(r.scope.node), id(r.func.node) if r.func else 0) for r in m.refs],
        [(f.order, id(f.node), f.name, [(id(e), o) for e, o in f.returns], [c.order for c in f.calls],
          scope_fp(f.scope)) for f in m.functions],
        [(c.name, id(c.node), sorted((k, [b.order for b in v]) for k, v in c.attrs.items()), sorted(c.methods))
         for c in m.classes],
        [(b.name, b.kind, b.order, id(b.node)) for b in m.module_bindings_in_order],
        scope_fp(m.scope),
        sorted(m.site_of_call), sorted(m.function_of_node),
    ]
    def norm(x, depth=0):
        if isinstance(x, cst.CSTNode):
            return id(x)
        if isinstance(x, (semantic.Scope, semantic.FunctionInfo, semantic.ClassInfo)):
            return (type(x).__name__, id(x.node))
        if dataclasses.is_dataclass(x) and depth < 3:  # CallSite, NameRef, Binding, ...: field by field
            return (type(x).__name__,) + tuple(norm(getattr(x, f.name), depth + 1) for f in dataclasses.fields(x))
        if isinstance(x, (tuple, list)):
            return tuple(norm(y, depth) for y in x)
        if isinstance(x, dict):
            return tuple(sorted((repr(k), norm(v, depth)) for k, v in x.items()))
        return x

    for name, value in sorted(vars(m).items()):  # the other per-node tables the builder fills
        if isinstance(value, list) and name not in ("functions", "classes", "calls", "refs",
                                                     "module_bindings_in_order"):
            out.append((name, [norm(item) for item in value]))
    return out


def _both(tree: cst.Module, source: str, monkeypatch) -> tuple[list, list]:
    fast = _fingerprint(semantic.Module(tree, source))
    with monkeypatch.context() as mp:
        # the same builder on libcst's own (recursive) traversal
        mp.setattr(builder.Builder, "walk", lambda self, root: root.visit(self))
        slow = _fingerprint(semantic.Module(tree, source))
    return fast, slow


def test_kitchen_sink_same_model(monkeypatch):
    tree = cst.parse_module(KITCHEN_SINK)
    fast, slow = _both(tree, KITCHEN_SINK, monkeypatch)
    assert fast == slow
    assert fast[0] and fast[1]  # calls and refs were recorded


def test_python312_syntax_same_model(monkeypatch):
    tree = cst.parse_module(PY312)  # the native parser reads 3.12 syntax whatever the running Python
    fast, slow = _both(tree, PY312, monkeypatch)
    assert fast == slow


FILES = sorted((ROOT / "fixtures").rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_same_model_on_real_files(path: Path, monkeypatch):
    source = path.read_text(encoding="utf-8")
    tree = cst.parse_module(source)  # every fixture is valid Python
    fast, slow = _both(tree, source, monkeypatch)
    assert fast == slow


def test_same_model_on_pypi_corpus_files(pypi_corpus, monkeypatch):
    """Real third-party files (the PyPI precision corpus, downloaded at test time), under 40 kB each."""
    paths = sorted(pypi_corpus.root / pkg.folder / rel for pkg, rel in pypi_corpus.files)
    paths = [p for p in paths if p.stat().st_size < 40_000]
    assert len(paths) >= 50
    differ = []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        tree = cst.parse_module(source)
        fast, slow = _both(tree, source, monkeypatch)
        if fast != slow:
            differ.append(str(path.relative_to(pypi_corpus.root)))
    assert not differ, differ


class _Recorder:
    """Records every visit/leave of a few node types, with the visit of If returning False."""

    def visit_Name(self, node):
        self.log.append(("visit", "Name", id(node)))

    def leave_Name(self, node):
        self.log.append(("leave", "Name", id(node)))

    def visit_Call(self, node):
        self.log.append(("visit", "Call", id(node)))

    def leave_Call(self, node):
        self.log.append(("leave", "Call", id(node)))

    def visit_If(self, node):
        self.log.append(("visit", "If", id(node)))
        return False  # children skipped, leave still called

    def leave_If(self, node):
        self.log.append(("leave", "If", id(node)))

    def visit_Integer(self, node):
        self.log.append(("visit", "Integer", id(node)))


class _FastRec(_Recorder, TaskVisitor):
    def __init__(self):
        super().__init__()
        self.log = []


class _SlowRec(_Recorder, cst.CSTVisitor):
    def __init__(self):
        super().__init__()
        self.log = []


def test_visit_and_leave_order_matches_libcst():
    tree = cst.parse_module(KITCHEN_SINK)
    fast, slow = _FastRec(), _SlowRec()
    fast.walk(tree)
    tree.visit(slow)
    assert fast.log == slow.log
    assert {e[1] for e in fast.log} == {"Name", "Call", "If", "Integer"}


def test_attribute_hooks_are_refused():
    class Hooked(TaskVisitor):
        def visit_Call_func(self, node):
            pass

    with pytest.raises(TypeError, match="attribute hooks"):
        Hooked().walk(cst.parse_module("f(x)\n"))


def test_walk_does_not_recurse():
    """Nesting far beyond the Python stack's limit is walked (the builder used to give up at ~490
    terms of ``a + a + ...``)."""
    import sys

    depth = sys.getrecursionlimit() * 3
    sources = ["z = " + " + ".join(["a"] * depth) + "\n",
               "w = " + "lambda: " * 600 + "f(x)\n",
               "def f():\n" + "".join("    " * (i + 1) + "if x:\n" for i in range(90)) + "    " * 91 + "g(y)\n"]
    walked = 0
    for source in sources:
        try:
            tree = cst.parse_module(source)
        except (RecursionError, cst.ParserSyntaxError):
            continue  # libcst itself cannot build this tree here; nothing to walk
        m = semantic.Module(tree, source)
        assert m.calls or m.refs
        walked += 1
    assert walked >= 2  # the first two parse with libcst 1.x


@pytest.mark.parametrize("source", [KITCHEN_SINK, "x = 1\r\ny = (\r\n  2)\r\nz = f(\\\n 3)\n", "a = 1"])
def test_node_positions_match_position_provider(source):
    """engine.node_positions (stops early, skips the regex) gives PositionProvider's ranges."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    from tfpar_lint.engine import node_positions

    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = [n for n in full if isinstance(n, (cst.Call, cst.Name, cst.Assign, cst.SimpleStatementLine,
                                               cst.FunctionDef, cst.ClassDef, cst.Integer))]
    assert nodes
    for wanted in (nodes, nodes[:1], nodes[-1:], nodes[len(nodes) // 2: len(nodes) // 2 + 3]):
        got = node_positions(tree, wanted)
        assert {id(n): got.get(n) for n in wanted} == {id(n): full[n] for n in wanted}
