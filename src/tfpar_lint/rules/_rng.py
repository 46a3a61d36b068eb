"""Shared helpers of the TFP4xx randomness rules."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, Module, arg


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
