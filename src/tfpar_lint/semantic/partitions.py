"""Who runs a piece of input code, and how much of the data each runner holds (TFP202, TFP203).

* **Unit tests.**  Code in a unit test runs in the test runner's one process: a ``TPUStrategy``
  there is the one host's TPU (nothing to shard between hosts), and a test that gives every
  replica the same batch does so to compare the replicas.  A unit test is a method of a class
  derived (here, or through the module's own classes) from an imported ``TestCase`` (unittest,
  absltest, ``tf.test``, parameterized, Keras' test cases), or a function pytest collects: a
  ``test_*`` function (at module level or in a ``Test*`` class) of a ``test_*.py`` /
  ``*_test.py`` module.
* **Own partitions.**  A dataset function whose data each process already holds alone: it reads
  an API that returns the calling process's shard (Ray Train's ``get_dataset_shard``), or a value
  its process was started with, where the launches pass each process a different part (Ray actors
  and tasks started with ``.remote(parts[i])`` in a loop)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.flow import names_read
from tfpar_lint.semantic.model import ClassInfo, FunctionInfo, Scope
from tfpar_lint.semantic.nodes import call_method
from tfpar_lint.semantic.walk import contains

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

_MAX_DEPTH = 3


# ------------------------------------------------------------------ unit tests
def _test_class(m: "Module", cls: ClassInfo, depth: int = 0) -> bool:
    if depth > 8:
        return False
    scope = cls.scope.parent or m.scope
    for base in cls.bases:
        q, raw = m.qualified_name(base, scope, 10**9)
        if q in api.TEST_CASES or (raw or q).rsplit(".", 1)[-1] == "TestCase" and (raw or q).count("."):
            return True
        for v in m.infer(base, scope, 10**9):
            if v.kind == api.CLASS and isinstance(v.info, ClassInfo) and v.info is not cls \
                    and _test_class(m, v.info, depth + 1):
                return True
    return False


def _pytest_module(path: str) -> bool:
    name = os.path.basename(path or "")
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def in_unit_test(m: "Module", scope: Scope) -> bool:
    """The code at ``scope`` runs in a unit test (see the module's docstring)."""
    memo = m.rule_memo.setdefault("unit_tests", {})
    fns = m.enclosing_functions(scope)
    for fn in fns:
        got = memo.get(id(fn))
        if got is None:
            got = memo[id(fn)] = _is_test(m, fn)
        if got:
            return True
    return False


def unit_test_functions(m: "Module") -> list[FunctionInfo]:
    """The module's functions that are unit tests, or methods of a unit-test class."""
    memo = m.rule_memo.setdefault("unit_tests", {})
    out = []
    for fn in m.functions:
        got = memo.get(id(fn))
        if got is None:
            got = memo[id(fn)] = _is_test(m, fn)
        if got:
            out.append(fn)
    return out


def in_unit_test_node(m: "Module", node: cst.CSTNode) -> bool:
    """``node`` lies in a unit test (a function of :func:`unit_test_functions`)."""
    return any(contains(fn.node, node) for fn in unit_test_functions(m))


def _is_test(m: "Module", fn: FunctionInfo) -> bool:
    if fn.cls is not None and _test_class(m, fn.cls):
        return True
    if not fn.name.startswith("test") or not _pytest_module(m.path):
        return False
    return fn.cls is None or fn.cls.name.startswith("Test")


# ------------------------------------------------------------------ own partitions
def own_partition(m: "Module", fn: FunctionInfo) -> bool:
    """The dataset function ``fn`` (or a local function it calls) reads data that its process
    alone holds: the result of an API that gives the calling process its shard, or what its process
    was started with, each launch passing another part."""
    seen: set[int] = set()
    work = [(fn, 0)]
    while work:
        f, depth = work.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for r in m.function_refs(f) + m.function_attr_refs(f):
            if _per_process(m, r.node, r.scope, r.order):
                return True
        if depth < _MAX_DEPTH:
            for cs in m.calls_within(f):
                for callee in m.callees(cs):
                    work.append((callee, depth + 1))
    return False


def _per_process(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
    """``expr`` holds the calling process's own shard, or a per-launch argument of its process."""
    for b in _bindings_of(m, expr, scope, order):
        if b.kind == "param" and b.func is not None and _launched_with_parts(m, b.func, b.node):
            return True
        if b.kind in ("assign", "annassign") and b.value is not None:
            if _shard_api(m, b.value, b.scope, b.order):
                return True
            if isinstance(b.value, cst.Name):  # self.files = files
                for b2 in m.lookup(b.value.value, b.scope, b.order):
                    if b2.kind == "param" and b2.func is not None and _launched_with_parts(m, b2.func, b2.node):
                        return True
    return False


def _bindings_of(m: "Module", expr: cst.BaseExpression, scope: Scope, order: int) -> list:
    if isinstance(expr, cst.Name):
        return m.lookup(expr.value, scope, order)
    if isinstance(expr, cst.Attribute):
        got = m.self_attr_bindings(expr, scope)
        return list(got or ())
    return []


def _shard_api(m: "Module", e: cst.BaseExpression, scope: Scope, order: int) -> bool:
    """A call of an API that returns the calling process's shard (``train.get_dataset_shard(...)``),
    or a method chained on one (``.to_tf(...)``)."""
    while isinstance(e, cst.Call):
        q, _ = m.qualified_name(e.func, scope, order)
        if q in api.PROCESS_SHARD_APIS:
            return True
        cm = call_method(e)
        if cm is None:
            return False
        e = cm[0]
    return False


def _launched_with_parts(m: "Module", fn: FunctionInfo, param: cst.CSTNode) -> bool:
    """``fn`` (a function, or the constructor of a class) is started as a process of its own
    (``X.remote(...)`` / ``X.options(...).remote(...)`` of a ``ray.remote`` class or function) in a
    loop, each launch passing ``param`` a value that reads the loop's target (``parts[i]``)."""
    target: Optional[object] = fn.cls if fn.name == "__init__" and fn.cls is not None else fn
    decorated = fn.cls.node.decorators if target is fn.cls else getattr(fn.node, "decorators", ())
    if not any(m.qualified_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator,
                                fn.parent, fn.order)[0] in api.PROCESS_LAUNCH_DECORATORS for d in decorated):
        return False
    params = [p for p in fn.params if not p.star]
    if fn.cls is not None and params:
        params = params[1:]  # self
    idx = next((i for i, p in enumerate(params) if p is param), None)
    if idx is None:
        return False
    name = params[idx].name.value
    for cs in m.calls:
        cm = call_method(cs.node)
        if cm is None or cm[1] != "remote" or not cs.loops:
            continue
        recv = cm[0]
        inner = call_method(recv) if isinstance(recv, cst.Call) else None
        if inner is not None and inner[1] == "options":
            recv = inner[0]
        if not any(v.info is target for v in m.infer(recv, cs.scope, cs.order)):
            continue
        a = next((x.value for x in cs.node.args if x.keyword is not None and x.keyword.value == name), None)
        positional = [x for x in cs.node.args if x.keyword is None and not x.star]
        if a is None and idx < len(positional):
            a = positional[idx].value
        if a is not None and _reads_loop_target(m, a, cs.scope, cs.order):
            return True
    return False


def _reads_loop_target(m: "Module", e: cst.BaseExpression, scope: Scope, order: int) -> bool:
    for n in names_read(e):
        if any(b.kind in ("for", "comp") for b in m.lookup(n.value, scope, order)):
            return True
    return False
