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
