"""Randomness: random ops and Keras seeded draws in replica functions, their seed arguments, and
whether a seed is the same on every replica (the questions of the TFP4xx rules)."""
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
    "tensorflow.nn.experimental.stateless_dropout": 2, "tensorflow.random.stateless_categorical": 2,
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
            if seed is not None and m.constant_exprs(seed, cs.scope, cs.order):
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
            if seed is None or not m.constant_exprs(seed, s, o):
                found = None
                break
            found = (iq, seed)
        if found is not None:
            yield cs, found[0], found[1]


# Calls whose result is the same on every replica when their arguments are (building a seed
# tensor out of replica-invariant parts).
_INVARIANT_CALLS = frozenset({
    "tensorflow.constant", "tensorflow.stack", "tensorflow.cast", "tensorflow.convert_to_tensor",
    "tensorflow.concat", "tensorflow.add", "tensorflow.multiply", "int", "abs",
})


def replica_invariant(m: Module, expr: Optional[cst.BaseExpression], scope, order: int, _depth: int = 0) -> bool:
    """``expr`` certainly has the same value on every replica: it is built only from literals,
    TensorFlow API constants (``tf.int64``), module-level names and their attributes / items
    (``args.seed`` of a module-level ``argparse`` namespace, ``CONFIG["seed"]``), ``self``
    attributes, arithmetic and the calls in ``_INVARIANT_CALLS`` of such parts, and parameters
    every caller (including ``strategy.run(..., args=...)``) gives such a value.  Anything else
    (the replica context, a Generator's draw, a dataset element, an unknown call, a loop
    variable) makes it not invariant."""
    if expr is None or _depth > 12:
        return False
    d = _depth + 1
    if is_constant(expr):
        return True
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(
            isinstance(e, cst.Element) and replica_invariant(m, e.value, scope, order, d) for e in expr.elements)
    if isinstance(expr, cst.UnaryOperation):
        return replica_invariant(m, expr.expression, scope, order, d)
    if isinstance(expr, cst.BinaryOperation):
        return replica_invariant(m, expr.left, scope, order, d) and replica_invariant(m, expr.right, scope, order, d)
    if isinstance(expr, cst.Call):
        q, _ = m.qualified_name(expr.func, scope, order)
        if not q and isinstance(expr.func, cst.Name) and expr.func.value in ("int", "abs") \
                and not m.lookup(expr.func.value, scope, order):
            q = expr.func.value
        return q in _INVARIANT_CALLS and all(
            not a.star and replica_invariant(m, a.value, scope, order, d) for a in expr.args)
    if isinstance(expr, cst.Subscript):
        return replica_invariant(m, expr.value, scope, order, d)
    if isinstance(expr, cst.Attribute):
        if m.qualified_name(expr, scope, order)[0]:
            return True  # tf.int64, a module constant of an imported API
        base = expr.value
        while isinstance(base, cst.Attribute):
            base = base.value
        if not isinstance(base, cst.Name):
            return False
        bs = m.lookup(base.value, scope, order)
        if bs and all(b.scope is m.scope and b.kind in ("assign", "annassign", "import") for b in bs):
            return True  # an attribute of a module-level object (args.seed)
        fn = scope.func
        while fn is not None and fn.cls is None:
            fn = fn.parent.func if fn.parent is not None else None
        if fn is not None and fn.params and base.value == fn.params[0].name.value and expr.value is base:
            bs = fn.cls.attrs.get(expr.attr.value) or fn.cls.scope.bindings.get(expr.attr.value)
            return bool(bs) and all(_invariant_binding(m, b, d) for b in bs)
        return False
    if isinstance(expr, cst.Name):
        bs = m.lookup(expr.value, scope, order)
        return bool(bs) and all(_invariant_binding(m, b, d) for b in bs)
    return False


def _invariant_binding(m: Module, b, depth: int) -> bool:
    if b.kind == "import":
        return True
    if b.kind in ("assign", "annassign") and b.value is not None:
        v = b.value
        if b.path:
            if len(b.path) != 1 or not isinstance(v, (cst.Tuple, cst.List)) or b.path[0] >= len(v.elements) \
                    or not isinstance(v.elements[b.path[0]], cst.Element):
                return False
            v = v.elements[b.path[0]].value
        return replica_invariant(m, v, b.scope, b.order, depth)
    if b.kind == "param":
        got = m.values.param_args(b)
        return bool(got) and all(replica_invariant(m, e, s, o, depth + 1) for e, s, o, _cs in got)
    return False
