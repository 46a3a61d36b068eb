#!/usr/bin/env python3
"""Generate ``src/tfpar_lint/data/api_table.json.gz``: the TensorFlow / Keras API table.

The linter never imports TensorFlow.  Everything it knows about the TensorFlow family's public
names comes from this table, which this script builds from the released wheels on PyPI, reading
their sources as text (``ast``), never importing them:

* the public names: the generated API modules (``tensorflow/_api/v2/**/__init__.py``,
  ``keras/api/_v2/keras/**``, Keras 3's ``keras/**/__init__.py``, ...) and the package
  ``__init__`` files they re-export, walked from each package's root;
* what each name resolves to: the private class or function that the import chain ends at
  (``tensorflow.distribute.MirroredStrategy`` ->
  ``tensorflow.python.distribute.mirrored_strategy.MirroredStrategy``);
* its kind: a class's kind comes from its base classes, resolved through the source with
  ``ast`` (``class Adam(optimizer.Optimizer)`` -> the class ``Optimizer`` of an optimizer
  module -> optimizer); a function's kind is what it returns (its return annotation, or the
  classes and functions its ``return`` statements call);
* the versions that have it: one bit per release (the newest patch of each minor version).

Wheels are read with HTTP range requests (``scripts/_wheelzip.py``): a TensorFlow wheel is
400-650 MB, its Python sources about 6 MB.  The sources of each wheel are cached under
``--cache`` (default ``~/.cache/tfpar-lint-apitable``), so a re-run is offline.

Usage:  python scripts/gen_api_table.py [--out PATH] [--cache DIR] [--quick]
See docs/api-table.md.
"""
from __future__ import annotations

import argparse
import ast
import gzip
import io
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Iterable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))

import _wheelzip  # noqa: E402
from tfpar_lint import tfapi  # noqa: E402
from tfpar_lint.tfapi import canonical  # noqa: E402  (import spellings; the aliases are set below)

OUT = os.path.join(ROOT, "src", "tfpar_lint", "data", "api_table.json.gz")
FORMAT = 1

# ----------------------------------------------------------------------------- kinds
# The kinds the analysis knows (tfpar_lint.tfapi's constants), most specific first: a Keras
# Model is a Layer, a Keras 2 Metric is a Layer; the first kind found among a class's
# ancestors wins.
PRECEDENCE = ("model", "optimizer", "metric", "loss", "strategy", "dist_dataset", "dataset",
              "checkpoint_manager", "checkpoint", "generator", "variable", "tape", "lock", "layer")

# The root class of each kind, by its private path (a regular expression on ``module.Class``).
# Every other class gets its kind by deriving from one of these.  These are the only
# hand-written facts about classes: each root is named in the package's own docs as the base
# class of its family (``tf.keras.Model``, ``tf.keras.optimizers.Optimizer``, ...).
ROOTS = [
    ("model", r"(^|\.)engine\.training(_v1)?\.Model$|(^|\.)models\.model\.Model$"),
    ("layer", r"(^|\.)engine\.base_layer(_v1)?\.Layer$|(^|\.)layers\.layer\.Layer$"),
    ("optimizer", r"\.optimizer_v2\.optimizer_v2\.OptimizerV2$|^tensorflow\.python\.training\.optimizer\.Optimizer$"
                  r"|(^|\.)optimizers\.(optimizer|base_optimizer|optimizer_experimental\.optimizer)\.(_?Base)?Optimizer$"),
    ("metric", r"(^|\.)metrics(\.base_metric|\.metric)?\.Metric$"),
    ("loss", r"(^|\.)losses(\.loss)?\.Loss$"),
    ("strategy", r"^tensorflow\.python\.distribute\.distribute_lib\.(StrategyBase|Strategy|StrategyV1)$"),
    ("dist_dataset", r"^tensorflow\.python\.(distribute\.input_lib|types\.distribute)\.(DistributedDataset|DistributedDatasetInterface)$"),
    ("dataset", r"^tensorflow\.python\.data\.ops\.dataset_ops\.(DatasetV2|DatasetV1)$"),
    ("checkpoint_manager", r"\.checkpoint_management\.CheckpointManager$"),
    ("checkpoint", r"^tensorflow\.python\.(checkpoint\.checkpoint|training\.tracking\.util)\.(Checkpoint|CheckpointV1)$"),
    ("generator", r"^tensorflow\.python\.ops\.stateful_random_ops\.Generator$"),
    ("variable", r"^tensorflow\.python\.ops\.variables\.(Variable|VariableV1)$"
                 r"|^keras\.src\.backend\.common\.variables\.(KerasVariable|Variable)$"),
    ("tape", r"^tensorflow\.python\.eager\.backprop\.GradientTape$"),
    ("lock", r"^tensorflow\.python\.ops\.critical_section_ops\.CriticalSection$"),
]
_ROOTS = [(k, re.compile(p)) for k, p in ROOTS]

# Public functions whose result the source cannot tell statically (it comes through a registry,
# a thread-local or a method of an object built at run time).  Each is stated in the package's
# docs; the generator applies an entry only to names that exist in the release it reads.
RETURNS = {
    # returns the strategy of the enclosing scope (a thread-local), documented as the Strategy
    "tensorflow.distribute.get_strategy": "strategy",
    "tensorflow.compat.v1.distribute.get_strategy": "strategy",
    # the global generator, created lazily in a module global
    "tensorflow.random.get_global_generator": "generator",
    "tensorflow.random.experimental.get_global_generator": "generator",
    # ``builder.as_dataset(...)``: a tf.data.Dataset (a tuple with the info if with_info=True)
    "tensorflow_datasets.load": "dataset",
    # deserialised from a file or a config through Keras's object registry
    "keras.models.load_model": "model",
    "keras.saving.load_model": "model",
    "keras.models.model_from_json": "model",
    "keras.models.model_from_config": "model",
    "keras.models.model_from_yaml": "model",
    "keras.models.clone_model": "model",
    "tf_keras.models.load_model": "model",
    "tf_keras.saving.load_model": "model",
    "tf_keras.models.model_from_json": "model",
    "tf_keras.models.model_from_config": "model",
    "tf_keras.models.clone_model": "model",
    "tensorflow.keras.models.load_model": "model",
    "tensorflow.keras.models.model_from_json": "model",
    "tensorflow.keras.models.model_from_config": "model",
    "tensorflow.keras.models.clone_model": "model",
}

# Class methods documented as returning an instance of the class they are called on, built
# through a preset loader the source cannot follow (keras-hub's and keras-cv's ``from_preset``).
SELF_FACTORIES = frozenset({"from_preset"})

# ----------------------------------------------------------------------------- releases
# (PyPI distribution, import package, oldest minor version, how the public tree is rooted)
PACKAGES = [
    ("tensorflow", "tensorflow", (2, 4)),
    ("keras", "keras", (2, 6)),
    ("tf-keras", "tf_keras", (2, 14)),
    ("keras-cv", "keras_cv", (0, 5)),
    ("keras-hub", "keras_hub", (0, 16)),
    ("keras-nlp", "keras_nlp", (0, 6)),  # keras-hub's former name, still imported by most code
    ("tensorflow-datasets", "tensorflow_datasets", (4, 0)),
]
# Public names never walked: a second copy of the same API (compat.v2 is tf itself), TF's
# generated op wrappers (raw_ops: 1500 kernels), internals, and other packages' trees.
SKIP_PUBLIC = re.compile(
    r"^tensorflow\.compat\.v2(\.|$)|^tensorflow\.compat\.v1\.(compat|keras|raw_ops|estimator)(\.|$)"
    r"|(^|\.)__internal__(\.|$)|(^|\.)__operators__(\.|$)|^tensorflow\.raw_ops(\.|$)|^tensorflow\.estimator(\.|$)"
    r"|^keras\._tf_keras(\.|$)|^keras\.(src|api)(\.|$)|^tf_keras\.(src|api)(\.|$)"
    r"|^keras_cv\.(src|api)(\.|$)|^keras_(hub|nlp)\.(src|api)(\.|$)|^tensorflow_datasets\.(testing|scripts)(\.|$)"
    r"|\.(tests|testing_utils)$"
)


def _vkey(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def pick_releases(dist: str, oldest: tuple[int, int], quick: bool) -> list[tuple[str, dict]]:
    """The newest final release of each minor version from ``oldest`` on, with a wheel to read:
    for TensorFlow a manylinux x86_64 wheel, for the pure-Python packages the universal one."""
    rel = _wheelzip.releases(dist)
    best: dict[tuple[int, int], tuple[str, dict]] = {}
    for ver, files in rel.items():
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?(\.post\d+)?", ver):
            continue
        minor = _vkey(ver)[:2]
        if minor < oldest:
            continue
        whls = [f for f in files if f["filename"].endswith(".whl")]
        if dist == "tensorflow":
            whls = [f for f in whls if "manylinux" in f["filename"] and "x86_64" in f["filename"]]
        if not whls:
            continue
        whl = max(whls, key=lambda f: f["filename"])
        if minor not in best or _vkey(ver) > _vkey(best[minor][0]):
            best[minor] = (ver, whl)
    out = [best[k] for k in sorted(best)]
    if quick:
        out = out[-1:]
    return out


def wheel_sources(whl: dict, pkg: str, cache: str) -> dict[str, str]:
    """path -> text of every ``.py`` file of ``pkg`` in the wheel (and its METADATA)."""
    path = os.path.join(cache, whl["filename"] + ".src.json.gz")
    if os.path.exists(path):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    z = _wheelzip.RemoteZip(whl["url"], whl.get("size"))
    names = [n for n in z.members
             if (n.startswith(pkg + "/") and n.endswith(".py") and "/include/" not in n)
             or n.endswith(".dist-info/METADATA")]
    raw = z.read(names)
    out = {n: b.decode("utf-8", "replace") for n, b in raw.items()}
    os.makedirs(cache, exist_ok=True)
    tmp = path + ".tmp"
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        json.dump(out, f)
    os.replace(tmp, path)
    return out


# ----------------------------------------------------------------------------- source model
@dataclass
class Ref:
    """What a name resolves to."""
    what: str  # class | def | module | external | attr (a member of a class) | value
    path: str  # dotted: module.Name, a module, an external dotted name
    node: Optional[ast.AST] = None
    mod: Optional["ModInfo"] = None
    owner: Optional["Ref"] = None  # for attr: the class


@dataclass
class ModInfo:
    name: str
    is_pkg: bool
    tree: ast.Module
    bindings: dict = field(default_factory=dict)
    stars: list = field(default_factory=list)
    all: Optional[list] = None


class Source:
    """One wheel's Python sources, resolved by name without importing anything."""

    def __init__(self, files: dict[str, str], top: str, external_kind):
        self.files = files
        self.top = top
        self.external_kind = external_kind  # dotted name of another package -> kind or None
        self._mods: dict[str, Optional[ModInfo]] = {}
        self._class_kind: dict[str, Optional[str]] = {}
        self._func_kind: dict[str, Optional[str]] = {}
        self.kinded_classes: dict[str, str] = {}  # every class met that has a kind

    # -- modules
    def file_of(self, mod: str) -> Optional[str]:
        p = mod.replace(".", "/")
        if p + "/__init__.py" in self.files:
            return p + "/__init__.py"
        if p + ".py" in self.files:
            return p + ".py"
        return None

    def internal(self, mod: str) -> bool:
        return mod == self.top or mod.startswith(self.top + ".")

    def module(self, mod: str) -> Optional[ModInfo]:
        if mod in self._mods:
            return self._mods[mod]
        self._mods[mod] = None
        f = self.file_of(mod)
        if f is None:
            return None
        text = self.files[f]
        if mod.rsplit(".", 1)[-1].startswith("gen_") and mod.startswith("tensorflow."):
            # TensorFlow's generated op wrappers (a third of its Python source): only functions
            # that return tensors.  Their top-level names are read from the text, unparsed.
            mi = ModInfo(mod, False, ast.Module(body=[], type_ignores=[]))
            for n in re.findall(r"^def (\w+)\(", text, re.M):
                mi.bindings[n] = ("def", None)
            for src_, n, alias in re.findall(r"^from ([\w.]+) import (\w+)(?: as (\w+))?$", text, re.M):
                mi.bindings.setdefault(alias or n, ("from", src_, n))
            self._mods[mod] = mi
            return mi
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
        mi = ModInfo(mod, f.endswith("__init__.py"), tree)
        self._bind(mi, tree.body)
        self._mods[mod] = mi
        return mi

    def _bind(self, mi: ModInfo, body: list) -> None:
        pkg = mi.name if mi.is_pkg else mi.name.rpartition(".")[0]
        for st in body:
            if isinstance(st, ast.ImportFrom):
                if st.level:
                    base = pkg
                    for _ in range(st.level - 1):
                        base = base.rpartition(".")[0]
                    src = f"{base}.{st.module}" if st.module else base
                else:
                    src = st.module or ""
                for a in st.names:
                    if a.name == "*":
                        mi.stars.append(src)
                    else:
                        mi.bindings[a.asname or a.name] = ("from", src, a.name)
            elif isinstance(st, ast.Import):
                for a in st.names:
                    if a.asname:
                        mi.bindings[a.asname] = ("module", a.name)
                    else:
                        mi.bindings[a.name.split(".")[0]] = ("module", a.name.split(".")[0])
            elif isinstance(st, ast.ClassDef):
                mi.bindings[st.name] = ("class", st)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                mi.bindings[st.name] = ("def", st)
            elif isinstance(st, (ast.Assign, ast.AnnAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                for t in targets:
                    if isinstance(t, ast.Name) and st.value is not None:
                        if t.id == "__all__" and isinstance(st.value, (ast.List, ast.Tuple)):
                            mi.all = [e.value for e in st.value.elts
                                      if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                        else:
                            mi.bindings[t.id] = ("assign", st.value)
            elif isinstance(st, ast.If):
                self._bind(mi, st.body)
                self._bind(mi, st.orelse)
            elif isinstance(st, ast.With):  # ``with lazy_imports(): from x import y``
                self._bind(mi, st.body)
            elif isinstance(st, ast.Try):
                self._bind(mi, st.body)
                for h in st.handlers:
                    self._bind(mi, h.body)
                self._bind(mi, st.orelse)
            elif isinstance(st, ast.Delete):
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        mi.bindings.pop(t.id, None)

    # -- names
    def resolve(self, mod: str, name: str, depth: int = 0) -> Optional[Ref]:
        if depth > 25:
            return None
        if not self.internal(mod):
            return Ref("external", f"{mod}.{name}")
        mi = self.module(mod)
        if mi is None:
            sub = f"{mod}.{name}"
            return Ref("module", sub) if self.file_of(sub) else None
        b = mi.bindings.get(name)
        if b is None:
            sub = f"{mod}.{name}"
            if self.file_of(sub):
                return Ref("module", sub)
            for s in mi.stars:
                if s == mod:
                    continue
                r = self.resolve(s, name, depth + 1)
                if r is not None and self._exported(s, name):
                    return r
            return None
        kind = b[0]
        if kind in ("class", "def"):
            return Ref(kind, f"{mod}.{name}", b[1], mi)
        if kind == "from":
            src, orig = b[1], b[2]
            # ``from pkg import sub``: a submodule, unless pkg binds the name to something else
            if self.internal(src) and self.file_of(f"{src}.{orig}"):
                smi = self.module(src) if src != mod else None
                other = smi.bindings.get(orig) if smi is not None else None
                if other is None or other[:2] == ("from", src):
                    return Ref("module", f"{src}.{orig}")
            if (src, orig) == (mod, name):
                return None
            return self.resolve(src, orig, depth + 1)
        if kind == "module":
            return Ref("module", b[1]) if self.internal(b[1]) else Ref("external", b[1])
        if kind == "assign":
            r = self.resolve_expr(mi, b[1], depth + 1)
            return r if r is not None else Ref("value", f"{mod}.{name}")
        return None

    def _exported(self, mod: str, name: str) -> bool:
        mi = self.module(mod)
        if mi is None or mi.all is None:
            return not name.startswith("_")
        return name in mi.all

    def exports(self, mod: str, _seen=None) -> list[str]:
        """The names ``from mod import *`` brings."""
        mi = self.module(mod)
        if mi is None:
            return []
        if mi.all is not None:
            return list(mi.all)
        _seen = _seen or set()
        if mod in _seen:
            return []
        _seen.add(mod)
        names = [n for n in mi.bindings if not n.startswith("_")]
        for s in mi.stars:
            if self.internal(s):
                names += [n for n in self.exports(s, _seen) if n not in mi.bindings]
        return list(dict.fromkeys(names))

    def resolve_expr(self, mi: ModInfo, e: ast.AST, depth: int = 0) -> Optional[Ref]:
        if depth > 25:
            return None
        if isinstance(e, ast.Name):
            return self.resolve(mi.name, e.id, depth + 1)
        if isinstance(e, ast.Attribute):
            base = self.resolve_expr(mi, e.value, depth + 1)
            if base is None:
                return None
            if base.what == "module":
                return self.resolve(base.path, e.attr, depth + 1)
            if base.what == "external":
                return Ref("external", f"{base.path}.{e.attr}")
            if base.what == "class":
                return Ref("attr", f"{base.path}.{e.attr}", owner=base)
            return None
        if isinstance(e, ast.Constant) and isinstance(e.value, str):  # a string annotation
            try:
                sub = ast.parse(e.value, mode="eval").body
            except SyntaxError:
                return None
            return self.resolve_expr(mi, sub, depth + 1)
        return None

    # -- kinds
    def class_kind(self, ref: Ref, depth: int = 0) -> Optional[str]:
        if ref.path in self._class_kind:
            return self._class_kind[ref.path]
        self._class_kind[ref.path] = None  # cycles
        kind = root_kind(ref.path)
        if kind is None and depth < 40:
            found = set()
            for base in ref.node.bases:
                k = self.expr_class_kind(ref.mod, base, depth + 1)
                if k:
                    found.add(k)
            kind = first(found)
        self._class_kind[ref.path] = kind
        if kind:
            self.kinded_classes[ref.path] = kind
        return kind

    def expr_class_kind(self, mi: ModInfo, e: ast.AST, depth: int = 0) -> Optional[str]:
        """The kind of the class that the expression ``e`` (a base, an annotation) names."""
        if isinstance(e, ast.Subscript):  # Optional[X], Union[X, None], Type[X] is not an instance
            head = e.value.attr if isinstance(e.value, ast.Attribute) else getattr(e.value, "id", "")
            if head in ("Optional", "Union"):
                elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
                return first({k for k in (self.expr_class_kind(mi, x, depth + 1) for x in elts) if k})
            return None
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitOr):  # X | None
            return first({k for k in (self.expr_class_kind(mi, e.left, depth + 1),
                                      self.expr_class_kind(mi, e.right, depth + 1)) if k})
        r = self.resolve_expr(mi, e)
        if r is None:
            return None
        if r.what == "class":
            return self.class_kind(r, depth + 1)
        if r.what == "external":
            return self.external_kind(r.path)
        return None

    def func_kind(self, ref: Ref, owner: Optional[Ref] = None, depth: int = 0) -> Optional[str]:
        """The kind of what the function ``ref`` returns (its annotation, or its returns)."""
        key = ref.path
        if key in self._func_kind:
            return self._func_kind[key]
        self._func_kind[key] = None
        node, mi = ref.node, ref.mod
        if node is None:  # an op wrapper read from the text
            return None
        kind = None
        if node.returns is not None:
            kind = self.expr_class_kind(mi, node.returns)
        if kind is None and depth < 6:
            kind = first(self._return_kinds(node, mi, owner, depth))
        self._func_kind[key] = kind
        return kind

    def _return_kinds(self, fn, mi: ModInfo, owner: Optional[Ref], depth: int) -> set:
        local: dict[str, list] = {}
        returns: list[tuple[ast.AST, dict]] = []  # (value, isinstance facts)

        def walk(stmts, facts):
            for st in stmts:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if isinstance(st, ast.Return) and st.value is not None:
                    returns.append((st.value, facts))
                elif isinstance(st, ast.Assign):
                    for t in st.targets:
                        if isinstance(t, ast.Name):
                            local.setdefault(t.id, []).append(st.value)
                elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                    local.setdefault(st.target.id, []).append(st.value)
                elif isinstance(st, ast.If):
                    f2 = dict(facts)
                    t = st.test
                    if isinstance(t, ast.Call) and isinstance(t.func, ast.Name) and t.func.id == "isinstance" \
                            and len(t.args) == 2 and isinstance(t.args[0], ast.Name):
                        f2[t.args[0].id] = t.args[1]
                    walk(st.body, f2)
                    walk(st.orelse, facts)
                else:
                    for fld in ("body", "orelse", "finalbody"):
                        sub = getattr(st, fld, None)
                        if isinstance(sub, list):
                            walk(sub, facts)
                    for h in getattr(st, "handlers", []) or []:
                        walk(h.body, facts)

        walk(fn.body, {})
        kinds = set()
        for value, facts in returns:
            k = self._value_kind(value, mi, owner, local, facts, depth, set())
            if k:
                kinds.add(k)
        return kinds

    def _value_kind(self, e, mi, owner, local, facts, depth, seen) -> Optional[str]:
        if isinstance(e, ast.IfExp):
            return first({k for k in (self._value_kind(e.body, mi, owner, local, facts, depth, seen),
                                      self._value_kind(e.orelse, mi, owner, local, facts, depth, seen)) if k})
        if isinstance(e, ast.Name):
            if e.id in facts:
                t = facts[e.id]
                elts = t.elts if isinstance(t, ast.Tuple) else [t]
                return first({k for k in (self.expr_class_kind(mi, x) for x in elts) if k})
            if e.id == "self" and owner is not None:
                return self.class_kind(owner)
            if e.id in local and e.id not in seen:
                seen = seen | {e.id}
                return first({k for k in (self._value_kind(v, mi, owner, local, facts, depth, seen)
                                          for v in local[e.id]) if k})
            return None
        if not isinstance(e, ast.Call):
            return None
        f = e.func
        if isinstance(f, ast.Name) and f.id == "cls" and owner is not None:
            return self.class_kind(owner)
        if isinstance(f, ast.Name) and f.id in local:
            return None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls") \
                and owner is not None:
            m = self.method(owner, f.attr)
            return self.func_kind(m[0], m[1], depth + 1) if m else None
        r = self.resolve_expr(mi, f)
        if r is None:
            return None
        return self.call_kind(r, depth + 1)

    def call_kind(self, r: Ref, depth: int = 0) -> Optional[str]:
        """The kind of what calling ``r`` gives."""
        if r.what == "class":
            return self.class_kind(r)
        if r.what == "def":
            return self.func_kind(r, None, depth)
        if r.what == "attr" and r.owner is not None:
            m = self.method(r.owner, r.path.rsplit(".", 1)[1])
            return self.func_kind(m[0], m[1], depth) if m else None
        if r.what == "external":
            return self.external_kind(r.path)
        return None

    def method(self, cls: Ref, name: str, depth: int = 0) -> Optional[tuple[Ref, Ref]]:
        """The definition of ``cls.name`` (through the bases in this wheel), and its class."""
        if depth > 30 or cls.node is None:
            return None
        for st in cls.node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name:
                return Ref("def", f"{cls.path}.{name}", st, cls.mod), cls
        for base in cls.node.bases:
            b = self.resolve_expr(cls.mod, base)
            if b is not None and b.what == "class":
                m = self.method(b, name, depth + 1)
                if m:
                    return m
        return None

    def methods(self, cls: Ref) -> dict[str, str]:
        """Public methods of a class (and its bases here) whose result has a kind."""
        names: set[str] = set()
        stack, seen = [cls], set()
        while stack:
            c = stack.pop()
            if c.path in seen or c.node is None or len(seen) > 40:
                continue
            seen.add(c.path)
            for st in c.node.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and not st.name.startswith("_"):
                    names.add(st.name)
            for base in c.node.bases:
                b = self.resolve_expr(c.mod, base)
                if b is not None and b.what == "class":
                    stack.append(b)
        out = {}
        for n in sorted(names):
            m = self.method(cls, n)
            if m is None or any(isinstance(d, ast.Name) and d.id == "property" for d in m[0].node.decorator_list):
                continue
            k = self.func_kind(m[0], m[1])
            if k is None and n in SELF_FACTORIES:
                k = self.class_kind(cls)
            if k:
                out[n] = k
        return out


def root_kind(path: str) -> Optional[str]:
    for k, rx in _ROOTS:
        if rx.search(path):
            return k
    return None


def first(kinds: Iterable[str]) -> Optional[str]:
    ks = set(kinds)
    for k in PRECEDENCE:
        if k in ks:
            return k
    return None


# ----------------------------------------------------------------------------- public walk
# Where each package's public tree starts: (file module, public name).  Later entries are tried
# only when the earlier file is absent from the wheel.
def roots_for(top: str, src: Source) -> list[tuple[str, str]]:
    if top == "tensorflow":
        return [("tensorflow", "tensorflow")]
    if top in ("keras", "tf_keras"):
        for cand in (f"{top}.api._v2.keras", f"{top}.api"):
            if src.file_of(cand) and (src.module(cand) and src.module(cand).bindings):
                return [(cand, top)]
        return [(top, top)]
    return [(top, top)]


@dataclass
class Entry:
    target: str
    kind: str
    what: str  # c class, f function, m module, v value


def walk_public(src: Source, top: str) -> tuple[dict[str, Entry], dict[str, dict[str, str]]]:
    names: dict[str, Entry] = {}
    methods: dict[str, dict[str, str]] = {}
    todo = [(mod, pub) for mod, pub in roots_for(top, src)]
    seen = set()
    while todo:
        mod, pub = todo.pop()
        if (mod, pub) in seen or pub.count(".") > 8:
            continue
        seen.add((mod, pub))
        mi = src.module(mod)
        if mi is None:
            continue
        exported = mi.all if mi.all is not None else list(dict.fromkeys(
            [n for n in mi.bindings if not n.startswith("_")] + [n for s in mi.stars if src.internal(s)
                                                                   for n in src.exports(s)]))
        if mod == top == "tensorflow":  # tf.losses, tf.optimizers, ... on TF >= 2.6: see tf_aliases
            pass
        for n in exported:
            if n.startswith("_"):
                continue
            full = f"{pub}.{n}"
            if SKIP_PUBLIC.search(full):
                continue
            b = mi.bindings.get(n)
            if b is not None and b[0] == "module" and not mi.is_pkg:
                continue  # ``import numpy as np`` inside a plain module is not API
            r = src.resolve(mod, n)
            if r is None:
                if b is not None and b[0] == "from":  # defined at run time (protobuf classes)
                    names[full] = Entry(f"{b[1]}.{b[2]}", "", "v")
                continue
            if r.what == "module":
                if src.file_of(r.path) and src.file_of(r.path).endswith("__init__.py"):
                    names[full] = Entry(r.path, "", "m")
                    todo.append((r.path, full))
                continue
            if r.what == "class":
                k = src.class_kind(r) or ""
                names[full] = Entry(r.path, k, "c")
                if k and r.path not in methods:
                    methods[r.path] = src.methods(r)
            elif r.what == "def":
                names[full] = Entry(r.path, src.func_kind(r) or "", "f")
            elif r.what == "external":
                if b is not None and b[0] == "module":
                    continue
                names[full] = Entry(r.path, src.external_kind(r.path) or "", "x")
            elif r.what == "attr":
                k = src.call_kind(r) or ""
                names[full] = Entry(r.path, k, "f")
            else:
                names[full] = Entry(r.path, "", "v")
    for pub, kind in RETURNS.items():
        if pub in names and names[pub].what in ("f", "x"):
            names[pub].kind = kind
    return names, methods


# ----------------------------------------------------------------------------- TF specifics
def tf_keras_pairing(files: dict[str, str]) -> str:
    """The Keras that ``tf.keras`` is in this TF release: "tf" (its own copy, TF <= 2.5),
    "2.N" (the keras 2.N package it requires) or "3" (Keras 3, TF >= 2.16)."""
    meta = next((t for p, t in files.items() if p.endswith(".dist-info/METADATA")), "")
    m = re.search(r"^Requires-Dist: keras(?![-_.\w])\s*\(?([^;\n]*)", meta, re.M)
    if not m:
        return "tf"
    lo = re.search(r"(?:>=|~=|==)\s*(\d+)\.(\d+)", m.group(1))
    if lo and int(lo.group(1)) >= 3:
        return "3"
    if lo:
        return f"{lo.group(1)}.{lo.group(2)}"
    return "tf"


def tf_aliases(files: dict[str, str]) -> list[str]:
    """Keras submodules that TensorFlow's ``__init__`` re-exports at the top (``tf.optimizers``)
    through lazy loaders (TF >= 2.6), read from the text of ``tensorflow/__init__.py``."""
    text = files.get("tensorflow/__init__.py", "")
    out = []
    for n in re.findall(r"setattr\(_current_module,\s*[\"'](\w+)[\"']", text):
        if n in ("keras", "estimator", "summary"):
            continue
        if re.search(rf"(_keras_package\s*\+\s*[\"']{n}[\"']|submodule\s*=\s*[\"']{n}[\"']"
                     rf"|\b{n}\s*=\s*keras\.{n}\b)", text):
            out.append(n)
    return sorted(set(out))


# ----------------------------------------------------------------------------- main
def build(cache: str, quick: bool, log) -> dict:
    table_names: dict[str, list] = {}  # public -> [target, kind, what, {pkg: set(versions)}]
    versions: dict[str, list[str]] = {}
    cls_kind: dict[str, str] = {}  # canonical name of a class -> the kind of its instances
    call_kind: dict[str, str] = {}  # canonical name of a function or method -> the kind it returns
    targets: dict[str, set] = {}  # canonical name of a kinded class -> canonical names of its definitions
    tf_info: dict[str, dict] = {}

    def external_kind(dotted: str) -> Optional[str]:
        q = canonical(dotted)
        return cls_kind.get(q) or call_kind.get(q)

    def order(item):  # tf.compat.v1 spellings reduce to the same canonical names: TF 2 first
        return (".compat.v1." in item[0], item[0])

    # canonical() folds tf.optimizers & co. into keras.*: the names it folds are read from
    # TensorFlow's __init__ first, since the table that would tell canonical() is being built
    aliases: set[str] = set()
    for ver, whl in pick_releases("tensorflow", PACKAGES[0][2], quick):
        aliases.update(tf_aliases(wheel_sources(whl, "tensorflow", cache)))
    tfapi._ALIASES = tuple(sorted(aliases))
    log(f"TensorFlow re-exports Keras's {', '.join(tfapi._ALIASES)}")

    for dist, top, oldest in PACKAGES:
        rels = pick_releases(dist, oldest, quick)
        versions[top] = [v for v, _ in rels]
        log(f"{dist}: {', '.join(versions[top])}")
        pc: dict[str, str] = {}
        pf: dict[str, str] = {}
        pt: dict[str, set] = {}
        for ver, whl in reversed(rels):  # the newest release first: its kinds win
            t0 = time.time()
            files = wheel_sources(whl, top, cache)
            src = Source(files, top, external_kind)
            names, methods = walk_public(src, top)
            if top == "tensorflow":
                tf_info[ver] = {"keras": tf_keras_pairing(files), "aliases": tf_aliases(files)}
            for pub, e in sorted(names.items(), key=order):
                rec = table_names.get(pub)
                if rec is None:
                    rec = table_names[pub] = [e.target, e.kind, e.what, {}]
                elif not rec[1] and e.kind:
                    rec[1] = e.kind
                rec[3].setdefault(top, set()).add(ver)
                cp, ct = canonical(pub), canonical(e.target)
                is_class = e.what == "c" or (e.what == "x" and e.target and canonical(e.target) in cls_kind)
                if e.kind:
                    (pc if is_class else pf).setdefault(cp, e.kind)
                    if e.what in ("c", "f"):
                        (pc if is_class else pf).setdefault(ct, e.kind)
                    if is_class and cp != ct:
                        pt.setdefault(cp, set()).add(ct)
                if e.what == "c" and e.target in methods:
                    for m, k in methods[e.target].items():
                        pf.setdefault(f"{cp}.{m}", k)
                        pf.setdefault(f"{ct}.{m}", k)
            for path, k in src.kinded_classes.items():
                pc.setdefault(canonical(path), k)
            log(f"  {top} {ver}: {len(names)} names, {sum(1 for e in names.values() if e.kind)} with a kind,"
                f" {time.time() - t0:.1f} s")
        for d, new in ((cls_kind, pc), (call_kind, pf)):
            for k, v in new.items():
                d.setdefault(k, v)
        for k, v in pt.items():
            targets.setdefault(k, set()).update(v)
    return {"versions": versions, "names": table_names, "cls": cls_kind, "call": call_kind,
            "targets": targets, "tf": tf_info}


def encode(data: dict) -> bytes:
    """The file: gzip of three JSON lines, so that the linter parses only what it asks for:
    1. a header: the releases read per package, and for each TensorFlow release which Keras
       ``tf.keras`` is and which Keras submodules TF re-exports at its top (``tf.optimizers``);
    2. the kinds: {"c": class -> kind of its instances, "f": function or method -> kind of its
       result, "t": class -> its definition (a list when releases or flavours differ)}, keyed by
       canonical name (tfpar_lint.tfapi.canonical),
       private definitions included (``keras.optimizer_v2.adam.Adam``);
    3. the names: public name (as its package spells it) -> [definition ("" when the same), kind,
       what (c class, f function, m module, v value, x another package's object), versions
       (bit i set: the package's i-th release in the header has it)]."""
    versions = data["versions"]
    index = {pkg: {v: i for i, v in enumerate(vs)} for pkg, vs in versions.items()}
    header = {
        "format": FORMAT,
        "generated_by": "scripts/gen_api_table.py",
        "packages": versions,
        "tf": data["tf"],
    }
    names = {}
    for pub in sorted(data["names"]):
        target, kind, what, vers = data["names"][pub]
        pkg = pub.split(".", 1)[0]
        mask = 0
        for v in vers.get(pkg, ()):
            mask |= 1 << index[pkg][v]
        names[pub] = [target if target != pub else "", kind, what, mask]
    kinds = {"c": dict(sorted(data["cls"].items())), "f": dict(sorted(data["call"].items())),
             "t": {k: (sorted(v) if len(v) > 1 else next(iter(v))) for k, v in sorted(data["targets"].items())}}
    lines = [json.dumps(header, separators=(",", ":"), sort_keys=True),
             json.dumps(kinds, separators=(",", ":")),
             json.dumps(names, separators=(",", ":"))]
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8"))
    return buf.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "tfpar-lint-apitable"))
    ap.add_argument("--quick", action="store_true", help="only the newest release of each package (a smoke test)")
    args = ap.parse_args(argv)
    t0 = time.time()
    data = build(args.cache, args.quick, lambda s: print(s, file=sys.stderr, flush=True))
    blob = encode(data)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {len(blob)} bytes, {len(data['names'])} names, {len(data['cls'])} classes and"
          f" {len(data['call'])} functions with a kind,"
          f" {time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
