"""``[tool.tfpar-lint]`` settings and rule selection.

Where the settings come from
    The nearest ``pyproject.toml`` with a ``[tool.tfpar-lint]`` table, searching
    upward from the current directory (ruff's rule: a ``pyproject.toml``
    without the table is passed over), or the file named by ``--config``
    (a ``pyproject.toml``, or any TOML file whose top level holds the keys).
    ``--no-config`` uses the defaults.  Relative paths and globs in the file
    (``exclude``, ``per-file-ignores``, ``cache-dir``) are relative to the
    file's folder, the *project root*; without a file the root is the cwd.

Keys
    ``select``, ``extend-select``, ``ignore`` (lists of selectors),
    ``per-file-ignores`` (table: glob -> list of selectors), ``exclude``
    (replaces the default excludes), ``extend-exclude`` (adds to them),
    ``strategy-factories``, ``dataset-distributors`` (qualified names),
    ``markers`` (extra pre-filter substrings), ``jobs`` (int >= 1; at most
    the number of CPUs is used), ``cache-dir`` (the result cache folder),
    ``output-format`` (or ``format``: text|concise|full|json|sarif|github),
    ``max-file-size`` (files larger are
    skipped with E902: bytes, or a string with a unit K, M or G (powers of
    1024), e.g. ``"10M"``; 0 = no limit; default 10M), ``file-timeout``
    (seconds of CPU time one file's analysis may take before it is given up
    with E903; 0 = no limit; default 60), ``fix``, ``unsafe-fixes``, ``show-fixes``
    (booleans, as in ruff; ``--fix``/``--no-fix`` and the like override them).

Selectors
    A code (``TFP101``), a prefix (``TFP1``, ``TFP``), ``ALL``, or a rule's
    kebab-case name.  A selector matching no rule is an error (``TFP`` itself
    is always accepted).

How selection is resolved (ruff's algorithm)
    Two layers, the file then the command line.  Within a layer the selectors
    are applied from least to most specific (``ALL`` < shorter prefix <
    longer prefix < full code or name); at equal specificity ``ignore`` beats
    ``select``.  A rule that is off by default is turned on only by its own
    code or name, or ``ALL``: a prefix (``TFP``, ``TFP4``) selects the rules
    under it that are on by default (the flake8 plugin decides the same way).  A layer with ``select`` starts from nothing, a layer without
    it changes the result of the layer before (the defaults for the first
    layer).  So ``--select`` on the command line replaces the file's
    ``select``/``ignore``/``extend-select`` entirely, while ``--extend-select``
    and ``--ignore`` adjust them.  Then ``per-file-ignores`` remove codes for
    the files their glob matches.
"""
from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfpar_lint.workers import DEFAULT_MAX_FILE_SIZE, DEFAULT_TIMEOUT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = "tfpar-lint"
FORMATS = ("text", "concise", "full", "json", "sarif", "github")

DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
    ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype",
    ".ruff_cache", ".svn", ".tfpar_lint_cache", ".tox", ".venv", ".vscode",
    "__pypackages__", "__pycache__", "_build", "buck-out", "build", "dist",
    "node_modules", "site-packages", "venv",
)

_KNOWN_KEYS = (
    "select", "extend-select", "ignore", "per-file-ignores", "exclude", "extend-exclude",
    "strategy-factories", "dataset-distributors", "markers", "jobs", "cache-dir", "format", "output-format",
    "tf-version", "max-file-size", "file-timeout", "fix", "unsafe-fixes", "show-fixes", "src", "project",
)

# The TensorFlow version the linted code targets (like ruff's target-version): rules whose truth
# depends on it read it (``tf.keras`` is Keras 3 from TF 2.16 on, Keras 2 before).  Not set (None):
# inferred for each file from the project's own files and the code's APIs (tfpar_lint.versions);
# where nothing states it (versions.UNKNOWN) the findings that depend on it are held back.
DEFAULT_TF_VERSION: Optional[str] = None
_TF_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")


def parse_tf_version(value: object, where: str) -> str:
    """``"2.15"`` / ``"2.15.1"`` -> ``"2.15"``; anything else is a ConfigError naming ``where``."""
    m = _TF_VERSION.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None or not (1 <= int(m.group(1)) <= 9):
        raise ConfigError(f"{where}: 'tf-version' must be a TensorFlow version like \"2.15\", got {value!r}")
    return f"{int(m.group(1))}.{int(m.group(2))}"


class ConfigError(Exception):
    """A problem with the settings; ``str()`` is the one line to print."""


@dataclass(frozen=True)
class Selection:
    """One layer of rule selection (the file's, or the command line's)."""

    select: Optional[tuple[str, ...]] = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    source: str = ""  # for --show-settings: "pyproject.toml", "command line"


@dataclass(frozen=True)
class Settings:
    config_path: Optional[str] = None
    root: str = "."
    file_selection: Selection = Selection(source="defaults")
    cli_selection: Selection = Selection(source="command line")
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDES
    extend_exclude: tuple[str, ...] = ()
    strategy_factories: tuple[str, ...] = ()
    dataset_distributors: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()
    jobs: Optional[int] = None
    cache_dir: str = ".tfpar_lint_cache"
    format: str = "text"
    tf_version: Optional[str] = DEFAULT_TF_VERSION  # None: inferred (tfpar_lint.versions)
    # whole-project analysis: follow names into the project's other files; ``src``: the folders
    # its modules live in (relative to the root, like ruff's ``src``; default: the root and src/)
    project: bool = True
    src: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    file_timeout: float = DEFAULT_TIMEOUT
    fix: bool = False  # ruff's settings of the same names (the command line's flags win)
    unsafe_fixes: bool = False
    show_fixes: bool = False

    # -- derived -------------------------------------------------------------
    @property
    def all_excludes(self) -> tuple[str, ...]:
        return tuple(self.exclude) + tuple(self.extend_exclude)

    def analysis_options(self) -> Any:
        from tfpar_lint.engine import AnalysisOptions

        return AnalysisOptions(
            strategy_factories=tuple(self.strategy_factories),
            dataset_distributors=tuple(self.dataset_distributors),
            extra_markers=tuple(self.markers),
            tf_version=self.tf_version,
            project=self.project,
            src=tuple(os.path.normpath(os.path.join(self.root, x)) for x in self.src),
        )

    def with_cli(self, *, select: Optional[Sequence[str]] = None,
                 extend_select: Sequence[str] = (), ignore: Sequence[str] = (),
                 exclude: Optional[Sequence[str]] = None, extend_exclude: Sequence[str] = (),
                 jobs: Optional[int] = None, format: Optional[str] = None,
                 tf_version: Optional[str] = None, project: Optional[bool] = None,
                 max_file_size: Optional[int] = None, file_timeout: Optional[float] = None) -> "Settings":
        """These settings with the command line's flags on top (validates the selectors and globs)."""
        where = "command line"
        check_globs(exclude or (), "--exclude", where)
        check_globs(extend_exclude, "--extend-exclude", where)
        sel = Selection(
            select=None if select is None else tuple(_check_selectors(select, "--select", where)),
            extend_select=tuple(_check_selectors(extend_select, "--extend-select", where)),
            ignore=tuple(_check_selectors(ignore, "--ignore", where)),
            source=where,
        )
        changes: dict[str, Any] = {"cli_selection": sel}
        if exclude is not None:
            changes["exclude"] = tuple(exclude)
        if extend_exclude:
            changes["extend_exclude"] = tuple(self.extend_exclude) + tuple(extend_exclude)
        if jobs is not None:
            changes["jobs"] = jobs
        if format is not None:
            changes["format"] = format
        if tf_version is not None:
            changes["tf_version"] = parse_tf_version(tf_version, "--tf-version")
        if project is not None:
            changes["project"] = project
        if max_file_size is not None:
            changes["max_file_size"] = max_file_size
        if file_timeout is not None:
            changes["file_timeout"] = file_timeout
        return replace(self, **changes)

    # -- rule selection ----------------------------------------------------------
    def decisions(self) -> dict[str, tuple[bool, str]]:
        """code -> (enabled, why) before per-file-ignores."""
        from tfpar_lint import registry

        state: dict[str, tuple[bool, str]] = {}
        for rule in registry.all_rules():
            state[rule.CODE] = (bool(rule.DEFAULT_ENABLED),
                                "on by default" if rule.DEFAULT_ENABLED else "off by default")
        for layer in (self.file_selection, self.cli_selection):
            updates: dict[str, tuple[bool, str]] = {}
            entries: list[tuple[int, int, str, str]] = []  # (specificity, is_ignore, selector, kind)
            for s in (layer.select or ()):
                entries.append((_specificity(s), 0, s, "select"))
            for s in layer.extend_select:
                entries.append((_specificity(s), 0, s, "extend-select"))
            for s in layer.ignore:
                entries.append((_specificity(s), 1, s, "ignore"))
            entries.sort(key=lambda e: (e[0], e[1]))
            for _spec, is_ignore, s, kind in entries:
                for code in (registry.expand_selector(s) if is_ignore else registry.select_codes(s)):
                    updates[code] = (not is_ignore, f"{kind} {s!r} ({layer.source})")
            if layer.select is not None:
                state = {c: (False, f"not selected ({layer.source} has select)") for c in state}
            state.update(updates)
        return state

    def base_enabled(self) -> frozenset[str]:
        return frozenset(c for c, (on, _) in self.decisions().items() if on)

    def per_file_ignored(self, path: str) -> set[str]:
        from tfpar_lint import registry

        out: set[str] = set()
        for pattern, selectors in self.per_file_ignores:
            if path_matches(path, pattern, self.root):
                for s in selectors:
                    out |= registry.expand_selector(s)
        return out

    def enabled_for(self, path: str, base: Optional[frozenset[str]] = None) -> frozenset[str]:
        """The codes to run on ``path``."""
        base = self.base_enabled() if base is None else base
        if not self.per_file_ignores:
            return base
        return base - self.per_file_ignored(path)

    def describe(self, paths: Sequence[str] = ()) -> str:
        """The text of ``--show-settings`` (``paths``: the files or folders given with it, whose
        inferred TensorFlow version is shown; default: the current folder)."""
        from tfpar_lint import registry

        from tfpar_lint.semantic.project import project_root

        out = [f"config file: {self.config_path or '(none)'}", f"project root: {self.root}"]
        here = os.path.join(os.getcwd(), "_")
        if self.project:
            # where the linted files' imports resolve (whole-project analysis): the nearest
            # pyproject.toml / setup.cfg / setup.py above the current folder, or the folder itself
            root = project_root(here)
            folders = [os.path.normpath(os.path.join(self.root, x)) for x in self.src] if self.src else (
                [root, os.path.join(root, "src")] if root else [os.getcwd()])
            out.append(f"whole-project analysis: on; root {root or '(none: a folder of scripts)'}; "
                       f"modules resolve against the importing file's folder and {folders}")
        else:
            out.append("whole-project analysis: off (each file alone)")
        from tfpar_lint import versions

        for f in fields(self):
            if f.name in ("config_path", "root", "file_selection", "cli_selection"):
                continue
            if f.name == "tf_version":
                shown = [p for p in paths if p and p != "-"] or [here]
                for p in shown:
                    lines = versions.show(os.path.join(p, "_") if os.path.isdir(p) else p, self.tf_version)
                    if p is not here:
                        lines[0] = f"{lines[0]}  [for {p}]"
                    out += lines
                continue
            val = getattr(self, f.name)
            if f.name == "per_file_ignores":
                val = {k: list(v) for k, v in val}
            elif isinstance(val, tuple):
                val = list(val)
            out.append(f"{f.name.replace('_', '-')}: {val!r}")
        for layer in (self.file_selection, self.cli_selection):
            out.append(f"selection from {layer.source}: select={list(layer.select) if layer.select is not None else None!r} "
                       f"extend-select={list(layer.extend_select)!r} ignore={list(layer.ignore)!r}")
        out.append("rules:")
        rules = registry.rules_by_code()
        for code, (on, why) in sorted(self.decisions().items()):
            out.append(f"  {code} {rules[code].NAME:<45} {'on ' if on else 'off'}  {why}")
        if self.per_file_ignores:
            out.append("  (per-file-ignores then remove codes for the files they match)")
        return "\n".join(out)


def _specificity(selector: str) -> int:
    from tfpar_lint import registry

    s = selector.strip()
    if s.upper() == "ALL":
        return 0
    if s in registry.rules_by_name() or s.upper() in registry.rules_by_code():
        return 100
    return 1 + len(s)


def _check_selectors(values: Iterable[str], key: str, where: str) -> list[str]:
    from tfpar_lint import registry

    out: list[str] = []
    for v in values:
        if not isinstance(v, str):
            raise ConfigError(f"{where}: '{key}' must be a list of strings, got {v!r}")
        s = v.strip()
        if not s:
            continue
        if s.upper() in ("ALL", "TFP") or registry.expand_selector(s):
            out.append(s)
            continue
        raise ConfigError(
            f"{where}: '{key}' has unknown rule selector {s!r} "
            "(use a code like TFP101, a prefix like TFP1, ALL, or a rule name; see `tfpar-lint --list-rules`)")
    return out


def split_csv(value: Optional[str]) -> list[str]:
    """``"TFP1, TFP201"`` -> ``["TFP1", "TFP201"]``."""
    if not value:
        return []
    return [p.strip() for p in re.split(r"[,\s]+", value) if p.strip()]


# -- path matching -------------------------------------------------------------

def _rel_posix(path: str, root: str) -> Optional[str]:
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    except ValueError:  # different drive on Windows
        return None
    if rel == os.curdir:
        return "."
    if rel.startswith(os.pardir):
        return None
    return PurePosixPath(*Path(rel).parts).as_posix()


def _glob_regex(pat: str) -> "re.Pattern[str]":
    """A glob as ruff (globset) reads it: ``*`` and ``?`` also cross ``/``,
    ``**/`` is zero or more folders, ``[...]`` is a character class."""
    out = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif c == "*":
            while i < n and pat[i] == "*":
                i += 1
            out.append(".*")
        elif c == "?":
            out.append(".")
            i += 1
        elif c == "[":
            j = pat.find("]", i + 2 if pat[i + 1:i + 2] in ("!", "]") else i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pat[i + 1:j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"(?:/.*)?\Z", re.DOTALL)


def glob_error(pattern: str) -> Optional[str]:
    """Why ``pattern`` is not a valid glob (a reversed range such as ``[z-a]``), or None."""
    pat = pattern.strip().replace("\\", "/").rstrip("/")
    try:
        _glob_regex(pat)
        fnmatch.translate(pat)
        re.compile(fnmatch.translate(pat))
    except (re.error, ValueError, RecursionError) as e:
        return str(e)
    return None


def check_globs(patterns: Iterable[str], key: str, where: str) -> None:
    for pat in patterns:
        why = glob_error(pat)
        if why is not None:
            raise ConfigError(f"{where}: '{key}' has an invalid glob {pat!r}: {why}")


# Upper bounds of the limits: larger values are surely typos (1e308), and past them the numbers no
# longer fit what they are given to (a read size, a select() time-out in milliseconds).
MAX_SIZE = 1 << 40  # 1 TiB
MAX_SECONDS = 1e6  # about 11.5 days


def parse_size(value: Any) -> int:
    """``10485760``, ``"10M"``, ``"512 KiB"``, ``"1.5G"`` -> bytes (K, M, G are powers of 1024),
    at most :data:`MAX_SIZE`.

    Raises ValueError with the reason.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 10M, got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(?:([kKmMgG])(?:i?[bB])?|[bB])?\s*", value)
        if not m:
            raise ValueError(f"expected a size such as 10M, 512K or a number of bytes, got {value!r}")
        scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[(m.group(2) or "").lower()]
        n = int(float(m.group(1)) * scale)
    else:
        raise ValueError(f"expected a size such as 10M, got {value!r}")
    if n < 0:
        raise ValueError(f"a size cannot be negative, got {value!r}")
    if n > MAX_SIZE:
        raise ValueError(f"a size of at most 1T ({MAX_SIZE} bytes) is accepted, got {value!r}")
    return n


def parse_seconds(value: Any) -> float:
    """A finite number of seconds >= 0 (0: no limit), at most :data:`MAX_SECONDS`; raises ValueError
    with the reason."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number of seconds, got {value!r}")
    try:
        v = float(value)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"expected a finite number of seconds >= 0, got {value!r}")
    if v > MAX_SECONDS:
        raise ValueError(f"expected at most {MAX_SECONDS:g} seconds (0: no limit), got {value!r}")
    return v


def path_matches(path: str, pattern: str, root: str) -> bool:
    """Does ``pattern`` (an exclude or per-file-ignores glob) match ``path``?

    A pattern without ``/`` matches the file's name or the name of any folder
    above it inside the root (``venv``, ``*_pb2.py``); a pattern with ``/`` is
    matched against the path relative to the root (``tests/*``,
    ``src/**/gen.py``, ``scripts/`` covers everything below ``scripts``) or,
    when absolute, against the absolute path.
    """
    pat = pattern.strip().replace("\\", "/")
    if not pat:
        return False
    pat = pat.rstrip("/") or "/"
    while pat.startswith("./"):
        pat = pat[2:]
    rel = _rel_posix(path, root)
    if "/" not in pat:
        parts = rel.split("/") if rel and rel != "." else [Path(os.path.abspath(path)).name]
        return any(fnmatch.fnmatchcase(p, pat) for p in parts)
    rx = _glob_regex(pat)
    if pat.startswith("/"):
        return bool(rx.match(Path(os.path.abspath(path)).as_posix()))
    return rel is not None and bool(rx.match(rel))


# -- loading -------------------------------------------------------------------

def find_config(start: Optional[str] = None) -> Optional[Path]:
    """The nearest ``pyproject.toml`` with a ``[tool.tfpar-lint]`` table, upward from ``start``."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            text = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{candidate}: cannot read: {e}") from None
        if TABLE not in text:  # cheap: cannot hold our table
            continue
        data = _parse_toml(text, candidate)
        if isinstance(data.get("tool"), dict) and TABLE in data["tool"]:
            return candidate
    return None


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None


def load_settings(config: Optional[str] = None, *, no_config: bool = False,
                  cwd: Optional[str] = None) -> Settings:
    """Settings from ``--config PATH``, or the discovered ``pyproject.toml``, or defaults."""
    if no_config:
        return Settings(root=os.path.abspath(cwd or os.getcwd()))
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ConfigError(f"{config}: config file not found")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{config}: cannot read: {e}") from None
        data = _parse_toml(text, path)
        tool = data.get("tool")
        if isinstance(tool, dict) and TABLE in tool:
            table = tool[TABLE]
        elif path.name == "pyproject.toml":
            table = {}
        else:  # a dedicated file (tfpar-lint.toml): keys at the top level
            table = data
        return settings_from_table(table, str(path))
    found = find_config(cwd)
    if found is None:
        return Settings(root=os.path.abspath(cwd or os.getcwd()))
    data = _parse_toml(found.read_text(encoding="utf-8"), found)
    return settings_from_table(data["tool"][TABLE], str(found))


def _str_list(table: Mapping[str, Any], key: str, where: str) -> Optional[list[str]]:
    if key not in table:
        return None
    val = table[key]
    if isinstance(val, str):
        raise ConfigError(f"{where}: '{key}' must be a list of strings, e.g. {key} = [{val!r}]")
    if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
        raise ConfigError(f"{where}: '{key}' must be a list of strings, got {val!r}")
    return list(val)


def settings_from_table(table: Any, config_path: str) -> Settings:
    """Validate one ``[tool.tfpar-lint]`` table."""
    where = config_path
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.{TABLE}] must be a table")
    unknown = [k for k in table if k not in _KNOWN_KEYS]
    if unknown:
        hint = ""
        for k in unknown:
            close = [c for c in _KNOWN_KEYS if c.replace("-", "_") == k or c == k.replace("_", "-")]
            if close:
                hint = f" (did you mean '{close[0]}'?)"
                break
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} in [tool.{TABLE}]{hint}; "
            f"known keys: {', '.join(_KNOWN_KEYS)}")
    root = str(Path(config_path).resolve().parent)
    kw: dict[str, Any] = {"config_path": config_path, "root": root}

    select = _str_list(table, "select", where)
    sel = Selection(
        select=None if select is None else tuple(_check_selectors(select, "select", where)),
        extend_select=tuple(_check_selectors(_str_list(table, "extend-select", where) or [], "extend-select", where)),
        ignore=tuple(_check_selectors(_str_list(table, "ignore", where) or [], "ignore", where)),
        source=Path(config_path).name,
    )
    kw["file_selection"] = sel

    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{where}: 'per-file-ignores' must be a table of glob = [codes], got {pfi!r}")
        items = []
        for glob, codes in pfi.items():
            key = f"per-file-ignores.{glob!r}"
            if isinstance(codes, str):
                raise ConfigError(f"{where}: '{key}' must be a list of strings, e.g. [{codes!r}]")
            if not isinstance(codes, list):
                raise ConfigError(f"{where}: '{key}' must be a list of strings, got {codes!r}")
            check_globs([glob], "per-file-ignores", where)
            items.append((glob, tuple(_check_selectors(codes, key, where))))
        kw["per_file_ignores"] = tuple(items)

    for key, attr in (("exclude", "exclude"), ("extend-exclude", "extend_exclude"),
                      ("strategy-factories", "strategy_factories"),
                      ("dataset-distributors", "dataset_distributors"), ("markers", "markers")):
        val = _str_list(table, key, where)
        if val is not None:
            if key in ("strategy-factories", "dataset-distributors"):
                for v in val:
                    if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", v.strip()):
                        raise ConfigError(f"{where}: '{key}' entry {v!r} is not a qualified name like 'pkg.module.func'")
                val = [v.strip() for v in val]
            if key in ("exclude", "extend-exclude"):
                check_globs(val, key, where)
            if key == "markers" and any(not v for v in val):
                raise ConfigError(f"{where}: 'markers' entries must be non-empty strings")
            kw[attr] = tuple(val)

    if "jobs" in table:
        jobs = table["jobs"]
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ConfigError(f"{where}: 'jobs' must be a positive integer, got {jobs!r}")
        kw["jobs"] = jobs
    if "cache-dir" in table:
        cd = table["cache-dir"]
        if not isinstance(cd, str) or not cd:
            raise ConfigError(f"{where}: 'cache-dir' must be a path string, got {cd!r}")
        kw["cache_dir"] = cd if os.path.isabs(cd) else os.path.join(root, cd)
    for key in ("fix", "unsafe-fixes", "show-fixes"):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{where}: '{key}' must be true or false, got {table[key]!r}")
            kw[key.replace("-", "_")] = table[key]
    if "tf-version" in table:
        kw["tf_version"] = parse_tf_version(table["tf-version"], where)
    if "project" in table:
        if not isinstance(table["project"], bool):
            raise ConfigError(f"{where}: 'project' must be true or false, got {table['project']!r}")
        kw["project"] = table["project"]
    if "src" in table:
        src = _str_list(table, "src", where)
        if not src or any(not x.strip() for x in src):
            raise ConfigError(f"{where}: 'src' must be a list of folder paths, e.g. [\"src\"]")
        kw["src"] = tuple(x.strip() for x in src)
    if "max-file-size" in table:
        try:
            kw["max_file_size"] = parse_size(table["max-file-size"])
        except ValueError as e:
            raise ConfigError(f"{where}: 'max-file-size': {e}") from None
    if "file-timeout" in table:
        try:
            kw["file_timeout"] = parse_seconds(table["file-timeout"])
        except ValueError as e:
            raise ConfigError(f"{where}: 'file-timeout': {e}") from None
    for key in ("format", "output-format"):  # output-format: ruff's name for it
        if key in table:
            fmt = table[key]
            if fmt not in FORMATS:
                raise ConfigError(f"{where}: '{key}' must be one of {', '.join(FORMATS)}, got {fmt!r}")
            kw["format"] = fmt
    return Settings(**kw)
