"""Environment variables the module writes or removes (``TF_CONFIG``, ``TF_USE_LEGACY_KERAS``...)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Union

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.model import CallSite, StoreSite
from tfpar_lint.semantic.nodes import arg, keyword, literal_str

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module


class Environment:
    def __init__(self, m: "Module") -> None:
        self.m = m

    def sets_env(self, var: str) -> Optional[str]:
        """The literal value this module assigns to environment variable ``var``
        (``os.environ[var] = "1"``, ``os.environ.setdefault(var, "1")``, ``os.putenv``), or None."""

        if var not in self.m.source:
            return None
        v = re.escape(var)
        pats = (rf"environ\s*\[\s*['\"]{v}['\"]\s*\]\s*=\s*['\"]([^'\"]*)['\"]",
                rf"(?:setdefault|putenv|update)\s*\(\s*(?:{{\s*)?['\"]{v}['\"]\s*[,:]\s*['\"]([^'\"]*)['\"]",
                rf"environ\.update\s*\(\s*{v}\s*=\s*['\"]([^'\"]*)['\"]")
        for p in pats:
            mt = re.search(p, self.m.source)
            if mt:
                return mt.group(1)
        return None

    def env_writes(self, var: str) -> list[tuple[Union[CallSite, StoreSite], Optional[cst.BaseExpression]]]:
        """Writes of the environment variable ``var`` (a literal name), in source order:
        ``os.environ[var] = v``, ``os.environ.update({var: v})`` / ``update(var=v)``,
        ``os.environ.setdefault(var, v)``, ``os.putenv(var, v)``; with the value written
        (None when it cannot be picked out)."""
        if var not in self.m.source:
            return []
        out: list[tuple[Union[CallSite, StoreSite], Optional[cst.BaseExpression]]] = []
        for st in self._env_stores(var):
            if not st.deleted:
                out.append((st, st.value))
        for cs, q in self.m.calls_to(("os.environ.update", "os.environ.setdefault", "os.putenv",
                                    "os.environ.__setitem__")):
            if q == "os.environ.update":
                d = arg(cs.node, 0)
                if isinstance(d, cst.Dict):
                    for el in d.elements:
                        if isinstance(el, cst.DictElement) and literal_str(el.key) == var:
                            out.append((cs, el.value))
                elif keyword(cs.node, var) is not None:
                    out.append((cs, keyword(cs.node, var)))
            elif literal_str(arg(cs.node, 0)) == var:
                out.append((cs, arg(cs.node, 1)))
        out.sort(key=lambda e: e[0].order)
        return out

    def env_unsets(self, var: str) -> list[Union[CallSite, StoreSite]]:
        """Removals of the environment variable ``var``: ``del os.environ[var]``,
        ``os.environ.pop(var[, default])``, ``os.unsetenv(var)``; in source order."""
        if var not in self.m.source:
            return []
        out: list[Union[CallSite, StoreSite]] = [st for st in self._env_stores(var) if st.deleted]
        for cs, _q in self.m.calls_to(("os.environ.pop", "os.unsetenv", "os.environ.__delitem__")):
            if literal_str(arg(cs.node, 0)) == var:
                out.append(cs)
        out.sort(key=lambda e: e.order)
        return out

    def _env_stores(self, var: str) -> Iterator[StoreSite]:
        for st in self.m.stores:
            if len(st.target.slice) != 1 or not isinstance(st.target.slice[0].slice, cst.Index):
                continue
            if literal_str(st.target.slice[0].slice.value) != var:
                continue
            if self.m.qualified_name(st.target.value, st.scope, st.order)[0] == "os.environ":
                yield st

    # ---------------------------------------------------------------- devices the process sees
    def one_device_visible(self, site: CallSite) -> bool:
        """The process sees at most one GPU when ``site`` runs (a strategy made there has one
        local replica): on every path the program takes to ``site`` (:meth:`Module.traces`, through
        the module's own calls), the last device-visibility setting before it names at most one
        device -- ``os.environ["CUDA_VISIBLE_DEVICES"] = "0"`` / ``str(rank)`` /
        ``f"{local_rank}"`` (not ``"0,1"``), ``tf.config.set_visible_devices(gpus[rank], "GPU")``
        or a list of at most one device.  One process per GPU (MPI ranks, a launcher per device)
        makes the strategy of each process a one-replica strategy."""
        settings = self._visibility_settings()
        if not any(single for single in settings.values()):
            return False
        seen = False
        for trace in self.m.traces():
            for i, ev in enumerate(trace):
                if ev.site is not site:
                    continue
                seen = True
                conds = set(ev.conds)
                last = next((e for e in reversed(trace[:i]) if id(e.site) in settings and set(e.conds) <= conds),
                            None)
                if last is None or not settings[id(last.site)]:
                    return False
        return seen

    def _visibility_settings(self) -> dict[int, bool]:
        """id(site) of each write of CUDA_VISIBLE_DEVICES (not ``setdefault``: the variable may be
        set already) and each ``tf.config.set_visible_devices`` call -> it names at most one device."""
        memo = getattr(self, "_visibility_memo", None)
        if memo is not None:
            return memo
        out: dict[int, bool] = {}
        for st, value in self.env_writes("CUDA_VISIBLE_DEVICES"):
            if isinstance(st, CallSite) and self.m.qualified_name(st.node.func, st.scope, st.order)[0] \
                    == "os.environ.setdefault":
                continue
            out[id(st)] = value is not None and self._one_device_text(value, st.scope, st.order)
        for cs, _q in self.m.calls_to(_SET_VISIBLE):
            devs = arg(cs.node, 0, "devices")
            out[id(cs)] = isinstance(devs, cst.Subscript) and all(
                isinstance(el.slice, cst.Index) for el in devs.slice) or (
                isinstance(devs, (cst.List, cst.Tuple)) and len(devs.elements) <= 1)
        self._visibility_memo = out
        return out

    def _one_device_text(self, expr: cst.BaseExpression, scope, order: int, _depth: int = 0) -> bool:
        """``expr`` is the text of one device id (no comma in what is written literally, at most one
        value formatted in)."""
        if _depth > 4:
            return False
        s = literal_str(expr)
        if s is not None:
            return "," not in s
        if isinstance(expr, cst.FormattedString):
            lits = [p.value for p in expr.parts if isinstance(p, cst.FormattedStringText)]
            holes = [p for p in expr.parts if isinstance(p, cst.FormattedStringExpression)]
            return len(holes) <= 1 and not any("," in t for t in lits)
        if isinstance(expr, cst.Call):
            q, _ = self.m.qualified_name(expr.func, scope, order)
            if q in ("str", "builtins.str") or (isinstance(expr.func, cst.Name) and expr.func.value == "str"):
                return len(expr.args) == 1 and not isinstance(expr.args[0].value, (cst.List, cst.Tuple, cst.Set))
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format":
                fmt = literal_str(expr.func.value)
                return fmt is not None and "," not in fmt and len(expr.args) <= 1
            return False
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
            fmt = literal_str(expr.left)
            return fmt is not None and "," not in fmt and not (
                isinstance(expr.right, cst.Tuple) and len(expr.right.elements) > 1)
        if isinstance(expr, cst.Name):
            got = self.m.origin_exprs(expr, scope, order)
            return bool(got) and all(e is not expr and self._one_device_text(e, s2, o2, _depth + 1)
                                     for e, s2, o2 in got)
        return False


_SET_VISIBLE = ("tensorflow.config.set_visible_devices", "tensorflow.config.experimental.set_visible_devices")
