"""Expand the command line's paths into the files to lint.

* A file named on the command line is linted whatever its extension
  (``.ipynb`` as a notebook, anything else as Python), and is not subject to
  the excludes unless ``force_exclude`` (as ruff's ``--force-exclude``; the
  pre-commit hook passes it, since pre-commit names every changed file).
* A folder is walked recursively for ``*.py``, ``*.pyi`` and ``*.ipynb``,
  skipping whatever ``exclude``/``extend-exclude`` match (see
  :func:`tfpar_lint.config.path_matches`) below it, and hidden checkpoints.
  The named folder itself is linted even when an exclude matches its name
  (``tfpar-lint build``), unless ``force_exclude``, as in ruff.
* ``-`` is standard input.
* A path that does not exist or a folder that cannot be read becomes a
  :class:`Problem` (reported as E902, the others are still linted).
"""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from tfpar_lint.config import path_matches

SUFFIXES = (".py", ".pyi", ".ipynb")
STDIN = "-"


@dataclass
class Problem:
    path: str
    message: str


@dataclass
class Discovered:
    files: list[str] = field(default_factory=list)
    stdin: bool = False
    problems: list[Problem] = field(default_factory=list)


def is_excluded(path: str, patterns: Iterable[str], root: str, below: str = "") -> bool:
    """Does an exclude pattern match ``path``?

    ``below``: the folder named on the command line that ``path`` was found
    in.  A pattern without ``/`` (``build``, ``venv``) then only looks at the
    names *below* that folder: ``tfpar-lint build`` lints ``build/`` (named
    paths are linted, as in ruff, unless ``--force-exclude``) but still skips
    ``build/venv/``.
    """
    name = os.path.basename(os.path.normpath(path))
    inner: "list[str] | None" = None
    if below:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(below))
        inner = [] if rel == os.curdir else rel.replace("\\", "/").split("/")
    for pat in patterns:
        p = pat.strip().rstrip("/\\")
        if not p:
            continue
        if "/" not in p and "\\" not in p:
            if inner is not None:
                if any(fnmatch.fnmatchcase(part, p) for part in inner):
                    return True
                continue
            if fnmatch.fnmatchcase(name, p):
                return True
        if path_matches(path, pat, root):
            return True
    return False


def discover(paths: Sequence[str], excludes: Sequence[str], root: str,
             force_exclude: bool = False) -> Discovered:
    out = Discovered()
    seen: set[str] = set()

    def add(p: str) -> None:
        key = os.path.normcase(os.path.abspath(p))
        if key not in seen:
            seen.add(key)
            out.files.append(p)

    for given in paths:
        if given == STDIN:
            out.stdin = True
            continue
        if os.path.isdir(given):
            if force_exclude and is_excluded(given, excludes, root):
                continue
            _walk(given, excludes, root, add, out)
        elif os.path.exists(given) or os.path.islink(given):
            if force_exclude and is_excluded(given, excludes, root):
                continue
            add(given)
        else:
            out.problems.append(Problem(given, "FileNotFoundError: no such file or directory"))
    return out


def _walk(top: str, excludes: Sequence[str], root: str, add, out: Discovered) -> None:
    def onerror(err: OSError) -> None:
        out.problems.append(Problem(err.filename or top, f"{type(err).__name__}: {err.strerror or err}"))

    for dirpath, dirnames, filenames in os.walk(top, onerror=onerror):
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            if is_excluded(full, excludes, root, below=top):
                continue
            keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            if not f.endswith(SUFFIXES):
                continue
            full = os.path.normpath(os.path.join(dirpath, f))
            if is_excluded(full, excludes, root, below=top):
                continue
            add(full)
