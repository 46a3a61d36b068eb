"""The project's own modules, so that values are followed across files.

A training job is split over files: ``train.py`` creates the strategy and runs the loop,
``models.py`` builds the model, ``data.py`` the dataset, ``steps.py`` the replica step.  A
:class:`Project` resolves the imports between them and builds the imported modules' semantic
models on demand, so that inference crosses files:

* forward: ``from models import build`` gives ``build``'s values in ``models.py`` (a function, a
  class, a module-level strategy...); calling it gives what it returns, created at the call;
* backward: the modules that import a module are found by a text scan of the project, and what
  they do with its functions counts in it (``strategy.run(steps.train_step)`` in ``train.py``
  makes ``train_step`` a replica function in ``steps.py``; their call sites give its
  parameters' values).

Module names resolve like Python does for a script and a package: against the importing file's
folder (``sys.path[0]`` of ``python train.py``), the project root (the folder of the nearest
``pyproject.toml``, ``setup.cfg`` or ``setup.py``) and ``<root>/src``; relative imports against
the importing file's package.  Third-party packages are never read (they are not under those
folders).  At most ``MAX_MODULES`` project files are read beyond the one being linted; the cap
is reported (``Project.capped``).
"""
from __future__ import annotations

import os
import re
import stat
import sys
from typing import TYPE_CHECKING, Callable, Iterator, Optional

import libcst as cst

from tfpar_lint.semantic import summary as summary_mod
from tfpar_lint.semantic.nodes import dotted_name
from tfpar_lint.semantic.summary import may_reach

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module
    from tfpar_lint.semantic.summary import SummaryStore

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
# Packages whose behaviour lives in tfpar_lint.tfapi: never looked for in the project.
THIRD_PARTY = frozenset({"tensorflow", "keras", "tf_keras", "numpy", "absl", "tensorflow_datasets",
                         "tensorflow_addons", "tensorflow_hub", "tf_agents", "official", "orbit", "jax",
                         "torch", "pandas", "scipy", "sklearn", "six", "tqdm", "wandb", "horovod"})

MAX_MODULES = 200  # project files read beyond the linted one
# Per linted file, the project files parsed for it may total at most BUDGET_BASE bytes plus
# BUDGET_FACTOR times the linted file's own size (parsing dominates whole-project analysis: a
# framework module imported by 80 others parsed them all, 6x its per-file time; issue 20 asks for
# at most 1.5x, measured in benchmarks/project_per_file.py).  Past the budget, a module is unknown.
BUDGET_BASE = 48 * 1024
BUDGET_FACTOR = 0.4
# Issue 28: most files of a code base need no other module and a few need many (measured over 23
# code bases: 95% of lints need at most 45 KB, 1% more than 400 KB; benchmarks/project_cap.py).  So
# in a run of many files the budgets are pooled: what a linted file leaves is kept for the next
# files its process lints, and each worker process starts with its share of the run's budget (the
# sum of its files' budgets); one file may use at most POOL_MAX bytes.  A run of many files parses
# at most twice the sum of its files' budgets; a file linted alone, its own budget (issue 20's
# 1.5x per file, as before).
POOL_MAX = 1024 * 1024
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+(?P<mod>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n#]+)"
                          r"|import[ \t]+(?P<plain>[^\n#]+))", re.M)
MAX_SCAN = 5000  # project files scanned (text only) for importers
MAX_SIZE = 2_000_000  # bytes; larger project files are not read
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py")


def project_root(path: str) -> Optional[str]:
    """The nearest folder above ``path`` with a pyproject.toml, setup.cfg or setup.py."""
    d = os.path.dirname(os.path.abspath(path))
    while True:
        if any(os.path.isfile(os.path.join(d, m)) for m in ROOT_MARKERS):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


# folder -> its project root, remembered during one run of the engine (lint_paths clears it): a
# run's files share their folders, and the result cache asks for every file's project
ROOTS: dict[str, Optional[str]] = {}


def project_root_memo(path: str) -> Optional[str]:
    """:func:`project_root`, remembered in :data:`ROOTS`."""
    d = os.path.dirname(os.path.abspath(path))
    walked = []
    found: Optional[str] = None
    while True:
        if d in ROOTS:
            found = ROOTS[d]
            break
        walked.append(d)
        if any(os.path.isfile(os.path.join(d, m)) for m in ROOT_MARKERS):
            found = d
            break
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for w in walked:
        ROOTS[w] = found
    return found


# The modules whose importers the answers asked for, since the caller last cleared it (the engine,
# per linted file): the result cache keys that file's result on who imports them.
ASKED: set = set()


class Project:
    def __init__(self, roots: list[str], build: Callable[[str, str], Optional["Module"]],
                 root: Optional[str] = None, summaries: Optional["SummaryStore"] = None, pool: int = 0) -> None:
        """``roots``: folders module names resolve against, in order; ``root``: the project root
        (scanned recursively for importers; other folders only at their top level);
        ``build(path, source)`` makes a module's semantic model (the engine's parse);
        ``summaries``: the per-module summaries (:mod:`.summary`) that spare parses, or None;
        ``pool``: bytes this process may parse beyond its files' budgets (its share of a run's)."""
        self.roots = [os.path.abspath(r) for r in dict.fromkeys(roots)]
        self.root = os.path.abspath(root) if root else None
        self._resolved: dict[tuple[str, str], Optional[str]] = {}
        self._build = build
        self.modules: dict[str, Optional["Module"]] = {}
        self.read = 0  # files read beyond the linted ones
        # a lint of this process met the budget or the cap on files read (it stays set: what that
        # lint could not follow may be remembered in the answers later lints reuse)
        self._lint_capped = False
        self.scan_capped = False  # the scan for importers met MAX_SCAN (the whole project, every lint)
        self._texts: Optional[dict[str, str]] = None
        self._index: Optional[dict[str, list[str]]] = None
        self._importers: dict[str, list["Module"]] = {}
        self.summaries = summaries
        self._summary_of: dict[str, Optional[dict]] = {}
        # module path -> project files whose summaries its answers read (result-cache dependencies)
        self._summary_deps: dict[str, set[str]] = {}
        self._words: dict[str, Optional[frozenset[str]]] = {}  # project file -> the words of its text
        self._unknown_memo: dict[tuple[str, str], bool] = {}
        self._unknown_paths: dict[tuple[str, str], tuple[str, ...]] = {}
        self.spared: dict[str, int] = {"importers": 0, "names": 0}  # parses the summaries answered instead
        self._budget: Optional[int] = None  # bytes the current lint may still parse (None: no lint begun)
        self._pool = max(0, pool)  # what the first lint finds left (a run's share; see begin)
        self._importable: dict[str, bool] = {}
        self._targets_memo: Optional[tuple] = None  # (path, text, its import targets): the last asked

    # -------------------------------------------------------------- modules
    def add(self, path: str, module: "Module") -> None:
        """Register a module being linted (so that others resolve to this very object)."""
        self.modules[os.path.abspath(path)] = module

    @property
    def capped(self) -> bool:
        """A lint of this process did not follow everything it asked for (see :meth:`begin`)."""
        return self._lint_capped or self.scan_capped

    def begin(self, source: str) -> None:
        """A new file is linted: its budget of bytes of other project files to parse, BUDGET_BASE
        plus BUDGET_FACTOR times its size, added to what the files linted before it in this
        process left unused, or for the first one to the process's share of the run's budget (at
        most POOL_MAX in all).  A run of many files parses at most twice the sum of its files'
        budgets; one file alone, its own budget."""
        left = self._budget if self._budget is not None else self._pool
        self._budget = min(POOL_MAX, left + BUDGET_BASE + int(BUDGET_FACTOR * len(source)))

    def forget(self, module: "Module") -> None:
        """Drop a linted module that no other module has read (its tree can be freed)."""
        path = os.path.abspath(module.path)
        if self.modules.get(path) is module and not any(
                path in (m.project_deps if m is not None else ()) for m in self.modules.values()) \
                and not any(path in spared for spared in self._summary_deps.values()):
            # (an importer a summary spared is kept as well: it is the one a later question about
            # its module, once linted, would otherwise parse again)
            del self.modules[path]
            self._importers.pop(path, None)

    def invalidate(self, path: str) -> None:
        """``path`` changed (an editor's buffer, or the disk): forget its module, every module
        whose answers read it (transitively), what failed to build, and the indexes made from
        the project's texts; the rest stays parsed (the language server keeps a project warm)."""
        stale = {os.path.abspath(path)}
        grew = True
        while grew:
            grew = False
            for p, m in self.modules.items():
                if p not in stale and (m is None or stale & set(m.project_deps)):
                    stale.add(p)
                    grew = True
        for p in stale:
            self.modules.pop(p, None)
            self._words.pop(p, None)
            self._summary_of.pop(p, None)
            self._summary_deps.pop(p, None)
        self._texts = None
        self._index = None
        self._importers.clear()
        self._resolved.clear()  # a new or removed file changes what a name resolves to
        self._targets_memo = None
        self._unknown_memo.clear()
        self._unknown_paths.clear()

    def module(self, path: str) -> Optional["Module"]:
        path = os.path.abspath(path)
        if path in self.modules:
            return self.modules[path]
        if self.read >= MAX_MODULES:
            self._lint_capped = True
            return None
        source = _read_regular(path)
        if source is None:
            self.modules[path] = None
            return None
        if self._budget is not None:
            if len(source) > self._budget:
                self._lint_capped = True
                return None  # not cached: another file's lint may have the budget for it
            self._budget -= len(source)
        self.modules[path] = None  # a cycle resolves to "unknown" while it is built
        self.read += 1
        try:
            mod = self._build(path, source)
        except (cst.ParserSyntaxError, RecursionError, MemoryError, ValueError):
            mod = None
        self.modules[path] = mod
        return mod

    def resolve(self, importer: "Module", dotted: str) -> Optional[tuple["Module", list[str]]]:
        head = dotted.split(".", 1)[0]
        if head in THIRD_PARTY or head in _STDLIB:
            return None
        return self._resolve(importer, dotted)

    def _resolve(self, importer: "Module", dotted: str) -> Optional[tuple["Module", list[str]]]:
        """The project module the longest prefix of ``dotted`` names, and the rest of the name:
        ``models.build`` -> (models.py's Module, ["build"]).  Relative names (``.models.build``)
        resolve against ``importer``'s package.  None when no prefix is a project module."""
        for path, rest in self._candidates(importer, dotted):
            mod = self.module(path)
            if mod is not None:
                importer.project_deps.add(mod.path)
                return mod, rest
        return None

    def _candidates(self, importer: "Module", dotted: str) -> Iterator[tuple[str, list[str]]]:
        """The files ``dotted`` may name, best first, with the rest of the name (the first one
        whose module parses is the answer)."""
        if not dotted:
            return
        level = len(dotted) - len(dotted.lstrip("."))
        parts = [p for p in dotted.lstrip(".").split(".") if p]
        if level:
            base = os.path.dirname(os.path.abspath(importer.path))
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            bases = [os.path.dirname(os.path.abspath(importer.path))] + self.roots
        for n in range(len(parts), 0, -1):
            for base in bases:
                path = self._file_for_cached(base, parts[:n])
                if path is not None and os.path.abspath(path) != os.path.abspath(importer.path):
                    yield path, parts[n:]
        if level and not parts:  # from . import x: the package itself
            path = self._file_for(bases[0], [])
            if path:
                yield path, []

    def summary(self, path: str, text: Optional[str] = None) -> Optional[dict]:
        """The summary of the project file at ``path`` (read from the cache folder or computed),
        or None (no summaries, unreadable, or Python cannot parse it)."""
        if self.summaries is None:
            return None
        path = os.path.abspath(path)
        if path not in self._summary_of:
            if text is None:
                text = self._text(path)
            if text is not None and self._budget is not None:
                # computing one (an `ast` parse) costs about a third of a libcst parse: charged so
                if len(text) // 3 > self._budget:
                    self._lint_capped = True
                    return None  # not cached: another file's lint may have the budget for it
                self._budget -= len(text) // 3
            self._summary_of[path] = self.summaries.get(text) if text is not None else None
        return self._summary_of[path]

    def unknown_without_parse(self, importer: "Module", dotted: str) -> bool:
        """True when the project name ``dotted`` certainly holds the unknown value and its module
        need not be parsed to say so: its summary shows an inert module-level name
        (``config.BATCH``, and so ``config.BATCH.attr``) or a name the module does not bind
        (``config.__file__``).  False: ask :meth:`resolve`."""
        if self.summaries is None or not dotted:
            return False
        key = (os.path.abspath(importer.path), dotted)
        got = self._unknown_memo.get(key)
        if got is None:
            got = self._unknown_memo[key] = self._unknown_without_parse(importer, dotted)
        if got:
            self._summary_deps.setdefault(key[0], set()).update(self._unknown_paths.get(key, ()))
        return got

    def _unknown_without_parse(self, importer: "Module", dotted: str) -> bool:
        head = dotted.split(".", 1)[0]
        if head in THIRD_PARTY or head in _STDLIB:
            return False
        for path, rest in self._candidates(importer, dotted):
            path = os.path.abspath(path)
            if path in self.modules or self.read >= MAX_MODULES or not rest:
                return False  # parsed already (or failed to), past the cap, or the module itself
            if path not in self._summary_of:
                text = self._text(path)
                if text is None or re.search(rf"^(?:async[ \t]+def|def|class)[ \t]+{re.escape(rest[0])}\b", text, re.M):
                    return False  # a function or class: the summary would not help
            summary = self.summary(path)
            if summary is None:
                return False
            if rest[0] in summary["inert"] or (rest[0] not in summary["bound"] and not summary["star_import"]):
                self._unknown_paths[(os.path.abspath(importer.path), dotted)] = (path,)
                self.spared["names"] += 1
                return True
            return False
        return False

    def _file_for_cached(self, base: str, parts: list[str]) -> Optional[str]:
        key = (base, ".".join(parts))
        if key not in self._resolved:
            self._resolved[key] = self._file_for(base, parts)
        return self._resolved[key]

    @staticmethod
    def _file_for(base: str, parts: list[str]) -> Optional[str]:
        stem = os.path.join(base, *parts)
        for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(cand):
                return cand
        return None

    # -------------------------------------------------------------- importers
    def importers(self, module: "Module") -> list["Module"]:
        """Project modules that import ``module`` (found by a text scan, then confirmed by
        resolving their imports)."""
        path = os.path.abspath(module.path)
        ASKED.add(path)
        if path in self._importers:
            module.project_deps.update(m.path for m in self._importers[path])
            return self._importers[path]
        self._importers[path] = []  # cycles: no importers while looking
        out = []
        spared: list[str] = []
        names: Optional[frozenset[str]] = None
        for other_path, text in self.importer_texts(path):
            if self.summaries is not None and other_path not in self.modules:
                # not parsed yet: parse it only if it may call or run one of module's functions
                if names is None:
                    names = frozenset([f.name for f in module.functions] + [c.name for c in module.classes])
                if other_path not in self._words:
                    self._words[other_path] = summary_mod.words_of(text)
                if not summary_mod.may_reach_text(text, self._words[other_path], names):
                    spared.append(other_path)
                    continue
                summary = self.summary(other_path, text)
                if summary is not None and not may_reach(summary, names):
                    spared.append(other_path)
                    continue
            other = self.modules.get(other_path) if other_path in self.modules else self.module(other_path)
            if other is not None and any(self._imports(other, q, module) for b in other.module_imports()
                                         for q in _imported_names(b)):
                out.append(other)
        # linted modules the scan does not cover (a notebook): their calls count too
        texts = self._project_texts()
        for other_path, other in list(self.modules.items()):
            if other is not None and other is not module and other_path not in texts and any(
                    self._imports(other, q, module) for b in other.module_imports() for q in _imported_names(b)):
                out.append(other)
        self._importers[path] = out
        self.spared["importers"] += len(spared)
        module.project_deps.update(m.path for m in out)
        # what they do decided that they do nothing here: a dependency of the answers (for the
        # result cache), though no model of them was read
        self._summary_deps.setdefault(path, set()).update(spared)
        return out

    def dependencies(self, module: "Module") -> set[str]:
        """Every project file ``module``'s answers may have read (imports, importers,
        transitively), not counting ``module`` itself."""
        out: set[str] = set()
        work = list(module.project_deps) + list(self._summary_deps.get(os.path.abspath(module.path), ()))
        while work:
            p = os.path.abspath(work.pop())
            if p in out:
                continue
            out.add(p)
            other = self.modules.get(p)
            if other is not None:
                work.extend(other.project_deps)
            work.extend(self._summary_deps.get(p, ()))
        out.discard(os.path.abspath(module.path))
        return out

    def importer_texts(self, path: str) -> list[tuple[str, str]]:
        """(path, text) of the project files whose import lines resolve to the module at
        ``path`` (found without parsing)."""
        path = os.path.abspath(path)
        if not self.importable(path):
            return []  # no scan: nothing the scan reads can name it
        ASKED.add(path)
        texts = self._project_texts()
        return [(p, texts[p]) for p in self._import_index().get(path, ()) if p != path]

    def importable(self, path: str) -> bool:
        """Whether an import line of a file the scan for importers reads (:meth:`_project_files`)
        could resolve to ``path``: the names an import resolves are identifiers joined under the
        importer's folder or a root, and the scan's files all lie under the roots, outside the
        folders it leaves out.  So a file outside every root cannot be named, nor one whose path
        below each root holding it passes a folder the scan leaves out whose name is not an
        identifier (``.venv``, ``site-packages``): no scanned file lies in that folder, and no
        dotted name enters it.  (A file an installed package holds, linted as part of the project
        above it, is not scanned for importers.)"""
        got = self._importable.get(path)
        if got is None:
            got = self._importable[path] = self._importable_path(path)
        return got

    def _importable_path(self, path: str) -> bool:
        folder = os.path.dirname(path)
        for root in self.roots:
            if folder != root and not folder.startswith(root.rstrip(os.sep) + os.sep):
                continue
            parts = os.path.relpath(folder, root).split(os.sep) if folder != root else []
            if not any(not p.isidentifier() and _left_out(p) for p in parts):
                return True
        return False

    def _import_index(self) -> dict[str, list[str]]:
        """Project file -> the project files whose import lines resolve to it (import lines
        resolved like ``imported_texts`` does).  With a cache folder, kept there between runs
        (:meth:`_index_memo`): only the files whose status changed are read again."""
        if self._index is None:
            memo_path = self._index_memo_path()
            stored = self._load_index_memo(memo_path) if memo_path else None
            reuse: dict[str, tuple] = {}
            if stored is not None and all(_dir_key(d) == k for d, k in stored["dirs"].items()):
                # no folder gained or lost an entry: the same files, and each import line resolves
                # as it did; a file whose status is the same has the same import lines
                self._files = [f[0] for f in stored["files"]]
                self._dirs = stored["dirs"]
                self.scan_capped = self.scan_capped or bool(stored["capped"])
                reuse = {f[0]: (f[1], f[2]) for f in stored["files"]}
            per_file: list[list] = []
            changed = stored is None or not reuse
            for p in self._project_files():
                key = None if p in OVERLAY else _file_key(p)  # an editor's buffer: never kept
                got = reuse.get(p)
                if got is not None and key is not None and got[0] == key:
                    targets = got[1]
                else:
                    changed = True
                    text = self._texts.get(p) if self._texts is not None else _read_regular(p)
                    targets = self._import_targets(p, text) if text is not None and "import" in text else []
                per_file.append([p, key, targets])
            self._index = {}
            for p, _key, targets in per_file:
                for target in targets:
                    lst = self._index.setdefault(target, [])
                    if not lst or lst[-1] != p:
                        lst.append(p)
            if memo_path and changed:
                self._store_index_memo(memo_path, per_file)
        return self._index

    def _index_memo_path(self) -> Optional[str]:
        """Where the import index of this project is kept (the result cache's folder, by the
        project's folders and tfpar-lint's code), or None without a cache folder."""
        folder = getattr(self.summaries, "root", None) if self.summaries is not None else None
        if not folder:
            return None
        import hashlib
        import json

        from tfpar_lint.cache import code_fingerprint

        h = hashlib.sha256(json.dumps([code_fingerprint(), self.roots, self.root]).encode("utf-8", "surrogatepass"))
        return os.path.join(folder, "importers", "v2", h.hexdigest()[:40] + ".json")

    @staticmethod
    def _load_index_memo(path: str) -> Optional[dict]:
        """The kept index: ``{"dirs": {folder: status key}, "files": [[path, status key, targets]],
        "capped": bool}``, or None (absent, not the user's regular file, checksum wrong...)."""
        import json

        from tfpar_lint.cache import _checksum, read_entry

        data = read_entry(path)
        if data is None:
            return None
        try:
            entry = json.loads(data)
            body = {k: v for k, v in entry.items() if k != "checksum"}
            if entry.get("checksum") != _checksum(body):
                return None
            if not isinstance(body["dirs"], dict) or not isinstance(body["files"], list) or not all(
                    isinstance(f, list) and len(f) == 3 and isinstance(f[0], str) and isinstance(f[2], list)
                    for f in body["files"]):
                return None
            return body
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None

    def _store_index_memo(self, path: str, per_file: list) -> None:
        import json

        from tfpar_lint.cache import _checksum

        if any(k is None for k in self._dirs.values()):
            return  # a folder changed as it was listed: list it again next time
        body = {"dirs": self._dirs, "files": per_file, "capped": self.scan_capped}
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with open(fd, "w", encoding="utf-8") as fh:
                json.dump(dict(body, checksum=_checksum(body)), fh, separators=(",", ":"))
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def importers_digest(self, paths) -> str:
        """A fingerprint of which project files import each of ``paths`` (their import lines,
        resolved against the files there are): a new importer of one of them, or an import line
        of one removed, changes it."""
        import hashlib

        index = self._import_index()
        h = hashlib.sha256()
        for p in sorted({os.path.abspath(x) for x in paths}):
            # NUL between names (no path holds one), two after each module
            h.update(("\0".join([p, *sorted(set(index.get(p, ())))]) + "\0\0").encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def imported_texts(self, path: str, source: str) -> list[tuple[str, str]]:
        """(path, text) of the project files the text of ``source`` (the file at ``path``)
        imports, found without parsing (for the pre-filter)."""
        out = []
        for f in self._import_targets(path, source):
            text = self._text(f)
            if text is not None:
                out.append((f, text))
        return out

    def _import_targets(self, path: str, source: str) -> list[str]:
        """The project files the import lines of ``source`` name (absolute paths)."""
        last = self._targets_memo
        if last is not None and last[0] == path and last[1] is source:  # asked again for the same text
            return list(last[2])
        out = self._find_import_targets(path, source)
        self._targets_memo = (path, source, tuple(out))
        return out

    def _find_import_targets(self, path: str, source: str) -> list[str]:
        out: list[str] = []
        here = os.path.dirname(os.path.abspath(path))
        for m in _IMPORT_LINE.finditer(source):
            if m.group("mod") is not None:
                mod = m.group("mod")
                names = [n.strip().split(" ")[0] for n in m.group("names").strip("() \t").split(",")]
                cands = [f"{mod}.{n}" if not mod.endswith(".") else mod + n for n in names if n] + [mod]
            else:
                cands = [n.strip().split(" ")[0] for n in m.group("plain").split(",")]
            for dotted in cands:
                level = len(dotted) - len(dotted.lstrip("."))
                parts = [x for x in dotted.lstrip(".").split(".") if x]
                if not parts or parts[0] in THIRD_PARTY or parts[0] in _STDLIB and not level:
                    continue
                if level:
                    base = here
                    for _ in range(level - 1):
                        base = os.path.dirname(base)
                    bases = [base]
                else:
                    bases = [here] + self.roots
                for base in bases:
                    f = self._file_for_cached(base, parts)
                    if f is not None:
                        out.append(os.path.abspath(f))
                        break
        return out

    def _text(self, path: str) -> Optional[str]:
        path = os.path.abspath(path)
        texts = self._project_texts()
        if path in texts:
            return texts[path]
        return _read_regular(path)

    def _imports(self, other: "Module", qname: str, target: "Module") -> bool:
        got = self.resolve(other, qname)
        return got is not None and got[0] is target

    def _project_files(self) -> list[str]:
        """The project's ``.py`` files the scan for importers reads (at most MAX_SCAN), in walk order.
        ``self._dirs``: the status of each folder the walk listed (or left out for want of an
        ``__init__.py``) and of each root, for :meth:`_import_index`'s kept index."""
        if getattr(self, "_files", None) is None:
            files: list[str] = []
            seen_set: set = set()
            dirs: dict[str, Optional[list]] = {r: _dir_key(r) for r in self.roots}
            for root in self.roots:
                for dirpath, dirnames, filenames in os.walk(root):
                    dirs[dirpath] = _dir_key(dirpath)
                    dirnames[:] = [d for d in dirnames if not _left_out(d)]
                    if root != self.root:  # a script's folder: its own files and its packages
                        for d in dirnames:  # (one that gains an __init__.py is walked next time)
                            dirs.setdefault(os.path.join(dirpath, d), _dir_key(os.path.join(dirpath, d)))
                        dirnames[:] = [d for d in dirnames if os.path.isfile(os.path.join(dirpath, d, "__init__.py"))]
                    for fn in filenames:
                        if not fn.endswith(".py") or len(files) >= MAX_SCAN:
                            continue
                        p = os.path.abspath(os.path.join(dirpath, fn))
                        if p in seen_set:
                            continue
                        seen_set.add(p)
                        files.append(p)
                    if len(files) >= MAX_SCAN:
                        self.scan_capped = True
                        break
            self._files = files
            self._dirs = dirs
        return self._files

    def _project_texts(self) -> dict[str, str]:
        if self._texts is None:
            self._texts = {}
            for p in self._project_files():
                text = _read_regular(p)
                if text is not None:
                    self._texts[p] = text
        return self._texts


def _left_out(d: str) -> bool:
    """A folder the scan for importers does not enter."""
    return d.startswith(".") or d in ("__pycache__", "node_modules", "site-packages", "venv", "build", "dist")


def _file_key(path: str) -> Optional[list]:
    """The status key of a project file for the kept import index (that of the result cache's
    digest index: device, inode, size, times; None when unreadable or changed too recently)."""
    from tfpar_lint.cache import DigestIndex

    try:
        return DigestIndex.key(os.stat(path))
    except OSError:
        return None


def _dir_key(path: str) -> Optional[list]:
    """A folder's status (its times change when an entry is added, removed or renamed in it): []
    when it does not exist, None when it changed too recently to be trusted."""
    from tfpar_lint.cache import RACY_NS

    import time

    try:
        st = os.stat(path)
    except OSError:
        return []
    if max(st.st_mtime_ns, st.st_ctime_ns) > time.time_ns() - RACY_NS:
        return None
    return [st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _imported_names(b) -> list[str]:
    """The module names an import binding imports: ``import pkg.dist`` binds ``pkg`` but
    imports ``pkg.dist`` too."""
    out = [b.qname]
    if isinstance(b.node, cst.ImportAlias) and b.qname:
        full = dotted_name(b.node.name) or ""
        if full.startswith(b.qname + "."):
            out.append(full)
    return out


# Texts of files open in an editor (the language server, :mod:`tfpar_lint.server`), by absolute
# path: what the user sees in the editor wins over the disk, for the project's other modules too.
OVERLAY: dict[str, str] = {}


def _read_regular(path: str) -> Optional[str]:
    """The text of a regular file of at most MAX_SIZE bytes (never a FIFO or a device: reading
    one could block or never end), else None.  An editor's buffer (:data:`OVERLAY`) wins."""
    text = OVERLAY.get(os.path.abspath(path))
    if text is not None:
        return text
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SIZE:
            return None
        with open(path, encoding="utf-8") as f:
            return f.read(MAX_SIZE + 1)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
