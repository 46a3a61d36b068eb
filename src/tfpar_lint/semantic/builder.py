"""The one traversal: records scopes, bindings, call sites (with the ``with`` items, ``if``
tests, ``try`` statements and loops around them), stores and name references.

Methods that must order their children (a value before the targets it binds, a function's
decorators outside its scope...) return task lists (see :mod:`.walk`), so nothing recurses."""
from __future__ import annotations

import itertools
from functools import partial
from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from tfpar_lint.semantic.model import Binding, CallSite, ClassInfo, FunctionInfo, NameRef, Scope, StoreSite
from tfpar_lint.semantic.nodes import dotted_name
from tfpar_lint.semantic.walk import TaskVisitor

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

# a + b, a - b, a * b, a / b ... on a name or attribute (recorded for value checks)
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power,
               cst.MatrixMultiply)


class Builder(TaskVisitor):
    def __init__(self, mod: "Module") -> None:
        super().__init__()
        self.m = mod
        self.counter = itertools.count(1)
        self.scope = mod.scope
        self.func: Optional[FunctionInfo] = None
        self.cls: Optional[ClassInfo] = None
        # per-function context stacks (reset when entering a function)
        self.withs: list[cst.WithItem] = []
        self.ifs: list[tuple[cst.If, bool]] = []
        # the alternatives this point is in, for two-path bindings (if_context): the if branches,
        # and a try body (with its else) against its except handlers
        self.branches: list[tuple[int, bool]] = []
        self.trys: list[cst.Try] = []
        self.loops = 0
        self.stack: list[tuple] = []
        self.skip_names: set[int] = set()
        self.stmt: Optional[cst.CSTNode] = None
        self.self_aliases: dict[int, set[str]] = {}  # id(method) -> names bound to its self

    # ---------------------------------------------------------------- utilities
    def _order(self) -> int:
        o = next(self.counter)
        if self.branches:  # the branches this point is in (same function), for two-path bindings
            self.m.if_context[o] = tuple(self.branches)
        return o

    def _bind(self, name: str, kind: str, node: cst.CSTNode, **kw: Any) -> Binding:
        scope = self.scope
        if name in scope.globals:
            scope = self.m.scope
        b = Binding(name=name, kind=kind, scope=scope, order=self._order(), node=node, **kw)
        scope.add(b)
        if kind == "import":
            self.m.imports.append(b)
        if scope is self.m.scope and kind in ("assign", "annassign", "aug", "import", "def", "class", "for", "with"):
            self.m.module_bindings_in_order.append(b)
        return b

    def _bind_target(self, target: cst.BaseExpression, kind: str, node: cst.CSTNode, value, path=()) -> None:
        work = [(target, path)]
        while work:
            target, path = work.pop()
            if isinstance(target, cst.Name):
                self.skip_names.add(id(target))
                self._bind(target.value, kind, node, value=value, path=path)
                method = self._method() if isinstance(value, cst.Name) and not path else None
                if method is not None and method.params and value.value in self._self_names(method):
                    self.self_aliases.setdefault(id(method), set()).add(target.value)  # this = self
            elif isinstance(target, (cst.Tuple, cst.List)):
                for i in reversed(range(len(target.elements))):
                    t = target.elements[i].value
                    if isinstance(t, cst.StarredElement):
                        t = t.value
                    work.append((t, path + (i,)))
            elif isinstance(target, cst.StarredElement):
                work.append((target.value, path + (-1,)))
            elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
                # self.attr = value inside a method (or a function nested in one)
                method = self._method()
                if method is not None and method.params and target.value.value in self._self_names(method):
                    b = Binding(name=target.attr.value, kind=kind, scope=self.scope, order=self._order(),
                                node=node, value=value, path=path, cls=method.cls)
                    method.cls.attrs.setdefault(target.attr.value, []).append(b)

    def _self_names(self, method: FunctionInfo) -> set[str]:
        """The method's ``self`` and the names bound to it so far (``this = self``)."""
        return {method.params[0].name.value} | self.self_aliases.get(id(method), set())

    def _method(self) -> Optional[FunctionInfo]:
        """The innermost enclosing method (a function defined in a class body)."""
        s: Optional[Scope] = self.scope
        while s is not None:
            if s.func is not None and s.func.cls is not None:
                return s.func
            s = s.parent
        return None

    def _push_function(self, node, name: str, params: cst.Parameters, decorators) -> FunctionInfo:
        parent = self.scope
        scope = Scope("lambda" if isinstance(node, cst.Lambda) else "function", node, parent, module=self.m)
        all_params = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
        if isinstance(params.star_arg, cst.Param):
            all_params.append(params.star_arg)
        if params.star_kwarg is not None:
            all_params.append(params.star_kwarg)
        info = FunctionInfo(node=node, name=name, scope=scope, parent=parent,
                            cls=self.cls if parent.kind == "class" else None,
                            decorators=[d.decorator for d in decorators], params=all_params,
                            order=self._order())
        scope.func = info
        self.m.functions.append(info)
        self.m.function_of_node[id(node)] = info
        if info.cls is not None and not isinstance(node, cst.Lambda):
            info.cls.methods[name] = info
        self.stack.append((self.scope, self.func, self.cls, self.withs, self.ifs, self.branches, self.trys, self.loops))
        self.scope = scope
        self.func = info
        if parent.kind == "class":
            self.cls = None
        self.withs, self.ifs, self.branches, self.trys, self.loops = [], [], [], [], 0
        for p in all_params:
            self.skip_names.add(id(p.name))
            ann = p.annotation.annotation if p.annotation is not None else None
            self._bind(p.name.value, "param", p, value=p.default, annotation=ann, func=info)
        return info

    def _pop(self) -> None:
        (self.scope, self.func, self.cls, self.withs, self.ifs, self.branches, self.trys, self.loops) = self.stack.pop()

    def _add_loop(self, n: int) -> None:
        self.loops += n

    # ---------------------------------------------------------------- imports
    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._bind(alias.asname.name.value, "import", alias, qname=full)
            else:
                head = full.split(".", 1)[0]
                self._bind(head, "import", alias, qname=head)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        mod = dotted_name(node.module) if node.module is not None else None
        if node.relative:  # from . import x / from ..pkg import y: the dots stay in the name
            mod = "." * len(node.relative) + (mod or "")
        if isinstance(node.names, cst.ImportStar):
            return False
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            qname = f"{mod}{'' if mod.endswith('.') else '.'}{name}" if mod else ""
            self._bind(local, "import", alias, qname=qname)
        return False

    # ---------------------------------------------------------------- defs
    def visit_FunctionDef(self, node: cst.FunctionDef) -> list:
        pre: list = list(node.decorators) + [node.returns]
        for p in list(node.params.params) + list(node.params.kwonly_params) + list(node.params.posonly_params):
            pre += [p.default, p.annotation]
        return pre + [partial(self._enter_def, node), node.body, self._pop]

    def _enter_def(self, node: cst.FunctionDef) -> None:
        self.skip_names.add(id(node.name))
        b = self._bind(node.name.value, "def", node)
        b.func = self._push_function(node, node.name.value, node.params, node.decorators)

    def visit_Lambda(self, node: cst.Lambda) -> list:
        return [partial(self._enter_lambda, node), node.body, self._pop]

    def _enter_lambda(self, node: cst.Lambda) -> None:
        self._push_function(node, "<lambda>", node.params, ())
        self.func.returns.append((node.body, self._order()))

    def visit_ClassDef(self, node: cst.ClassDef) -> list:
        return list(node.decorators) + list(node.bases) + [partial(self._enter_class, node), node.body, self._pop]

    def _enter_class(self, node: cst.ClassDef) -> None:
        self.skip_names.add(id(node.name))
        scope = Scope("class", node, self.scope, module=self.m)
        info = ClassInfo(node=node, name=node.name.value, scope=scope, bases=[a.value for a in node.bases])
        scope.cls = info
        self._bind(node.name.value, "class", node, cls=info)
        self.m.classes.append(info)
        self.stack.append((self.scope, self.func, self.cls, self.withs, self.ifs, self.branches, self.trys, self.loops))
        self.scope, self.cls = scope, info

    def visit_Return(self, node: cst.Return) -> None:
        if self.func is not None and node.value is not None:
            self.func.returns.append((node.value, self._order()))

    def visit_Global(self, node: cst.Global) -> None:
        for n in node.names:
            self.scope.globals.add(n.name.value)
            self.skip_names.add(id(n.name))

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for n in node.names:
            self.scope.nonlocals.add(n.name.value)
            self.skip_names.add(id(n.name))

    # ---------------------------------------------------------------- bindings
    def visit_SimpleStatementLine(self, node) -> None:
        self.stmt = node

    def visit_Assign(self, node: cst.Assign) -> list:
        # the value is evaluated before the targets are bound
        tasks: list = [node.value]
        for t in node.targets:
            tasks += [partial(self._assign_target, node, t.target), t.target]
        return tasks

    def _assign_target(self, node: cst.Assign, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Attribute):
            self.m.attr_assigns.append((target, node.value, self.scope, self._order()))
        elif isinstance(target, cst.Subscript):
            self._store(node, target, node.value)
        self._bind_target(target, "assign", node, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> list:
        return [node.value, node.annotation, partial(self._annassign_target, node), node.target]

    def _annassign_target(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name):
            self.skip_names.add(id(node.target))
            self._bind(node.target.value, "annassign", node, value=node.value, annotation=node.annotation.annotation)
        else:
            if isinstance(node.target, cst.Subscript):
                self._store(node, node.target, node.value)
            self._bind_target(node.target, "annassign", node, node.value)

    def _store(self, node: cst.CSTNode, target: cst.Subscript, value: Optional[cst.BaseExpression],
               deleted: bool = False) -> None:
        self.m.stores.append(StoreSite(node=node, target=target, value=value, scope=self.scope, func=self.func,
                                       order=self._order(), withs=tuple(self.withs), ifs=tuple(self.ifs),
                                       trys=tuple(self.trys), loops=self.loops, deleted=deleted))

    def visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else None
        for t in [e.value for e in targets] if targets is not None else [node.target]:
            if isinstance(t, cst.Subscript):
                self._store(node, t, None, deleted=True)

    def visit_AugAssign(self, node: cst.AugAssign) -> list:
        # an aug-assigned name is also read
        return [node.value, node.target, partial(self._aug_target, node)]

    def _aug_target(self, node: cst.AugAssign) -> None:
        if self.ifs:
            self.m.ifs_at[id(node)] = tuple(self.ifs)
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, "aug", node, value=None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> list:
        return [node.value, partial(self._walrus_target, node)]

    def _walrus_target(self, node: cst.NamedExpr) -> None:
        if isinstance(node.target, cst.Name):
            self.skip_names.add(id(node.target))
            self._bind(node.target.value, "walrus", node, value=node.value)

    def visit_For(self, node: cst.For) -> list:
        return [node.iter, partial(self._bind_target, node.target, "for", node, node.iter), node.target,
                partial(self._add_loop, 1), node.body, partial(self._add_loop, -1), node.orelse]

    def visit_While(self, node: cst.While) -> list:
        return [node.test, partial(self._add_loop, 1), node.body, partial(self._add_loop, -1), node.orelse]

    def visit_CompFor(self, node: cst.CompFor) -> list:
        return [node.iter, partial(self._bind_target, node.target, "comp", node, node.iter), node.target,
                list(node.ifs), node.inner_for_in]

    def visit_With(self, node: cst.With) -> list:
        tasks: list = []
        for item in node.items:
            self.m.with_items.append((item, self.scope, self._order(), self.func, tuple(self.ifs)))
            tasks.append(item.item)
            if item.asname is not None:
                tasks.append(partial(self._bind_target, item.asname.name, "with", item, item.item))
        return tasks + [partial(self._push_withs, node), node.body, partial(self._pop_withs, node)]

    def _push_withs(self, node: cst.With) -> None:
        self.withs = self.withs + list(node.items)

    def _pop_withs(self, node: cst.With) -> None:
        self.withs = self.withs[: len(self.withs) - len(node.items)]

    def visit_If(self, node: cst.If) -> list:
        tasks: list = [node.test, partial(self._push_if, (node, True)), node.body, self._pop_if]
        if node.orelse is not None:
            tasks += [partial(self._push_if, (node, False)), node.orelse, self._pop_if]
        return tasks

    def _push_if(self, entry: tuple) -> None:
        if entry[1]:  # where the test is read (after its names, before the body): paths.py resolves its names there
            self.m.if_where[id(entry[0])] = (self.scope, self._order(), self.loops)
        self.ifs.append(entry)
        self.branches.append((id(entry[0]), entry[1]))
        self.m.if_nodes[id(entry[0])] = entry[0]

    def _pop_if(self) -> None:
        self.ifs.pop()
        self.branches.pop()

    def visit_Try(self, node: cst.Try) -> list:
        # with handlers, the body (and its else) and the handlers are alternatives for the names
        # they bind: ``try: s = TPUStrategy(r) except ValueError: s = MirroredStrategy()`` leaves
        # either after the statement (each handler a branch of its own inside the handlers' one)
        alt = any(_falls_through(h.body) for h in node.handlers)
        tasks: list = [partial(self._push_try, node)]
        if alt:
            tasks.append(partial(self._push_branch, (id(node), True)))
        tasks += [node.body, self._pop_try]
        if alt:
            tasks.append(self._pop_branch)
        for h in node.handlers:
            tasks += [partial(self._push_branch, (id(node), False)), partial(self._push_branch, (id(h), True))]
            if h.name is not None and isinstance(h.name.name, cst.Name):
                tasks.append(partial(self._bind_handler, h))
            tasks += [h, self._pop_branch, self._pop_branch]
        if alt and node.orelse is not None:  # runs after the body only: the body's branch
            tasks += [partial(self._push_branch, (id(node), True)), node.orelse, self._pop_branch]
        else:
            tasks.append(node.orelse)
        return tasks + [node.finalbody]

    def _push_branch(self, entry: tuple) -> None:
        self.branches.append(entry)

    def _pop_branch(self) -> None:
        self.branches.pop()

    def _push_try(self, node: cst.Try) -> None:
        self.trys.append(node)

    def _pop_try(self) -> None:
        self.trys.pop()

    def _bind_handler(self, h: cst.ExceptHandler) -> None:
        self._bind(h.name.name.value, "except", h)
        self.skip_names.add(id(h.name.name))

    # ---------------------------------------------------------------- uses
    def visit_Call(self, node: cst.Call) -> None:
        site = CallSite(node=node, scope=self.scope, func=self.func, order=self._order(),
                        withs=tuple(self.withs), ifs=tuple(self.ifs), trys=tuple(self.trys),
                        loops=self.loops, stmt=self.stmt)
        self.m.calls.append(site)
        self.m.site_of_call[id(node)] = site
        if self.func is not None:
            self.func.calls.append(site)
        for a in node.args:
            if a.keyword is not None:
                self.skip_names.add(id(a.keyword))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip_names.add(id(node.attr))
        if isinstance(node.value, cst.Name):
            self.m.attr_refs.append(NameRef(node, self.scope, self._order(), self.func))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, (cst.Name, cst.Attribute)):
            self.m.subscripts.append((node, self.scope, self._order()))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, _ARITHMETIC) and (
            isinstance(node.left, (cst.Name, cst.Attribute)) or isinstance(node.right, (cst.Name, cst.Attribute))
        ):
            self.m.arithmetic.append((node, self.scope, self._order()))
            if self.ifs:
                self.m.ifs_at[id(node)] = tuple(self.ifs)
        if isinstance(node.operator, cst.Multiply) and (
            isinstance(node.left, (cst.List, cst.Tuple)) or isinstance(node.right, (cst.List, cst.Tuple))
        ):
            self.m.sequence_repeats.append((node, self.scope, self._order()))

    # a comprehension is a loop: calls in it run once per item
    def visit_ListComp(self, node: cst.ListComp) -> None:
        self.m.comprehensions.append((node, self.scope, self._order()))
        self.loops += 1

    def leave_ListComp(self, node: cst.ListComp) -> None:
        self.loops -= 1

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.m.comprehensions.append((node, self.scope, self._order()))
        self.loops += 1

    def leave_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.loops -= 1

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self.loops += 1

    def leave_SetComp(self, node: cst.SetComp) -> None:
        self.loops -= 1

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self.m.comprehensions.append((node, self.scope, self._order()))
        self.loops += 1

    def leave_DictComp(self, node: cst.DictComp) -> None:
        self.loops -= 1

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        self.m.fstring_exprs.append((node, self.scope, self._order()))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self.skip_names:
            return
        self.m.refs.append(NameRef(node, self.scope, self._order(), self.func))


_NO_RETURN_CALLS = frozenset({"exit", "quit", "sys.exit", "os._exit", "os.abort"})


def _falls_through(body: cst.BaseSuite) -> bool:
    """A handler's block may end normally: its last statement does not raise, return, leave the
    loop or exit the program (then what it binds, or leaves unbound, reaches the code after)."""
    stmts = body.body if isinstance(body, cst.IndentedBlock) else [body]
    if not stmts:
        return True
    last = stmts[-1]
    if isinstance(last, cst.SimpleStatementLine) and last.body:
        small = last.body[-1]
        if isinstance(small, (cst.Raise, cst.Return, cst.Continue, cst.Break)):
            return False
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            f = small.value.func
            name = f.value if isinstance(f, cst.Name) else (
                f"{f.value.value}.{f.attr.value}" if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name)
                else "")
            if name in _NO_RETURN_CALLS:
                return False
    if isinstance(last, cst.SimpleStatementSuite) and last.body:
        return _falls_through(cst.IndentedBlock(body=[cst.SimpleStatementLine(body=last.body)]))
    return True
