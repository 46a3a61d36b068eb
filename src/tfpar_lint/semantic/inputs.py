"""Input that reaches replicas: told apart from what every replica should get on purpose (a
learning rate, a step number, a config) by kind and use, never by name.

Input is distributed only when a distribution API made it (``experimental_distribute_dataset``,
``distribute_datasets_from_function``, ``experimental_distribute_values_from_function``, the
coordinator's per-worker datasets: values of kind ``DIST_VALUES``).  Anything else that a replica
function feeds to a model is the same on every replica:

* a batch drawn (``next()``, a ``for`` target) from an object no distribution API made and that
  was not made with the strategy's help (a Keras directory iterator, a generator, an array, a
  builder's result; not a parameter from unseen callers, which may be a distributed dataset);
* data the replica function reads from outside it (a closure, a global, ``self``): an array a
  data library made (``np.load``, ``pd.read_csv``...), an element of a dataset or a batch.

"Fed to a model" means passed (directly, inside a list or tuple, or through a name unpacked or
indexed from it) to a call of a Keras model or layer: the model's forward pass."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.flow import names_read
from tfpar_lint.semantic.kinds import Kinds
from tfpar_lint.semantic.model import CallSite, FunctionInfo, Value

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

_FORWARD = (api.MODEL, api.LAYER)


class Inputs:
    def __init__(self, m: "Module") -> None:
        self.m = m

    def made_with_strategy(self, v: Value) -> bool:
        """The object ``v`` was drawn from (following ``source``) was made by a call handed a
        strategy (``make_dist_dataset(strategy)``, ``strategy.something(...)``): it may be
        distributed."""
        seen = 0
        while v is not None and seen < 20:
            seen += 1
            o = v.origin
            if isinstance(o, cst.Call):
                site = v.site or self.m.site_of_call.get(id(o))
                if site is not None:
                    owner = site.scope.module or self.m
                    parts: list[cst.BaseExpression] = [a.value for a in o.args if not a.star]
                    if isinstance(o.func, cst.Attribute):
                        parts.append(o.func.value)
                    for e in parts:
                        if any(x.kind in (api.STRATEGY, api.DIST_DATASET, api.DIST_ITERATOR, api.DIST_VALUES)
                               for x in owner.infer(e, site.scope, site.order)):
                            return True
            v = v.source
        return False

    def forward_calls(self, fn: FunctionInfo) -> Iterator[CallSite]:
        """Calls in ``fn`` (and the functions nested in it) of a Keras model or layer (also its own
        ``call`` method: ``self.call(x)`` in a model's method)."""
        for cs in self.m.calls_within(fn):
            f = cs.node.func
            if isinstance(f, (cst.Name, cst.Attribute)):
                vals = self.m.infer(f, cs.scope, cs.order)
                if vals and any(v.kind in _FORWARD for v in vals):
                    yield cs
                elif vals and isinstance(f, cst.Attribute) and f.attr.value == "call" and all(
                        v.kind == api.FUNCTION and isinstance(v.info, FunctionInfo) and v.info.cls is not None
                        and self.m.class_kind(v.info.cls) in _FORWARD for v in vals):
                    yield cs

    def feeds_model(self, fn: FunctionInfo, param: str) -> Optional[CallSite]:
        """The model or layer call in ``fn`` that gets the parameter ``param``, or a name
        unpacked, indexed or computed from it (``images, labels = inputs``; ``x = inputs[0]``;
        ``features, labels = prepare(inputs)``)."""
        names = {param}
        # names unpacked, indexed or computed from it (``features, labels = prepare(inputs)``), in
        # the order the function binds them
        binds = sorted((b for b_list in fn.scope.bindings.values() for b in b_list
                        if b.kind in ("assign", "annassign") and b.value is not None), key=lambda b: b.order)
        for b in binds:
            if any(n.value in names for n in names_read(b.value)):
                names.add(b.name)
        for cs in self.forward_calls(fn):
            for a in cs.node.args:
                if any(n.value in names for n in names_read(a.value)):
                    return cs
        return None

    def captured_data(self, fn: FunctionInfo) -> Optional[tuple[CallSite, cst.BaseExpression, Value]]:
        """A model or layer call in ``fn`` fed data that ``fn`` reads from outside itself (a
        closure, a global, ``self``): (the call, the expression, the data's value)."""
        for cs in self.forward_calls(fn):
            for a in cs.node.args:
                if a.keyword is not None:
                    continue
                items = [el.value for el in a.value.elements] if isinstance(a.value, (cst.List, cst.Tuple)) \
                    else [a.value]
                for e in items:
                    for v in self.m.infer(e, cs.scope, cs.order):
                        if self._outside_data(v, fn):
                            return cs, e, v
        return None

    def _outside_data(self, v: Value, fn: FunctionInfo) -> bool:
        if v.origin is None or Kinds.opaque(v) or self.m.created_within(v.origin, fn):
            return False
        if v.site is not None and any(f is fn for f in self.m.enclosing_functions(v.site.scope)):
            return False  # made by fn's own code (an unpacking target inside it)
        if v.kind in (api.ELEMENT, api.BATCH):
            return v.kind == api.ELEMENT or not self.made_with_strategy(v)
        return Kinds.is_array(v)
