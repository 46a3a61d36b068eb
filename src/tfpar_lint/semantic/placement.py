"""Placement: the device strings of ``tf.device(...)`` calls and the calls under them (the
questions of TFP107/TFP108)."""
from __future__ import annotations

import re
from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import CallSite, Module, arg

DEVICE_RE = re.compile(r"(?:^|/|device:)(GPU|CPU|TPU|XLA_GPU)[:/]?(\d+)?", re.IGNORECASE)
# Verified on TF 2.21 for these (TPUStrategy places variables its own way: not claimed).
MIRRORING = frozenset({"tensorflow.distribute.MirroredStrategy"}) | api.MULTI_WORKER_STRATEGIES


def device_calls(m: Module) -> Iterator[tuple[CallSite, str, str, Optional[int]]]:
    """``tf.device("<literal>")`` calls: (site, text, kind "GPU"/"CPU"/"TPU", index or None)."""
    for cs, _ in m.calls_to(api.DEVICE_SCOPE):
        a = arg(cs.node, 0, "device_name")
        if not isinstance(a, cst.SimpleString):
            continue
        text = a.evaluated_value
        if not isinstance(text, str):
            continue
        mt = DEVICE_RE.search(text)
        if not mt:
            continue
        kind = mt.group(1).upper().replace("XLA_", "")
        idx = int(mt.group(2)) if mt.group(2) is not None else None
        yield cs, text, kind, idx


def device_calls_formatted(m: Module) -> Iterator[tuple[CallSite, str, str]]:
    """``tf.device("/gpu:%d" % i)`` / ``tf.device(f"/gpu:{i}")``: a device string built from a literal
    that names the device kind, with a computed index: (site, source text, kind)."""
    for cs, _ in m.calls_to(api.DEVICE_SCOPE):
        a = arg(cs.node, 0, "device_name")
        head: Optional[str] = None
        if isinstance(a, cst.BinaryOperation) and isinstance(a.operator, cst.Modulo) \
                and isinstance(a.left, cst.SimpleString) and isinstance(a.left.evaluated_value, str):
            head = a.left.evaluated_value
        elif isinstance(a, cst.FormattedString):
            head = "".join(p.value for p in a.parts if isinstance(p, cst.FormattedStringText))
        if head is None:
            continue
        mt = DEVICE_RE.search(head)
        if mt:
            yield cs, m.code(a), mt.group(1).upper().replace("XLA_", "")


def calls_inside(m: Module, with_call: cst.Call) -> list[CallSite]:
    """Call sites in the body of ``with <with_call>:``."""
    return [cs for cs in m.calls if any(item.item is with_call for item in cs.withs)]
