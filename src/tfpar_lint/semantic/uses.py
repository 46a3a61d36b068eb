"""Kinds from use: what an object made by code the analysis cannot see (a third-party factory, a
project helper beyond reach, ``models.__dict__[name](...)``, one item of an unknown call's tuple)
must be, judged by what the module does with it.

* a strategy: its ``scope()`` is taken, it distributes datasets or values
  (``experimental_distribute_dataset``...), it runs a local function with arguments
  (``run(fn, args=...)``, ``experimental_run_v2``, ``extended.call_for_each_replica``), or it
  reduces with a ``tf.distribute.ReduceOp``;
* a Keras model: ``compile``, ``fit``, ``fit_generator`` or ``train_on_batch`` is called on it
  (``fit`` of an object a known non-Keras library made, such as a scikit-learn estimator, does not
  count);
* an optimizer: ``apply_gradients`` is called on it, or it is given to ``compile(optimizer=...)``.

Only values whose kind inference left unknown, that have an origin (the call, or the unpacking
target, that made them) and that are not instances of the module's own classes are judged; a
value used as two different kinds stays unknown.  Never a name: only uses.

The index is built once per module, the first time a value is asked for: the receivers of those
uses are inferred then (with no refinement while the index is built), and the inference memo is
cleared after, so that values derived from a refined one (the dataset a strategy distributes) are
inferred again with it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, ClassInfo, FunctionInfo, Value
from tfpar_lint.semantic.nodes import arg, call_method, keyword
from tfpar_lint.semantic.values import open_questions

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

_CONFLICT = "<conflict>"
# ``fit`` of an object these libraries made is not a Keras model's
NOT_KERAS_FIT = frozenset({"sklearn", "xgboost", "lightgbm", "catboost", "statsmodels", "scipy", "numpy",
                           "pandas", "torch", "joblib", "prophet", "gensim", "umap", "hdbscan", "cuml"})
_STRATEGY_METHODS = (api.DISTRIBUTE_DATASET_METHODS | api.DISTRIBUTE_FN_METHODS | api.DISTRIBUTE_VALUES_METHODS
                     | {"experimental_run_v2"})
_MODEL_METHODS = frozenset({"compile", "fit", "fit_generator", "train_on_batch"})


class Uses:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._index: Optional[dict[int, str]] = None
        self.building = False
        # the index is built for the module being linted; a project module read only to answer
        # another file's questions keeps none (building each in turn cascaded over the project)
        self.enabled = True

    def ready(self) -> bool:
        return self._index is not None or not self.enabled

    def build(self) -> None:
        """Infer the receivers of the telling uses and file their unknown origins by kind.  Only
        between questions (none open, in any module): built in the middle of one, the inference
        it runs would re-enter half-computed tables; until then the module's values are not
        refined."""
        if self._index is not None or self.building or not self.enabled or open_questions():
            return
        self.building = True
        index: dict[int, str] = {}
        try:
            for expr, cs, kind, meth in self._telling_uses():
                for v in self.m.infer(expr, cs.scope, cs.order):
                    if not _judged(v):
                        continue
                    if isinstance(v.info, ClassInfo) and meth and self.m.values.class_member(v.info, meth) is not None:
                        continue  # the class's own method (a trainer's ``fit``), not a Keras one it inherits
                    if kind == api.MODEL and (v.qname.split(".", 1)[0] in NOT_KERAS_FIT):
                        continue
                    got = index.get(id(v.origin))
                    index[id(v.origin)] = kind if got in (None, kind) else _CONFLICT
        finally:
            self.building = False
            self._index = index
        # answers given while the index was built may hold values derived from ones it now
        # refines (the dataset an unrefined strategy distributes); the project's other modules
        # refine this module's values as they return them (see refine), their memos stay
        self.m.values.forget()

    def _telling_uses(self) -> Iterator[tuple[cst.BaseExpression, CallSite, str, str]]:
        """(expression, where, the kind it tells, the method called on it or "")"""
        for cs in self.m.calls:
            cm = call_method(cs.node)
            if cm is None:
                continue
            recv, meth = cm
            if meth in _STRATEGY_METHODS:
                yield recv, cs, api.STRATEGY, meth
            elif meth == "call_for_each_replica" and isinstance(recv, cst.Attribute) and recv.attr.value == "extended":
                yield recv.value, cs, api.STRATEGY, meth
            elif meth == "scope" and not cs.node.args:
                yield recv, cs, api.STRATEGY, meth
            elif meth == "run" and (keyword(cs.node, "args") is not None or keyword(cs.node, "kwargs") is not None) \
                    and self.m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order):
                yield recv, cs, api.STRATEGY, meth
            elif meth == "reduce" and cs.node.args:
                q, _ = self.m.qualified_name(cs.node.args[0].value, cs.scope, cs.order)
                if q.startswith("tensorflow.distribute.ReduceOp."):
                    yield recv, cs, api.STRATEGY, meth
            elif meth in _MODEL_METHODS:
                yield recv, cs, api.MODEL, meth
                if meth == "compile":
                    opt = keyword(cs.node, "optimizer") or arg(cs.node, 0)
                    if opt is not None and not isinstance(opt, (cst.SimpleString, cst.ConcatenatedString)):
                        yield opt, cs, api.OPTIMIZER, ""
            elif meth == "apply_gradients":
                yield recv, cs, api.OPTIMIZER, meth

    def kind_of(self, v: Value) -> Optional[str]:
        """The kind ``v``'s uses give it (only for an unknown value with an origin)."""
        if self._index is None or v.origin is None:
            return None
        k = self._index.get(id(v.origin))
        return k if k not in (None, _CONFLICT) else None

    def refine(self, vals: list[Value]) -> list[Value]:
        """``vals`` with each unknown value that its uses (in this module or the one that made
        it) give a kind turned into a value of that kind."""
        if self.building:
            return vals
        out = None
        for i, v in enumerate(vals):
            if not _judged(v):
                continue
            k = self.kind_of(v)
            owner = v.site.scope.module if v.site is not None else None
            if k is None and owner is not None and owner is not self.m:
                k = owner.uses.kind_of(v)  # its uses there, when that module was linted
            if k is None:
                continue
            if out is None:
                out = list(vals)
            out[i] = Value(k, v.qname, origin=v.origin, site=v.site, raw_qname=v.raw_qname, info=v.info,
                           source=v.source)
        return vals if out is None else out


def _judged(v: Value) -> bool:
    """An unknown value with an origin that is not a function: its uses may tell its kind."""
    return v.kind == api.UNKNOWN and v.origin is not None and not isinstance(v.info, FunctionInfo)
