from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic import CallSite, Module, Scope, Value, arg, keyword

VAR_ATTRS = frozenset({"trainable_variables", "trainable_weights", "variables", "weights"})
Owners = Optional[frozenset]  # origins of the models whose variables a list holds (None: unknown)


def owners(m: Module, expr: Optional[cst.BaseExpression], scope: Scope, order: int, _depth: int = 0) -> Owners:
    """The models (or layers) a variable-list expression takes its variables from."""
    if expr is None or _depth > 8:
        return None
    if isinstance(expr, cst.Attribute) and expr.attr.value in VAR_ATTRS:
        vals = m.infer(expr.value, scope, order)
        if vals and all(v.kind in (api.MODEL, api.LAYER) and v.origin is not None for v in vals) and len(vals) == 1:
            return frozenset({vals[0].origin})
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        a = owners(m, expr.left, scope, order, _depth + 1)
        b = owners(m, expr.right, scope, order, _depth + 1)
        return None if a is None or b is None else a | b
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
        out: frozenset = frozenset()
        for el in expr.elements:
            o = owners(m, el.value, scope, order, _depth + 1)
            if o is None:
                return None
            out |= o
        return out
    if isinstance(expr, cst.Name):
        reaching = m.reaching_exprs(expr, scope, order)
        if not reaching or len(reaching) != 1:
            return None
        e, s, o = reaching[0]
        return owners(m, e, s, o, _depth + 1)
    return None


def grads_and_vars_owners(m: Module, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
                          _depth: int = 0) -> Owners:
    """``zip(grads, model.trainable_variables)`` -> the models of the second argument."""
    if expr is None or _depth > 4:
        return None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "zip" \
            and not m.lookup("zip", scope, order) and len(expr.args) == 2 and not expr.args[1].star:
        return owners(m, expr.args[1].value, scope, order)
    if isinstance(expr, cst.Name):
        reaching = m.reaching_exprs(expr, scope, order)
        if reaching and len(reaching) == 1:
            e, s, o = reaching[0]
            return grads_and_vars_owners(m, e, s, o, _depth + 1)
    return None


def _contains(m: Module, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """The model created by the call ``outer`` may be built from the one created by ``inner``:
    ``inner`` is mentioned in the call's arguments or, for a local factory function, in what it
    returns (directly or through local names)."""
    site = m.site_of_call.get(id(outer)) if isinstance(outer, cst.Call) else None
    if site is None:
        return True  # cannot tell
    work: list[tuple[cst.CSTNode, Scope, int]] = [(a.value, site.scope, site.order) for a in outer.args]
    for fn in m.resolve_function(outer.func, site.scope, site.order):
        work.extend((e, fn.scope, o) for e, o in fn.returns)
    seen: set[int] = set()
    while work and len(seen) < 300:
        node, scope, order = work.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node is inner:
            return True
        if isinstance(node, cst.Name):
            if any(v.origin is inner for v in m.infer(node, scope, order)):
                return True
            for e, s, o in m.reaching_exprs(node, scope, order) or ():
                work.append((e, s, o))
            continue
        for child in node.children:
            work.append((child, scope, order))
    return False


class OptimizerReusedAcrossVariableLists(Rule):
    CODE = "TFP703"
    NAME = "optimizer-reused-across-variable-lists"
    SUMMARY = "one Keras optimizer applied to the variables of two different models (second use raises)"
    FIX_HINT = ("Create one optimizer per model (e.g. `generator_optimizer` and `discriminator_optimizer`), or "
                "build it once for all variables with `optimizer.build(a.trainable_variables + b.trainable_variables)`.")
    DEFAULT_ENABLED = True
    SEVERITY = "error"
    PROBE = "execution"
    MARKERS = (("optimizers",), ("apply_gradients", "apply(", "minimize", "compile"))
    # the relevance stage (tfpar_lint.relevance): an optimizer used with models' or layers' variables
    NEEDS = (("optimizer",), ("model", "layer"), tuple(f"attr:{x}" for x in ("apply_gradients", "apply", "minimize", "build", "compile")))

    def check(self) -> Iterator[Report]:
        m = self.module
        uses: dict[int, tuple[Value, list[tuple[CallSite, Owners, str]]]] = {}

        def optimizer_of(expr, cs) -> Optional[Value]:
            vals = m.infer_at(expr, cs)
            if not vals or any(v.kind != api.OPTIMIZER or v.origin is not vals[0].origin or v.origin is None
                               for v in vals):
                return None
            v = vals[0]
            if versions.builds_at_first_use(m, v) is False:  # Keras 3, and Keras 2 from TF 2.11 on
                return None
            return v

        for cs, recv, meth in m.method_calls(("apply_gradients", "apply", "minimize", "build", "compile")):
            if meth == "compile":
                opt = optimizer_of(keyword(cs.node, "optimizer") or arg(cs.node, 0), cs)
                if opt is None:
                    continue
                mvals = m.infer_at(recv, cs)
                own: Owners = None
                if len(mvals) == 1 and mvals[0].kind == api.MODEL and mvals[0].origin is not None:
                    own = frozenset({mvals[0].origin})
                uses.setdefault(id(opt.origin), (opt, []))[1].append((cs, own, "compile"))
                continue
            opt = optimizer_of(recv, cs)
            if opt is None:
                continue
            if meth == "apply_gradients":
                own = grads_and_vars_owners(m, arg(cs.node, 0, "grads_and_vars"), cs.scope, cs.order)
            elif meth == "apply":
                own = owners(m, arg(cs.node, 1, "trainable_variables"), cs.scope, cs.order)
            elif meth == "minimize":
                own = owners(m, arg(cs.node, 1, "var_list"), cs.scope, cs.order)
            else:
                own = owners(m, arg(cs.node, 0, "var_list"), cs.scope, cs.order)
            uses.setdefault(id(opt.origin), (opt, []))[1].append((cs, own, meth))
        if not uses:
            return
        for opt, lst in uses.values():
            builds = [u for u in lst if u[2] == "build"]
            ordered = builds + sorted((u for u in lst if u[2] != "build"), key=lambda u: u[0].order)
            first_cs, first_own, first_meth = ordered[0]
            if first_own is None:
                continue
            for cs, own, meth in ordered[1:]:
                if own is None or own <= first_own:
                    continue
                new = [o for o in own - first_own
                       if not any(_contains(m, f, o) or _contains(m, o, f)
                                  for f in first_own)]
                if not new:
                    continue
                if versions.builds_at_first_use(m, opt) is None:  # no version stated: held back
                    versions.withhold(m, self.CODE)
                    break
                flavor = versions.keras_flavor(m, opt)
                err = ("`ValueError: Unknown variable: ... This optimizer can only be called for the variables it "
                       "was originally built with`" if flavor == "keras" else
                       "`KeyError: 'The optimizer cannot recognize variable ...'`")
                how = {"compile": "is compiled with", "build": "is built for"}.get(first_meth, "is first applied to")
                yield Report(
                    cs.node,
                    f"the optimizer `{m.code(opt.origin)}` {how} other variables (line {{line}}) and is used here "
                    f"for a different model's variables: Keras optimizers build their state for the first variable "
                    f"list, so this raises {err}; use one optimizer per model{versions.note(m, opt)}",
                    {"optimizer": m.code(opt.origin)},
                    related=first_cs.node,
                )
                break
