"""The PyPI precision corpus: pinned wheels of real distributed-TensorFlow packages, fetched at test time.

No code of these packages is stored in the repository. ``tests/pypi_corpus/packages.tsv`` pins each
package (name, exact version, wheel file name, its SHA-256, and how many of its files the selection
below picks). The wheels are downloaded with ``pip download --no-deps --only-binary=:all:`` into a cache
outside the repository (``$TFPAR_LINT_PYPI_CACHE``, else ``$XDG_CACHE_HOME/tfpar-lint/pypi-corpus``,
else ``~/.cache/tfpar-lint/pypi-corpus``) and re-used while their SHA-256 matches.

The selection: every ``.py`` member of the wheel whose text contains one of :data:`SELECT_SUBSTRINGS`
(``tf.distribute``, ``tensorflow.distribute``, ``tensorflow.python.distribute``). Every ``.py`` of the
wheel is extracted to a temporary folder (so that imports between the package's modules resolve as in
a checkout), and the selected files are linted with the command line, named one by one, once with the
default rules and once with ``--select ALL``.

Failures are told apart: when pip cannot reach the package index (connection refused, name resolution,
proxy, time-out) :class:`NetworkUnavailable` is raised and the tests skip with that reason; anything
else (a pin that no longer resolves, a wheel whose SHA-256 differs, pip missing) is
:class:`DownloadError`, and the tests fail.

``benchmarks/pypi_corpus.py`` prints the measurements docs/measurements.md quotes (sizes, findings, precision,
run times).
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
DATA = HERE / "pypi_corpus"
PACKAGES_TSV = DATA / "packages.tsv"
EXPECTED_TSV = DATA / "expected.tsv"
TRIAGE_MD = DATA / "TRIAGE.md"
CACHE_ENV = "TFPAR_LINT_PYPI_CACHE"

# A file is in the corpus when its text contains one of these (plain substring test, case-sensitive).
SELECT_SUBSTRINGS = ("tf.distribute", "tensorflow.distribute", "tensorflow.python.distribute")

# What pip prints (with -vv) when it cannot reach the index at all.
_NETWORK_MARKERS = (
    "NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution",
    "Name or service not known", "nodename nor servname", "Network is unreachable", "No route to host",
    "Connection refused", "Unable to connect to proxy", "ProxyError", "Read timed out",
    "ConnectTimeoutError", "connection error", "Connection reset by peer", "RemoteDisconnected",
)


class NetworkUnavailable(Exception):
    """pip could not reach the package index: the corpus tests skip."""


class DownloadError(Exception):
    """Any other failure to obtain a pinned wheel: the corpus tests fail."""


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    wheel: str
    sha256: str
    files: int  # how many .py members the selection picks

    @property
    def folder(self) -> str:
        """The folder of the extracted files, ``name-version`` (the first path component of a finding)."""
        return f"{self.name}-{self.version}"


@dataclass(frozen=True)
class Expected:
    package: str
    version: str
    path: str
    line: int
    code: str
    verdict: str  # TP (a true bug) or FP (a known false positive, kept visible in the precision)
    reason: str

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        return (self.package, self.version, self.path, self.line, self.code)


@dataclass
class Corpus:
    root: Path
    packages: list[Package]
    # (package, relative path inside the wheel) -> number of lines
    files: dict[tuple[Package, str], int] = field(default_factory=dict)
    # package -> number of .py files extracted (the selected ones and the rest of the package)
    extracted: dict[str, int] = field(default_factory=dict)

    @property
    def lines(self) -> int:
        return sum(self.files.values())


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tfpar-lint" / "pypi-corpus"


def _rows(path: Path) -> list[dict[str, str]]:
    """The rows of a tab-separated file with a header line; lines starting with # are comments."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def load_packages(path: Path = PACKAGES_TSV) -> list[Package]:
    return [Package(r["package"], r["version"], r["wheel"], r["sha256"], int(r["files"])) for r in _rows(path)]


def load_expected(path: Path = EXPECTED_TSV) -> list[Expected]:
    out = []
    for r in _rows(path):
        out.append(Expected(r["package"], r["version"], r["path"], int(r["line"]), r["code"], r["verdict"],
                            (r["reason"] or "").strip()))
    return out


def uses_tf_distribute(text: str) -> bool:
    return any(s in text for s in SELECT_SUBSTRINGS)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def network_failure(pip_output: str) -> Optional[str]:
    """The line of pip's output that says the index could not be reached, or None."""
    for line in pip_output.splitlines():
        if any(m in line for m in _NETWORK_MARKERS):
            return line.strip()
    return None


def ensure_wheel(pkg: Package, cache: Path, env: Optional[dict] = None) -> Path:
    """The cached wheel of ``pkg`` (downloaded when missing or when its SHA-256 differs)."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / pkg.wheel
    if target.is_file():
        if sha256_of(target) == pkg.sha256:
            return target
        target.unlink()  # a partial or foreign file: fetch it again
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--no-input", "--retries", "1", "--timeout", "30", "-vv",
               f"{pkg.name}=={pkg.version}", "-d", tmp]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        except subprocess.TimeoutExpired as exc:
            raise NetworkUnavailable(f"pip download {pkg.name}=={pkg.version} did not finish in "
                                     f"{exc.timeout:.0f} s") from None
        out = r.stdout + r.stderr
        if r.returncode != 0:
            why = network_failure(out)
            if why is not None and not any(Path(tmp).iterdir()):
                raise NetworkUnavailable(f"pip could not reach the package index for "
                                         f"{pkg.name}=={pkg.version}: {why[:300]}")
            errors = [ln for ln in out.splitlines() if ln.startswith("ERROR")] or out.splitlines()[-5:]
            raise DownloadError(f"pip download {pkg.name}=={pkg.version} failed (exit {r.returncode}): "
                                + " | ".join(errors))
        got = Path(tmp) / pkg.wheel
        if not got.is_file():
            raise DownloadError(f"pip download {pkg.name}=={pkg.version} gave {sorted(os.listdir(tmp))}, "
                                f"not {pkg.wheel}")
        digest = sha256_of(got)
        if digest != pkg.sha256:
            raise DownloadError(f"{pkg.wheel}: SHA-256 {digest}, pinned {pkg.sha256}")
        os.replace(got, target)  # atomic: a concurrent run sees the whole wheel or none
    return target


def extract(pkg: Package, wheel: Path, root: Path) -> dict[str, int]:
    """Write every ``.py`` member of the wheel under ``root/pkg.folder`` (the package around the linted
    files, for the linter's cross-file analysis); {relative path: lines} of the selected ones."""
    out: dict[str, int] = {}
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if info.is_dir() or not name.endswith(".py"):
                continue
            data = z.read(info)
            dest = root / pkg.folder / name
            if root.resolve() not in dest.resolve().parents:
                raise DownloadError(f"{pkg.wheel}: member {name!r} escapes the extraction folder")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            if uses_tf_distribute(data.decode("utf-8", "replace")):
                out[name] = data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
    return out


def build(root: Path, cache: Optional[Path] = None, env: Optional[dict] = None) -> Corpus:
    """Download (or re-use) every pinned wheel and extract it under ``root``; the corpus is its selected files."""
    cache = cache or cache_dir()
    packages = load_packages()
    corpus = Corpus(root=root, packages=packages)
    for pkg in packages:
        wheel = ensure_wheel(pkg, cache, env)
        for rel, n in extract(pkg, wheel, root).items():
            corpus.files[(pkg, rel)] = n
        corpus.extracted[pkg.name] = sum(1 for _ in (root / pkg.folder).rglob("*.py"))
    return corpus


def lint(corpus: Corpus, select_all: bool) -> tuple[int, list[dict]]:
    """``python -m tfpar_lint --format json`` on the extracted corpus: (exit code, JSON entries).

    The subprocess imports the same tfpar_lint as this process (its folder goes first on PYTHONPATH)."""
    import tfpar_lint

    src = str(Path(tfpar_lint.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "tfpar_lint", "--no-config", "--no-cache", "--no-progress", "--format", "json"]
    if select_all:
        cmd += ["--select", "ALL"]
    cmd += sorted(f"{pkg.folder}/{rel}" for pkg, rel in corpus.files)  # the selected files only
    r = subprocess.run(cmd, cwd=str(corpus.root), capture_output=True, text=True, env=env, timeout=1200)
    if r.returncode not in (0, 1):
        raise AssertionError(f"tfpar-lint exit {r.returncode}: {r.stderr[-3000:]}\n{r.stdout[-3000:]}")
    return r.returncode, json.loads(r.stdout)


def finding_key(corpus: Corpus, entry: dict) -> tuple[str, str, str, int, str]:
    """(package, version, path inside the wheel, line, code) of one JSON entry."""
    parts = [p for p in Path(entry["path"]).parts if p != "."]
    folder, rel = parts[0], "/".join(parts[1:])
    for pkg in corpus.packages:
        if pkg.folder == folder:
            return (pkg.name, pkg.version, rel, int(entry["line"]), entry["code"])
    raise AssertionError(f"finding outside every package folder: {entry}")
