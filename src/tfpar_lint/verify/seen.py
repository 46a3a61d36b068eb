"""What a probe saw (:class:`Seen`), and the two readings of a recorded error that the probes and
the crash symptoms (:mod:`tfpar_lint.verify.symptoms`) share: which pattern its text matches, and
the script line it passed through last."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class Seen:
    """What a probe saw at one place of the script: a mistake (``status`` CONFIRMED), the code
    behaving correctly (NOT_REPRODUCED), or why it cannot tell (INCONCLUSIVE), with the evidence.

    ``line`` is where it was seen (the thread target's ``assign``, the ``strategy.run`` call whose
    replicas got one tensor, the ``set_seed`` call); ``lines`` are other script lines of the same
    thing (a static finding on one of them is judged by it); ``also`` other codes it decides;
    ``anywhere``: it decides a finding of its code wherever the finding is; ``runtime``: a CONFIRMED
    one is a mistake of its own (RUNTIME) when no static finding covers it.

    A probe module whose parent side is ``seen(run) -> list[Seen]`` gets ``judge``, ``locate`` and
    ``observe`` from :func:`judge_from`, :func:`locate_from` and :func:`observe_from`."""

    code: str
    line: int
    evidence: str
    lines: tuple[int, ...] = ()
    status: str = "CONFIRMED"
    also: tuple[str, ...] = ()
    anywhere: bool = False
    runtime: bool = True


def error_line(err: Optional[dict[str, Any]]) -> Optional[int]:
    """The innermost script line an error passed through (``"train.py:12"`` -> 12)."""
    if not err:
        return None
    loc = str(err.get("location") or "")
    if ":" in loc:
        tail = loc.rsplit(":", 1)[1]
        if tail.isdigit():
            return int(tail)
    lines = err.get("script_lines") or []
    return int(lines[-1]) if lines else None


def error_matches(err: Optional[dict], patterns: list[str]) -> Optional[str]:
    """The first of ``patterns`` (regular expressions) that the error's ``Type: message`` matches."""
    import re

    if not err:
        return None
    # the functions it passed through follow the message (an AssertionError inside an update step)
    text = f"{err.get('type', '')}: {err.get('message', '')}\n" + " ".join(str(f[2]) for f in err.get("frames", []))
    for p in patterns:
        if re.search(p, text, re.S):
            return p
    return None
