"""Copy-on-write redirection of a script's writes (the fallback when there are no namespaces).

One mapping: a path outside the allowed folders that the script writes (opens for writing,
creates, removes, renames onto, chmods, truncates, makes a folder or a link at) gets a mirror
under the run's scratch folder, ``<overlay>/<absolute path>``.  The existing file is copied
there first when the write keeps its content (append, ``r+``, ``O_RDWR`` without ``O_TRUNC``,
chmod, utime).  Removed names are remembered (a whiteout set), so the real file stays where it
is while the script no longer sees it.  Later reads, stats and listings of such a path go to the
mirror (a listing is the union of the real folder and its mirror, minus the whiteouts), so the
script sees its own writes and goes on running.

:func:`install` applies it to Python (``open``, ``io.open``, ``os`` and through them ``shutil``
and ``pathlib``), to ``h5py.File`` opened by name, and to TensorFlow's file layer
(``_pywrap_file_io``: gfile, ``file_io``; the path ops ``WriteFile``, ``ReadFile``, ``SaveV2``,
``RestoreV2``, ``MergeV2Checkpoints``, ``CreateSummaryFileWriter``; checkpoint savers and readers,
SavedModel save and load, summary file writers).  C or C++ code that opens files by itself,
outside these entry points, is not seen: the audit hook of :mod:`sandbox` still refuses what
Python's own file layer sees of it, the rest would reach the real path.
"""
from __future__ import annotations

import builtins
import errno
import io
import os
import shutil
import stat as stat_mod
import threading
from typing import Callable, Optional

_BUSY = threading.local()  # the overlay's own work (copies, mirror folders) is not redirected again


class _busy:
    def __enter__(self):
        self.was = getattr(_BUSY, "on", False)
        _BUSY.on = True

    def __exit__(self, *exc):
        _BUSY.on = self.was


def busy() -> bool:
    return getattr(_BUSY, "on", False)


class Overlay:
    """The mapping and its state (mirror root, whiteouts)."""

    def __init__(self, root: str, allowed: Callable[[str], bool]):
        self.root = os.path.realpath(root).rstrip(os.sep)
        self.allowed = allowed  # absolute path -> True when the script may write it where it is
        self.white: set[str] = set()
        self.lock = threading.RLock()
        o = {}
        for n in ("stat", "lstat", "listdir", "scandir", "mkdir", "makedirs", "rename", "replace", "remove",
                  "unlink", "rmdir", "symlink", "link", "chmod", "chown", "utime", "truncate", "open",
                  "readlink", "access"):
            o[n] = getattr(os, n)
        o["builtin_open"] = builtins.open
        o["rmtree"] = shutil.rmtree
        o["copy2"] = shutil.copy2
        o["copytree"] = shutil.copytree
        self.o = o
        with _busy():
            o["makedirs"](self.root, exist_ok=True)

    # ------------------------------------------------------------ the mapping
    def key(self, path, dir_fd=None) -> Optional[str]:
        """The absolute path a path argument names, or None when it is not a local path to map."""
        if path is None or isinstance(path, int):
            return None
        try:
            p = os.fsdecode(path)
        except (TypeError, ValueError):
            return None
        if "://" in p or "\0" in p:
            return None
        with _busy():
            if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(p):
                try:
                    p = os.path.join(self.o["readlink"](f"/proc/self/fd/{dir_fd}"), p)
                except OSError:
                    return None
            a = os.path.abspath(p)
            if a == self.root or a.startswith(self.root + os.sep):
                return None  # already a mirror
            if self.allowed(a):
                return None
            d, b = os.path.split(a)
            k = os.path.join(os.path.realpath(d), b) if b else a
            if k == self.root or k.startswith(self.root + os.sep) or self.allowed(k):
                return None
            return k

    def m(self, k: str) -> str:
        return self.root + k

    def unmap(self, p: str) -> str:
        return p[len(self.root):] if p.startswith(self.root + os.sep) else p

    def visible(self, k: str) -> bool:
        """The real ``k`` shows through: neither it nor a folder above it was removed."""
        if not self.white:
            return True
        while True:
            if k in self.white:
                return False
            up = os.path.dirname(k)
            if up == k:
                return True
            k = up

    def has_m(self, k: str) -> bool:
        try:
            self.o["lstat"](self.m(k))
            return True
        except OSError:
            return False

    def real_exists(self, k: str) -> bool:
        if not self.visible(k):
            return False
        try:
            self.o["lstat"](k)
            return True
        except OSError:
            return False

    def exists(self, k: str) -> bool:
        return self.has_m(k) or self.real_exists(k)

    def is_dir(self, k: str) -> bool:
        for p in ((self.m(k),) if self.has_m(k) else ((k,) if self.visible(k) else ())):
            try:
                return stat_mod.S_ISDIR(self.o["stat"](p).st_mode)
            except OSError:
                return False
        return False

    def follow(self, k: str) -> tuple:
        """Symbolic links at ``k`` resolved as the kernel would, through the mirrors:
        ``(key, None)``, or ``(None, path)`` when a link leads to an allowed place."""
        for _ in range(40):
            with _busy():
                if self.has_m(k):
                    p = self.m(k)
                elif self.visible(k):
                    p = k
                else:
                    return k, None
                if not os.path.islink(p):
                    return k, None
                t = self.o["readlink"](p)
            nxt = os.path.normpath(os.path.join(os.path.dirname(k), t))
            nk = self.key(nxt)
            if nk is None:
                return None, nxt
            k = nk
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), k)

    def is_real_dir(self, k: str) -> bool:
        with _busy():
            return self.visible(k) and os.path.isdir(k)

    def read_path(self, k: str) -> str:
        """Where a read of ``k`` goes: its mirror when it has one or the real one was removed."""
        return self.m(k) if self.has_m(k) or not self.visible(k) else k

    def read_prefix(self, k: str) -> str:
        """A checkpoint prefix (``k.index``, ``k.data-*`` are the files)."""
        if self.has_m(k) or self.has_m(k + ".index") or not self.visible(k):
            return self.m(k)
        return k

    def _parent(self, k: str) -> None:
        """Make the mirror of ``k``'s folder when that folder exists (for the script)."""
        d = os.path.dirname(k)
        md = self.m(d)
        with _busy():
            if os.path.isdir(md):
                return
            if self.visible(d) and os.path.isdir(d):
                self.o["makedirs"](md, exist_ok=True)

    def write_path(self, k: str, keep: bool = False) -> str:
        """Where a write of ``k`` goes (its mirror), with the real content copied first if ``keep``."""
        with self.lock, _busy():
            self._parent(k)
            mk = self.m(k)
            if keep and not self.has_m(k) and self.real_exists(k):
                try:
                    if os.path.isdir(k) and not os.path.islink(k):
                        self.o["makedirs"](mk, exist_ok=True)
                        shutil.copystat(k, mk)
                    elif os.path.islink(k):
                        self.o["symlink"](self.o["readlink"](k), mk)
                    else:
                        self.o["copy2"](k, mk)
                except OSError:
                    pass
            return mk

    def write_dir(self, k: str) -> str:
        """A folder the caller will create with its parents (``makedirs``, TF's RecursivelyCreateDir)."""
        with self.lock, _busy():
            self._parent(k)
            return self.m(k)

    def mkdirs(self, k: str) -> str:
        with self.lock, _busy():
            self.o["makedirs"](self.m(k), exist_ok=True)
            return self.m(k)

    def names(self, k: str) -> Optional[list]:
        """The union listing of folder ``k`` (None: neither a real nor a mirrored folder)."""
        names: set = set()
        found = False
        with _busy():
            if self.visible(k):
                try:
                    names.update(self.o["listdir"](k))
                    found = True
                except OSError:
                    pass
            try:
                names.update(self.o["listdir"](self.m(k)))
                found = True
            except OSError:
                pass
        if not found:
            return None
        return sorted(n for n in names if self.has_m(os.path.join(k, n)) or os.path.join(k, n) not in self.white)

    def touched(self, k: str) -> bool:
        """Folder ``k`` differs from the real one (a mirror, or a whiteout in it)."""
        return self.has_m(k) or not self.visible(k) or any(os.path.dirname(w) == k for w in self.white)

    # ----------------------------------------------------- semantic operations
    def remove(self, k: str, path, folder: bool = False) -> None:
        with self.lock, _busy():
            mk = self.m(k)
            if folder:
                listed = self.names(k)
                if listed:
                    raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), os.fsdecode(path))
            had_real = self.real_exists(k)
            if self.has_m(k):
                (self.o["rmdir"] if folder else self.o["unlink"])(mk)
            elif had_real:
                real_dir = os.path.isdir(k) and not os.path.islink(k)
                if folder and not real_dir:
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), os.fsdecode(path))
                if not folder and real_dir:
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fsdecode(path))
            else:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(path))
            if had_real:
                self.white.add(k)

    def remove_tree(self, k: str) -> bool:
        """``rmtree`` of ``k``: False when there was nothing."""
        with self.lock, _busy():
            had = False
            if self.has_m(k):
                had = True
                if os.path.isdir(self.m(k)) and not os.path.islink(self.m(k)):
                    self.o["rmtree"](self.m(k))
                else:
                    self.o["unlink"](self.m(k))
            if self.real_exists(k):
                had = True
                self.white.add(k)
            return had

    def move(self, src, dst, src_k: Optional[str], dst_k: Optional[str], rename: Callable) -> None:
        """rename/replace with at least one side outside the allowed folders."""
        with self.lock, _busy():
            s = src if src_k is None else self.read_path(src_k)
            d = dst if dst_k is None else self.write_path(dst_k)
            if dst_k is not None and not self.has_m(dst_k) and self.real_exists(dst_k) and self.is_dir(dst_k):
                # onto an existing real folder: the kernel's rules (empty folder only) on its mirror
                self.o["makedirs"](d, exist_ok=True)
            if src_k is None or s != src_k:  # src is a mirror or an allowed file: a real rename
                try:
                    rename(s, d)
                except OSError as e:
                    if e.errno != errno.EXDEV:
                        raise
                    self._copy(s, d)
                    (self.o["rmtree"] if os.path.isdir(s) and not os.path.islink(s) else self.o["unlink"])(s)
            else:  # the real src: copy it, and hide it
                self.o["lstat"](s)  # FileNotFoundError as the real rename would give
                self._copy(s, d)
            if src_k is not None and self.real_exists(src_k):
                self.white.add(src_k)

    def _copy(self, s: str, d: str) -> None:
        if os.path.isdir(s) and not os.path.islink(s):
            if os.path.isdir(d):
                self.o["rmdir"](d)
            self.o["copytree"](s, d, symlinks=True)
        elif os.path.islink(s):
            if os.path.lexists(d):
                self.o["unlink"](d)
            self.o["symlink"](self.o["readlink"](s), d)
        else:
            self.o["copy2"](s, d)


class _Entry:
    """A ``os.DirEntry`` look-alike for a union listing."""

    def __init__(self, ov: Overlay, folder, name: str, k: str):
        self.name = name if isinstance(folder, str) else os.fsencode(name)
        self.path = os.path.join(folder, self.name)
        self._target = ov.read_path(k)

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"<DirEntry {self.name!r}>"

    def stat(self, *, follow_symlinks=True):
        return os.stat(self._target) if follow_symlinks else os.lstat(self._target)

    def is_dir(self, *, follow_symlinks=True):
        try:
            return stat_mod.S_ISDIR(self.stat(follow_symlinks=follow_symlinks).st_mode)
        except OSError:
            return False

    def is_file(self, *, follow_symlinks=True):
        try:
            return stat_mod.S_ISREG(self.stat(follow_symlinks=follow_symlinks).st_mode)
        except OSError:
            return False

    def is_symlink(self):
        try:
            return stat_mod.S_ISLNK(os.lstat(self._target).st_mode)
        except OSError:
            return False

    def inode(self):
        return os.lstat(self._target).st_ino

    def is_junction(self):
        return False


class _Scan:
    def __init__(self, entries):
        self._it = iter(entries)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass


def _same_type(orig, p: str):
    return os.fsencode(p) if isinstance(orig, bytes) else p


# ----------------------------------------------------------------------------------- Python and os
def install_python(ov: Overlay, own: Callable[[], bool]) -> None:
    o = ov.o
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def off() -> bool:
        return busy() or own()

    def k_of(path, dir_fd=None):
        return None if off() else ov.key(path, dir_fd)

    def opened(path, mode="r", *a, **kw):
        k = None if isinstance(path, int) or kw.get("opener") else k_of(path)
        if k is None:
            return o["builtin_open"](path, mode, *a, **kw)
        writing = isinstance(mode, str) and any(c in mode for c in "wax+")
        k, there = ov.follow(k)
        if there is not None:  # a link into an allowed folder
            return o["builtin_open"](_same_type(path, there), mode, *a, **kw)
        if writing and "x" in mode and ov.exists(k):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(path))
        target = ov.write_path(k, keep="a" in mode or ("+" in mode and "w" not in mode)) if writing \
            else ov.read_path(k)
        f = o["builtin_open"](_same_type(path, target), mode, *a, **kw)
        try:  # the file object keeps the name the script gave
            raw = f
            while hasattr(raw, "buffer") or hasattr(raw, "raw"):
                raw = getattr(raw, "buffer", None) or raw.raw
            raw.name = path
        except (AttributeError, TypeError):
            pass
        return f

    builtins.open = opened
    io.open = opened

    def os_open(path, flags, mode=0o777, *, dir_fd=None):
        k = k_of(path, dir_fd)
        if k is None:
            if dir_fd is not None and flags & write_flags and not off() and not os.path.isabs(os.fsdecode(path)):
                try:  # name the file in full: the audit hook, which never sees dir_fd, checks it
                    path = os.path.join(o["readlink"](f"/proc/self/fd/{dir_fd}"), os.fsdecode(path))
                    dir_fd = None
                except OSError:
                    pass
            return o["open"](path, flags, mode, dir_fd=dir_fd)
        if not flags & os.O_NOFOLLOW:
            k, there = ov.follow(k)
            if there is not None:
                return o["open"](_same_type(path, there), flags, mode)
        if not flags & write_flags and ov.is_real_dir(k):
            return o["open"](k, flags, mode)  # a folder: the real one (names relative to it are mapped)
        if flags & write_flags:
            if flags & os.O_CREAT and flags & os.O_EXCL and ov.exists(k):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(path))
            # without O_CREAT the file must exist there: its copy (O_TRUNC then empties it)
            target = ov.write_path(k, keep=not flags & os.O_TRUNC or not flags & os.O_CREAT)
        else:
            target = ov.read_path(k)
        return o["open"](_same_type(path, target), flags, mode)

    os.open = os_open

    def reader(name):
        orig = o[name]

        def f(path, *a, dir_fd=None, **kw):
            k = k_of(path, dir_fd)
            if k is None:
                return orig(path, *a, dir_fd=dir_fd, **kw) if dir_fd is not None else orig(path, *a, **kw)
            if name in ("stat", "access") and kw.get("follow_symlinks", True):
                k, there = ov.follow(k)
                if there is not None:
                    return orig(_same_type(path, there), *a, **kw)
            return orig(_same_type(path, ov.read_path(k)), *a, **kw)

        f.__name__ = name
        setattr(os, name, f)

    for n in ("stat", "lstat", "readlink", "access"):
        reader(n)

    def listdir(path="."):
        k = k_of(path)
        if k is None:
            return o["listdir"](path)
        names = ov.names(k)
        if names is None:
            return o["listdir"](_same_type(path, ov.read_path(k)))  # the error a listing would give
        return [_same_type(path, n) for n in names]

    os.listdir = listdir

    def scandir(path="."):
        k = k_of(path)
        if k is None or not ov.touched(k):
            return o["scandir"](path)
        names = ov.names(k)
        if names is None:
            return o["scandir"](_same_type(path, ov.read_path(k)))
        folder = os.fsdecode(path) if not isinstance(path, bytes) else path
        return _Scan([_Entry(ov, folder, n, os.path.join(k, n)) for n in names])

    os.scandir = scandir

    def mkdir(path, mode=0o777, *, dir_fd=None):
        k = k_of(path, dir_fd)
        if k is None:
            return o["mkdir"](path, mode, dir_fd=dir_fd)
        if ov.exists(k):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(path))
        return o["mkdir"](ov.write_path(k), mode)

    os.mkdir = mkdir

    def remover(name, folder):
        orig = o[name]

        def f(path, *, dir_fd=None):
            k = k_of(path, dir_fd)
            if k is None:
                return orig(path, dir_fd=dir_fd)
            ov.remove(k, path, folder)

        f.__name__ = name
        setattr(os, name, f)

    remover("remove", False)
    remover("unlink", False)
    remover("rmdir", True)

    def mover(name):
        orig = o[name]

        def f(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
            sk, dk = k_of(src, src_dir_fd), k_of(dst, dst_dir_fd)
            if sk is None and dk is None:
                return orig(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
            s = src if sk is not None or src_dir_fd is None else os.path.join(
                o["readlink"](f"/proc/self/fd/{src_dir_fd}"), os.fsdecode(src))
            d = dst if dk is not None or dst_dir_fd is None else os.path.join(
                o["readlink"](f"/proc/self/fd/{dst_dir_fd}"), os.fsdecode(dst))
            ov.move(s, d, sk, dk, orig)

        f.__name__ = name
        setattr(os, name, f)

    mover("rename")
    mover("replace")

    def symlink(src, dst, target_is_directory=False, *, dir_fd=None):
        k = k_of(dst, dir_fd)
        if k is None:
            return o["symlink"](src, dst, target_is_directory, dir_fd=dir_fd)
        if ov.exists(k):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(dst))
        return o["symlink"](src, _same_type(dst, ov.write_path(k)), target_is_directory)

    os.symlink = symlink

    def link(src, dst, *, src_dir_fd=None, dst_dir_fd=None, follow_symlinks=True):
        sk, dk = k_of(src, src_dir_fd), k_of(dst, dst_dir_fd)
        if sk is None and dk is None:
            return o["link"](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)
        if dk is not None and ov.exists(dk):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(dst))
        s = ov.read_path(sk) if sk is not None else src
        d = ov.write_path(dk) if dk is not None else dst
        try:
            o["link"](s, d)
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM):
                raise
            with _busy():
                o["copy2"](s, d)

    os.link = link

    def changer(name):
        orig = o[name]

        def f(path, *a, dir_fd=None, follow_symlinks=True, **kw):
            k = k_of(path, dir_fd)
            if k is None:
                if dir_fd is not None:
                    kw["dir_fd"] = dir_fd
                if not follow_symlinks:
                    kw["follow_symlinks"] = follow_symlinks
                return orig(path, *a, **kw)
            if not ov.exists(k):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(path))
            target = ov.write_path(k, keep=True)
            if not follow_symlinks:
                kw["follow_symlinks"] = False
            return orig(_same_type(path, target), *a, **kw)

        f.__name__ = name
        setattr(os, name, f)

    for n in ("chmod", "chown", "utime"):
        changer(n)

    def truncate(path, length):
        k = k_of(path)
        if k is None:
            return o["truncate"](path, length)
        if not ov.exists(k):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(path))
        return o["truncate"](ov.write_path(k, keep=True), length)

    os.truncate = truncate

    def rmtree(path, *a, **kw):
        k = None if kw.get("dir_fd") is not None else k_of(path)
        if k is None:
            return o["rmtree"](path, *a, **kw)
        if not ov.remove_tree(k):
            o["rmtree"](_same_type(path, ov.m(k)), *a, **kw)  # nothing there: the error rmtree gives

    rmtree.avoids_symlink_attacks = getattr(shutil.rmtree, "avoids_symlink_attacks", False)
    shutil.rmtree = rmtree


# ------------------------------------------------------------------------------------------- h5py
def install_h5py(ov: Overlay, own: Callable[[], bool]) -> None:
    try:
        import h5py
    except Exception:  # noqa: BLE001 - no h5py: nothing to redirect
        return
    orig = h5py.File.__init__

    def init(self, name, mode="r", *a, **kw):
        driver = kw.get("driver", a[0] if a else None)
        in_memory = driver == "core" and not kw.get("backing_store", True)
        if isinstance(name, (str, bytes, os.PathLike)) and not in_memory and not (busy() or own()):
            k = ov.key(name)
            if k is not None:
                m = mode or "r"
                if m == "r":
                    name = ov.read_path(k)
                else:
                    if m in ("w-", "x") and ov.exists(k):
                        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(name))
                    name = ov.write_path(k, keep=m in ("a", "r+"))
        return orig(self, name, mode, *a, **kw)

    h5py.File.__init__ = init


# ------------------------------------------------------------------------------------- TensorFlow
def install_tensorflow(ov: Overlay, own: Callable[[], bool]) -> None:
    """TensorFlow's C++ file layer is invisible to Python: map the paths at its Python entry points."""
    from tensorflow.python.lib.io import _pywrap_file_io as pfi

    def key(p):
        if busy() or own() or not isinstance(p, (str, bytes)):
            return None
        return ov.key(p)

    def out(p, new):
        return _same_type(p, new)

    def wrap(name, make):
        orig = getattr(pfi, name, None)
        if orig is not None:
            setattr(pfi, name, make(orig))

    def first_arg(path_of):
        """Wrappers that map the entry point's first argument, a path, to ``path_of(key)``."""
        def make(orig):
            def f(path, *a, **kw):
                k = key(path)
                return orig(path if k is None else out(path, path_of(k)), *a, **kw)
            return f
        return make

    for n in ("FileExists", "IsDirectory", "Stat", "ReadFileToString", "BufferedInputStream", "HasAtomicMove"):
        wrap(n, first_arg(ov.read_path))

    def children(orig):
        def f(path, *a, **kw):
            k = key(path)
            if k is None:
                return orig(path, *a, **kw)
            names = ov.names(k)
            if names is None:
                return orig(out(path, ov.read_path(k)), *a, **kw)
            return names
        return f

    wrap("GetChildren", children)

    def matching(orig):
        def f(pattern, *a, **kw):
            k = key(pattern)
            if k is None:
                return orig(pattern, *a, **kw)
            found = {}
            for p in orig(pattern, *a, **kw):
                pk = ov.key(p)
                if pk is None or (ov.visible(pk) and not ov.has_m(pk)):
                    found[os.fsdecode(p)] = p
            pat = os.fsdecode(pattern)
            for p in orig(out(pattern, ov.m(k)), *a, **kw):
                u = ov.unmap(os.fsdecode(p))
                if not os.path.isabs(pat):  # as TensorFlow names them: relative to where the pattern is
                    u = os.path.relpath(u)
                    if not os.path.dirname(pat) or pat.startswith("./"):
                        u = "./" + u
                found[u] = out(p, u)
            return [found[x] for x in sorted(found)]
        return f

    wrap("GetMatchingFiles", matching)

    def writable(orig):
        def f(path, mode, *a, **kw):
            k = key(path)
            return orig(path if k is None else out(path, ov.write_path(k, keep="a" in str(mode))), mode, *a, **kw)
        return f

    wrap("WritableFile", writable)

    wrap("WriteStringToFile", first_arg(ov.write_path))

    def create_dir(orig):
        def f(path, *a, **kw):
            k = key(path)
            if k is None:
                return orig(path, *a, **kw)
            if ov.real_exists(k) and not ov.has_m(k):
                return orig(path, *a, **kw)  # TensorFlow's "already exists" error, nothing written
            return orig(out(path, ov.write_dir(k)), *a, **kw)
        return f

    wrap("CreateDir", create_dir)

    def create_dirs(orig):
        def f(path, *a, **kw):
            k = key(path)
            if k is None:
                return orig(path, *a, **kw)
            ov.mkdirs(k)
            return None
        return f

    wrap("RecursivelyCreateDir", create_dirs)

    def delete_file(orig):
        def f(path, *a, **kw):
            k = key(path)
            if k is None:
                return orig(path, *a, **kw)
            if not ov.exists(k) or ov.is_dir(k):
                return orig(out(path, ov.read_path(k)), *a, **kw)  # TensorFlow's error
            ov.remove(k, path)
        return f

    wrap("DeleteFile", delete_file)

    def delete_tree(orig):
        def f(path, *a, **kw):
            k = key(path)
            if k is None:
                return orig(path, *a, **kw)
            if not ov.remove_tree(k):
                return orig(out(path, ov.m(k)), *a, **kw)
        return f

    wrap("DeleteRecursively", delete_tree)

    def two(orig, is_rename):
        def f(src, dst, overwrite=False, *a, **kw):
            sk, dk = key(src), key(dst)
            if sk is None and dk is None:
                return orig(src, dst, overwrite, *a, **kw)
            if dk is not None and not overwrite and ov.exists(dk):
                return orig(src, dst, overwrite, *a, **kw)  # TensorFlow's "already exists" error
            if sk is not None and not ov.exists(sk):
                return orig(out(src, ov.m(sk)), dst if dk is None else out(dst, ov.m(dk)), overwrite, *a, **kw)
            s = src if sk is None else out(src, ov.read_path(sk))
            if not is_rename:
                d = dst if dk is None else out(dst, ov.write_path(dk))
                return orig(s, d, overwrite, *a, **kw)

            ov.move(os.fsdecode(s) if sk is None else os.fsdecode(src), os.fsdecode(dst), sk, dk,
                    lambda a_, b_: orig(a_, b_, True))
        return f

    wrap("CopyFile", lambda o_: two(o_, False))
    wrap("RenameFile", lambda o_: two(o_, True))

    import tensorflow as tf
    from tensorflow.python.ops import gen_io_ops, gen_summary_ops

    replaced: dict = {}

    def static(t):
        if isinstance(t, (str, bytes)):
            return t
        try:
            v = tf.get_static_value(t)
        except Exception:  # noqa: BLE001
            return None
        if isinstance(v, (str, bytes)):
            return v
        try:
            import numpy as np

            if isinstance(v, np.ndarray) and v.shape == () and isinstance(v.item(), (str, bytes)):
                return v.item()
        except Exception:  # noqa: BLE001
            pass
        return None

    def mapped(t, how):
        """``t`` (a string or a string tensor with a value known now), mapped; ``t`` itself if not."""
        v = static(t)
        if v is None or v in ("", b""):  # no file (Dataset.cache() in memory)
            return t
        k = key(v)
        if k is None:
            return t
        new = how(k)
        if isinstance(t, (str, bytes)):
            return out(t, new)
        return tf.constant(new, dtype=tf.string)

    traced: set = set()  # written by an op of a graph being built: the file exists when the graph runs

    def read_k(k):
        if not tf.executing_eagerly() and (k in traced or not ov.real_exists(k)):
            return ov.m(k)
        return ov.read_path(k)

    def write_k(k):
        if not tf.executing_eagerly():
            traced.add(k)
        return ov.write_path(k)

    def prefix_r(k):
        if not tf.executing_eagerly() and (k in traced or not ov.real_exists(k + ".index")):
            return ov.m(k)
        return ov.read_prefix(k)

    def dir_w(k):
        return ov.mkdirs(k)

    def arg_wrapper(owner, name, specs):
        """specs: [(position, keyword, how)]."""
        orig = getattr(owner, name, None)
        if orig is None:
            return

        def f(*a, **kw):
            a = list(a)
            for pos, kwname, how in specs:
                if kwname in kw:
                    kw[kwname] = mapped(kw[kwname], how)
                elif len(a) > pos:
                    a[pos] = mapped(a[pos], how)
            return orig(*a, **kw)

        f.__name__ = getattr(orig, "__name__", name)
        f.__doc__ = getattr(orig, "__doc__", None)
        setattr(owner, name, f)
        replaced[id(orig)] = f

    arg_wrapper(gen_io_ops, "write_file", [(0, "filename", write_k)])
    arg_wrapper(gen_io_ops, "read_file", [(0, "filename", read_k)])
    arg_wrapper(gen_io_ops, "save_v2", [(0, "prefix", write_k)])
    arg_wrapper(gen_io_ops, "restore_v2", [(0, "prefix", prefix_r)])
    arg_wrapper(gen_io_ops, "merge_v2_checkpoints", [(1, "destination_prefix", write_k)])
    arg_wrapper(gen_summary_ops, "create_summary_file_writer", [(1, "logdir", dir_w)])
    try:
        from tensorflow.python.checkpoint import functional_saver as fs

        arg_wrapper(fs.MultiDeviceSaver, "save", [(1, "file_prefix", write_k)])
        arg_wrapper(fs.MultiDeviceSaver, "restore", [(1, "file_prefix", prefix_r)])
    except ImportError:  # pragma: no cover
        pass
    from tensorflow.python.training import py_checkpoint_reader as pcr

    arg_wrapper(pcr, "NewCheckpointReader", [(0, "filepattern", prefix_r)])
    from tensorflow.python.saved_model import load as sm_load
    from tensorflow.python.saved_model import save as sm_save

    def export_w(k):
        with _busy():
            ov.write_dir(k)
        return ov.m(k)

    arg_wrapper(sm_save, "save", [(1, "export_dir", export_w)])
    arg_wrapper(sm_save, "save_and_return_nodes", [(1, "export_dir", export_w)])
    arg_wrapper(sm_load, "load", [(0, "export_dir", read_k)])
    arg_wrapper(sm_load, "load_partial", [(0, "export_dir", read_k)])
    try:
        from tensorflow.python.saved_model import loader_impl

        arg_wrapper(loader_impl, "parse_saved_model", [(0, "export_dir", read_k)])
    except ImportError:  # pragma: no cover
        pass
    from tensorflow.python.ops import summary_ops_v2

    arg_wrapper(summary_ops_v2, "create_file_writer_v2", [(0, "logdir", dir_w)])
    _install_tf_data_and_records(ov, key, out, mapped, arg_wrapper, read_k, write_k, dir_w)
    # The public API (tf.io.write_file, tf.saved_model.save, ...) holds the original functions.
    import sys

    for modname, mod in list(sys.modules.items()):
        if mod is None or not modname.startswith(("tensorflow", "keras", "tf_keras")):
            continue
        try:
            items = list(vars(mod).items())
        except TypeError:
            continue
        for name, v in items:
            g = replaced.get(id(v))
            if g is not None and g is not v:
                try:
                    setattr(mod, name, g)
                except (AttributeError, TypeError):
                    pass


def _install_tf_data_and_records(ov: Overlay, key, out, mapped, arg_wrapper, read_k, write_k, dir_w) -> None:
    """TFRecord files and tf.data's own files: ``tf.io.TFRecordWriter``, ``tf_record_iterator``,
    ``tf.data.TFRecordDataset``, ``tf.data.experimental.TFRecordWriter``, ``Dataset.save``/``load``,
    ``Dataset.cache(filename)`` and ``Dataset.snapshot`` (their ops take the path as a tensor whose
    value is known when the op is made)."""
    import tensorflow as tf
    from tensorflow.python.lib.io import tf_record
    from tensorflow.python.ops import gen_dataset_ops, gen_experimental_dataset_ops as ged

    writer_init = tf_record.TFRecordWriter.__init__

    def init(self, path, *a, **kw):
        k = key(path)
        return writer_init(self, path if k is None else out(path, ov.write_path(k)), *a, **kw)

    tf_record.TFRecordWriter.__init__ = init
    arg_wrapper(tf_record, "tf_record_iterator", [(0, "path", lambda k: ov.read_path(k))])

    def each(how):
        """A mapping of every file name in a list or a 1-D string tensor known now."""
        def f(t):
            try:
                v = tf.get_static_value(t) if not isinstance(t, (str, bytes, list, tuple)) else t
            except Exception:  # noqa: BLE001
                return t
            if v is None:
                return t
            try:
                import numpy as np

                names = [x.item() if isinstance(x, np.generic) else x for x in np.asarray(v, dtype=object).ravel()]
            except Exception:  # noqa: BLE001
                return t
            if not names or not all(isinstance(x, (str, bytes)) for x in names):
                return t
            new = [mapped(x, how) for x in names]
            if new == names:
                return t
            shaped = new[0] if getattr(np.asarray(v, dtype=object), "ndim", 1) == 0 else new
            return tf.constant(shaped, dtype=tf.string)
        return f

    def list_wrapper(owner, name, pos, kwname, how):
        orig = getattr(owner, name, None)
        if orig is None:
            return
        f_each = each(how)

        def f(*a, **kw):
            a = list(a)
            if kwname in kw:
                kw[kwname] = f_each(kw[kwname])
            elif len(a) > pos:
                a[pos] = f_each(a[pos])
            return orig(*a, **kw)

        f.__name__ = getattr(orig, "__name__", name)
        setattr(owner, name, f)

    # TFRecordDataset, TextLineDataset, FixedLengthRecordDataset: their file names become a dataset
    # first (each reader op then gets one inside a function, too late to know it)
    from tensorflow.python.data.ops import readers

    list_wrapper(readers, "_create_or_validate_filenames_dataset", 0, "filenames", read_k)
    list_wrapper(gen_dataset_ops, "tf_record_dataset", 0, "filenames", read_k)
    list_wrapper(gen_dataset_ops, "tf_record_dataset_v2", 0, "filenames", read_k)
    arg_wrapper(gen_dataset_ops, "cache_dataset", [(1, "filename", write_k)])
    arg_wrapper(gen_dataset_ops, "cache_dataset_v2", [(1, "filename", write_k)])
    arg_wrapper(ged, "dataset_to_tf_record", [(1, "filename", write_k)])
    arg_wrapper(ged, "save_dataset", [(1, "path", dir_w)])
    arg_wrapper(ged, "save_dataset_v2", [(1, "path", dir_w)])
    arg_wrapper(ged, "load_dataset", [(0, "path", read_k)])
    arg_wrapper(ged, "snapshot_dataset", [(1, "path", dir_w)])
    arg_wrapper(ged, "snapshot_dataset_v2", [(1, "path", dir_w)])
