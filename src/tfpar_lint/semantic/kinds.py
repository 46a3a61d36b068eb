"""Kinds: what a value is (a strategy, a Keras model, an optimizer, a dataset, a metric, a variable,
a numpy array...), from its origin where the analysis knows it and from how the module uses it
where it does not.  The one place that decides; rules ask it (through value inference, which
refines every answer here, and the predicates below), never a list of their own.

**Identities for what inference cannot follow.**  A name the module never binds (a star import, a
snippet without its imports), an attribute of an object whose class is unknown (``owner.net``,
``self.loader`` set by a base class the module cannot see) and what calling such a thing makes are
values with an identity (:meth:`Kinds.free`, :meth:`Kinds.attribute`), never "no value": their
kind comes from their uses like any other unknown value's.  Such a value may be anything (a
distributed dataset included), so it counts as *opaque*, like a parameter of unseen callers; what
a call of it makes is *made* there, like what a call of an imported function makes.

**Kinds from use.**  An unknown value with an identity gets the kind its uses tell:

* a strategy: its ``scope()`` is taken, it distributes datasets or values
  (``experimental_distribute_dataset``...), it runs a local function with arguments
  (``run(fn, args=...)``, ``experimental_run_v2``, ``extended.call_for_each_replica``), it reduces
  with a ``tf.distribute.ReduceOp``, its ``num_replicas_in_sync`` is read;
* a Keras model: ``compile``, ``fit``, ``fit_generator`` or ``train_on_batch`` is called on it (not
  on an object a known non-Keras library made, such as a scikit-learn estimator), or gradients are
  taken of, applied to or minimized over its ``trainable_variables`` (``tape.gradient(loss,
  net.trainable_variables)``, ``opt.apply_gradients(zip(grads, net.trainable_weights))``,
  ``opt.minimize(loss, var_list=net.trainable_variables)``);
* an optimizer: ``apply_gradients`` or ``get_updates`` is called on it, ``minimize`` over a model's
  variables, it is given to ``compile(optimizer=...)``, or it is called with (gradient, variable)
  pairs (``step(zip(grads, net.trainable_variables))``: a wrapper that applies them);
* a tf.data dataset: ``with_options``, ``batch``, ``shuffle``, ``prefetch``, ``padded_batch``,
  ``interleave`` (with an argument) is called on it, or a strategy distributes it
  (``experimental_distribute_dataset(ds)``); a callable one of whose results is distributed that
  way returns datasets (``loader = Loader(cfg)``: every ``loader("train", n)`` is a dataset);
* a metric: ``update_state`` or ``reset_states`` is called on it (``reset_states`` is a model's too:
  other uses that make it a model win);
* a variable: ``assign_add`` or ``assign_sub`` is called on it.

A value used as two different kinds stays unknown; a local class's own method of the name (a
trainer's ``fit``) tells nothing.  Never a name: only uses.

The index is built once per module, the first time a value is asked for: the receivers of those
uses are inferred then (with no refinement while the index is built), and the inference memo is
cleared after, so that values derived from a refined one (the dataset a strategy distributes) are
inferred again with it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import ATTRIBUTE as ATTRIBUTE_LOST
from tfpar_lint.semantic.model import (CONTAINER, UNBOUND, CallSite, ClassInfo, FunctionInfo, Scope, Value, lost,
                                       open_questions)
from tfpar_lint.semantic.nodes import arg, call_method, keyword

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

# ``Value.info`` of the identities given to what inference cannot follow
FREE = "free"  # a name the module never binds
ATTRIBUTE = "attribute"  # an attribute of an object of unknown class
CALL = "call"  # what calling an unknown callable made (``source``: the callable)
ITEM = "item"  # an item of a made object the analysis cannot take apart
BY_USE = "by-use"  # a strategy told by its use only (no identity: ``strategy_by_use``)
OPAQUE = frozenset({FREE, ATTRIBUTE})


@dataclass(frozen=True)
class Parts:
    """``Value.info`` of what an API returns in parts: a tuple (``tfds.load(..., with_info=True)``:
    items by position) or a dict of one kind of value (``tfds.load(name)``: a dataset per split)."""

    items: tuple = ()  # the values by position (a tuple)
    each: Optional[Value] = None  # every value of a dict (by key)

    def item(self, key: object) -> Optional[Value]:
        if isinstance(key, int) and -len(self.items) <= key < len(self.items):
            return self.items[key]
        if self.each is not None and (key is None or isinstance(key, str)):
            return self.each
        return None

_CONFLICT = "<conflict>"
# ``fit`` of an object these libraries made is not a Keras model's
NOT_KERAS_FIT = frozenset({"sklearn", "xgboost", "lightgbm", "catboost", "statsmodels", "scipy", "numpy",
                           "pandas", "torch", "joblib", "prophet", "gensim", "umap", "hdbscan", "cuml"})
# Libraries whose calls make data arrays (np.load, np.array, pd.read_csv, h5py.File(...)[...])
DATA_LIBRARIES = frozenset({"numpy", "pandas", "h5py", "scipy", "pickle", "joblib", "PIL", "cv2", "imageio"})
# methods of a numpy array that give an array again
ARRAY_METHODS = frozenset({"astype", "reshape", "transpose", "copy", "squeeze", "flatten", "ravel", "swapaxes",
                           "clip", "round", "view", "take"})
# Methods and attributes only a tf.distribute.Strategy has
STRATEGY_ONLY_METHODS = frozenset({
    "experimental_run_v2", "experimental_run", "experimental_local_results", "make_dataset_iterator",
    "make_input_fn_iterator"}) | api.DISTRIBUTE_DATASET_METHODS | api.DISTRIBUTE_FN_METHODS \
    | api.DISTRIBUTE_VALUES_METHODS
STRATEGY_ONLY_ATTRS = frozenset({"num_replicas_in_sync"})
_STRATEGY_METHODS = (api.DISTRIBUTE_DATASET_METHODS | api.DISTRIBUTE_FN_METHODS | api.DISTRIBUTE_VALUES_METHODS
                     | {"experimental_run_v2", "experimental_local_results"})
_MODEL_METHODS = frozenset({"compile", "fit", "fit_generator", "train_on_batch"})
_DATASET_METHODS = frozenset({"with_options", "batch", "shuffle", "prefetch", "padded_batch", "interleave"})
_METRIC_METHODS = frozenset({"update_state", "reset_states"})
# Methods other kinds have too: ``reset_states`` of a metric is also a Keras model's (its stateful
# layers): the kind it tells yields to what other uses tell (a model whose variables are trained)
_SHARED_METHODS = frozenset({"reset_states"})
_SHARED_METHODS_YIELD = {api.METRIC: (api.MODEL,)}
_VARIABLE_METHODS = frozenset({"assign_add", "assign_sub"})
TRAINABLE = ("trainable_variables", "trainable_weights")


class Kinds:
    def __init__(self, m: "Module") -> None:
        self.m = m
        self._index: Optional[dict[int, str]] = None
        self._returns: dict[int, str] = {}  # id(origin of a callable) -> the kind its results have
        self.building = False
        # the index is built for the module being linted; a project module read only to answer
        # another file's questions keeps none (building each in turn cascaded over the project)
        self.enabled = True
        self._placeholders: dict[tuple, cst.CSTNode] = {}
        self._strategy_uses_memo: Optional[dict[tuple, set[str]]] = None

    # ------------------------------------------------------------------ identities
    def _placeholder(self, key: tuple, name: str) -> cst.CSTNode:
        node = self._placeholders.get(key)
        if node is None:
            node = self._placeholders[key] = cst.Name(name)  # not in the tree: an identity only
        return node

    def free(self, name: str) -> Value:
        """The value of a name the module never binds (a star import, a snippet's missing import)."""
        return Value(api.UNKNOWN, origin=self._placeholder(("free", name), name), info=FREE, why=UNBOUND)

    def attribute(self, owner: object, attr: str, source: Optional[Value] = None) -> Value:
        """The value of ``<owner>.attr`` where the owner's class is unknown: one identity per owner
        (an object's origin, or a class for ``self.attr``) and attribute."""
        return Value(api.UNKNOWN, origin=self._placeholder(("attr", id(owner), attr), attr), info=ATTRIBUTE,
                     source=source, why=ATTRIBUTE_LOST)

    def item(self, v: Value, key: object) -> Value:
        """An item of ``v`` (``x[i]``, an element iterated from it, one target of an unpacking)
        when the analysis cannot take ``v`` apart: an API's part (``tfds.load``'s datasets); a
        slice of an array is an array; an item of an opaque value is opaque, of a made object made;
        an item of no value is no value."""
        if isinstance(v.info, Parts):
            got = v.info.item(key[0] if isinstance(key, tuple) and len(key) == 1 else
                              (None if key in ("[]", "iter", "element") else key))
            if got is not None:
                return got
        if v.origin is None or v.kind in (api.FUNCTION, api.CLASS, api.API, api.MODULE):
            return v if v.why else lost(CONTAINER)
        if self.is_array(v):
            return v
        if v.kind != api.UNKNOWN or isinstance(v.info, (ClassInfo, FunctionInfo)):
            return lost(CONTAINER)
        return Value(api.UNKNOWN, origin=self._placeholder(("item", id(v.origin), key), "item"),
                     info=ATTRIBUTE if self.opaque(v) else ITEM, source=v, why=CONTAINER)

    @staticmethod
    def call_result(callee: Value, call: cst.Call, site: Optional[CallSite]) -> Value:
        """What calling ``callee``, a callable the analysis cannot follow, made at ``call``: an
        object made there (its uses may tell its kind; the callable's, what all its results are)."""
        return Value(api.UNKNOWN, origin=call, site=site, info=CALL, source=callee if _judged(callee) else None,
                     why=callee.why if callee.why in (UNBOUND, ATTRIBUTE_LOST) else "")

    def method_result(self, recv: Value, meth: str, call: cst.Call, site: Optional[CallSite]) -> Value:
        """What ``recv.meth(...)`` made when nothing says what that method returns: an array for
        an array's ``astype``/``reshape``..., else an object made there."""
        if self.is_array(recv) and meth in ARRAY_METHODS:
            return Value(api.UNKNOWN, recv.qname, origin=call, site=site, raw_qname=recv.raw_qname)
        return Value(api.UNKNOWN, origin=call, site=site)

    @staticmethod
    def opaque(v: Value) -> bool:
        """``v`` may be anything, a distributed dataset included: a parameter of unseen callers, a
        name the module never binds, an attribute of an object of unknown class."""
        return v.kind == api.UNKNOWN and (isinstance(v.origin, cst.Param) or v.info in OPAQUE)

    @staticmethod
    def made_object(v: Value) -> bool:
        """``v`` is an object of unknown kind that a call made (not an opaque value, which may be
        anything, a distributed dataset included)."""
        return v.kind == api.UNKNOWN and v.origin is not None and not isinstance(v.origin, cst.Param) \
            and not isinstance(v.info, (FunctionInfo, ClassInfo)) and v.info not in OPAQUE

    @staticmethod
    def is_array(v: Value) -> bool:
        """An array (or data frame) a data library made (``np.load(...)``, ``pd.read_csv(...)``, a
        slice or ``.astype()`` of one): whole, on the host."""
        return v.kind == api.UNKNOWN and isinstance(v.origin, (cst.Call, cst.Subscript)) \
            and v.qname.split(".", 1)[0] in DATA_LIBRARIES

    # ------------------------------------------------------------------ kinds from use
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
        returns: dict[int, str] = {}

        def file(table: dict[int, str], key: int, kind: str) -> None:
            got = table.get(key)
            table[key] = kind if got in (None, kind) else _CONFLICT

        shared: dict[int, str] = {}  # what a method other kinds have too told (see _SHARED_METHODS)
        try:
            for expr, cs, kind, meth in self._telling_uses():
                for v in self.m.infer(expr, cs.scope, cs.order):
                    if not _judged(v):
                        continue
                    if isinstance(v.info, ClassInfo) and meth and self.m.values.class_member(v.info, meth) is not None:
                        continue  # the class's own method (a trainer's ``fit``), not a Keras one it inherits
                    if kind == api.MODEL and (v.qname.split(".", 1)[0] in NOT_KERAS_FIT):
                        continue
                    if kind == api.DATASET and not meth and self.opaque(v):
                        # distributed somewhere: a parameter or another object's attribute is then
                        # distributed before use, in an order between methods the analysis cannot tell
                        continue
                    if meth in _SHARED_METHODS:
                        file(shared, id(v.origin), kind)
                        continue
                    file(index, id(v.origin), kind)
                    src = v.source
                    if v.info == CALL and src is not None and _judged(src) and kind == api.DATASET:
                        file(returns, id(src.origin), kind)  # what the callable makes is a dataset
            for key, kind in shared.items():
                got = index.get(key)
                if got is None:
                    index[key] = kind
                elif got != kind and got not in _SHARED_METHODS_YIELD.get(kind, ()):
                    index[key] = _CONFLICT
        finally:
            self.building = False
            self._index = index
            self._returns = returns
        # answers given while the index was built may hold values derived from ones it now
        # refines (the dataset an unrefined strategy distributes); the project's other modules
        # refine this module's values as they return them (see refine), their memos stay
        self.m.values.forget()

    def _telling_uses(self) -> Iterator[tuple[cst.BaseExpression, CallSite, str, str]]:
        """(expression, where, the kind it tells, the method called on it or "")"""
        for cs in self.m.calls:
            call = cs.node
            cm = call_method(call)
            if cm is None:
                owner = _pairs_owner(call, self.m, cs)
                if owner is not None:  # step(zip(grads, net.trainable_variables))
                    yield call.func, cs, api.OPTIMIZER, ""
                    yield owner, cs, api.MODEL, ""
                continue
            recv, meth = cm
            if meth in _STRATEGY_METHODS:
                yield recv, cs, api.STRATEGY, meth
                if meth in api.DISTRIBUTE_DATASET_METHODS and call.args:
                    yield call.args[0].value, cs, api.DATASET, ""
            elif meth == "call_for_each_replica" and isinstance(recv, cst.Attribute) and recv.attr.value == "extended":
                yield recv.value, cs, api.STRATEGY, meth
            elif meth == "scope" and not call.args:
                yield recv, cs, api.STRATEGY, meth
            elif meth == "run" and (keyword(call, "args") is not None or keyword(call, "kwargs") is not None) \
                    and self.m.resolve_function(arg(call, 0, "fn"), cs.scope, cs.order):
                yield recv, cs, api.STRATEGY, meth
            elif meth == "reduce" and call.args:
                q, _ = self.m.qualified_name(call.args[0].value, cs.scope, cs.order)
                if q.startswith("tensorflow.distribute.ReduceOp."):
                    yield recv, cs, api.STRATEGY, meth
            elif meth in _MODEL_METHODS:
                yield recv, cs, api.MODEL, meth
                if meth == "compile":
                    opt = keyword(call, "optimizer") or arg(call, 0)
                    if opt is not None and not isinstance(opt, (cst.SimpleString, cst.ConcatenatedString)):
                        yield opt, cs, api.OPTIMIZER, ""
            elif meth in ("apply_gradients", "get_updates"):
                yield recv, cs, api.OPTIMIZER, meth
                owner = _pairs_owner(call, self.m, cs)
                if owner is not None:
                    yield owner, cs, api.MODEL, ""
            elif meth == "gradient":
                owner = _variables_owner(arg(call, 1, "sources"), self.m, cs)
                if owner is not None:
                    yield owner, cs, api.MODEL, ""
            elif meth == "minimize":
                # opt.minimize(loss, var_list=net.trainable_variables[, tape=tape]): an optimizer
                # stepping a model's variables
                owner = _variables_owner(arg(call, 1, "var_list"), self.m, cs)
                if owner is not None:
                    yield recv, cs, api.OPTIMIZER, meth
                    yield owner, cs, api.MODEL, ""
            elif meth in _DATASET_METHODS and call.args:
                yield recv, cs, api.DATASET, meth
            elif meth in _METRIC_METHODS:
                yield recv, cs, api.METRIC, meth
            elif meth in _VARIABLE_METHODS and call.args:
                yield recv, cs, api.VARIABLE, meth
        for ref in self.m.attr_refs:
            node = ref.node
            if isinstance(node, cst.Attribute) and node.attr.value in STRATEGY_ONLY_ATTRS:
                site = _site_for(self.m, ref)
                if site is not None:
                    yield node.value, site, api.STRATEGY, ""

    def kind_of(self, v: Value) -> Optional[str]:
        """The kind ``v``'s uses give it (only for an unknown value with an origin)."""
        if self._index is None or v.origin is None:
            return None
        k = self._index.get(id(v.origin))
        if k is None and v.info == CALL and v.source is not None and v.source.origin is not None:
            k = self._returns.get(id(v.source.origin))
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
                k = owner.kinds.kind_of(v)  # its uses there, when that module was linted
            if k is None:
                continue
            if out is None:
                out = list(vals)
            out[i] = Value(k, v.qname, origin=v.origin, site=v.site, raw_qname=v.raw_qname, info=v.info,
                           source=v.source, conds=v.conds, path=v.path)
        return vals if out is None else out

    # ------------------------------------------------------------------ strategies by their use
    def receiver_key(self, expr: Optional[cst.BaseExpression], scope: Scope, order: int) -> Optional[tuple]:
        """What a receiver denotes, so that its other uses can be found: a name's bindings (a name
        bound nowhere: the name itself), ``self.<attr>`` of a class."""
        if isinstance(expr, cst.Name):
            bs = self.m.lookup(expr.value, scope, order)
            return ("free", expr.value) if not bs else ("bound", frozenset(id(b) for b in bs))
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            fn = self.m.values._method_of(scope)
            if fn is not None and fn.params and fn.params[0].name.value == expr.value.value:
                return ("self", id(fn.cls), expr.attr.value)
        return None

    def strategy_uses(self) -> dict[tuple, set[str]]:
        """receiver key -> the strategy-only uses made of it in this module."""
        memo = self._strategy_uses_memo
        if memo is not None:
            return memo
        memo = {}
        for cs in self.m.calls:
            cm = call_method(cs.node)
            if cm is None:
                continue
            recv, meth = cm
            use = None
            if meth in STRATEGY_ONLY_METHODS:
                use = meth
            elif meth == "reduce":
                op = arg(cs.node, 0, "reduce_op")
                q = self.m.qualified_name(op, cs.scope, cs.order)[0] if op is not None else ""
                if q.startswith("tensorflow.distribute.ReduceOp."):
                    use = "reduce"
            elif meth == "run" and (keyword(cs.node, "args") is not None or keyword(cs.node, "kwargs") is not None) \
                    and self.m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order):
                use = "run"  # run(<local function>, args=...): strategy.run's signature
            if use is None:
                continue
            key = self.receiver_key(recv, cs.scope, cs.order)
            if key is not None:
                memo.setdefault(key, set()).add(use)
        for ref in self.m.attr_refs:
            node = ref.node
            if isinstance(node, cst.Attribute) and node.attr.value in STRATEGY_ONLY_ATTRS:
                key = self.receiver_key(node.value, ref.scope, ref.order)
                if key is not None:
                    memo.setdefault(key, set()).add(node.attr.value)
        self._strategy_uses_memo = memo
        return memo

    def takes_strategy(self, fn: FunctionInfo) -> bool:
        """A parameter of ``fn`` is used as a strategy (``def build(model, strategy): ...
        strategy.run(step, args=...)``)."""
        uses = self.strategy_uses()
        for bs in fn.scope.bindings.values():
            for b in bs:
                if b.kind == "param" and uses.get(("bound", frozenset({id(b)}))):
                    return True
        return False

    def strategy_by_use(self, expr: Optional[cst.BaseExpression], site: CallSite) -> list[Value]:
        """``expr`` holds a strategy by its use: the module cannot resolve it (a parameter of a
        function called from elsewhere, ``self.strategy`` set from one, a name a snippet never
        binds), and it is used as only a strategy is (``experimental_run_v2``,
        ``experimental_distribute_dataset``, ``num_replicas_in_sync``, ``reduce(ReduceOp...)``,
        ``run(<local function>, args=...)``).  Its class is unknown: [Value(STRATEGY, "")]."""
        if expr is None:
            return []
        vals = self.m.infer_at(expr, site)
        if any(v.kind != api.UNKNOWN for v in vals):
            return []
        key = self.receiver_key(expr, site.scope, site.order)
        if key is None or not self.strategy_uses().get(key):
            return []
        return [Value(api.STRATEGY, "", origin=None, info=BY_USE)]


def _judged(v: Value) -> bool:
    """An unknown value with an origin that is not a function: its uses may tell its kind."""
    return v.kind == api.UNKNOWN and v.origin is not None and not isinstance(v.info, FunctionInfo)


def _variables_owner(expr: Optional[cst.BaseExpression], m: Optional["Module"] = None,
                     cs: Optional[CallSite] = None) -> Optional[cst.BaseExpression]:
    """``X`` of ``X.trainable_variables`` (``trainable_weights``), also inside ``list(...)`` and
    through a local name bound once to it (``training_vars = model.trainable_variables``)."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") \
            and expr.args:
        expr = expr.args[0].value
    if isinstance(expr, cst.Name) and m is not None and cs is not None:
        got = m.reaching_exprs(expr, cs.scope, cs.order)
        if got and len(got) == 1:
            expr = got[0][0]
    if isinstance(expr, cst.Attribute) and expr.attr.value in TRAINABLE:
        return expr.value
    return None


def _pairs_owner(call: cst.Call, m: Optional["Module"] = None, cs: Optional[CallSite] = None
                 ) -> Optional[cst.BaseExpression]:
    """``X`` when the call's first argument is (gradient, variable) pairs of ``X``'s trainable
    variables: ``zip(grads, X.trainable_variables)`` (also in ``list(...)``)."""
    a = arg(call, 0, "grads_and_vars")
    if isinstance(a, cst.Call) and isinstance(a.func, cst.Name) and a.func.value == "list" and a.args:
        a = a.args[0].value
    if isinstance(a, cst.Call) and isinstance(a.func, cst.Name) and a.func.value == "zip" and len(a.args) == 2:
        return _variables_owner(a.args[1].value, m, cs)
    return None


def _site_for(m: "Module", ref) -> Optional[CallSite]:
    """A call-site-like context for a reference (scope and order are what inference needs)."""
    return CallSite(None, ref.scope, ref.func, ref.order, (), (), (), 0)  # type: ignore[arg-type]


# ------------------------------------------------------------------ variables at construction
# Whether making an object already made its variables is part of what the object is: a functional
# Keras model, a ``Sequential`` whose first layer has an input shape, a loaded or pretrained model
# hold their variables from the constructor on; a layer, a ``Sequential`` without an input shape,
# an instance of a subclassed Keras model or layer or of a ``tf.Module`` whose constructor makes
# only (unbuilt) layers hold none until their first call builds them.  Checked on TF 2.21 with 2
# replicas (Keras 3 and tf_keras): such an object made outside the scope and first called inside
# it gets MirroredVariables; a ``Sequential`` with ``keras.Input`` made outside keeps plain ones.

# Keyword arguments that make a Keras layer (and so a Sequential model) build at once.
SHAPE_KEYWORDS = ("input_shape", "input_dim", "batch_input_shape", "batch_shape")
INPUT_LAYERS = frozenset({"keras.Input", "keras.layers.Input", "keras.layers.InputLayer", "keras.InputLayer"})
# calls in a constructor that create variables of the object being made
_MAKES_WEIGHTS = frozenset({"add_weight", "add_variable", "build"})


def constructor_builds(m: "Module", call: cst.Call, scope: Scope, order: int, q: str) -> bool:
    """The Keras model factory ``q`` (canonical), called at ``call``, creates the model's variables
    right away: a functional ``Model(inputs, outputs)``, a ``Sequential`` whose first layer is an
    ``Input`` or has an input shape, ``load_model``, ``keras.applications.*``, ``clone_model``...
    (the model factories of the API table)."""
    if q in ("keras.Model", "keras.models.Model"):
        return bool(call.args)  # functional model: built from its inputs
    if q in ("keras.Sequential", "keras.models.Sequential"):
        layers = call.args[0].value if call.args else keyword(call, "layers")
        if not isinstance(layers, (cst.List, cst.Tuple)) or not layers.elements:
            return False
        first = layers.elements[0].value
        if not isinstance(first, cst.Call):
            return False
        fq, _ = m.qualified_name(first.func, scope, order)
        return fq in INPUT_LAYERS or any(keyword(first, k) is not None for k in SHAPE_KEYWORDS)
    return q in api.MODEL_FACTORIES  # keras.applications.*, load_model, ... (from the API table)


def builds_at_construction(m: "Module", v: Value, _depth: int = 0) -> Optional[bool]:
    """Does making ``v`` (a Keras model or layer, a ``tf.Module``, a variable) create its variables?
    True: a variable; a model :func:`constructor_builds` says is built; an instance of a local class
    whose constructor makes a variable, builds or calls itself or a part, or makes a built model; a
    local builder that returns such an object on some path, or calls (builds) what it returns.
    False: a layer, an unbuilt ``Sequential``, an instance of a local subclass of a Keras model or
    layer or of ``tf.Module`` whose constructor does none of that.  None: the analysis cannot tell
    (an object an unknown callable made, a parameter)."""
    if v.kind == api.VARIABLE and v.source is None:
        return True
    site, o = v.site, v.origin
    if _depth > 6 or site is None or not isinstance(o, cst.Call):
        return None
    owner = site.scope.module or m
    fns = owner.resolve_function(o.func, site.scope, site.order)
    if fns:  # a local builder: what it returns, and whether it calls that first
        answers: list[Optional[bool]] = []
        for fn in fns:
            home = fn.scope.module or owner
            for ret, order in fn.returns:
                for rv in home.infer(ret, fn.scope, order):
                    if rv.origin is None or not home.created_within(rv.origin, fn):
                        answers.append(None)
                        continue
                    got = builds_at_construction(home, rv, _depth + 1)
                    if got is False and _called_in(home, fn, rv.origin):
                        got = True
                    answers.append(got)
        if any(a is True for a in answers):
            return True  # on one path: a mistake on one path is a mistake
        return False if answers and all(a is False for a in answers) else None
    if isinstance(v.info, ClassInfo):
        return _class_builds(v.info.scope.module or owner, v.info, _depth + 1)
    q, _ = owner.qualified_name(o.func, site.scope, site.order)
    made = api.kind_of_constructor(q) if q else None
    if made == api.MODEL:
        return constructor_builds(owner, o, site.scope, site.order, q)
    if made == api.LAYER:
        return False  # built by its first call (an input shape only matters to a Sequential)
    if made == api.VARIABLE:
        return True
    for v2 in owner.infer(o.func, site.scope, site.order):
        if v2.kind == api.CLASS and isinstance(v2.info, ClassInfo):
            return _class_builds(v2.info.scope.module or owner, v2.info, _depth + 1)
    return None


def _called_in(m: "Module", fn: FunctionInfo, origin: cst.CSTNode) -> bool:
    """``fn`` (or a function nested in it) calls the object made at ``origin`` or its ``build``."""
    for cs in m.calls_within(fn):
        f = cs.node.func
        target = f.value if isinstance(f, cst.Attribute) and f.attr.value == "build" else f
        if any(x.origin is origin for x in m.infer(target, cs.scope, cs.order)):
            return True
    return False


# Keras methods that make no variable (called on the object in its constructor)
_KERAS_NON_BUILDING = frozenset({"compile", "add_loss", "add_metric", "summary", "get_layer", "save",
                                 "save_weights", "get_config", "set_weights", "reset_metrics", "reset_states"})


def _class_builds(m: "Module", cls: ClassInfo, depth: int) -> Optional[bool]:
    """An instance of the local class ``cls`` holds variables once its constructor has run (see
    :func:`builds_at_construction`); False for a lazily built Keras model or layer or
    ``tf.Module``; None when the class is neither (or cannot be told)."""
    if depth > 6:
        return None
    if _init_builds(m, cls, depth, set()):
        return True
    if m.class_kind(cls) in (api.MODEL, api.LAYER) or m.values._tf_module_class(cls):
        return False
    return None


def _init_builds(m: "Module", cls: ClassInfo, depth: int, seen: set) -> bool:
    """The constructor of ``cls`` (a method of its own it calls, or the constructor of a local base
    class it runs) creates variables."""
    if id(cls) in seen or len(seen) > 12:
        return False
    seen.add(id(cls))
    work = [cls.methods["__init__"]] if "__init__" in cls.methods else []
    done: set[int] = set()
    while work:
        fn = work.pop()
        if id(fn) in done:
            continue
        done.add(id(fn))
        me = fn.params[0].name.value if fn.params else None
        for cs in fn.calls:
            f = cs.node.func
            if isinstance(f, cst.Name) and f.value == me:
                return True  # self(...): the first call, in the constructor
            if isinstance(f, cst.Attribute):
                recv, meth = f.value, f.attr.value
                if isinstance(recv, cst.Name) and recv.value == me:
                    if meth in _MAKES_WEIGHTS:
                        return True
                    if meth in cls.methods:
                        work.append(cls.methods[meth])  # a helper of its own
                    elif meth not in _KERAS_NON_BUILDING and not meth.startswith("_"):
                        return True  # self.encoder(...): a part called, so built
                    continue
                if isinstance(recv, cst.Call) and isinstance(recv.func, cst.Name) and recv.func.value == "super" \
                        and meth in _MAKES_WEIGHTS:
                    return True
            q, _ = m.qualified_name(f, cs.scope, cs.order)
            made = api.kind_of_constructor(q) if q else None
            if made == api.VARIABLE:
                return True
            if made == api.MODEL and constructor_builds(m, cs.node, cs.scope, cs.order, q):
                return True
            if made is None and not isinstance(f, cst.Attribute) or (made is None and f.attr.value != "__init__"):
                for v in m.infer(cs.node, cs.scope, cs.order):
                    if v.origin is cs.node and isinstance(v.info, ClassInfo) and v.info is not cls \
                            and _class_builds(v.info.scope.module or m, v.info, depth + 1) is True:
                        return True
    init = cls.methods.get("__init__")
    if init is not None and not any(isinstance(cs.node.func, cst.Attribute) and cs.node.func.attr.value == "__init__"
                                    for cs in init.calls):
        return False  # a constructor of its own that never runs its base's
    for base in cls.bases:
        for bv in m.infer(base, cls.scope.parent or m.scope, 10**9):
            if bv.kind == api.CLASS and isinstance(bv.info, ClassInfo) and bv.info is not cls \
                    and _init_builds(bv.info.scope.module or m, bv.info, depth, seen):
                return True
    return False


def part_of_owner(v: Value) -> bool:
    """``v`` is a part of another object and carries that object's origin: a variable or the
    variables of a model, layer or ``tf.Module`` (``net.trainable_variables``, an element of it,
    ``layer.kernel``), a layer of a model.  It was not made where its origin says: the object
    was (a module's variables are not a ``tf.Variable(...)`` call)."""
    src = v.source
    return v.kind in (api.VARIABLE, api.VARIABLES, api.LAYER, api.LAYERS) and src is not None \
        and src.origin is v.origin
