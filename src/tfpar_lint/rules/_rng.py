"""Shared helpers of the TFP4xx randomness rules."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, Module, arg, is_constant


def rng_calls_in_replica_fns(m: Module) -> Iterator[tuple[CallSite, str]]:
    """Stateful and stateless RNG op calls inside functions run by ``strategy.run``."""
    for cs in m.calls:
        q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
        if not q or not (q in api.STATEFUL_RNG_OPS or api.is_stateless_rng(q)):
            continue
        if m.in_replica_fn(cs.scope):
            yield cs, q


# Position of ``seed`` in the signature of the random ops (tf 2.x API).
SEED_POSITION = {
    "tensorflow.random.normal": 4, "tensorflow.random.uniform": 4, "tensorflow.random.truncated_normal": 4,
    "tensorflow.random.shuffle": 1, "tensorflow.random.gamma": 4, "tensorflow.random.poisson": 3,
    "tensorflow.random.categorical": 3, "tensorflow.image.random_flip_left_right": 1,
    "tensorflow.image.random_flip_up_down": 1, "tensorflow.image.random_brightness": 2,
    "tensorflow.image.random_contrast": 3, "tensorflow.image.random_hue": 2,
    "tensorflow.image.random_saturation": 3, "tensorflow.image.random_crop": 2,
    "tensorflow.image.random_jpeg_quality": 3, "tensorflow.nn.dropout": 3,
    "tensorflow.image.stateless_random_flip_left_right": 1, "tensorflow.image.stateless_random_flip_up_down": 1,
    "tensorflow.image.stateless_random_brightness": 2, "tensorflow.image.stateless_random_contrast": 3,
    "tensorflow.image.stateless_random_hue": 2, "tensorflow.image.stateless_random_saturation": 3,
    "tensorflow.image.stateless_random_crop": 2, "tensorflow.image.stateless_random_jpeg_quality": 3,
    "tensorflow.nn.experimental.stateless_dropout": 2,
    # stateless ops whose seed is not the second argument
    "tensorflow.random.stateless_categorical": 2,  # (logits, num_samples, seed)
}


def seed_arg(cs: CallSite, q: str) -> Optional[cst.BaseExpression]:
    """The ``seed`` argument, by keyword or by position."""
    pos = SEED_POSITION.get(q)
    if pos is None and q.startswith("tensorflow.random.stateless_"):
        pos = 1  # stateless_*(shape, seed, ...)
    s = arg(cs.node, pos, "seed")
    if isinstance(s, cst.Name) and s.value == "None":
        return None  # seed=None is no seed
    return s


def _literal_index(expr: cst.BaseExpression) -> object:
    """A literal subscript key (``d["noise"]``, ``t[0]``) or None."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        k = expr.slice[0].slice.value
        if isinstance(k, cst.SimpleString):
            return k.evaluated_value
        if isinstance(k, cst.Integer):
            return int(k.value, 0)
    return None


def constant_seed(m: Module, expr: Optional[cst.BaseExpression], scope, order: int, _depth: int = 0) -> bool:
    """``expr`` holds the same value on every replica and at every call: a literal, or a
    list/tuple of such, or a name / literal-key item of a container literal / ``self``
    attribute / parameter of the replica function every binding or call site of which gives
    such a constant (``SEED = 42``, ``a, b = 1, 2``, ``CFG["seed"]``, ``self.seed = 7``,
    ``strategy.run(fn, args=(x, 7))``).  Values are followed, never guessed from names."""
    if expr is None or _depth > 12:
        return False
    if is_constant(expr):
        return True
    d = _depth + 1
    if isinstance(expr, cst.UnaryOperation):
        return constant_seed(m, expr.expression, scope, order, d)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(
            isinstance(e, cst.Element) and constant_seed(m, e.value, scope, order, d) for e in expr.elements)
    if isinstance(expr, cst.Name):
        bs = m.lookup(expr.value, scope, order)
        return bool(bs) and all(_constant_binding(m, b, d) for b in bs)
    if isinstance(expr, cst.Subscript):
        key = _literal_index(expr)
        if key is None:
            return False
        items = m.container_items(expr.value, scope, order, key)
        return bool(items) and all(constant_seed(m, e, s, o, d) for e, s, o in items)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        fn = scope.func
        while fn is not None and fn.cls is None:
            fn = fn.parent.func if fn.parent is not None else None
        if fn is None or not fn.params or expr.value.value != fn.params[0].name.value:
            return False
        bs = fn.cls.attrs.get(expr.attr.value) or fn.cls.scope.bindings.get(expr.attr.value)
        return bool(bs) and all(_constant_binding(m, b, d) for b in bs)
    return False


def _constant_binding(m: Module, b, depth: int) -> bool:
    if b.kind in ("assign", "annassign") and b.value is not None:
        v = b.value
        if b.path:  # a, b = 1, 2
            if len(b.path) != 1 or not isinstance(v, (cst.Tuple, cst.List)) or b.path[0] >= len(v.elements) \
                    or not isinstance(v.elements[b.path[0]], cst.Element):
                return False
            v = v.elements[b.path[0]].value
        return constant_seed(m, v, b.scope, b.order, depth)
    if b.kind == "param" and b.func is not None:
        return _constant_param(m, b, depth)
    return False


def _constant_param(m: Module, b, depth: int) -> bool:
    """Every place that calls the function gives this parameter a constant: the ``args=`` /
    ``kwargs=`` of the ``strategy.run`` calls that run it, and its direct local calls."""
    fn = b.func
    idx = next((i for i, p in enumerate(fn.params) if p is b.node), None)
    if idx is None or b.node.star:
        return False
    pos = idx - (1 if fn.cls is not None else 0)  # bound methods: self is not passed
    sites = 0
    for cs, _recv, _meth, _strat in m.replica_runs():
        if not any(f is fn for f in m.resolve_function(arg(cs.node, 0, "fn"), cs.scope, cs.order)):
            continue
        sites += 1
        got = None
        args = arg(cs.node, 1, "args")
        if args is not None and pos >= 0:
            items = m.container_items(args, cs.scope, cs.order, pos)
            got = items if items is not None and len(items) == 1 else None
        if got is None:
            kwargs = arg(cs.node, 2, "kwargs")
            items = m.container_items(kwargs, cs.scope, cs.order, b.name) if kwargs is not None else None
            got = items if items is not None and len(items) == 1 else None
        if got is None:
            if b.node.default is not None:
                got = [(b.node.default, fn.parent, fn.order)]
            else:
                return False
        if not all(constant_seed(m, e, s, o, depth + 1) for e, s, o in got):
            return False
    for cs in m.callers(fn):
        sites += 1
        a = arg(cs.node, pos if pos >= 0 else None, b.name)
        if a is None or not constant_seed(m, a, cs.scope, cs.order, depth + 1):
            return False
    return sites > 0


# Keras 3 random ops (``keras.random.*``; ``tf.keras.random`` on TF >= 2.16): position of ``seed``.
KERAS_RNG_SEED_POSITION = {
    "keras.random.normal": 4, "keras.random.uniform": 4, "keras.random.truncated_normal": 4,
    "keras.random.randint": 4, "keras.random.categorical": 3, "keras.random.dropout": 3,
    "keras.random.shuffle": 2, "keras.random.gamma": 3, "keras.random.binomial": 4, "keras.random.beta": 4,
    "keras.random.SeedGenerator": 0,
}
# Keras initializers (keras, tf.keras, tf_keras): position of ``seed``.  A seeded initializer
# draws statelessly: every call, on every replica, returns the same tensor.
_INIT_SEED_POSITION = {
    "RandomNormal": 2, "RandomUniform": 2, "TruncatedNormal": 2, "GlorotUniform": 0, "GlorotNormal": 0,
    "HeNormal": 0, "HeUniform": 0, "LecunNormal": 0, "LecunUniform": 0, "Orthogonal": 1, "VarianceScaling": 3,
    "random_normal": 2, "random_uniform": 2, "truncated_normal": 2, "glorot_uniform": 0, "glorot_normal": 0,
    "he_normal": 0, "he_uniform": 0, "lecun_normal": 0, "lecun_uniform": 0, "orthogonal": 1,
}
KERAS_INITIALIZER_SEED_POSITION = {"keras.initializers." + k: v for k, v in _INIT_SEED_POSITION.items()}


def keras_seeded_draws_in_replica_fns(m: Module) -> Iterator[tuple[CallSite, str, cst.BaseExpression]]:
    """Keras draws inside functions run by ``strategy.run`` whose seed is constant, as (call, the
    API called or instantiated, the seed): ``keras.random.normal(shape, seed=1)``, a
    ``keras.random.SeedGenerator(42)`` created there, and calls of an initializer built with a
    constant seed (``GlorotUniform(seed=0)(shape)``, or ``init(shape)`` where every value of
    ``init`` is such an initializer)."""
    for cs in m.calls:
        if not m.in_replica_fn(cs.scope):
            continue
        q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
        if q in KERAS_RNG_SEED_POSITION:
            seed = arg(cs.node, KERAS_RNG_SEED_POSITION[q], "seed")
            if constant_seed(m, seed, cs.scope, cs.order):
                yield cs, q, seed
            continue
        makers: list[tuple[cst.Call, object, int]] = []
        if isinstance(cs.node.func, cst.Call):
            makers = [(cs.node.func, cs.scope, cs.order)]
        elif isinstance(cs.node.func, cst.Name):
            makers = [e for e in (m.reaching_exprs(cs.node.func, cs.scope, cs.order) or [])]
            if not makers or not all(isinstance(e, cst.Call) for e, _s, _o in makers):
                continue
        if not makers:
            continue
        found = None
        for call, s, o in makers:
            iq, _ = m.qualified_name(call.func, s, o)
            seed = arg(call, KERAS_INITIALIZER_SEED_POSITION[iq], "seed") \
                if iq in KERAS_INITIALIZER_SEED_POSITION else None
            if seed is None or not constant_seed(m, seed, s, o):
                found = None
                break
            found = (iq, seed)
        if found is not None:
            yield cs, found[0], found[1]
