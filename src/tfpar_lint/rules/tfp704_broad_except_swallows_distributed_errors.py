from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import STRATEGY_MARKERS, Report, Rule
from tfpar_lint.semantic import CallSite, FunctionInfo, Module, call_method

BROAD = ("Exception", "BaseException", "RuntimeError")
_EXITS = frozenset({"sys.exit", "os._exit", "os.abort", "absl.logging.fatal", "absl.app.UsageError"})


def broad_handler(m: Module, h: cst.ExceptHandler, site: CallSite) -> Optional[str]:
    """``except:`` / ``except Exception`` / ``except RuntimeError`` (alone or in a tuple), as written."""
    if h.type is None:
        return "except:"
    types = [e.value for e in h.type.elements] if isinstance(h.type, cst.Tuple) else [h.type]
    for t in types:
        if isinstance(t, cst.Name) and t.value in BROAD and not m.lookup(t.value, site.scope, site.order):
            return f"except {m.code(h.type)}"
    return None


def _leaves_on_success(t: cst.Try) -> bool:
    """The ``try`` body leaves its loop when it works (``break`` / ``return`` outside nested
    loops and functions): the loop around it is a retry loop, not a loop over the data."""
    found = False

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_For(self, node: cst.For) -> bool:
            return False

        def visit_While(self, node: cst.While) -> bool:
            return False

        def visit_Break(self, node: cst.Break) -> None:
            nonlocal found
            found = True

        def visit_Return(self, node: cst.Return) -> None:
            nonlocal found
            found = True

    t.body.visit(V())
    return found


def handler_leaves(m: Module, h: cst.ExceptHandler, fn_node: cst.CSTNode, site: CallSite,
                   try_node: Optional[cst.Try] = None) -> bool:
    """The handler re-raises, retries (``continue`` in a loop the ``try`` body leaves on success)
    or ends the program; or the exception it binds is raised later in the same function.  A
    ``continue`` in a loop over the data skips the failed step and goes on: not leaving."""
    found = False
    retry = try_node is None or _leaves_on_success(try_node)
    exc_name = h.name.name.value if h.name is not None and isinstance(h.name.name, cst.Name) else None

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Raise(self, node: cst.Raise) -> None:
            nonlocal found
            found = True

        def visit_Continue(self, node: cst.Continue) -> None:
            nonlocal found
            found = found or retry

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            q, _ = m.qualified_name(node.func, site.scope, 10**9)
            if q in _EXITS or (isinstance(node.func, cst.Name) and node.func.value in ("exit", "quit")):
                found = True

    h.body.visit(V())
    if found or exc_name is None:
        return found
    names = {exc_name}

    class Saved(cst.CSTVisitor):  # `error = e` keeps the exception for later
        def visit_Assign(self, node: cst.Assign) -> None:
            if isinstance(node.value, cst.Name) and node.value.value == exc_name:
                names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))

    h.body.visit(Saved())

    class Later(cst.CSTVisitor):
        def visit_Raise(self, node: cst.Raise) -> None:
            nonlocal found
            if isinstance(node.exc, cst.Name) and node.exc.value in names:
                found = True

    fn_node.visit(Later())
    return found


def training_calls(m: Module) -> Iterator[tuple[CallSite, str]]:
    """``strategy.run(...)`` and ``model.fit(...)`` of a model created or fitted under a strategy scope."""
    for cs in m.calls:
        cm = call_method(cs.node)
        if cm is None:
            continue
        recv, meth = cm
        if meth in api.RUN_METHODS:
            if m.strategies(recv, cs):
                yield cs, f"{m.code(recv)}.{meth}"
        elif meth == "fit":
            vals = m.infer_at(recv, cs)
            if not vals or any(v.kind != api.MODEL for v in vals):
                continue
            known, _ = m.scope_strategies(cs)
            if known or any(v.site is not None and m.scope_strategies(v.site)[0] for v in vals):
                yield cs, f"{m.code(recv)}.fit"


def enclosing_trys(m: Module, cs: CallSite, depth: int = 0, seen: Optional[set] = None, looped: bool = False
                   ) -> Iterator[tuple[cst.Try, CallSite, bool]]:
    """Try statements whose body runs ``cs``: in its function, then around the calls of that
    function (when it is only called directly), innermost first; with whether a loop on the
    way repeats ``cs`` (a training loop rather than one call)."""
    seen = seen if seen is not None else set()
    looped = looped or cs.loops > 0
    for t in reversed(cs.trys):
        yield t, cs, looped
    fn: Optional[FunctionInfo] = cs.func
    if fn is None or depth > 5 or id(fn) in seen or m.is_passed_around(fn):
        return
    seen.add(id(fn))
    for caller in m.callers(fn):
        yield from enclosing_trys(m, caller, depth + 1, seen, looped)


class BroadExceptSwallowsDistributedErrors(Rule):
    CODE = "TFP704"
    NAME = "broad-except-swallows-distributed-errors"
    SUMMARY = "broad `except` around distributed training that neither re-raises nor exits"
    FIX_HINT = ("Catch only what you handle (e.g. `tf.errors.UnavailableError` to restore and retry), or log and "
                "`raise` so that the worker fails and the job can be restarted.")
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "execution"
    MARKERS = (STRATEGY_MARKERS, ("except",), (".run(", "fit(", "experimental_run"))
    # the relevance stage (tfpar_lint.relevance): strategy.run, or fit under a scope
    NEEDS = (("strategy",), ("replica_run", "scope"))

    def check(self) -> Iterator[Report]:
        m = self.module
        done: set[int] = set()
        for cs, what in training_calls(m):
            for t, at, looped in enclosing_trys(m, cs):
                if not looped and not what.endswith(".fit"):
                    continue  # one `strategy.run` call (a probe or a demo), not a training loop
                for h in t.handlers:
                    if id(h) in done:
                        continue
                    spelled = broad_handler(m, h, at)
                    if spelled is None:
                        continue
                    fn_node = at.func.node if at.func is not None else m.tree
                    if handler_leaves(m, h, fn_node, at, t):
                        continue
                    done.add(id(h))
                    how = f"`{what}(...)`" if at is cs else f"`{m.code(at.node)}`, which runs `{what}(...)`"
                    yield Report(
                        h,
                        f"`{spelled}` around distributed training ({how}, line {{line}}) neither "
                        f"re-raises nor exits: a lost worker (`tf.errors.UnavailableError`), a collective error or "
                        f"a `RuntimeError` is swallowed and the program carries on as if training had finished; "
                        f"catch what you handle, or log and `raise`",
                        {"handler": spelled, "training": what},
                        related=at.node,
                    )
                # the innermost try that handles broadly decides; outer ones are not reached
                if any(broad_handler(m, h, at) for h in t.handlers):
                    break
