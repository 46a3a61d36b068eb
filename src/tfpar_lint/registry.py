"""Collects the rule classes from ``tfpar_lint/rules/`` (one per file)."""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from tfpar_lint.rule import Rule


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    import tfpar_lint.rules as pkg

    found: list[type[Rule]] = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.name.startswith("tfp"):
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.CODE:
                if obj.__module__ == mod.__name__:
                    found.append(obj)
    found.sort(key=lambda r: r.CODE)
    codes = [r.CODE for r in found]
    dupes = {c for c in codes if codes.count(c) > 1}
    if dupes:  # pragma: no cover - caught by tests
        raise RuntimeError(f"duplicate rule codes: {sorted(dupes)}")
    return tuple(found)


def rules_by_code() -> dict[str, type[Rule]]:
    return {r.CODE: r for r in all_rules()}


def rules_by_name() -> dict[str, type[Rule]]:
    return {r.NAME: r for r in all_rules()}


@lru_cache(maxsize=1)
def default_codes() -> frozenset[str]:
    return frozenset(r.CODE for r in all_rules() if r.DEFAULT_ENABLED)


@lru_cache(maxsize=1)
def rule_names() -> tuple[str, ...]:
    return tuple(r.NAME for r in all_rules())


def expand_selector(selector: str) -> set[str]:
    """A code (TFP101), a prefix (TFP1, TFP), ``ALL`` or a rule name -> codes."""
    sel = selector.strip()
    rules = all_rules()
    if not sel:
        return set()
    if sel.upper() == "ALL":
        return {r.CODE for r in rules}
    by_name = rules_by_name()
    if sel in by_name:
        return {by_name[sel].CODE}
    up = sel.upper()
    return {r.CODE for r in rules if r.CODE.startswith(up)}


def select_codes(selector: str) -> set[str]:
    """The codes a *select* turns on: a rule that is off by default is turned on only by its
    own code or name, or by ``ALL``, never by a prefix (``TFP``, ``TFP4``).  So ``--select TFP``
    (the usual flake8 spelling) gives the default rule set in both front ends."""
    codes = expand_selector(selector)
    sel = selector.strip()
    if sel.upper() == "ALL" or sel in rules_by_name() or sel.upper() in rules_by_code():
        return codes
    return codes & default_codes()
