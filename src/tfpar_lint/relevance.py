"""The relevance stage: between the substring pre-filter and the libcst parse.

The pre-filter (:func:`tfpar_lint.engine.candidate_rules`) keeps a rule when its marker substrings
occur in the text: ``strategy`` in ``strategy="greedy"`` is enough.  Most of the files it passes
hold nothing a rule can report: a rule reports what the analysis infers about *values* (a strategy,
a model, an optimizer, a thread...), and a value of a kind exists in a module only where the
module's code makes one (an API the API table gives that kind, a call the analysis treats as
making one), uses an object the way only that kind is used (the analysis' kinds from use), or
gets one from another module of the project.

This stage asks that question of the code's words (identifiers of the code without comments and
docstrings: :func:`tfpar_lint.codetext.code_text`), with no parse at all:

* a *fact* is a named, conservative test on those words (``strategy``: can a strategy value exist
  in this module?).  Each fact is derived from the tables the analysis itself reads: the API
  table's kinds (``tfapi``), the kinds-from-use tables of :mod:`tfpar_lint.semantic.uses` and
  :mod:`tfpar_lint.semantic.contexts`, the thread and pool APIs of :mod:`tfpar_lint.semantic.callgraph`;
* a rule's *needs* are a conjunction of disjunctions of facts (like its ``MARKERS``), declared as
  ``NEEDS`` on the rule class; a rule without ``NEEDS`` whose ``MARKERS`` hold the strategy group
  needs ``strategy`` (that group stands for "a strategy can be created or received here"), any
  other rule without ``NEEDS`` is always relevant;
* a file whose project links the analysis may follow (a project module it imports, a project file
  that imports it: :meth:`~tfpar_lint.semantic.project.Project.imported_texts`,
  :meth:`~tfpar_lint.semantic.project.Project.importer_texts`) may get any value from next door:
  every fact holds for it;
* a candidate rule whose needs fail cannot report anything in the file and is not run; a file left
  with no rule is not parsed by libcst (it is syntax-checked by Python, as a file the pre-filter
  rejects is).

Findings are the same with and without the stage (``TFPAR_LINT_RELEVANCE=0`` turns it off, for
comparison: ``tests/test_relevance.py`` compares both over the fixtures and the test data, and
``benchmarks/identical.py`` compares two commits over the real-code sets and a corpus).
"""
from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from tfpar_lint import tfapi as api
from tfpar_lint.codetext import code_text

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.engine import AnalysisOptions
    from tfpar_lint.rule import Rule

# Set to 0 to turn the stage off (every rule the pre-filter passes is run, as before).
ENV = "TFPAR_LINT_RELEVANCE"

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINED = re.compile(r"^[ \t]*(?:async[ \t]+def|def|class)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


# ================================================================ the code's words
class Text:
    """The words of one module's code (computed once, on the first question)."""

    def __init__(self, source: str, options: "AnalysisOptions", code: Optional[str] = None) -> None:
        self.source = source
        self.options = options
        self._code = code
        self._words: Optional[frozenset[str]] = None
        self._facts: dict[str, bool] = {}

    @property
    def code(self) -> str:
        if self._code is None:
            self._code = code_text(self.source)
        return self._code

    @property
    def words(self) -> frozenset[str]:
        if self._words is None:
            self._words = frozenset(_WORD.findall(self.code))
        return self._words

    def api_words(self, vocab: frozenset) -> frozenset:
        """The words of ``vocab`` in the code that may name an API: a word the module defines itself
        (``class Strategy``) counts only where it is imported or reached as an attribute."""
        found = vocab & self.words
        if not found:
            return found
        local = set(_DEFINED.findall(self.code)) & found
        if not local:
            return found
        keep = set(found - local)
        for w in local:
            if re.search(rf"\.[ \t]*{w}\b|\bimport\b[^\n]*\b{w}\b", self.code) or _imported_in_parens(self.code, w):
                keep.add(w)
        return frozenset(keep)

    @property
    def structure(self) -> Optional[dict[str, bool]]:
        """The facts of the code's shapes (:func:`_structure`), or None when Python cannot parse it
        (the libcst parse gives the verdict then)."""
        if not hasattr(self, "_structure"):
            import ast

            try:
                self._structure = _structure(ast.parse(self.source))
            except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
                self._structure = None
        return self._structure

    def fact(self, name: str) -> bool:
        got = self._facts.get(name)
        if got is None:
            if name.startswith("word:"):  # the identifier occurs in the code
                got = name[5:] in self.words
            elif name.startswith("text:"):  # the text occurs in the code
                got = name[5:] in self.code
            else:
                got = bool(FACTS[name](self))
            self._facts[name] = got
        return got

    def holds(self, needs: Sequence[Sequence[str]]) -> bool:
        return all(any(self.fact(f) for f in group) for group in needs)


def _imported_in_parens(code: str, w: str) -> bool:
    """``w`` among the names of a parenthesised ``from x import (...)``."""
    for m in re.finditer(r"\bimport[ \t]*\(([^)]*)\)", code):
        if re.search(rf"\b{w}\b", m.group(1)):
            return True
    return False


# ================================================================ vocabularies from the analysis' tables
def _last(q: str) -> str:
    return q.rsplit(".", 1)[-1]


@functools.lru_cache(maxsize=None)
def creators(kind: str) -> tuple[frozenset, frozenset]:
    """The API names that make a value of ``kind`` (``tfapi.kind_of_constructor``: the table's
    classes and functions of that kind, and the thread, pool and lock classes of the standard
    library): (distinctive last names, (owner, last name) pairs of the generic ones).

    A last name is generic when it is a lower-case word without ``_`` (``optimizers.get``,
    ``Dataset.range``): it counts only beside its owner's name.  Whatever spelling reaches the API
    (``tf.keras.optimizers.Adam``, ``from keras.optimizers import Adam as A``, an alias module
    ``O = tf.optimizers; O.Adam()``) writes its last name, and its owner's name (in the chain or
    the import line)."""
    t = api.table()
    names = [q for q, k in t.cls.items() if k == kind] + [q for q, k in t.call.items() if k == kind]
    names += [q for q, k in api._NON_TF_CONSTRUCTORS.items() if k == kind]
    distinct: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for q in names:
        owner, _, last = q.rpartition(".")
        if last.islower() and "_" not in last and owner:
            pairs.add((_last(owner), last))
        else:
            distinct.add(last)
    return frozenset(distinct), frozenset(pairs)


def makes(text: Text, kind: str) -> bool:
    """The code names an API that makes a value of ``kind``."""
    distinct, pairs = creators(kind)
    if text.api_words(distinct):
        return True
    w = text.words
    return any(last in w and owner in w for owner, last in pairs)


@functools.lru_cache(maxsize=1)
def strategy_use_words() -> frozenset:
    """Methods and attributes that only a strategy has: a receiver used so is one (kinds from use,
    :mod:`tfpar_lint.semantic.uses` and :class:`tfpar_lint.semantic.contexts.Contexts`)."""
    from tfpar_lint.semantic import uses
    from tfpar_lint.semantic.contexts import Contexts

    return frozenset(uses._STRATEGY_METHODS | Contexts._STRATEGY_ONLY_METHODS | Contexts._STRATEGY_ONLY_ATTRS
                     | {"call_for_each_replica", "experimental_run_v2"})


_SCOPE_CALL = re.compile(r"\.\s*scope\s*\(\s*\)")
_RUN_CALL = re.compile(r"\.\s*run\s*\(")
_ARGS_KEYWORD = re.compile(r"\b(?:args|kwargs)\s*=")


def _strategy(text: Text) -> bool:
    w = text.words
    if makes(text, api.STRATEGY) or text.api_words(frozenset(_last(q) for q in api.STRATEGY_GETTERS)):
        return True
    opts = text.options
    if any(_last(q) in w for q in opts.strategy_factories + opts.dataset_distributors):
        return True
    if not strategy_use_words().isdisjoint(w):
        return True
    code = text.code
    if "scope" in w and _SCOPE_CALL.search(code):  # X.scope(): X is a strategy (uses.py)
        return True
    if "run" in w and _RUN_CALL.search(code) and _ARGS_KEYWORD.search(code):  # X.run(fn, args=...)
        return True
    return "reduce" in w and "ReduceOp" in w  # X.reduce(tf.distribute.ReduceOp.SUM, ...)


def _kind(kind: str, *uses: str) -> Callable[[Text], bool]:
    """A value of ``kind`` can exist: an API makes one, or an object is used as only one is
    (``uses``: the analysis' kinds from use)."""
    words = frozenset(uses)

    def fact(text: Text) -> bool:
        return makes(text, kind) or not words.isdisjoint(text.words)
    fact.__doc__ = f"a {kind} can exist here"
    return fact


def _model_uses() -> frozenset:
    from tfpar_lint.semantic import uses

    return uses._MODEL_METHODS


def _thread(text: Text) -> bool:
    """A Python thread can be started here (:meth:`tfpar_lint.semantic.callgraph.CallGraph.handed_over`:
    ``threading.Thread``/``Timer``, a ``Thread`` subclass, a thread pool's methods)."""
    w = text.words
    return ("threading" in w and not {"Thread", "Timer"}.isdisjoint(w)) or makes(text, api.EXECUTOR)


def _variable(text: Text) -> bool:
    """A ``tf.Variable`` can exist: an API makes one, or a model's or layer's variables are read."""
    if makes(text, api.VARIABLE):
        return True
    attrs = api.VARIABLE_LIST_ATTRS | api.VARIABLE_ATTRS
    return not attrs.isdisjoint(text.words) and (FACTS["model"](text) or makes(text, api.LAYER))


def _dataset(text: Text) -> bool:
    """A tf.data dataset (or an iterator over one) can exist."""
    w = text.words
    return makes(text, api.DATASET) or any(_last(q) in w for q in api.V1_ITERATOR_FACTORIES)


# ================================================================ shapes of the code (one ast walk)
GRADIENT_METHODS = frozenset({"gradient", "jacobian", "batch_jacobian"})
# strategy.run and friends (contexts.replica_runs, values' PER_REPLICA results, TFP701's partials)
RUN_ATTRS = api.RUN_METHODS | {"call_for_each_replica"}
SHAPES = ("tape_reuse", "free_comprehension", "sequence_repeat", "replica_run", "scope")


def _structure(tree: Any) -> dict[str, bool]:
    """Facts of the code's shapes, each a superset of what the analysis' own walk finds:

    * ``tape_reuse``: a function (or the module) asks ``.gradient``/``.jacobian``/
      ``.batch_jacobian`` twice, or once inside a loop or comprehension of its own (TFP702);
    * ``free_comprehension``: a list, dict or generator comprehension whose element reads none of
      its targets (``[ds for _ in range(n)]``, TFP202);
    * ``sequence_repeat``: a list or tuple display multiplied (``[ds] * n``, TFP202);
    * ``replica_run``: an attribute ``.run``/``.experimental_run_v2``/``.experimental_run``/
      ``.call_for_each_replica``, called or not: every replica function, ``PerReplica`` result and
      eager ``strategy.run`` starts at one (in this module or in an importer, which links the file);
    * ``scope``: an attribute ``.scope``: every strategy scope the analysis knows is entered by a
      ``with X.scope():`` (directly, through a helper returning ``X.scope()``, or around a caller)."""
    import ast

    out = dict.fromkeys(SHAPES, False)
    grads: dict[int, int] = {}
    func_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    loop_types = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    stack: list[tuple[Any, int, bool]] = [(tree, 0, False)]
    while stack:
        node, group, loop = stack.pop()
        if isinstance(node, ast.Attribute):
            if node.attr in RUN_ATTRS:
                out["replica_run"] = True
            elif node.attr == "scope":
                out["scope"] = True
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mult) and (isinstance(node.left, (ast.List, ast.Tuple))
                                                   or isinstance(node.right, (ast.List, ast.Tuple))):
                out["sequence_repeat"] = True
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.DictComp)) and not out["free_comprehension"]:
            targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            elt = node.value if isinstance(node, ast.DictComp) else node.elt
            if targets.isdisjoint(n.id for n in ast.walk(elt) if isinstance(n, ast.Name)):
                out["free_comprehension"] = True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr in GRADIENT_METHODS:
                grads[group] = grads.get(group, 0) + 1
                if loop or grads[group] > 1:
                    out["tape_reuse"] = True
        if isinstance(node, func_types):
            group, loop = id(node), False
        elif isinstance(node, loop_types):
            loop = True
        for child in ast.iter_child_nodes(node):
            stack.append((child, group, loop))
    return out


def _shape(name: str) -> Callable[[Text], bool]:
    def fact(text: Text) -> bool:
        st = text.structure
        return True if st is None else st[name]
    return fact


_VALUES_ITEM = re.compile(r"\.\s*values\s*\[")


def _distributes(text: Text) -> bool:
    w = text.words
    methods = api.DISTRIBUTE_DATASET_METHODS | api.DISTRIBUTE_FN_METHODS | api.DISTRIBUTE_VALUES_METHODS
    if not methods.isdisjoint(w) or makes(text, api.DIST_DATASET):
        return True
    return any(_last(q) in w for q in text.options.dataset_distributors)


# ================================================================ the facts
FACTS: dict[str, Callable[[Text], bool]] = {
    "strategy": _strategy,
    "model": lambda text: makes(text, api.MODEL) or not _model_uses().isdisjoint(text.words),
    "layer": lambda text: makes(text, api.LAYER),
    # apply_gradients, or given to compile(optimizer=...) (uses.py)
    "optimizer": _kind(api.OPTIMIZER, "apply_gradients", "compile"),
    "metric": _kind(api.METRIC),
    "loss": _kind(api.LOSS),
    "tape": _kind(api.TAPE),
    "variable": _variable,
    "dataset": _dataset,
    "thread": _thread,
    "strategy_made": lambda text: makes(text, api.STRATEGY),
    # Strategy methods by name (the receiver a strategy: checked by the analysis)
    "values_fn": lambda text: not api.DISTRIBUTE_VALUES_METHODS.isdisjoint(text.words),
    # distributed data: a dataset or values distributed by a strategy (or a configured distributor)
    "distributes": _distributes,
    # x.values[i]: a PerReplica's components read by index (perreplica.hedged_roots)
    "values_item": lambda text: "values" in text.words and _VALUES_ITEM.search(text.code) is not None,
    **{name: _shape(name) for name in SHAPES},
}
FACTS["scope"] = lambda text: _shape("scope")(text) or "experimental_set_strategy" in text.words


# ================================================================ rules' needs
@functools.lru_cache(maxsize=None)
def needs_of(rule: type) -> tuple[tuple[str, ...], ...]:
    """The rule's needs: its ``NEEDS``, else ``(("strategy",),)`` when a group of its ``MARKERS`` is
    the strategy group, else none (always relevant)."""
    from tfpar_lint.rule import STRATEGY_MARKERS

    declared = getattr(rule, "NEEDS", None)
    if declared is not None:
        for group in declared:
            for f in group:
                if f not in FACTS and not f.startswith(("word:", "text:")):
                    raise ValueError(f"{rule.CODE}: unknown relevance fact {f!r}")
        return tuple(tuple(g) for g in declared)
    strat = frozenset(STRATEGY_MARKERS)
    if any(frozenset(g) == strat for g in getattr(rule, "MARKERS", ())):
        return (("strategy",),)
    return ()


def relevant_rules(source: str, rules: Sequence[type["Rule"]], options: "AnalysisOptions",
                   path: Optional[str] = None, project: Any = None, code: Optional[str] = None) -> list:
    """The rules of ``rules`` (the pre-filter's candidates) whose needs the code meets.  ``project``:
    ``path``'s project (whole-project analysis), or None."""
    if not rules or not enabled():
        return list(rules)
    if options.extra_markers and any(m in source for m in options.extra_markers):
        return list(rules)  # the user says what makes a file relevant
    pending = [r for r in rules if needs_of(r)]
    if not pending:
        return list(rules)
    if project is not None and path and linked(project, path, source):
        return list(rules)
    text = Text(source, options, code)
    return [r for r in rules if not needs_of(r) or text.holds(needs_of(r))]


def linked(project: Any, path: str, source: str) -> bool:
    """``path`` imports a module of its project or is imported by one (values may cross)."""
    return bool(project.imported_texts(path, source)) or bool(project.importer_texts(path))
