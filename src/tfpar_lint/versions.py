"""The TensorFlow (and Keras) version the linted code targets, and where that came from.

Rules whose truth depends on the version (``tf.keras`` is Keras 3 from TensorFlow 2.16 on; the
Keras optimizers build their state at the first step from 2.11 on) ask :func:`target_of` for
the module's :class:`Target`.  It is decided, first match wins, by:

1. the explicit setting: ``tf-version`` in ``[tool.tfpar-lint]``, ``--tf-version``,
   ``--tfp-tf-version`` (flake8);
2. the project's own statement, read from the nearest folder at or above the file (up to the
   repository's root) that states one: requirements files (``*requirements*.txt`` and
   ``requirements/*.txt``, following ``-r``/``-c``), ``pyproject.toml`` (PEP 621 dependencies
   and optional dependencies, PEP 735 groups, Poetry dependencies and groups), ``poetry.lock``,
   ``Pipfile``, ``Pipfile.lock``, ``setup.py`` and ``setup.cfg`` (``install_requires``), conda
   ``environment.yml``, and Dockerfiles (the base image ``tensorflow/tensorflow:2.4.1-gpu``,
   ``pip install tensorflow==2.11.0`` lines, ``ENV TF_USE_LEGACY_KERAS=1``).  A pin of the
   standalone ``keras`` (``keras<3``) or of ``tf-keras`` bounds TensorFlow too (pip installs
   TensorFlow 2.16+ only with Keras 3).  A range (``tensorflow>=2.4``) is narrowed by the APIs
   the code uses;
   The code's own text may state it too (:func:`code_statements`: a notebook's
   ``!pip install tensorflow==2.15.0``, ``packages_to_install=[...]``, a setup.py it writes, a
   container image): used where the project states nothing, else intersected with it;
3. the APIs the code uses (:func:`api_range`): names that exist only in some versions
   (``tf.estimator`` is gone from 2.16, ``tf.keras.layers.experimental`` and an optimizer's
   ``lr`` exist only in Keras 2, ``keras.ops`` only in Keras 3); they bound the version, they do
   not say what installs (:meth:`Target.at_least`);
4. nothing: :data:`UNKNOWN`; the rules that depend on the version report nothing there and say
   so once for the run (:func:`withhold`; issue 28: a version finding needs version evidence).

A range means what pip installs today from it: its newest release (``>=2.4`` installs the
current TensorFlow).  ``TF_USE_LEGACY_KERAS=1`` (set by the module, by a project module it
imports or by the Dockerfile) makes ``tf.keras`` Keras 2 on any version.
"""
from __future__ import annotations

import ast
import json
import os
import re
import sys
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Iterator, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

if TYPE_CHECKING:  # pragma: no cover
    from tfpar_lint.semantic import Module, Value

Version = tuple[int, int]
KERAS3_TF = (2, 16)  # the first TensorFlow whose tf.keras is Keras 3
NEW_OPTIMIZERS_TF = (2, 11)  # the first TensorFlow whose Keras optimizers capture the strategy when made
_OPEN = (2, 999)  # "any later 2.x": pip installs the newest


@dataclass(frozen=True)
class Target:
    """A TensorFlow version range and its source.  ``high`` None: no upper bound."""

    low: Optional[Version] = None
    high: Optional[Version] = None
    source: str = ""  # "requirements.txt", "Dockerfile", "tf-version setting", "the code's APIs", ...
    detail: str = ""  # what was read: "tensorflow==2.4.1", "FROM tensorflow/tensorflow:2.4.1-gpu"
    path: Optional[str] = None  # the file read (a result-cache dependency)
    keras: Optional[int] = None  # the standalone ``keras`` package's major version, when stated
    legacy_keras: bool = False  # TF_USE_LEGACY_KERAS=1 stated by the project (not by the module)
    known: bool = True  # False: nothing found, UNKNOWN's assumption
    also: tuple[str, ...] = ()  # other statements read (for --show-settings)
    # the upper bound comes from the code's APIs (which Keras it was written for), not a statement
    high_from_code: bool = False
    # the whole range comes from the code's APIs: bounds on the version, not what installs
    from_apis: bool = False
    # the code states what installs through a name it does not define (``packages_to_install=[TF]``
    # with ``TF`` imported): a version is stated, out of sight, so today's is not assumed
    elsewhere: str = ""

    @property
    def runs(self) -> Version:
        """The version that runs: the newest the range allows (what pip installs today)."""
        if self.high is not None:
            return self.high
        return max(self.low or KERAS3_TF, _LATEST)

    def at_least(self, v: Version) -> Optional[bool]:
        """Does the code run on TensorFlow ``v`` or later?  None: nothing says.

        A statement of what installs (the setting, a pin or lock file, a requirements range, a
        Dockerfile's image, the code's own ``pip install``) answers with the release it installs (a
        range runs its newest release: pip installs it).  The code's APIs only bound the version:
        ``tf.keras.layers.Normalization`` (2.6 on) says nothing about 2.11 or Keras 3, and a name
        of Keras 2 only (``optimizers.legacy``, an optimizer's ``lr``) says 2.15 or older, nothing
        about 2.11 (issue 28: a TF 2.6 notebook's ``Adam(lr=...)`` was reported as a 2.11+
        mistake).  Nothing stated: None."""
        if self.elsewhere and (not self.known or self.from_apis):  # stated where this file cannot read
            if self.known and self.low is not None and self.low >= v:
                return True
            if self.known and self.high is not None and self.high < v:
                return False
            return None
        if not self.known:  # nothing at all states the version: no answer (the finding is withheld)
            return None
        if self.from_apis or self.high_from_code:
            if self.low is not None and self.low >= v:
                return True
            if self.high is not None and self.high < v:
                return False
            return None  # the code's APIs leave the question open: no evidence either way
        # what pip installs within the range the project states: its newest release
        return self.runs >= v

    def tf_keras_is_keras3(self) -> Optional[bool]:
        """Is ``tf.keras`` Keras 3 (TensorFlow 2.16+ without ``TF_USE_LEGACY_KERAS=1``)?  None: nothing says."""
        if self.legacy_keras:
            return False
        return self.at_least(KERAS3_TF)

    def keras_major(self) -> Optional[int]:
        """The major version of the standalone ``keras`` package (``import keras``); None: nothing says."""
        if self.keras is not None:
            return self.keras
        k3 = self.at_least(KERAS3_TF)
        return None if k3 is None else (3 if k3 else 2)

    def version_text(self) -> str:
        lo, hi = self.low, self.high
        if hi is not None and hi[1] >= 999:
            hi = None
        if lo is not None and hi is not None:
            return _v(lo) if lo == hi else f"{_v(lo)}-{_v(hi)}"
        if lo is not None:
            return f"{_v(lo)}+"
        if hi is not None:
            return f"{_v(hi)} or older"
        return "(any)"

    def describe(self, keras: Optional[int] = None) -> str:
        """``TensorFlow 2.16+ (Keras 3, from requirements.txt)``."""
        bits = []
        if keras is not None:
            bits.append(f"Keras {keras}")
        if not self.known:
            bits.append("nothing in the project states a version")
            return f"TensorFlow (any) ({', '.join(bits)})"
        bits.append(f"from {self.source}")
        return f"TensorFlow {self.version_text()} ({', '.join(bits)})"


_LATEST = (2, 21)  # the newest TensorFlow this table knows (a range without an upper bound runs it)


def _v(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


# Nothing states the version: a question about it has no answer (None), and a finding that holds only
# on some versions is withheld (withhold) and counted in the run's one note.  The same where the code's
# APIs bound the version without settling the question (a Keras 2 name says 2.15 or older, nothing
# about 2.11; a name that exists since 2.6 says nothing about Keras 3).
UNKNOWN = Target(low=KERAS3_TF, high=None, source="", known=False)


def explicit(value: str) -> Target:
    """The ``tf-version`` setting (already validated: ``"2.15"``)."""
    major, minor = (int(x) for x in value.split(".")[:2])
    return Target(low=(major, minor), high=(major, minor), source="the tf-version setting", detail=value)


# ============================================================================ requirement specs
# Distributions that install TensorFlow (normalised: lower case, '_' and '.' as '-').
TF_DISTS = frozenset({
    "tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-macos", "tensorflow-intel",
    "intel-tensorflow", "tensorflow-aarch64", "tensorflow-rocm", "tensorflow-cpu-aws", "tensorflow-base",
    "tensorflow-metal-plugin",
})
NIGHTLY_DISTS = frozenset({"tf-nightly", "tf-nightly-gpu", "tf-nightly-cpu"})
KERAS_DISTS = frozenset({"keras", "keras-nightly"})
TF_KERAS_DISTS = frozenset({"tf-keras", "tf-keras-nightly"})
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$", re.S)
_CLAUSE = re.compile(r"(===|==|~=|!=|<=|>=|<|>|\^|~|=)?\s*v?(\d+(?:\.(?:\d+|\*))*)"
                     r"(?:[._-]?(?:a|b|c|rc|alpha|beta|pre|preview|dev|post)\d*)*(?:\+[\w.]+)?")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip().lower())


@dataclass(frozen=True)
class Spec:
    """One statement about a distribution's version: ``tensorflow==2.4.1`` read from a file."""

    dist: str  # normalised distribution name
    low: Optional[Version]
    high: Optional[Version]
    text: str  # as written, for messages
    pinned: bool  # an exact version (==, a lock file, an image tag)


def _ver(text: str) -> Optional[tuple[int, ...]]:
    parts = []
    for p in text.split("."):
        if p == "*":
            break
        if not p.isdigit():
            return None
        parts.append(int(p))
    return tuple(parts) if parts else None


def spec_range(spec: str, style: str = "pep440") -> Optional[tuple[Optional[Version], Optional[Version], bool]]:
    """``">=2.4,<2.16"`` -> ((2, 4), (2, 15), False).  ``style``: "pep440", "poetry" (``^2.4``,
    ``~2.4``, a bare version is exact) or "conda" (``=2.4`` matches 2.4.*).  None: no bound stated
    (``*``, empty, a URL); the third item says whether it names one minor version (a pin)."""
    spec = spec.strip().strip('"\'')
    if not spec or spec == "*" or "://" in spec or spec.startswith("@"):
        return None
    low: Optional[Version] = None
    high: Optional[Version] = None
    any_clause = False
    for clause in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", spec):
        clause = clause.strip()
        if not clause:
            continue
        if style == "conda" and " " in clause:  # "2.4.1 build_string"
            clause = clause.split()[0]
        m = _CLAUSE.fullmatch(clause)
        if m is None:
            continue
        op, vt = m.group(1) or ("==" if style in ("poetry", "conda") else ""), m.group(2)
        v = _ver(vt)
        if v is None:
            continue
        mm: Version = (v[0], v[1] if len(v) > 1 else 0)
        wild = vt.endswith("*") or len(v) == 1
        if op == "=" and style == "conda":
            op, wild = "==", True
        if op in ("==", "==="):
            if len(v) == 1 or (wild and len(v) == 1):
                lo_, hi_ = (v[0], 0), (v[0], 999)
            else:
                lo_, hi_ = mm, mm
        elif op == "~=":
            lo_, hi_ = mm, (mm if len(v) >= 3 else (v[0], 999))
        elif op == "~":  # poetry: ~2.4 / ~2.4.1 -> 2.4.*; ~2 -> 2.*
            lo_, hi_ = mm, (mm if len(v) >= 2 else (v[0], 999))
        elif op == "^":  # poetry: ^2.4 -> <3.0
            lo_, hi_ = mm, (v[0], 999) if v[0] > 0 else (mm if len(v) >= 2 else (0, 999))
        elif op == ">=" or op == ">":
            lo_, hi_ = mm, None
        elif op == "<=":
            lo_, hi_ = None, mm
        elif op == "<":
            if len(v) == 1 or (len(v) >= 2 and v[1] == 0 and all(x == 0 for x in v[2:])):
                hi_ = (v[0] - 1, 999) if len(v) == 1 or v[1] == 0 else (v[0], v[1] - 1)
            elif all(x == 0 for x in v[2:]):
                hi_ = (v[0], v[1] - 1)
            else:
                hi_ = mm
            lo_ = None
        elif op == "!=":
            continue
        else:
            continue
        any_clause = True
        if lo_ is not None and (low is None or lo_ > low):
            low = lo_
        if hi_ is not None and (high is None or hi_ < high):
            high = hi_
    if not any_clause:
        return None
    return low, high, low is not None and low == high


def parse_requirement(line: str, style: str = "pep440") -> Optional[tuple[str, str]]:
    """``"tensorflow-gpu[and-cuda]>=2.4 ; python_version<'3.9'"`` -> ("tensorflow-gpu", ">=2.4")."""
    line = line.split(";", 1)[0].split(" #", 1)[0].strip()
    line = re.split(r"\s+--?[A-Za-z]", line, maxsplit=1)[0]  # pip options after it: --hash=sha256:...
    if not line or line.startswith(("#", "-")):
        return None
    wheel = re.search(r"/([A-Za-z0-9_.]+)-(\d+(?:\.\d+)+)-[^/]*\.whl", line)
    if wheel:  # a wheel URL or path: tensorflow-2.4.0-cp38-...whl
        return norm(wheel.group(1)), "==" + wheel.group(2)
    if "@" in line and "://" in line:
        return None
    m = _NAME.match(line)
    if m is None:
        return None
    rest = m.group(3).strip()
    if style == "conda" and rest and rest[0].isdigit():
        rest = "=" + rest  # "tensorflow 2.4.1"
    return norm(m.group(1)), rest


def statement(dist: str, spec: str, text: str, style: str = "pep440") -> Optional[Spec]:
    dist = norm(dist)
    if dist in NIGHTLY_DISTS:  # a nightly: its version when pinned (2.21.0.dev2026...), else the newest
        r = spec_range(spec, style)
        if r is None or (r[0] is None and r[1] is None):
            return Spec("tensorflow", _LATEST, None, text, False)
        return Spec("tensorflow", r[0], r[1], text, r[2])
    if dist not in TF_DISTS and dist not in KERAS_DISTS and dist not in TF_KERAS_DISTS:
        return None
    r = spec_range(spec, style)
    if r is None:
        return Spec(dist if dist in KERAS_DISTS or dist in TF_KERAS_DISTS else "tensorflow", None, None, text, False)
    low, high, pinned = r
    if dist in TF_DISTS:
        dist = "tensorflow"
    return Spec(dist, low, high, text, pinned)


# ============================================================================ the project's files
@dataclass
class Statements:
    """What one folder's files say."""

    specs: list[tuple[int, str, Spec]] = field(default_factory=list)  # (priority, file, spec)
    legacy: Optional[str] = None  # the file that sets TF_USE_LEGACY_KERAS=1
    files: list[str] = field(default_factory=list)  # every file read (cache dependencies)


def _read(path: str, limit: int = 2 << 20) -> Optional[str]:
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > limit:
            return None
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None


def _requirements(path: str, seen: set[str], depth: int = 0) -> Iterator[Spec]:
    text = _read(path)
    if text is None or depth > 5 or os.path.realpath(path) in seen:
        return
    seen.add(os.path.realpath(path))
    joined = re.sub(r"\\\r?\n", " ", text)
    for raw in joined.splitlines():
        line = raw.strip()
        inc = re.match(r"(?:-r|-c|--requirement|--constraint)(?:\s+|=)(\S+)", line)
        if inc:
            target = os.path.join(os.path.dirname(path), inc.group(1))
            yield from _requirements(target, seen, depth + 1)
            continue
        req = parse_requirement(line)
        if req is not None:
            st = statement(req[0], req[1], f"{req[0]}{req[1]}")
            if st is not None:
                yield st


def _pyproject(path: str) -> Iterator[Spec]:
    text = _read(path)
    if text is None or not re.search(r"tensorflow|keras|tf-nightly|tf_nightly", text, re.I):
        return
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    lines: list[str] = []
    for v in [project.get("dependencies")] + list((project.get("optional-dependencies") or {}).values()) \
            + list((data.get("dependency-groups") or {}).values()):
        if isinstance(v, list):
            lines += [x for x in v if isinstance(x, str)]
    for line in lines:
        req = parse_requirement(line)
        if req is not None:
            st = statement(req[0], req[1], line)
            if st is not None:
                yield st
    poetry = (data.get("tool") or {}).get("poetry") if isinstance(data.get("tool"), dict) else None
    if isinstance(poetry, dict):
        tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
        for g in (poetry.get("group") or {}).values():
            if isinstance(g, dict):
                tables.append(g.get("dependencies"))
        yield from _poetry_tables(tables)


def _poetry_tables(tables) -> Iterator[Spec]:
    for table in tables:
        if not isinstance(table, dict):
            continue
        for name, val in table.items():
            if isinstance(val, list):  # multiple constraints: the first
                val = val[0] if val else None
            if isinstance(val, dict):
                val = val.get("version")
            if not isinstance(val, str):
                continue
            st = statement(name, val, f"{name} = {val!r}", style="poetry")
            if st is not None:
                yield st


def _poetry_lock(path: str) -> Iterator[Spec]:
    text = _read(path, 16 << 20)
    if text is None or not re.search(r'name = "(tensorflow|keras|tf-keras|tf-nightly)', text, re.I):
        return
    for m in re.finditer(r'\[\[package\]\]\s*\nname\s*=\s*"([^"]+)"\s*\nversion\s*=\s*"([^"]+)"', text):
        st = statement(m.group(1), "==" + m.group(2), f"{m.group(1)} {m.group(2)}")
        if st is not None:
            yield st


_PIPFILE_LINE = re.compile(r"""^\s*["']?([A-Za-z0-9][A-Za-z0-9._-]*)["']?\s*=\s*"""
                           r"""(?:["']([^"'\n]*)["']|\{[^}\n]*?\bversion\s*=\s*["']([^"'\n]*)["'])""")


def _pipfile_lines(text: str) -> Iterator[Spec]:
    """A Pipfile that is not valid TOML (a key written twice, a stray character): its
    ``[packages]`` and ``[dev-packages]`` lines one by one."""
    section = ""
    for line in text.splitlines():
        head = re.match(r"^\s*\[([^\]]+)\]", line)
        if head:
            section = head.group(1).strip()
            continue
        if section not in ("packages", "dev-packages"):
            continue
        mt = _PIPFILE_LINE.match(line)
        if mt:
            val = mt.group(2) if mt.group(2) is not None else mt.group(3)
            st = statement(mt.group(1), val, f"{mt.group(1)} = {val!r}")
            if st is not None:
                yield st


def _pipfile(path: str) -> Iterator[Spec]:
    text = _read(path)
    if text is None:
        return
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        yield from _pipfile_lines(text)
        return
    for key in ("packages", "dev-packages"):
        table = data.get(key)
        if isinstance(table, dict):
            for name, val in table.items():
                if isinstance(val, dict):
                    val = val.get("version")
                if isinstance(val, str):
                    st = statement(name, val, f"{name} = {val!r}")
                    if st is not None:
                        yield st


def _pipfile_lock(path: str) -> Iterator[Spec]:
    text = _read(path, 16 << 20)
    if text is None:
        return
    try:
        data = json.loads(text)
    except ValueError:
        return
    for key in ("default", "develop"):
        table = data.get(key) if isinstance(data, dict) else None
        if isinstance(table, dict):
            for name, val in table.items():
                if isinstance(val, dict) and isinstance(val.get("version"), str):
                    st = statement(name, val["version"], f"{name}{val['version']}")
                    if st is not None:
                        yield st


def _setup_py(path: str) -> Iterator[Spec]:
    text = _read(path)
    if text is None or not re.search(r"tensorflow|keras|tf-nightly", text, re.I):
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            req = parse_requirement(node.value)
            if req is not None and (req[1] == "" or req[1][:1] in "<>=!~"):
                st = statement(req[0], req[1], node.value)
                if st is not None:
                    yield st


def _setup_cfg(path: str) -> Iterator[Spec]:
    text = _read(path)
    if text is None:
        return
    block = re.search(r"^\s*install_requires\s*=\s*\n?((?:[ \t]*.*\n?)*?)(?=^\S|\Z)", text, re.M)
    sections = [block.group(1)] if block else []
    # (\x5b and \x5d are the square brackets: written so, the regex keeps deep.py's bracket count even)
    extras = re.search(r"^\x5boptions\.extras_require\x5d\s*\n((?:(?!^\x5b).*\n?)*)", text, re.M)
    if extras:
        sections.append(extras.group(1))
    for sect in sections:
        for line in sect.splitlines():
            line = line.strip()
            if "=" in line and not re.match(r"[A-Za-z0-9._\[\]-]+\s*(==|>=|<=|~=|!=)", line):
                line = line.split("=", 1)[1].strip()  # "gpu = tensorflow-gpu>=2.4"
            req = parse_requirement(line)
            if req is not None:
                st = statement(req[0], req[1], line)
                if st is not None:
                    yield st


def _conda(path: str) -> Iterator[Spec]:
    text = _read(path)
    if text is None:
        return
    in_pip = None
    for raw in text.splitlines():
        m = re.match(r"^(\s*)-\s+(.+?)\s*(?:#.*)?$", raw)
        if m is None:
            pm = re.match(r"^(\s*)-\s*pip\s*:\s*$", raw)
            if pm:
                in_pip = len(pm.group(1))
            elif raw.strip() and in_pip is not None and not raw.lstrip().startswith("-"):
                in_pip = None
            continue
        item = m.group(2).strip().strip('"\'')
        if item.startswith("pip:") or item == "pip":
            continue
        style = "pep440" if in_pip is not None and len(m.group(1)) > in_pip else "conda"
        item = item.split("::", 1)[-1]  # conda-forge::tensorflow=2.4
        if style == "conda":
            parts = item.split("=")
            if len(parts) >= 3 and parts[1] and parts[2] and not parts[2][0].isdigit():
                item = parts[0] + "=" + parts[1]  # name=version=build
        req = parse_requirement(item, style)
        if req is not None:
            st = statement(req[0], req[1], item, style)
            if st is not None:
                yield st


_IMAGE = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.I | re.M)


_AZUREML_ENV = re.compile(r"(?:^|[:/])AzureML-tensorflow-(\d+)\.(\d+)\b", re.I)


def image_spec(image: str) -> Optional[Spec]:
    """A base image's TensorFlow: ``tensorflow/tensorflow:2.4.1-gpu``, ``...:latest-gpu``,
    AWS ``tensorflow-training:2.4.1-gpu-py37``, Google ``tf2-gpu.2-4`` / ``tf-cpu.1-15``, an Azure
    ML curated environment ``azureml:AzureML-tensorflow-2.16-cuda12@latest``."""
    az = _AZUREML_ENV.search(image)
    if az:
        mm = (int(az.group(1)), int(az.group(2)))
        return Spec("tensorflow", mm, mm, f"environment {image}", True)
    name, _, tag = image.partition(":")
    base = name.rsplit("/", 1)[-1].lower()
    text = f"FROM {image}"
    if base in ("tensorflow", "tensorflow-training", "tensorflow-inference") and "tensorflow" in name.lower():
        if not tag or tag.startswith(("latest", "nightly")) or tag == "devel" or tag.startswith("devel-"):
            return Spec("tensorflow", (_LATEST[0], _LATEST[1]), None, text, False)
        v = re.match(r"(\d+)\.(\d+)", tag)
        if v:
            mm = (int(v.group(1)), int(v.group(2)))
            return Spec("tensorflow", mm, mm, text, True)
        return None
    g = re.match(r"tf2?-(?:gpu|cpu|tpu)[.-](\d+)[-.](\d+)", base)
    if g:
        mm = (int(g.group(1)), int(g.group(2)))
        return Spec("tensorflow", mm, mm, text, True)
    return None


_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_]\w*)(?:\s*=\s*(\S+))?", re.I | re.M)
_ARG_REF = re.compile(r"\$\{([A-Za-z_]\w*)(?::?-([^}]*))?\}|\$([A-Za-z_]\w*)")


def _build_args(dockerfile: str) -> dict[str, str]:
    """The build arguments a dev container gives the Dockerfile beside it (``devcontainer.json``:
    ``"build": {"args": {"VERSION": "2.11.0"}}``; JSON with comments, read line by line)."""
    folder = os.path.dirname(dockerfile)
    out: dict[str, str] = {}
    for name in ("devcontainer.json", ".devcontainer.json"):
        text = _read(os.path.join(folder, name))
        if not text:
            continue
        text = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("//"))
        block = re.search(r'"args"\s*:\s*\{([^}]*)\}', text)
        if block:
            for k, v in re.findall(r'"([A-Za-z_]\w*)"\s*:\s*"([^"]*)"', block.group(1)):
                out.setdefault(k, v)
    return out


def _dockerfile(path: str) -> tuple[list[Spec], bool]:
    text = _read(path)
    if text is None:
        return [], False
    out: list[Spec] = []
    joined = re.sub(r"\\\r?\n", " ", text)
    args: Optional[dict[str, str]] = None
    for m in _IMAGE.finditer(joined):
        image = m.group(1)
        if "$" in image:  # FROM tensorflow/tensorflow:${VERSION}: an ARG's default, or a dev container's argument
            if args is None:
                args = {k: v.strip("'\"") for k, v in _ARG.findall(joined) if v}
                args.update(_build_args(path))
            image = _ARG_REF.sub(lambda r: args.get(r.group(1) or r.group(3), r.group(2) or "\0"), image)
            if "\0" in image:
                continue  # an argument nobody gives a value: no evidence
        st = image_spec(image)
        if st is not None:
            out.append(st)
    for m in re.finditer(r"pip3?\s+install\s+([^\n&;|]+)", joined):
        for tok in m.group(1).split():
            tok = tok.strip("'\"")
            if tok.startswith("-"):
                continue
            req = parse_requirement(tok)
            if req is not None:
                st = statement(req[0], req[1], tok)
                if st is not None:
                    out.append(st)
    legacy = re.search(r"^\s*ENV\s+.*\bTF_USE_LEGACY_KERAS\s*[= ]\s*['\"]?(1|true|True)\b", joined, re.M)
    return out, legacy is not None


# A job or deployment spec beside the code (a Kubeflow TFJob, a Kubernetes pod, docker-compose, an
# Azure ML job, a Vertex AI config): the image or environment it runs the code in.
_SPEC_IMAGE = re.compile(r"""^\s*-?\s*["']?(?:image|imageUri|image_uri|containerUri|container_uri|environment)["']?\s*:"""
                         r"""\s*["']?([^\s"'#]+)""", re.M)


def _spec_images(path: str) -> list[Spec]:
    text = _read(path, 1 << 20)
    if not text or ("tensorflow" not in text.lower() and "tf2-" not in text and "tf-" not in text):
        return []
    out = []
    for m in _SPEC_IMAGE.finditer(text):
        st = image_spec(m.group(1))
        if st is not None:
            out.append(st)
    return out


# (priority, matcher, reader): a lower priority number wins a conflict (a lock file says what installs)
def _folder_files(folder: str) -> list[tuple[int, str, str]]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for n in names:
        low = n.lower()
        p = os.path.join(folder, n)
        if low in ("poetry.lock", "pipfile.lock"):
            out.append((0, p, low))
        elif low.endswith(".txt") and "requirement" in low or low in ("constraints.txt",):
            out.append((0 if "lock" in low else 1, p, "requirements"))  # a lock file says what installs
        elif low == "requirements" and os.path.isdir(p):
            try:
                out += [(1, os.path.join(p, x), "requirements") for x in sorted(os.listdir(p)) if x.endswith(".txt")]
            except OSError:
                pass
        elif low in ("pyproject.toml", "pipfile", "setup.py", "setup.cfg"):
            out.append((2, p, low))
        elif re.fullmatch(r"(.*environment.*|conda.*|env)\.ya?ml", low):
            out.append((3, p, "conda"))
        elif low.endswith((".yml", ".yaml")):
            out.append((4, p, "spec"))
        elif low == "dockerfile" or low.startswith("dockerfile.") or low.endswith(".dockerfile"):
            out.append((4, p, "docker"))
        elif low in ("docker", ".devcontainer") and os.path.isdir(p):
            try:
                out += [(4, os.path.join(p, x), "docker") for x in sorted(os.listdir(p))
                        if x.lower() == "dockerfile" or x.lower().startswith("dockerfile.")
                        or x.lower().endswith(".dockerfile")]
            except OSError:
                pass
    out.sort()
    return out


_FOLDERS: dict[str, Statements] = {}


def folder_statements(folder: str) -> Statements:
    """What the files directly in ``folder`` (and its docker/ and requirements/ folders) say."""
    got = _FOLDERS.get(folder)
    if got is not None:
        return got
    st = Statements()
    for prio, path, kind in _folder_files(folder):
        specs: list[Spec] = []
        if kind == "requirements":
            specs = list(_requirements(path, set()))
        elif kind == "pyproject.toml":
            specs = list(_pyproject(path))
        elif kind == "poetry.lock":
            specs = list(_poetry_lock(path))
        elif kind == "pipfile":
            specs = list(_pipfile(path))
        elif kind == "pipfile.lock":
            specs = list(_pipfile_lock(path))
        elif kind == "setup.py":
            specs = list(_setup_py(path))
        elif kind == "setup.cfg":
            specs = list(_setup_cfg(path))
        elif kind == "conda":
            specs = list(_conda(path))
        elif kind == "spec":
            specs = _spec_images(path)
        elif kind == "docker":
            specs, legacy = _dockerfile(path)
            if legacy and st.legacy is None:
                st.legacy = path
        if specs:
            st.files.append(path)
        st.specs += [(prio, path, s) for s in specs]
    _FOLDERS[folder] = st
    return st


def _stop_at(folder: str) -> bool:
    """The repository's root (a .git entry) or the user's home: the search goes no higher."""
    return os.path.exists(os.path.join(folder, ".git")) or folder == os.path.expanduser("~")


def project_target(path: str) -> Optional[Target]:
    """The version the project around ``path`` states: the nearest folder at or above the file
    whose files state a version of TensorFlow, Keras or tf-keras; a folder that only names them
    (``tensorflow`` unpinned in a sub-project's requirements) does not stop the search, which
    goes on up to the repository's root (None when nothing names them)."""
    folder = os.path.dirname(os.path.abspath(path)) if not os.path.isdir(path) else os.path.abspath(path)
    walked = _WALKS[folder] = []
    legacy: Optional[str] = None
    unpinned: Optional[Target] = None  # the nearest folder that names TensorFlow without a version
    for _ in range(64):
        walked.append(folder)
        st = folder_statements(folder)
        legacy = legacy or st.legacy
        if st.specs:
            t = combine(st.specs, folder)
            if not t.known and unpinned is None:
                unpinned = t  # `tensorflow` in a sub-project's requirements: the root may pin it
            if t.known:
                if unpinned is not None:
                    t = replace(t, keras=t.keras if t.keras is not None else unpinned.keras,
                                also=unpinned.also + t.also)
                if legacy:
                    t = replace(t, legacy_keras=True, also=t.also + (f"TF_USE_LEGACY_KERAS=1 in "
                                                                       f"{_rel(legacy, folder)}",))
                return t
        if _stop_at(folder):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if unpinned is not None:
        return replace(unpinned, legacy_keras=True) if legacy else unpinned
    if legacy:
        return Target(low=None, high=None, source=_rel(legacy, os.path.dirname(legacy)),
                      detail="TF_USE_LEGACY_KERAS=1", path=legacy, legacy_keras=True, known=False)
    return None


def _rel(path: str, folder: str) -> str:
    try:
        rel = os.path.relpath(path, folder)
    except ValueError:  # pragma: no cover - another drive
        return path
    return os.path.basename(path) if rel.startswith("..") else rel


def _intersect(a: tuple[Optional[Version], Optional[Version]],
               b: tuple[Optional[Version], Optional[Version]]) -> Optional[tuple[Optional[Version], Optional[Version]]]:
    lo = max((x for x in (a[0], b[0]) if x is not None), default=None)
    hi = min((x for x in (a[1], b[1]) if x is not None), default=None)
    if lo is not None and hi is not None and lo > hi:
        return None
    return lo, hi


def combine(specs: list[tuple[int, str, Spec]], folder: str) -> Target:
    """One Target from a folder's statements: TensorFlow's ranges intersected (a conflict: the
    statement of the file that says what installs wins: lock, requirements, project metadata,
    conda, Dockerfile); a keras pin bounds TensorFlow (keras 3 needs 2.16+, keras 2 <= 2.15)."""
    tf = [(p, f, s) for p, f, s in specs if s.dist == "tensorflow"]
    keras = [(p, f, s) for p, f, s in specs if s.dist in KERAS_DISTS]
    tfk = [(p, f, s) for p, f, s in specs if s.dist in TF_KERAS_DISTS]
    rng: tuple[Optional[Version], Optional[Version]] = (None, None)
    used: list[tuple[int, str, Spec]] = []
    for p, f, s in sorted(tf, key=lambda e: e[0]):
        if s.low is None and s.high is None:
            continue
        got = _intersect(rng, (s.low, s.high))
        if got is None:  # conflicts with a statement of higher priority: ignored
            continue
        rng = got
        used.append((p, f, s))
    keras_major: Optional[int] = None
    for p, f, s in keras:
        if s.high is not None and s.high[0] <= 2:
            keras_major = 2  # keras 2.X (X >= 6) ships with TensorFlow 2.X; older ones with <= 2.5
            lo = s.low if s.low is not None and s.low[0] == 2 and s.low[1] >= 6 else None
            hi = s.high if s.high[0] == 2 and 6 <= s.high[1] <= 15 else ((2, 5) if s.high[1] < 6 else (2, 15))
            bound = (lo, hi)
        elif s.low is not None and s.low[0] >= 3:
            keras_major = 3
            bound = (KERAS3_TF, None)
        else:
            continue
        got = _intersect(rng, bound)
        if got is not None:
            rng = got
            used.append((p, f, s))
    for p, f, s in tfk:  # tf-keras 2.X is made for TensorFlow 2.X
        if s.low is None and s.high is None:
            continue
        got = _intersect(rng, (s.low if s.low and s.low[1] < 999 else None, s.high))
        if got is not None and got != rng:
            rng = got
            used.append((p, f, s))
    all_read = tuple(f"{_rel(f, folder)}: {s.text}" for _p, f, s in specs)
    if not used:  # only unpinned statements: the project names TensorFlow, not a version
        return Target(source=_rel(specs[0][1], folder), detail=specs[0][2].text, path=specs[0][1],
                      keras=keras_major, known=False, also=all_read)
    first = used[0]
    files = list(dict.fromkeys(_rel(f, folder) for _p, f, _s in used))
    return Target(low=rng[0], high=rng[1], source=", ".join(files), detail="; ".join(s.text for _p, _f, s in used),
                  path=first[1], keras=keras_major, also=all_read)


# ============================================================================ the code's APIs
# Names that exist only in some versions, as (canonical-or-raw prefix, low, high): the fallback
# until the generated API table (tfapi) says which versions have each name.  Checked on the
# installed TensorFlow 2.21 / Keras 3.15 / tf_keras 2.21 and the release notes.
_KERAS2_ONLY = ("layers.experimental", "experimental.", "mixed_precision.experimental", "layers.DenseFeatures",
                "estimator", "premade", "callbacks.experimental", "wrappers.scikit_learn", "utils.multi_gpu_model",
                "optimizers.legacy")
_KERAS3_ONLY = ("ops.", "random.", "tree.", "layers.TorchModuleWrapper", "layers.JaxLayer", "distribution.",
                "config.enable_unsafe_deserialization")
_TF_RANGES = (
    ("tensorflow.estimator.", None, (2, 15)),  # removed in 2.16
    ("tensorflow.contrib.", None, (1, 15)),  # TensorFlow 1.x
    ("tensorflow.Session", None, (1, 15)),
    ("tensorflow.placeholder", None, (1, 15)),
    # code written for Keras 2: TensorFlow 1 style sessions (they stay in tf.compat.v1, but Keras 3
    # has no graph-mode session to run a model in)
    ("tensorflow.compat.v1.Session", None, (2, 15)),
    ("tensorflow.compat.v1.InteractiveSession", None, (2, 15)),
    ("tensorflow.compat.v1.keras.backend.get_session", None, (2, 15)),
    ("tensorflow.compat.v1.keras.backend.set_session", None, (2, 15)),
    ("tensorflow.keras.ops.", KERAS3_TF, None),
    ("tensorflow.keras.random.", KERAS3_TF, None),
)


def api_range(raw_qname: str) -> Optional[tuple[Optional[Version], Optional[Version], int]]:
    """The TensorFlow versions that have the API ``raw_qname`` (as imported: ``tensorflow.keras.
    layers.experimental.preprocessing.Rescaling``, ``keras.ops.mean``), or None when every
    version has it or nothing is known.  The third item: the standalone ``keras`` major it implies
    (0: none).  Two sources, intersected: the generated API table (:func:`tfapi.tf_versions`: the
    releases from 2.4 on that have the name) and the facts above (names the table does not hold,
    such as ``tf.estimator`` and ``tf.contrib``, and Keras 3 stubs that only raise, such as
    ``keras.optimizers.legacy``)."""
    got = _table_range(raw_qname)
    fact = _fact_range(raw_qname)
    if got is None:
        return fact
    if fact is None:
        return got
    both = _intersect(got[:2], fact[:2])
    if both is None:
        return fact
    return both[0], both[1], fact[2] or got[2]


def _table_range(raw_qname: str) -> Optional[tuple[Optional[Version], Optional[Version], int]]:
    if not raw_qname.startswith(("tensorflow.", "keras.", "tf_keras.")):
        return None
    try:
        from tfpar_lint import tfapi

        rec = tfapi.table().names.get(raw_qname)
        if rec is not None and rec[2] in ("m", "x"):
            return None  # a module, or a package TensorFlow loads lazily (tf.keras from 2.15): not evidence
        found = tfapi.tf_versions(raw_qname)
        every = sorted(tfapi.table().header["tf"], key=tfapi._vkey)
    except Exception:  # a missing or damaged table: the facts alone (tfapi reports the table's state)
        return None
    if not found or not every:
        return None

    def mm(v: str) -> Version:
        a, b = v.split(".")[:2]
        return int(a), int(b)

    lo = mm(found[0]) if found[0] != every[0] else None
    hi = mm(found[-1]) if found[-1] != every[-1] else None
    if lo is None and hi is None:
        return None
    keras = 0
    if raw_qname.startswith("keras."):
        keras = 2 if hi is not None and hi < KERAS3_TF else (3 if lo is not None and lo >= KERAS3_TF else 0)
    return lo, hi, keras


def _fact_range(raw_qname: str) -> Optional[tuple[Optional[Version], Optional[Version], int]]:
    q = raw_qname + "."
    for prefix, lo, hi in _TF_RANGES:
        if q.startswith(prefix if prefix.endswith(".") else prefix + "."):
            return lo, hi, 0
    for head, keras_tf in (("tensorflow.keras.", True), ("tensorflow.compat.v2.keras.", True), ("keras.", False)):
        if q.startswith(head):
            rest = q[len(head):]
            if rest.startswith("src.") or rest.startswith("api."):
                return None
            if any(rest.startswith(p if p.endswith(".") else p + ".") for p in _KERAS2_ONLY):
                return (None, (2, 15), 0) if keras_tf else (None, (2, 15), 2)
            if any(rest.startswith(p if p.endswith(".") else p + ".") for p in _KERAS3_ONLY):
                return (KERAS3_TF, None, 0) if keras_tf else (KERAS3_TF, None, 3)
    return None


_CHAIN = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)+)")

def code_range(m: "Module") -> Optional[tuple[Optional[Version], Optional[Version], Optional[int], str]]:
    """What the APIs ``m`` uses say: (low, high, keras major or None, the evidence), or None."""
    from tfpar_lint.codetext import code_text

    src = m.source
    if "tensorflow" not in src and "keras" not in src:
        return None
    text = code_text(src)
    imports: dict[str, str] = {}
    for b in m.imports:
        raw = getattr(b, "raw_qname", "") or getattr(b, "qname", "") or ""
        if b.name and raw:
            imports.setdefault(b.name, raw)
    evid: list[tuple[Optional[Version], Optional[Version], int, str]] = []
    for raw in set(imports.values()):
        got = api_range(raw)
        if got is not None:
            evid.append((*got, raw))
    seen: set[str] = set()
    for mt in _CHAIN.finditer(text):
        chain = re.sub(r"\s+", "", mt.group(1))
        head, _, rest = chain.partition(".")
        base = imports.get(head)
        if base is None or not base.startswith(("tensorflow", "keras", "tf_keras")):
            continue
        q = f"{base}.{rest}"
        if q in seen:
            continue
        seen.add(q)
        got = api_range(q)
        if got is not None:
            evid.append((*got, q))
    evid += list(_attribute_evidence(m))
    if not evid:
        return None
    lo: Optional[Version] = None
    hi: Optional[Version] = None
    keras: Optional[int] = None
    names = []
    for elo, ehi, ek, name in evid:
        got = _intersect((lo, hi), (elo, ehi))
        if got is None:
            return None  # the code uses names of both sides (a compatibility branch): no evidence
        lo, hi = got
        if ek:
            keras = ek
        names.append(_short(name))
    if lo is None and hi is None and keras is None:
        return None
    return lo, hi, keras, ", ".join(sorted(set(names))[:3])


def _short(q: str) -> str:
    return q.replace("tensorflow.", "tf.", 1) if q.startswith("tensorflow.") else q


def _attribute_evidence(m: "Module") -> Iterator[tuple[Optional[Version], Optional[Version], int, str]]:
    """Keras 2 members on objects the code makes: an optimizer's ``lr`` (attribute or keyword:
    Keras 3 has neither), a model's ``fit_generator``/``evaluate_generator``/``predict_generator``
    (gone in Keras 3), and a strategy's ``experimental_run_v2`` (the name of ``run`` in TensorFlow
    2.0 and 2.1: code written for them, and so for Keras 2; the alias itself stays)."""
    import libcst as cst

    from tfpar_lint import tfapi as api

    def keras2(v, what: str) -> Optional[tuple[Optional[Version], Optional[Version], int, str]]:
        raw = v.raw_qname or ""
        if raw.startswith("tf_keras") or not raw.startswith(("tensorflow", "keras")):
            return None
        return (None, (2, 15), 2, what) if raw.startswith("keras") else (None, (2, 15), 0, what)

    src = m.source
    if "experimental_run_v2" in src:
        for _cs, _recv, _meth, _strat in m.strategy_method_calls(("experimental_run_v2",)):
            yield None, (2, 15), 0, "`strategy.experimental_run_v2`"
            break
    if "experimental_run" in src or "make_dataset_iterator" in src:
        # the TensorFlow 2.0 previews' strategy methods (`experimental_run(fn, iterator)`,
        # `make_dataset_iterator`), gone from tf.distribute's strategies since 2.0 (the
        # tf.compat.v1 strategies keep them): code written before 2.0, and so for Keras 2
        for _cs, _recv, meth, strat in m.strategy_method_calls(("experimental_run", "make_dataset_iterator")):
            if strat and not any(".compat.v1." in (v.qname or "") or ".compat.v1." in (v.raw_qname or "")
                                 for v in strat):
                yield None, (2, 15), 0, f"`strategy.{meth}`"
                break
    if re.search(r"_generator\s*\x28", src):  # \x28 is an opening parenthesis, written so for deep.py
        for cs, recv, meth in m.method_calls(("fit_generator", "evaluate_generator", "predict_generator")):
            for v in m.infer_at(recv, cs):
                e = keras2(v, f"`model.{meth}`") if v.kind == api.MODEL else None
                if e is not None:
                    yield e
                    return
    if not re.search(r"\blr\b", src):
        return
    for cs in m.calls:
        node = cs.node
        if any(a.keyword is not None and a.keyword.value == "lr" for a in node.args):
            for v in m.infer_at(node, cs):
                e = keras2(v, "an optimizer made with `lr=`") \
                    if v.kind == api.OPTIMIZER and ".legacy." not in (v.qname or "") else None
                if e is not None:
                    yield e
                    return
        # model.optimizer.lr.numpy(), K.get_value(opt.lr), print(opt.lr)
        stack: list[cst.CSTNode] = [node.func] + [a.value for a in node.args]
        budget = 64
        while stack and budget:
            budget -= 1
            x = stack.pop()
            if isinstance(x, cst.Attribute):
                if x.attr.value == "lr":
                    recv = x.value
                    vals = [v for v in m.infer_at(recv, cs) if v.kind == api.OPTIMIZER]
                    if not vals and isinstance(recv, cst.Attribute) and recv.attr.value == "optimizer":
                        vals = [v for v in m.infer_at(recv.value, cs) if v.kind == api.MODEL]
                    for v in vals:
                        e = keras2(v, "an optimizer's `lr`")
                        if e is not None:
                            yield e
                            return
                stack.append(x.value)
            elif isinstance(x, cst.Call):
                stack.append(x.func)


# ============================================================================ the code's own statements
# A notebook or script often says which TensorFlow it installs: `!pip install tensorflow==2.15.0`
# (in a .py export: `# !pip install ...`, `get_ipython().system("pip install ...")`), a list handed
# to a job (`packages_to_install=["tensorflow==2.15.0"]`), a setup.py it writes
# (`install_requires=['tensorflow==2.8.0']`), a container image (`tensorflow/tensorflow:2.4.1-gpu`,
# `tf2-gpu.2-8`).  Any such requirement or image in the text counts.
_CODE_REQUIREMENT = re.compile(
    r"(?<![\w.-])(tensorflow(?:[-_](?:gpu|cpu|macos|intel))?|tf-nightly|tf_nightly|keras|tf[-_]keras)"
    r"(?:\[[\w,-]+\])?\s*(===|==|~=|>=|<=|<|>)\s*v?(\d+\.\d+(?:\.\d+)?)(?![\w.])")
_CODE_IMAGE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*tensorflow(?:-training|-inference)?:\d+\.\d+[\w.-]*"
                         r"|(?:[\w.-]+/)*tf2?-(?:gpu|cpu|tpu)\.\d+-\d+)")


def code_statements(text: str) -> list[Spec]:
    """The requirements and images the code's own text states (see above)."""
    out: list[Spec] = []
    if "tensorflow" not in text and "keras" not in text and "tf2-" not in text and "tf-" not in text:
        return out
    for mt in _CODE_REQUIREMENT.finditer(text):
        st = statement(mt.group(1), mt.group(2) + mt.group(3), f"{mt.group(1)}{mt.group(2)}{mt.group(3)}")
        if st is not None and (st.low is not None or st.high is not None):
            out.append(st)
    for mt in _CODE_IMAGE.finditer(text):
        st = image_spec(mt.group(1))
        if st is not None:
            out.append(st)
    return out


# The same statements made through a name the file does not define: a job's package list or image
# given as a constant of another module (`packages_to_install=[TENSORFLOW]`, `base_image=IMAGE`,
# `container_uri=cfg.image`).  The code does state what installs, where a single file cannot read it.
_ENV_KEYWORDS = r"(?:packages_to_install|install_requires|base_image|container_uri|image_uri|framework_version)"
_OPAQUE_STATEMENT = re.compile(_ENV_KEYWORDS + r"\s*=\s*(\[[^\]]*\]|[A-Za-z_][\w.]*)")


def opaque_statement(text: str) -> str:
    """``packages_to_install=[TENSORFLOW]`` where the code hands a job its packages or image through
    names (not literals); "" where it states none that way."""
    if "=" not in text:
        return ""
    for mt in _OPAQUE_STATEMENT.finditer(text):
        value = mt.group(1)
        items = [x.strip() for x in value.strip("[]").split(",")] if value.startswith("[") else [value]
        if any(x and x[0] not in "\"'" and re.fullmatch(r"[A-Za-z_][\w.]*", x) and x not in ("None", "True", "False")
               for x in items):
            return re.sub(r"\s+", " ", mt.group(0))
    return ""


def code_target(m: "Module") -> Optional[Target]:
    """What the module's own text states (a notebook: its raw cells too, whose `!pip` lines the
    linted code no longer holds)."""
    text = m.source
    if m.path.endswith(".ipynb") and not m.path.startswith("<"):
        raw = _read(m.path, 32 << 20)
        if raw:
            text = raw
    specs = code_statements(text)
    if not specs:
        return None
    t = combine([(0, m.path, s) for s in specs], os.path.dirname(os.path.abspath(m.path)))
    if not t.known:
        return None
    return replace(t, source=f"the code ({t.detail.split('; ')[0]})", path=None)


# ============================================================================ per module
_LEGACY_ENV = re.compile(r"TF_USE_LEGACY_KERAS['\"]\s*(?:\]\s*=|,|:)\s*['\"](?:1|true|True)['\"]")


def target_of(m: "Module") -> Target:
    """The Target of module ``m`` (computed once per module)."""
    got = getattr(m, "_target", None)
    if got is not None:
        return got
    t = _resolve(m)
    m._target = t
    return t


def _resolve(m: "Module") -> Target:
    setting = getattr(m, "tf_setting", None)
    if setting:
        return explicit(setting)
    proj = project_target(m.path) if m.path and not m.path.startswith("<") else None
    legacy = _module_sets_legacy(m)
    stated = code_target(m)
    if stated is not None:
        if proj is None or not proj.known:
            proj = replace(stated, legacy_keras=proj.legacy_keras if proj is not None else False,
                           keras=stated.keras if stated.keras is not None else (proj.keras if proj else None))
        elif not (proj.low is not None and proj.low == proj.high):
            got = _intersect((proj.low, proj.high), (stated.low, stated.high))
            if got is not None and got != (proj.low, proj.high):
                proj = replace(proj, low=got[0], high=got[1], source=f"{proj.source} and {stated.source}")
    if proj is not None and proj.known and proj.low is not None and proj.low == proj.high:
        t = proj  # an exact pin: the code's APIs do not override it
    else:
        code = code_range(m)
        t = proj if proj is not None and proj.known else None
        if code is not None:
            lo, hi, keras, names = code
            if t is not None:
                got = _intersect((t.low, t.high), (lo, hi))
                if got is not None and got != (t.low, t.high):
                    t = replace(t, low=got[0], high=got[1], source=f"{t.source} and the code's APIs ({names})",
                                keras=t.keras if keras is None else keras,
                                high_from_code=got[1] is not None and got[1] != t.high)
            else:
                base = proj if proj is not None else UNKNOWN
                t = replace(base, low=lo, high=hi, known=True, source=f"the code's APIs ({names})",
                            keras=keras if keras is not None else base.keras, high_from_code=hi is not None,
                            from_apis=True)
        if t is None:
            t = proj if proj is not None else UNKNOWN
            if not t.known:
                t = replace(UNKNOWN, keras=t.keras, legacy_keras=t.legacy_keras, also=t.also, path=t.path)
    if stated is None and (not t.known or t.from_apis):
        hidden = opaque_statement(m.source)
        if hidden:
            t = replace(t, elsewhere=hidden, also=t.also + (f"the code states its packages through names: {hidden}",))
    if legacy and not t.legacy_keras:
        t = replace(t, legacy_keras=True, also=t.also + (f"TF_USE_LEGACY_KERAS=1 set in {legacy}",))
    return t


def _module_sets_legacy(m: "Module") -> Optional[str]:
    """The project file (the module itself, a package ``__init__`` above it, or a project module
    it imports) that sets ``TF_USE_LEGACY_KERAS=1`` through ``os.environ``."""
    if _LEGACY_ENV.search(m.source):
        return os.path.basename(m.path)
    d = os.path.dirname(os.path.abspath(m.path)) if m.path and not m.path.startswith("<") else None
    while d and os.path.isfile(os.path.join(d, "__init__.py")):
        text = _read(os.path.join(d, "__init__.py"))
        if text and _LEGACY_ENV.search(text):
            return os.path.join(os.path.basename(d), "__init__.py")
        d = os.path.dirname(d)
    project = getattr(m, "project", None)
    if project is not None and "TF_USE_LEGACY_KERAS" not in m.source:
        try:
            for p, text in project.imported_texts(m.path, m.source):
                if _LEGACY_ENV.search(text):
                    return os.path.basename(p)
        except Exception:  # pragma: no cover - the project's scan is best effort here
            return None
    return None


def flavor(m: "Module", spelling: str) -> str:
    """The Keras an object of ``spelling`` ("tf_keras", "tf.keras", "keras") is under ``m``'s
    target: "tf_keras" (Keras 2), "keras" (Keras 3), or "unknown" when nothing about the version
    tells (no statement, no API of one Keras only): the rules that depend on it report nothing
    there (:func:`withhold`)."""
    if spelling == "tf_keras":
        return "tf_keras"
    t = target_of(m)
    if spelling == "tf.keras":
        legacy = m.sets_env("TF_USE_LEGACY_KERAS")
        if legacy is not None and legacy.strip().lower() in ("1", "true"):
            return "tf_keras"
        k3 = t.tf_keras_is_keras3()
        return "unknown" if k3 is None else ("keras" if k3 else "tf_keras")
    major = t.keras_major()
    return "unknown" if major is None else ("keras" if major >= 3 else "tf_keras")


def note(m: "Module", v: "Value", sep: str = "") -> str:
    """`` (with TensorFlow 2.16+ (Keras 3, from requirements.txt))`` for a Keras object whose
    Keras depends on the targeted version (``tf.keras``, ``import keras``); "" for ``tf_keras``."""
    raw = v.raw_qname or ""
    if not raw and v.info is not None:
        raw = "keras"  # a local subclass: its base's spelling was judged by keras_flavor
    if raw.startswith("tf_keras"):
        return ""
    keras = {"keras": 3, "tf_keras": 2}.get(keras_flavor(m, v))
    if sep:
        return f"{sep}with {target_of(m).describe(keras)}"
    return f" (with {target_of(m).describe(keras)})"


def keras_flavor(m: "Module", v: "Value") -> str:
    """Which Keras created ``v``: "tf_keras" (Keras 2: ``tf_keras``, or ``tf.keras`` when the module
    sets ``TF_USE_LEGACY_KERAS=1``), "keras" (Keras 3: ``import keras``, or ``tf.keras`` when the
    targeted TensorFlow is 2.16 or later), "unknown" for a Keras object whose Keras depends on a
    version nothing states, or "" when it is not a Keras object or cannot be told (the spelling is
    the semantic model's, ``Module.keras_spelling``)."""
    spelling = m.keras_spelling(v)
    return flavor(m, spelling) if spelling else ""


def is_legacy(m: "Module", v: "Value") -> bool:
    """Keras 2 (``tf_keras``, or ``tf.keras`` with ``TF_USE_LEGACY_KERAS=1`` or a ``tf-version`` before 2.16)."""
    return keras_flavor(m, v) == "tf_keras"


def is_keras3(m: "Module", v: "Value") -> bool:
    return keras_flavor(m, v) == "keras"


def builds_at_first_use(m: "Module", v: "Value") -> Optional[bool]:
    """Does the Keras optimizer ``v`` capture the strategy when made and build its state at the
    first step (Keras 3, and Keras 2's optimizers from TensorFlow 2.11 on; not the legacy ones)?
    None: it depends on a version nothing states."""
    if ".legacy." in (v.qname or "") or ".legacy." in (v.raw_qname or ""):
        return False
    fl = keras_flavor(m, v)
    if fl == "keras":
        return True
    if not fl and not v.raw_qname.startswith(("tensorflow.", "tf_keras.")):
        # an optimizer of a class the analysis cannot see (a project's wrapper, known by its use):
        # the Keras optimizers of the TensorFlow it runs on (None: nothing states it)
        return target_of(m).at_least(NEW_OPTIMIZERS_TF)
    if fl not in ("tf_keras", "unknown"):
        return False
    raw = v.raw_qname or ""
    if raw.startswith("tf_keras"):
        return True  # tf_keras exists from 2.14 on
    return target_of(m).at_least(NEW_OPTIMIZERS_TF)  # Keras 3 or Keras 2 from 2.11 on: both build then


# ============================================================================ findings held back
# A rule whose finding holds only on some versions reports nothing where no evidence names the
# version (flavor "unknown", builds_at_first_use None): it calls withhold() instead, and the run
# says so once (engine: a file's note; cli: one line for all files).
WITHHELD_NOTE = "version not stated"


def withhold(m: "Module", code: str) -> None:
    """Count a finding of ``code`` that holds only on a version nothing in the project states."""
    held = getattr(m, "version_withheld", None)
    if held is None:
        held = m.version_withheld = {}
    held[code] = held.get(code, 0) + 1


def withheld_note(held: dict[str, int]) -> str:
    """A file's note for the findings it held back: ``version not stated: TFP102=1, TFP606=2``."""
    return f"{WITHHELD_NOTE}: " + ", ".join(f"{c}={n}" for c, n in sorted(held.items()))


def parse_withheld(note: str) -> Optional[dict[str, int]]:
    """The counts of a :func:`withheld_note`, or None for any other note."""
    if not note.startswith(WITHHELD_NOTE + ": "):
        return None
    out: dict[str, int] = {}
    for part in note[len(WITHHELD_NOTE) + 2:].split(", "):
        code, _, n = part.partition("=")
        if not n.isdigit():
            return None
        out[code] = out.get(code, 0) + int(n)
    return out


# the rules whose truth depends on the TensorFlow or Keras version (their findings on code that states
# none rest on the assumption above)
VERSIONED = frozenset({"TFP102", "TFP110", "TFP113", "TFP502", "TFP503", "TFP505", "TFP606", "TFP703"})


def withheld_summary(files: dict[str, dict[str, int]]) -> str:
    """The one line the run prints for every file whose findings were held back."""
    total: dict[str, int] = {}
    for held in files.values():
        for c, n in held.items():
            total[c] = total.get(c, 0) + n
    count = sum(total.values())
    names = sorted(files)
    where = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    codes = ", ".join(f"{c} ({n})" if n > 1 else c for c, n in sorted(total.items()))
    return (f"no TensorFlow version stated for {where} (no pin or lock file, Dockerfile image, API of one "
            f"Keras or era only, or tf-version setting; or stated only through names the file does not define, "
            f"such as a job's package list or image), so none is assumed: {count} "
            f"finding{'s' if count != 1 else ''} that hold{'s' if count == 1 else ''} only on some TensorFlow "
            f"or Keras versions ({codes}) {'were' if count != 1 else 'was'} not reported; pin tensorflow or set "
            f"tf-version (\"{_v(_LATEST)}\" is today's release) to check them")


# The files a project most often states its TensorFlow in, watched in every folder the search went
# through: the result cache re-lints a file when one appears (a user pins tensorflow after the note).
_WATCHED = ("requirements.txt", "pyproject.toml", "Pipfile", "Pipfile.lock", "poetry.lock", "setup.py", "setup.cfg",
            "environment.yml", "Dockerfile")
_WALKS: dict[str, list[str]] = {}  # the folder of a linted file -> the folders project_target read


def dependency_paths(m: "Module") -> list[str]:
    """The files the module's target was read from, and the usual statement files of every folder
    the search went through (the result cache re-lints when they change or appear)."""
    t = getattr(m, "_target", None)
    if t is None:
        return []
    out = [t.path] if t.path else []
    if getattr(m, "tf_setting", None) or not m.path or m.path.startswith("<"):
        return out
    for folder in _WALKS.get(os.path.dirname(os.path.abspath(m.path)), ()):
        out += [p for p in (os.path.join(folder, n) for n in _WATCHED) if p not in out]
    return out


def show(path: str, setting: Optional[str]) -> list[str]:
    """``--show-settings`` lines for the project around ``path``."""
    if setting:
        return [f"tf-version: {setting} (the tf-version setting; it wins over the project's files)"]
    t = project_target(path)
    if t is None or not t.known:
        keras = ""
        if t is not None and t.keras:
            keras = f"; keras {t.keras} stated"
        lines = [f"tf-version: not set; the project states no TensorFlow version{keras}: each file's APIs of "
                 f"one Keras only may tell; where nothing tells, the findings that hold only on some versions "
                 f"are not reported"]
    else:
        k3 = t.tf_keras_is_keras3()
        lines = [f"tf-version: not set; inferred {t.describe(None if k3 is None else (3 if k3 else 2))}: "
                 f"{t.detail} (files' APIs may narrow a range)"]
    if t is not None:
        lines += [f"  read: {a}" for a in t.also]
    return lines


def clear_cache() -> None:
    _FOLDERS.clear()
    _WALKS.clear()
