"""The relevance stage: between the substring pre-filter and the libcst parse.

The pre-filter (:func:`tfpar_lint.engine.candidate_rules`) keeps a rule when its marker substrings
occur in the text: ``strategy`` in ``strategy="greedy"`` is enough.  Most of the files it passes
hold nothing a rule can report: a rule reports what the analysis infers about *values* (a strategy,
a model, an optimizer, a thread...) and where they meet (a function run by ``strategy.run``, a
strategy's scope...), and a value of a kind exists in a module only where the module's code makes
one (an API the API table gives that kind), uses an object the way only that kind is used (the
analysis' kinds from use), or gets one from another module of the project.

This stage asks those questions of the code, cheaply: first of its words (identifiers of the code
without comments and docstrings, :func:`tfpar_lint.codetext.code_text`: no parse), then, for what
the words allow, of Python's ``ast`` (about ten times cheaper than libcst's parse), where a word
counts only in the place that matters (a method name as an attribute, not as a ``def``; an API name
imported or reached as an attribute, not a class of the module's own):

* a *fact* is a named, conservative test (``strategy``: can a strategy value exist in this module?
  ``replica_run``: is there a ``.run`` that could run a function on the replicas?).  Each is derived
  from the tables the analysis itself reads: the API table's kinds (:mod:`tfpar_lint.tfapi`), the
  kinds-from-use tables of :mod:`tfpar_lint.semantic.uses` and
  :class:`tfpar_lint.semantic.contexts.Contexts`, the thread and pool APIs;
* a rule's *needs* are a conjunction of disjunctions of facts (like its ``MARKERS``), declared as
  ``NEEDS`` on the rule class beside the ``check`` they summarise; a rule without ``NEEDS`` whose
  ``MARKERS`` hold the strategy group needs ``strategy`` (that group stands for "a strategy can be
  created or received here"); any other rule without ``NEEDS`` is always relevant (a new rule is
  parsed for until it says what it needs);
* a file whose project links the analysis may follow (a project module it imports, a project file
  that imports it: :meth:`~tfpar_lint.semantic.project.Project.imported_texts`,
  :meth:`~tfpar_lint.semantic.project.Project.importer_texts`) may get any value from next door, and
  have its functions run by another module: every fact holds for it;
* a candidate rule whose needs fail cannot report anything in the file and is not run; a file left
  with no rule is not parsed by libcst (Python checks its syntax, as for a file the pre-filter
  rejects).

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
from tfpar_lint.codetext import bare_code, code_text

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.engine import AnalysisOptions
    from tfpar_lint.rule import Rule

# Set to 0 to turn the stage off (every rule the pre-filter passes is run, as before).
ENV = "TFPAR_LINT_RELEVANCE"

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


# ================================================================ the code: its words, then its ast
_ATTR = re.compile(r"\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_DEFINED = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+[\w. \t]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)", re.M)
_STAR = re.compile(r"\bimport[ \t]+\*")
_BASES = re.compile(r"^[ \t]*class[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*\(([^)]*)\)", re.M)


class Text:
    """One module's code, asked about lazily: its words (regular expressions over the code without
    comments and string literals: every answer a superset of the truth), then, for the few shapes
    words cannot tell (:data:`AST_SHAPES`), its ``ast``."""

    def __init__(self, source: str, options: "AnalysisOptions", code: Optional[str] = None) -> None:
        self.source = source
        self.options = options
        self._code = code
        self._memo: dict[str, Any] = {}
        self._facts: dict[str, bool] = {}

    def _get(self, key: str, make: Callable[[], Any]) -> Any:
        got = self._memo.get(key, self)
        if got is self:
            got = self._memo[key] = make()
        return got

    @property
    def code(self) -> str:
        """The text without comments and docstrings (what ``text:`` facts search)."""
        if self._code is None:
            self._code = code_text(self.source)
        return self._code

    @property
    def bare(self) -> str:
        """The text without comments and string literals (f-strings kept)."""
        return self._get("bare", lambda: bare_code(self.source))

    @property
    def words(self) -> frozenset:
        """Identifiers of the code (string literals left out: no analysis reads a kind from one)."""
        return self._get("words", lambda: frozenset(_WORD.findall(self.bare)))

    @property
    def code_words(self) -> frozenset:
        """Identifiers of the code and its short strings (``word:`` facts)."""
        return self._get("code_words", lambda: frozenset(_WORD.findall(self.code)))

    @property
    def attrs(self) -> frozenset:
        """Names written after a ``.`` (attributes, methods; a superset)."""
        return self._get("attrs", lambda: frozenset(_ATTR.findall(self.bare)))

    @property
    def names(self) -> frozenset:
        """Identifiers not written after a ``.`` (names, and words of import lines)."""
        return self._get("names", lambda: frozenset(_WORD.findall(_ATTR.sub(".", self.bare))))

    @property
    def imported(self) -> frozenset:
        """Words of the import statements."""
        return self._get("imported", lambda: frozenset(
            w for m in _IMPORT.finditer(self.bare) for w in _WORD.findall(m.group(0))))

    @property
    def defined(self) -> frozenset:
        """Names of the module's own functions and classes (none where a star import may rebind)."""
        return self._get("defined", lambda: frozenset() if _STAR.search(self.bare)
                         else frozenset(_DEFINED.findall(self.bare)))

    def _only_in_bases(self, w: str) -> bool:
        """Every ``.w`` of the code stands in the bases of a class (``class S(lib.Strategy)``)."""
        bases = self._get("bases", lambda: "\n".join(m.group(1) for m in _BASES.finditer(self.bare)))
        pat = re.compile(rf"\.\s*{w}\b")
        n = len(pat.findall(bases))
        return n > 0 and n == len(pat.findall(self.bare))

    # -- where words stand
    def attribute(self, vocab: frozenset) -> bool:
        """A word of ``vocab`` is an attribute (``x.apply_gradients``): a method called or read."""
        return not vocab.isdisjoint(self.words) and not vocab.isdisjoint(self.attrs)

    def api_name(self, vocab: frozenset, bases: bool = True) -> bool:
        """A word of ``vocab`` may name an API: an attribute (not only in the bases of classes, unless
        ``bases``), an imported name, or a name the module does not define itself (``class Strategy``
        of the module's own is not the API's)."""
        found = vocab & self.words
        if not found:
            return False
        if not found.isdisjoint(self.imported) or not (found & self.names).issubset(self.defined):
            return True
        for w in found & self.attrs:
            if bases or not self._only_in_bases(w):
                return True
        return False

    @property
    def shapes(self) -> Optional[dict[str, bool]]:
        """The shapes of :func:`_walk` (one walk of the ``ast``); None when Python cannot parse the
        module (every shape holds then: the libcst parse gives the verdict)."""
        def walk() -> Optional[dict[str, bool]]:
            import ast

            try:
                return _walk(ast.parse(self.source))
            except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
                return None
        return self._get("shapes", walk)

    # While ``deferring``, a shape is taken to hold without walking the ast (and ``guessed`` is set):
    # a file that some rule needs whatever the shapes say is parsed by libcst anyway.
    deferring = False
    guessed = False

    def shape(self, name: str) -> bool:
        if self.deferring:
            self.guessed = True
            return True
        sh = self.shapes
        return True if sh is None else sh[name]

    @property
    def lines(self) -> dict[str, bool]:
        """The shapes :func:`_line_shapes` tells from the lines (before the ast is asked)."""
        return self._get("lines", lambda: _line_shapes(self.bare))

    def search(self, pattern: "re.Pattern") -> bool:
        return pattern.search(self.bare) is not None

    # -- facts
    def fact(self, name: str) -> bool:
        got = self._facts.get(name)
        if got is None:
            before, self.guessed = self.guessed, False
            if name.startswith("word:"):  # the identifier occurs in the code (or a short string)
                got = name[5:] in self.code_words
            elif name.startswith("attr:"):  # an attribute of that name (``x.apply_gradients``)
                got = self.attribute(frozenset({name[5:]}))
            elif name.startswith("text:"):  # the text occurs in the code
                got = name[5:] in self.code
            else:
                got = bool(FACTS[name](self))
            if not self.guessed:  # a guess is not kept: asked again without deferring, it is walked
                self._facts[name] = got
            self.guessed = self.guessed or before
        return got

    def holds(self, needs: Sequence[Sequence[str]]) -> bool:
        return all(any(self.fact(f) for f in group) for group in needs)

    def relevant(self, rules: Sequence[type]) -> list:
        """The rules whose needs hold.  The ast is walked only when it decides whether the file is
        parsed at all: when a rule needs the file whatever the shapes say, the rules whose needs
        hold with every shape taken to hold are kept (a rule kept so reports nothing it would not:
        its needs are conservative)."""
        self.deferring = True
        try:
            kept, sure = [], False
            for r in rules:
                needs = needs_of(r)
                if not needs:
                    kept.append(r)
                    sure = True
                    continue
                self.guessed = False
                if self.holds(needs):
                    kept.append(r)
                    sure = sure or not self.guessed
        finally:
            self.deferring = False
        if sure or not kept:
            return kept
        return [r for r in kept if self.holds(needs_of(r))]


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


# kinds a local class takes from its bases (semantic.attributes.Inference.class_kind)
CLASS_KINDS = frozenset({api.MODEL, api.LAYER, api.METRIC, api.OPTIMIZER})


def makes(text: Text, kind: str) -> bool:
    """The code may name an API that makes a value of ``kind`` (called, aliased, or as an
    annotation: parameters have the kind; as a class's base only for the kinds a subclass
    inherits)."""
    distinct, pairs = creators(kind)
    if text.api_name(distinct, bases=kind in CLASS_KINDS):
        return True
    w = text.words
    return any(last in w and owner in w for owner, last in pairs)


@functools.lru_cache(maxsize=None)
def uses_of(kind: str) -> frozenset:
    """Method and attribute names whose use on an object the analysis cannot follow gives it
    ``kind`` (the analysis' kinds from use): from :mod:`tfpar_lint.semantic.kinds` where the
    analysis has it, else from :mod:`tfpar_lint.semantic.uses` and
    :class:`tfpar_lint.semantic.contexts.Contexts`.  A table renamed there fails here, loudly."""
    try:
        from tfpar_lint.semantic import kinds as k  # type: ignore[attr-defined]
    except ImportError:
        k = None
    if k is not None:
        trainable = frozenset(k.TRAINABLE)  # gradients of X.trainable_variables: X a model, pairs: an optimizer
        table = {
            api.STRATEGY: k.STRATEGY_ONLY_METHODS | k.STRATEGY_ONLY_ATTRS | k._STRATEGY_METHODS,
            api.MODEL: k._MODEL_METHODS | trainable,
            api.OPTIMIZER: frozenset({"apply_gradients", "get_updates", "compile"}) | trainable,
            api.DATASET: k._DATASET_METHODS | api.DISTRIBUTE_DATASET_METHODS,
            api.METRIC: k._METRIC_METHODS,
            api.VARIABLE: k._VARIABLE_METHODS,
        }
    else:
        from tfpar_lint.semantic import uses
        from tfpar_lint.semantic.contexts import Contexts

        table = {
            api.STRATEGY: uses._STRATEGY_METHODS | Contexts._STRATEGY_ONLY_METHODS | Contexts._STRATEGY_ONLY_ATTRS,
            api.MODEL: uses._MODEL_METHODS,
            api.OPTIMIZER: frozenset({"apply_gradients", "compile"}),  # compile(optimizer=...)
        }
    out = frozenset(table.get(kind, ()))
    return out | {"experimental_run_v2"} if kind == api.STRATEGY else out


# ================================================================ shapes
GRADIENT_METHODS = frozenset({"gradient", "jacobian", "batch_jacobian"})
# shapes told by the ast (words cannot: which function a call is in, what a comprehension reads)
AST_SHAPES = ("tape_reuse", "free_comprehension", "sequence_repeat", "loop_closure")
_GRADIENT_CALL = re.compile(r"\.\s*(?:gradient|jacobian|batch_jacobian)\s*\(")
_REPEAT = re.compile(r"[\])]\s*\*(?!\*)|(?<!\*)\*\s*[\[(]")
_COMPREHENSION = re.compile(r"\bfor\b")
# strategy.run and friends (contexts.replica_runs, values' PER_REPLICA results, TFP701's partials):
# an attribute .run/.experimental_run_v2/.experimental_run, or .extended.call_for_each_replica
RUN_ATTRS = api.RUN_METHODS | {"call_for_each_replica"}
_REPLICA_RUN = re.compile(r"\.\s*(?:run|experimental_run_v2|experimental_run)\b"
                          r"|\.\s*extended\s*\.\s*call_for_each_replica\b")
_SCOPE = re.compile(r"\.\s*scope\b")
_SCOPE_CALL = re.compile(r"\.\s*scope\s*\(\s*\)")
_RUN_CALL = re.compile(r"\.\s*run\s*\(")
_ARGS_KEYWORD = re.compile(r"\b(?:args|kwargs)\s*=")
_REDUCE_CALL = re.compile(r"\.\s*reduce\s*\(")
_VALUES_ITEM = re.compile(r"\.\s*values\s*\[")
_TRY = re.compile(r"\btry\s*:")


_BLOCK = re.compile(r"(?:async[ \t]+)?(def|for|while|class)\b")
_OPEN = re.compile(r"[\[({]")
_CLOSE = re.compile(r"[\])}]")


def _line_shapes(bare: str) -> dict[str, bool]:
    """``tape_reuse`` and ``loop_closure`` told from the lines of the code (strings blanked), each a
    superset of :func:`_walk`'s: blocks by indentation, a lambda's calls counted in the function
    around it, a ``for`` anywhere in a logical line taken for a comprehension around everything in
    it, any loop of an enclosing block for a loop around the call."""
    out = {"tape_reuse": False, "loop_closure": False}
    stack: list[tuple[int, str, int]] = []  # open def/for/while/class blocks: (indentation, keyword, number)
    grads: dict[int, int] = {}  # id of the innermost def block (0: the module) -> gradient calls
    blocks = 0
    depth = 0  # brackets open (a logical line continues)
    joined = False  # the line before ended with a backslash
    logical: list[str] = []
    for line in bare.split("\n") + [""]:
        if depth > 0 or joined:
            logical.append(line)
        else:
            if logical:
                _logical_shapes("\n".join(logical), stack, grads, out)
            logical = [line]
            stripped = line.lstrip()
            if stripped:
                indent = len(line.expandtabs(8)) - len(stripped.expandtabs(8))
                while stack and stack[-1][0] >= indent:
                    stack.pop()
                m = _BLOCK.match(stripped)
                if stripped.startswith("@") and _GRADIENT_CALL.search(stripped):
                    out["tape_reuse"] = True  # a decorator's call: its function's, in the ast
                if m:
                    blocks += 1
                    stack.append((indent, m.group(1), blocks))
        depth = max(depth + len(_OPEN.findall(line)) - len(_CLOSE.findall(line)), 0)
        joined = line.rstrip().endswith("\\")
    return out


def _logical_shapes(text: str, stack: list, grads: dict, out: dict) -> None:
    looped = any(k in ("for", "while") for _i, k, _n in stack) or re.search(r"\bfor\b", text) is not None
    if looped and (re.search(r"\blambda\b", text) or (stack and stack[-1][1] == "def" and len(stack) > 1)):
        out["loop_closure"] = True
    n = len(_GRADIENT_CALL.findall(text))
    if n:
        group = next((e[2] for e in reversed(stack) if e[1] == "def"), 0)
        grads[group] = grads.get(group, 0) + n
        if looped or grads[group] > 1:
            out["tape_reuse"] = True


def _may_hold(e: Any) -> bool:
    """The expression may hold an object of the analysis' kinds: not a literal (a constant, a signed
    constant, a display: value inference gives none of them a kind such as a dataset)."""
    import ast

    t = type(e)
    if t is ast.Constant or t in (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.JoinedStr):
        return False
    return not (t is ast.UnaryOp and type(e.operand) is ast.Constant)


def _walk(tree: Any) -> dict[str, bool]:
    """The shapes words cannot tell, each a superset of what the analysis' own walk finds:

    * ``tape_reuse``: a function (or the module) asks ``.gradient``/``.jacobian``/
      ``.batch_jacobian`` twice, or once inside a loop or comprehension of its own (TFP702);
    * ``free_comprehension``: a list, dict or generator comprehension whose element reads none of
      its targets (``[ds for _ in range(n)]``, TFP202), and may hold an object (:func:`_may_hold`);
    * ``sequence_repeat``: a list or tuple display, with an item that may hold an object, multiplied
      (``[ds] * n``; not ``[0] * n``, TFP202);
    * ``loop_closure``: a lambda or a nested function made inside a loop or comprehension of the
      function (or module) around it (TFP303's late-bound loop variables)."""
    import ast

    out = dict.fromkeys(AST_SHAPES, False)
    grads: dict[int, int] = {}
    func_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    loop_types = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    stack: list[tuple[Any, int, bool]] = [(tree, 0, False)]
    while stack:
        node, group, loop = stack.pop()
        t = type(node)
        if t is ast.Name or t is ast.Constant:
            continue
        if t is ast.Call:
            f = node.func
            if type(f) is ast.Attribute and f.attr in GRADIENT_METHODS:
                grads[group] = grads.get(group, 0) + 1
                if loop or grads[group] > 1:
                    out["tape_reuse"] = True
        elif t is ast.BinOp:
            if type(node.op) is ast.Mult:
                for side in (node.left, node.right):
                    if type(side) in (ast.List, ast.Tuple) and any(_may_hold(e) for e in side.elts):
                        out["sequence_repeat"] = True
        elif t in (ast.ListComp, ast.GeneratorExp, ast.DictComp):
            if not out["free_comprehension"]:
                elt = node.value if t is ast.DictComp else node.elt
                if _may_hold(elt):
                    targets = {n.id for g in node.generators for n in ast.walk(g.target) if type(n) is ast.Name}
                    if targets.isdisjoint(n.id for n in ast.walk(elt) if type(n) is ast.Name):
                        out["free_comprehension"] = True
        if t in func_types:
            if loop:
                out["loop_closure"] = True
            group, loop = id(node), False
        elif t in loop_types:
            loop = True
        for child in ast.iter_child_nodes(node):
            stack.append((child, group, loop))
    return out


# ================================================================ the facts
def _strategy(text: Text) -> bool:
    """A strategy value can exist here: an API makes one (or a getter returns one), a configured
    factory or distributor is called, or an object is used as only a strategy is."""
    if makes(text, api.STRATEGY) or text.api_name(frozenset(_last(q) for q in api.STRATEGY_GETTERS)):
        return True
    opts = text.options
    w = text.words
    if any(_last(q) in w for q in opts.strategy_factories + opts.dataset_distributors):
        return True
    if text.attribute(uses_of(api.STRATEGY)):
        return True
    if "scope" in w and text.search(_SCOPE_CALL):  # X.scope(): X is a strategy (uses.py)
        return True
    if "run" in w and text.search(_RUN_CALL) and text.search(_ARGS_KEYWORD):  # X.run(fn, args=...)
        return True
    if "extended" in w and "call_for_each_replica" in w and text.search(_REPLICA_RUN):
        return True  # X.extended.call_for_each_replica(fn)
    return "ReduceOp" in w and "reduce" in w and text.search(_REDUCE_CALL)  # X.reduce(ReduceOp.SUM, ...)


def _kind(kind: str) -> Callable[[Text], bool]:
    """A value of ``kind`` can exist: an API makes one, or an object is used as only one is
    (:func:`uses_of`)."""
    def fact(text: Text) -> bool:
        return makes(text, kind) or text.attribute(uses_of(kind))
    fact.__doc__ = f"a {kind} can exist here"
    return fact


def _thread(text: Text) -> bool:
    """A Python thread can be started here (:meth:`tfpar_lint.semantic.callgraph.CallGraph.handed_over`:
    ``threading.Thread``/``Timer``, a ``Thread`` subclass, a thread pool's methods)."""
    w = text.words
    return ("threading" in w and not {"Thread", "Timer"}.isdisjoint(w)) or makes(text, api.EXECUTOR)


def _variable(text: Text) -> bool:
    """A ``tf.Variable`` can exist: an API makes one, or a model's or layer's variables are read."""
    if makes(text, api.VARIABLE) or text.attribute(uses_of(api.VARIABLE)):
        return True
    return text.attribute(frozenset(api.VARIABLE_LIST_ATTRS | api.VARIABLE_ATTRS)) \
        and (text.fact("model") or text.fact("layer"))


def _dataset(text: Text) -> bool:
    """A tf.data dataset (or an iterator over one) can exist."""
    return makes(text, api.DATASET) or text.attribute(uses_of(api.DATASET)) \
        or text.api_name(frozenset(_last(q) for q in api.V1_ITERATOR_FACTORIES))


def _distributes(text: Text) -> bool:
    """Data distributed by a strategy (or by a configured distributor) can exist here."""
    methods = frozenset(api.DISTRIBUTE_DATASET_METHODS | api.DISTRIBUTE_FN_METHODS | api.DISTRIBUTE_VALUES_METHODS)
    if text.attribute(methods) or makes(text, api.DIST_DATASET):
        return True
    return any(_last(q) in text.words for q in text.options.dataset_distributors)


_TF_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+tensorflow\b|import[ \t]+(?:[\w.]+[ \t]*(?:as[ \t]+\w+)?[ \t]*,[ \t]*)*"
                        r"tensorflow\b)", re.M)
_TF_BOUND = re.compile(r"^(?:from[ \t]+[\w.]+[ \t]+)?import[ \t][^\n]*\bas[ \t]+tf\b", re.M)
_CLUSTER_KEY = re.compile(r"[\"']cluster[\"']")
_TASK_KEY = re.compile(r"[\"']task[\"']")


@functools.lru_cache(maxsize=1)
def _mirroring_names() -> frozenset:
    from tfpar_lint.semantic.placement import MIRRORING

    return frozenset(_last(q) for q in MIRRORING)


@functools.lru_cache(maxsize=1)
def _session_names() -> frozenset:
    from tfpar_lint.semantic import threadfacts

    return frozenset(_last(q) for q in threadfacts.SESSION_CLASSES | threadfacts.SESSION_GETTERS)


def _task_source(text: Text) -> bool:
    """Where the task type and index can come from (:func:`tfpar_lint.semantic.lifecycle.task_source`,
    :func:`tfpar_lint.semantic.chieftests.task_field`): the ``TF_CONFIG`` variable, a strategy's
    ``cluster_resolver`` or its ``extended`` chief flags, a cluster resolver of
    ``tf.distribute.cluster_resolver``, a config dict with ``"cluster"`` and ``"task"``."""
    from tfpar_lint.semantic import lifecycle

    if "TF_CONFIG" in text.code or "cluster_resolver" in text.attrs:
        return True
    if "extended" in text.attrs and not lifecycle._CHIEF_FLAGS.isdisjoint(text.attrs):
        return True
    if _CLUSTER_KEY.search(text.code) and _TASK_KEY.search(text.code):  # {"cluster": ..., "task": ...}
        return True
    return text.api_name(frozenset(w for w in text.words if w.endswith("ClusterResolver")))


FACTS: dict[str, Callable[[Text], bool]] = {
    "strategy": _strategy,
    "strategy_made": lambda text: makes(text, api.STRATEGY),
    # tf.device (api.DEVICE_SCOPE): the word, and TensorFlow imported, or `tf` used and not bound at
    # module level by an import (a name bound nowhere is TensorFlow: bindings.FREE_ALIASES)
    "tf_device": lambda text: "device" in text.words and (
        text.search(_TF_IMPORT) or ("tf" in text.names and not text.search(_TF_BOUND))),
    # a MirroredStrategy or MultiWorkerMirroredStrategy of the API (semantic.placement.MIRRORING)
    "mirroring": lambda text: text.api_name(_mirroring_names(), bases=False),
    "model": _kind(api.MODEL),
    "layer": _kind(api.LAYER),
    "optimizer": _kind(api.OPTIMIZER),
    "metric": _kind(api.METRIC),
    "loss": _kind(api.LOSS),
    "tape": _kind(api.TAPE),
    "variable": _variable,
    "dataset": _dataset,
    "thread": _thread,
    # a strategy's values function by its method's name (the receiver: checked by the analysis)
    "values_fn": lambda text: text.attribute(frozenset(api.DISTRIBUTE_VALUES_METHODS)),
    "distributes": _distributes,
    # x.values[i]: a PerReplica's components read by index (perreplica.hedged_roots)
    # (in a try whose handler falls back to x: perreplica.hedged_roots)
    "values_item": lambda text: "values" in text.attrs and "except" in text.words and text.search(_VALUES_ITEM)
    and text.search(_TRY),
    # TF1 sessions, Keras 2 training functions (K.function(..., updates=...)): semantic.threads' writes
    "session": lambda text: text.api_name(_session_names()),
    "keras_function": lambda text: {"backend", "function"} <= text.words,
    "task_source": _task_source,
    # a strategy's scope: X.scope, or tf.distribute.experimental_set_strategy
    "scope": lambda text: ("scope" in text.attrs and text.search(_SCOPE))
    or text.api_name(frozenset({"experimental_set_strategy"})),
    # every replica function, PerReplica result and eager strategy.run starts at one (in this module
    # or in an importer, which links the file)
    "replica_run": lambda text: not RUN_ATTRS.isdisjoint(text.attrs) and text.search(_REPLICA_RUN),
    # the ast's shapes, after their words
    "tape_reuse": lambda text: _GRADIENT_CALL.search(text.bare) is not None and text.lines["tape_reuse"]
    and text.shape("tape_reuse"),
    "free_comprehension": lambda text: text.search(_COMPREHENSION) and text.shape("free_comprehension"),
    "sequence_repeat": lambda text: text.search(_REPEAT) and text.shape("sequence_repeat"),
    "loop_closure": lambda text: not {"lambda", "def"}.isdisjoint(text.words)
    and not {"for", "while"}.isdisjoint(text.words) and text.lines["loop_closure"] and text.shape("loop_closure"),
}


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
                if f not in FACTS and not f.startswith(("word:", "text:", "attr:")):
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
    if not any(needs_of(r) for r in rules):
        return list(rules)
    if project is not None and path and linked(project, path, source):
        return list(rules)
    return Text(source, options, code).relevant(rules)


def linked(project: Any, path: str, source: str) -> bool:
    """``path`` imports a module of its project or is imported by one (values may cross, and another
    module may run its functions)."""
    return bool(project.imported_texts(path, source)) or bool(project.importer_texts(path))
