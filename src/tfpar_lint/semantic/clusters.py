"""The clusters a multi-worker program is declared to run in, and whether they have a ``chief`` task.

TensorFlow makes worker 0 the chief when the cluster has no ``chief`` task (the TF_CONFIG rule), so
a chief test that also lets worker 0 in is right on such a cluster.  The clusters are read where
the code or the project declares them:

* a job spec the module builds (``{"tfReplicaSpecs": {"Worker": ...}}``,
  ``V1TFJobSpec(tf_replica_specs={"Worker": ...})``);
* a job spec beside the code: a YAML file (a Kubeflow ``TFJob``) in the linted file's folder or a
  folder above it up to the repository's root, or in a folder directly below the file's folder or
  the root (``k8s/tfjob.yaml``), whose ``tfReplicaSpecs`` names the replica types
  (``Chief``/``Master``, ``Worker``, ``PS``, ``Evaluator``).  A sibling project's folder on the way
  up is not read: its jobs run other code.

A cluster literal the module writes itself (``{"cluster": {"worker": [...]}}`` for ``TF_CONFIG``)
does not count: the multi-worker tutorials write a worker-only one on ``localhost`` to demonstrate,
and the code then meets the deployed clusters, which may have a chief (TFP607 reads it the same
way; the realcode tutorial labelled for its two writers keeps its finding).  Nothing is guessed
from names: with no declaration the answer is "not told"."""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from tfpar_lint.semantic.nodes import literal_str

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module

_SPEC_KEYS = ("tfReplicaSpecs", "tf_replica_specs")
_SPEC_LINE = re.compile(r"^(?P<ind>[ \t]*)[\"']?(?:tfReplicaSpecs|tf_replica_specs)[\"']?[ \t]*:[ \t]*(?:#.*)?$", re.M)
_KEY_LINE = re.compile(r"^(?P<ind>[ \t]*)[\"']?(?P<key>[A-Za-z_][\w-]*)[\"']?[ \t]*:")
_TYPES = {"chief": "chief", "master": "chief", "worker": "worker", "ps": "ps", "evaluator": "evaluator"}
_MAX_FILES = 200  # YAML files read per linted folder's walk
_MAX_SIZE = 512 * 1024
_MAX_UP = 12  # folders above the linted file


def task_type(key: str) -> Optional[str]:
    return _TYPES.get(key.lower())


def yaml_clusters(text: str) -> list[set[str]]:
    """The replica types of each ``tfReplicaSpecs`` mapping of a YAML text (lower case, ``master``
    read as ``chief``)."""
    out: list[set[str]] = []
    lines = text.splitlines()
    starts = {text.count("\n", 0, mt.start()): len(mt.group("ind").expandtabs()) for mt in _SPEC_LINE.finditer(text)}
    for start, ind in starts.items():
        child: Optional[int] = None
        types: set[str] = set()
        for line in lines[start + 1:]:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            depth = len(line) - len(line.lstrip(" \t"))
            if depth <= ind:
                break
            if child is None:
                child = depth
            if depth != child:
                continue
            mt = _KEY_LINE.match(line)
            if mt and task_type(mt.group("key")):
                types.add(task_type(mt.group("key")))
        if types:
            out.append(types)
    return out


_FOLDER_MEMO: dict[str, tuple[list[set[str]], list[str]]] = {}


def _folder_specs(folder: str, below: bool) -> tuple[list[set[str]], list[str]]:
    """The job-spec clusters of the YAML files directly in ``folder`` (and, ``below``, in the
    folders directly below it), with the files that hold them."""
    key = f"{int(below)}{folder}"
    got = _FOLDER_MEMO.get(key)
    if got is not None:
        return got
    clusters: list[set[str]] = []
    files: list[str] = []
    candidates: list[str] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        entries = []
    for e in entries:
        try:
            if e.is_file() and e.name.lower().endswith((".yaml", ".yml")):
                candidates.append(e.path)
            elif below and e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
                for sub in sorted(os.scandir(e.path), key=lambda x: x.name):
                    if sub.is_file() and sub.name.lower().endswith((".yaml", ".yml")):
                        candidates.append(sub.path)
        except OSError:
            continue
        if len(candidates) > _MAX_FILES:
            break
    for path in candidates[:_MAX_FILES]:
        try:
            if os.path.getsize(path) > _MAX_SIZE:
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        if "tfReplicaSpecs" not in text and "tf_replica_specs" not in text:
            continue
        got_here = yaml_clusters(text)
        if got_here:
            clusters += got_here
            files.append(path)
    _FOLDER_MEMO[key] = (clusters, files)
    return clusters, files


def spec_clusters(path: str) -> tuple[list[set[str]], list[str]]:
    """The job-spec clusters declared beside the file at ``path`` (its folder and those above it,
    up to the repository's root), and the files read."""
    if not path or path.startswith("<"):
        return [], []
    folder = os.path.dirname(os.path.abspath(path))
    clusters: list[set[str]] = []
    files: list[str] = []
    for i in range(_MAX_UP):
        root = os.path.exists(os.path.join(folder, ".git")) or folder == os.path.expanduser("~")
        c, f = _folder_specs(folder, i == 0 or root)
        clusters += c
        files += f
        if root:
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return clusters, files


def _module_job_specs(m: "Module") -> list[set[str]]:
    """Job specs the module builds: a dict whose ``tfReplicaSpecs`` entry is a dict literal, or a
    call with ``tf_replica_specs={...}``."""
    if "eplica" not in m.source:
        return []
    out: list[set[str]] = []
    found: list[cst.Dict] = []
    for cs in m.calls:
        for a in cs.node.args:
            if a.keyword is not None and a.keyword.value in _SPEC_KEYS and isinstance(a.value, cst.Dict):
                found.append(a.value)
            elif isinstance(a.value, cst.Dict):
                found.extend(_spec_dicts(a.value))
    for _target, value, _scope, _order in m.attr_assigns:
        if isinstance(value, cst.Dict):
            found.extend(_spec_dicts(value))
    for bs in m.scope.bindings.values():
        for b in bs:
            if isinstance(b.value, cst.Dict):
                found.extend(_spec_dicts(b.value))
    for d in found:
        types = {task_type(k) for k in (literal_str(el.key) for el in d.elements if isinstance(el, cst.DictElement))
                 if k and task_type(k)}
        if types:
            out.append(types)
    return out


def _spec_dicts(d: cst.Dict, depth: int = 0) -> list[cst.Dict]:
    """The ``tfReplicaSpecs`` dict literals inside a dict literal (a job's manifest)."""
    out: list[cst.Dict] = []
    if depth > 6:
        return out
    for el in d.elements:
        if not isinstance(el, cst.DictElement) or not isinstance(el.value, cst.Dict):
            continue
        if literal_str(el.key) in _SPEC_KEYS:
            out.append(el.value)
        else:
            out.extend(_spec_dicts(el.value, depth + 1))
    return out


def declared_clusters(m: "Module") -> list[set[str]]:
    """Every cluster the module or the job specs beside it declare, as sets of task types."""
    memo = m.rule_memo.setdefault("clusters", {})
    if "all" not in memo:
        specs, files = spec_clusters(m.path)
        memo["files"] = files
        memo["all"] = _module_job_specs(m) + specs
    return memo["all"]


def has_chief_task(m: "Module") -> Optional[bool]:
    """Whether the cluster the program runs in has a ``chief`` task: True when some declared
    cluster has one (a ``master`` counts), False when every declared cluster lists its tasks and
    none is a chief (worker 0 is then the chief), None when none is declared."""
    clusters = [c for c in declared_clusters(m) if c]
    if not clusters:
        return None
    return any("chief" in c for c in clusters)


def dependency_paths(m: "Module") -> list[str]:
    """The job-spec files the module's answer read (the result cache re-lints when they change)."""
    memo = m.rule_memo.get("clusters") or {}
    return list(memo.get("files", ()))


def clear_cache() -> None:
    _FOLDER_MEMO.clear()
