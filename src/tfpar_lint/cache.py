"""On-disk cache of lint results (``.tfpar_lint_cache/``).

One entry per linted file and configuration, found by the file's absolute
path and valid only for the file's exact content:

* the *bucket* (a folder) is named by a hash of everything besides the file
  that decides the result: the cache format, tfpar-lint's version and a
  fingerprint of its own source files (so editing a rule in a development
  checkout invalidates the cache), the enabled rule codes, the
  :class:`~tfpar_lint.engine.AnalysisOptions` and whether ``# noqa`` is
  applied;
* the *entry* (a JSON file in the bucket) is named by a hash of the absolute
  path and stores the SHA-256 of the file's bytes next to the result; a
  lookup hashes the file and uses the entry only when the digests agree.

The key of a file's result also covers every other file it depends on: an
entry lists (``deps``) the SHA-256 of each project file the analysis or the
pre-filter read (imports, importers, what the importers import, transitively)
and, for the modules whose importers its answers asked for, a fingerprint of
which files import them (``Project.importers_digest``), so that a file that
starts or stops importing one of them, or any edit to a module it depends on,
is a miss.

Whether a file is unchanged is decided by its SHA-256, as above, but a file is hashed only when
its status changed: :class:`DigestIndex` (``digests/v1.json`` in the cache folder, shared by all
configurations) remembers each file's digest together with its device, inode, size,
modification and status-change times (git's index does the same), and a file whose status is
the same is not read again.  A digest is remembered only when the file had not changed in the
:data:`RACY_NS` before it was read (a change within the same clock tick would not change its
times); the status-change time, which no program can set back, is part of the key.

So a changed file, a different selection or option, or another tfpar-lint
is a miss, and the entry is overwritten by the fresh result (at most one
entry per file per configuration).  An entry is trusted only after checks:
it is a regular file (never followed through a link), owned by the user
running tfpar-lint, at most :data:`ENTRY_MAX_BYTES`, of this format, and its
``checksum`` (SHA-256 of its content) matches; an entry that fails a check,
or cannot be read, decoded or understood, is a miss and is recomputed and
overwritten.  Nothing in the cache can make a run fail.  Writes are atomic
(temporary file + ``os.replace``), so concurrent runs are safe.

Only content-determined results are stored: findings, and syntax errors.
Files that could not be read, and internal errors, are linted again next time.

The folder holds a ``.gitignore`` containing ``*`` (as ruff does) and a
``CACHEDIR.TAG``, so neither git nor backup tools pick it up.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from dataclasses import asdict
from typing import Any, Callable, Collection, Optional

from tfpar_lint import __version__
from tfpar_lint.files import read_bounded, read_regular_stat
from tfpar_lint.finding import FileError, Finding

FORMAT = 2
ENTRY_MAX_BYTES = 64 << 20
DEFAULT_DIR = ".tfpar_lint_cache"
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by tfpar-lint.\n"

_code_fp: Optional[str] = None


def code_fingerprint() -> str:
    """tfpar-lint's version plus the size and mtime of every module of the package."""
    global _code_fp
    if _code_fp is None:
        pkg = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256(f"{FORMAT}\0{__version__}".encode())
        for dirpath, dirnames, filenames in os.walk(pkg):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    p = os.path.join(dirpath, name)
                    try:
                        st = os.stat(p)
                    except OSError:
                        continue
                    h.update(f"\0{os.path.relpath(p, pkg)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        _code_fp = h.hexdigest()
    return _code_fp


def config_key(enabled: Optional[Collection[str]], options: Any, apply_noqa: bool) -> str:
    """Hash of everything besides the file's content that decides its result."""
    opts = asdict(options) if options is not None else {}
    opts.pop("summary_dir", None)  # where summaries are kept does not change a result
    opts.pop("project_pool", None)  # the run's share of the project budget (the size of the run)
    payload = json.dumps({
        "code": code_fingerprint(),
        "enabled": None if enabled is None else sorted(enabled),
        "options": {k: list(v) if isinstance(v, (tuple, list)) else v for k, v in sorted(opts.items())},
        "noqa": bool(apply_noqa),
    }, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _ensure_root(root: str) -> None:
    os.makedirs(root, exist_ok=True)
    for name, text in ((".gitignore", "# Automatically created by tfpar-lint.\n*\n"), ("CACHEDIR.TAG", _TAG)):
        p = os.path.join(root, name)
        if not os.path.exists(p):
            try:
                with open(p, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError:
                pass


# A file's digest is remembered by its status only when its last change (modification or status
# change) is at least this long before it was read: a write in the same tick of a coarse
# filesystem clock (2 s on FAT) leaves the times as they were.
RACY_NS = 2_000_000_000
DIGESTS_MAX = 200_000  # files remembered by DigestIndex; past it, only those of the last run are kept


class DigestIndex:
    """SHA-256 of files' bytes, trusted while the file's status is unchanged (see the module
    docstring).  Kept in ``<cache folder>/digests/v1.json``: the SHA-256 of the rest of the file
    on its first line, then ``{path: [device, inode, size, mtime_ns, ctime_ns, digest]}`` as JSON;
    read with the checks of :func:`read_entry`, else empty.  Concurrent runs may each write it
    (atomically): one's additions may be lost, never mixed up."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, "digests", "v1.json")
        self.root = root
        self._known: Optional[dict[str, list]] = None
        self._used: set[str] = set()
        self._dirty = False

    @staticmethod
    def key(st: os.stat_result, now_ns: Optional[int] = None) -> Optional[list]:
        """The status key of a regular file read at ``now_ns`` (default: now), or None when it
        changed too recently to be trusted (:data:`RACY_NS`) or is no regular file."""
        if not stat.S_ISREG(st.st_mode):
            return None
        if now_ns is None:
            now_ns = time.time_ns()
        if max(st.st_mtime_ns, st.st_ctime_ns) > now_ns - RACY_NS:
            return None
        return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]

    def _load(self) -> dict[str, list]:
        if self._known is None:
            self._known = {}
            data = read_entry(self.path)
            if data is not None and data[64:65] == b"\n" and \
                    data[:64].decode("ascii", "replace") == hashlib.sha256(data[65:]).hexdigest():
                try:
                    known = json.loads(data[65:])
                except (ValueError, RecursionError):
                    known = None
                if isinstance(known, dict):
                    self._known = {p: v for p, v in known.items()
                                   if isinstance(v, list) and len(v) == 6 and isinstance(v[5], str)}
        return self._known

    def lookup(self, path: str, st: os.stat_result) -> Optional[str]:
        """The remembered digest of ``path`` if its status ``st`` is the remembered one."""
        got = self._load().get(path)
        if got is None or not stat.S_ISREG(st.st_mode):
            return None
        if got[:5] != [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]:
            return None
        self._used.add(path)
        return got[5]

    def record(self, path: str, key: Optional[list], file_digest: str) -> None:
        if key is None:
            return
        known = self._load()
        value = list(key) + [file_digest]
        self._used.add(path)
        if known.get(path) != value:
            known[path] = value
            self._dirty = True

    def digest_of(self, path: str, max_size: int) -> Optional[str]:
        """The SHA-256 of the regular file ``path`` (at most ``max_size`` bytes), from the index
        when its status is unchanged, else read and hashed (and remembered); None if it cannot
        be read."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        got = self.lookup(path, st)
        if got is not None:
            return got
        try:
            data, fst = read_regular_stat(path, max_size)  # never blocks on a FIFO
        except OSError:
            return None
        now = time.time_ns()
        d = digest(data)
        self.record(path, self.key(fst, now), d)
        return d

    def save(self) -> None:
        if not self._dirty or self._known is None:
            return
        known = self._known
        if len(known) > DIGESTS_MAX:
            known = {p: v for p, v in known.items() if p in self._used}
        body = json.dumps(known, separators=(",", ":")).encode("utf-8", "surrogatepass")
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            _ensure_root(self.root)
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with open(fd, "wb") as fh:
                fh.write(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
            os.replace(tmp, self.path)
            self._dirty = False
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


class Cache:
    """The cache for one configuration (see the module docstring)."""

    def __init__(self, directory: str, enabled: Optional[Collection[str]], options: Any,
                 apply_noqa: bool = True, max_file_size: Optional[int] = None,
                 graph: Optional[Callable[[str, list], str]] = None) -> None:
        """``graph(path, deps)``: the fingerprint of who imports ``path`` and each of ``deps`` now
        (see the module docstring; the engine gives :func:`tfpar_lint.engine.cache_graph`).  Without
        it, an entry whose answers asked who imports a module is never valid."""
        from tfpar_lint.workers import DEFAULT_MAX_FILE_SIZE

        self.graph = graph
        self.max_file_size = DEFAULT_MAX_FILE_SIZE if max_file_size is None else max_file_size
        self.root = os.path.abspath(directory)
        self.key = config_key(enabled, options, apply_noqa)
        self.bucket = os.path.join(self.root, f"v{FORMAT}", self.key[:32])
        self._bucket_exists: Optional[bool] = None
        self.digests = DigestIndex(self.root)
        self._dep_digest: dict[str, str] = {}  # during this run: a dependency's digest, by path
        self.hits = 0
        self.misses = 0
        self.writes = 0

    # -- paths -----------------------------------------------------------------
    def entry_path(self, path: str) -> str:
        name = hashlib.sha256(os.path.abspath(path).encode("utf-8", "surrogatepass")).hexdigest()
        return os.path.join(self.bucket, name[:2], name[2:] + ".json")

    # -- lookup ----------------------------------------------------------------
    def _entry(self, path: str) -> Optional[dict]:
        if self._bucket_exists is None:
            self._bucket_exists = os.path.isdir(self.bucket)
        if not self._bucket_exists:
            return None
        data = read_entry(self.entry_path(path))
        if data is None:
            return None
        try:
            entry = json.loads(data)
        except (ValueError, RecursionError):
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            return None
        body = {k: v for k, v in entry.items() if k != "checksum"}
        if entry.get("checksum") != _checksum(body):
            return None
        return entry

    def get(self, path: str, data: Optional[bytes] = None) -> Optional[Any]:
        """The cached FileResult for ``path`` (whose bytes are ``data``; read here if None), or None."""
        from tfpar_lint.finding import GRAPH_KEY, FileResult

        entry = self._entry(path)
        if entry is None:
            self.misses += 1
            return None
        if data is None:  # the file's digest, read and hashed only when its status changed
            d = self.digests.digest_of(path, self.max_file_size)  # never blocks on a FIFO, never unbounded
            if d is None:
                self.misses += 1
                return None
        else:
            d = digest(data)
        self._dep_digest.setdefault(path, d)  # its own answers may depend on it (who imports it)
        try:
            if entry.get("format") != FORMAT or entry.get("digest") != d or entry.get("key") != self.key:
                raise ValueError("stale")
            deps = entry.get("deps") or {}
            for dep, dep_digest in deps.items():
                # another project file the result read: it must be unchanged too
                if dep == GRAPH_KEY:  # and so must which files import the modules it asked about
                    if self.graph is None:
                        raise ValueError("stale")
                    now = self.graph(path, list(deps))
                else:
                    now = self._dep_digest.get(dep)
                    if now is None:
                        now = self._dep_digest[dep] = self.digests.digest_of(dep, self.max_file_size) or ""
                if now != dep_digest:
                    raise ValueError("stale")
            findings = [Finding.from_dict(dict(f, path=path)) for f in entry["findings"]]
            err = entry.get("error")
            error = FileError(path, str(err["message"]), int(err["line"]), int(err["col"])) if err else None
            result = FileResult(path, findings=findings, error=error, skipped=bool(entry.get("skipped")),
                                deps=dict(entry.get("deps") or {}),
                                notes=[str(n) for n in entry.get("notes") or []])
        except (ValueError, KeyError, TypeError, AttributeError):
            self.misses += 1
            return None
        self.hits += 1
        return result

    # -- store -----------------------------------------------------------------
    @staticmethod
    def cacheable(result: Any) -> bool:
        err = result.error
        return err is None or err.message.startswith("syntax error")

    def put(self, path: str, file_digest: str, result: Any, stat_key: Optional[list] = None) -> bool:
        """Store ``result`` for ``path`` with content digest ``file_digest``; False if not stored.
        ``stat_key``: the file's status when those bytes were read (:meth:`DigestIndex.key`)."""
        self.digests.record(path, stat_key, file_digest)
        if not self.cacheable(result):
            return False
        err = result.error
        findings = []
        for f in result.findings:
            d = f.to_dict()
            d.pop("path", None)
            d.pop("verification", None)
            findings.append(d)
        entry = {
            "format": FORMAT, "key": self.key, "digest": file_digest,
            "findings": findings, "skipped": bool(result.skipped), "deps": dict(getattr(result, "deps", {}) or {}),
            "notes": list(getattr(result, "notes", []) or []),
            "error": None if err is None else {"message": err.message, "line": err.line, "col": err.col},
        }
        entry["checksum"] = _checksum(entry)
        try:
            text = json.dumps(entry, separators=(",", ":"))
            # a finding whose data does not survive JSON exactly is not cached
            back = json.loads(text)["findings"]
            if any(Finding.from_dict(dict(b, path=f.path)) != _plain(f) for b, f in zip(back, result.findings)):
                return False
        except (TypeError, ValueError):
            return False
        target = self.entry_path(path)
        try:
            if not self._bucket_exists:
                _ensure_root(self.root)
                os.makedirs(self.bucket, exist_ok=True)
                self._bucket_exists = True
            folder = os.path.dirname(target)
            os.makedirs(folder, exist_ok=True)
            tmp = f"{target}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, target)
        except OSError:
            try:
                os.unlink(tmp)  # type: ignore[possibly-undefined]
            except (OSError, NameError):
                pass
            return False
        self.writes += 1
        return True


    def flush(self) -> None:
        """Write what this run learnt that is kept across runs (the file digests)."""
        self.digests.save()


def _checksum(body: dict) -> str:
    """SHA-256 of an entry's content (every field but ``checksum``), in a canonical form."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_entry(path: str, max_size: int = ENTRY_MAX_BYTES) -> Optional[bytes]:
    """The bytes of a cache file, or None unless it is a regular file (not a link: ``O_NOFOLLOW``),
    owned by the user running tfpar-lint, and at most ``max_size`` bytes.  Never blocks (a FIFO put
    in its place)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_size:
            return None
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            return None
        with open(fd, "rb", closefd=False) as fh:
            data = read_bounded(fh, max_size)
        return data if len(data) <= max_size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _plain(f: Finding) -> Finding:
    if f.verification is None:
        return f
    from dataclasses import replace

    return replace(f, verification=None)
