"""Keras optimizers as the distribution rules need them: which ones create slot variables, what
``compile`` gets as its optimizer, and whether an optimizer object is built before its first step.

Keras 3 creates an optimizer's variables (its ``iterations`` counter, learning rate and, for
optimizers with state, one slot per model variable) when it is built: at ``compile`` for a name
(``optimizer="adam"``), at ``optimizer.build(vars)``, or lazily at the first ``apply_gradients``.
Whatever strategy is current at that moment owns them.  Measured on TensorFlow 2.21 / Keras 3 with
two logical CPUs (rules/TFP110.md, rules/TFP112.md): Adam, RMSprop and the Keras 3 default
(``compile()`` without ``optimizer=`` is RMSprop) fail; plain SGD, which has no slots, does not.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, Value
from tfpar_lint.semantic.nodes import arg, keyword, literal_str

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

# optimizer names ``compile`` accepts whose optimizer keeps per-variable state (slots)
SLOT_OPTIMIZER_NAMES = frozenset({"adam", "adamw", "adamax", "nadam", "rmsprop", "adagrad", "adadelta", "ftrl",
                                  "lion", "lamb", "adafactor", "loss_scale_optimizer"})
# Keras 3 ``Model.compile(optimizer="rmsprop", ...)``: the default
KERAS3_DEFAULT_OPTIMIZER = "rmsprop"
# optimizer classes (last part of the canonical name) without slot variables at their defaults
SLOTLESS_CLASSES = frozenset({"SGD"})


def compile_optimizer(m: "Module", site: CallSite) -> tuple[str, Optional[str], Optional[cst.BaseExpression]]:
    """What ``model.compile(...)`` at ``site`` gets as its optimizer: ("name", "adam", expr),
    ("default", "rmsprop", None) when not given, ("object", None, expr) for anything else,
    ("unknown", None, None) when ``**kwargs`` may carry it."""
    call = site.node
    expr = arg(call, 0, "optimizer")
    if expr is None:
        if any(a.star for a in call.args):
            return "unknown", None, None
        return "default", KERAS3_DEFAULT_OPTIMIZER, None
    text = literal_str(expr) if isinstance(expr, cst.SimpleString) else None
    if text is None and isinstance(expr, cst.Name):
        consts = m.constant_exprs(expr, site.scope, site.order)
        texts = {literal_str(c) if isinstance(c, cst.SimpleString) else None for c in consts or ()}
        if len(texts) == 1:
            text = texts.pop()
    if text is not None:
        return "name", text.lower(), expr
    return "object", None, expr


def has_slots_by_name(name: str) -> bool:
    return name.lower() in SLOT_OPTIMIZER_NAMES


def has_slots(v: Value) -> Optional[bool]:
    """Whether an optimizer object keeps slot variables: False for plain SGD (no ``momentum=``
    or ``momentum=0``), True for the others, None when unknown."""
    if v.kind != api.OPTIMIZER or not v.qname:
        return None
    last = v.qname.rsplit(".", 1)[-1]
    if last in SLOTLESS_CLASSES:
        call = v.origin
        if not isinstance(call, cst.Call):
            return None
        mom = keyword(call, "momentum")
        if mom is None:
            mom = arg(call, 1)
        if mom is None:
            return False
        if isinstance(mom, (cst.Integer, cst.Float)) and float(mom.value) == 0.0:
            return False
        return True
    return True


SHADOW_CLASSES = frozenset({"tensorflow.train.ExponentialMovingAverage"})


def built_before_use(m: "Module", v: Value) -> bool:
    """Something builds the optimizer ``v`` outside its first step: ``opt.build(...)`` anywhere in the
    module, or ``model.compile(optimizer=opt)`` (Keras then builds it in ``fit``), or a checkpoint
    restore that may create its variables."""
    memo = m.rule_memo.setdefault("optimizers_built", {})
    key = id(v.origin)
    if key in memo:
        return memo[key]
    got = False
    for cs, recv, meth in m.method_calls(("build", "compile", "restore", "read")):
        if meth == "build":
            vals = m.infer_at(recv, cs)
            if any(x.origin is v.origin for x in vals):
                got = True
                break
        elif meth == "compile":
            opt = arg(cs.node, 0, "optimizer")
            if opt is not None and any(x.origin is v.origin for x in m.infer_at(opt, cs)):
                got = True
                break
        else:  # checkpoint.restore(...): a deferred restore may create the slots
            vals = m.infer_at(recv, cs)
            if vals and all(x.kind == api.CHECKPOINT for x in vals):
                got = True
                break
    memo[key] = got
    return got
