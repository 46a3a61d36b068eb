"""Reading source files without blocking or reading without bound.

``open(path).read()`` blocks forever on a FIFO named ``*.py`` and reads a
symlink to ``/dev/zero`` until memory runs out.  :func:`read_regular` reads
only regular files (checked before opening, and again on the open
descriptor, which is opened non-blocking), at most ``max_size`` bytes;
anything else raises an :class:`OSError` (:class:`NotRegularFile`,
:class:`FileTooLarge`), so a caller's ``except OSError`` already covers it.
The engine's ``read_bytes`` (the files being linted) and the project
analysis (the other files of the project it reads) both go through here.
"""
from __future__ import annotations

import io
import os
import stat


class NotRegularFile(OSError):
    """A FIFO, a device, a socket or a directory where a source file was expected."""


class FileTooLarge(OSError):
    """A file over the size limit."""


def _check(path: str, st: os.stat_result, max_size: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path)
    if max_size and st.st_size > max_size:
        raise FileTooLarge(path)


def read_bounded(fh, max_size: int) -> bytes:
    """What is left of the open binary file ``fh``, at most ``max_size + 1`` bytes (0: no limit);
    read in chunks, as ``read(max_size + 1)`` would allocate that much at once."""
    if not max_size:
        return fh.read()
    parts, n = [], 0
    while n <= max_size:
        chunk = fh.read(min(1 << 20, max_size + 1 - n))
        if not chunk:
            break
        parts.append(chunk)
        n += len(chunk)
    return b"".join(parts)


def read_regular(path: str, max_size: int = 0) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_size`` bytes; 0: no limit)."""
    return read_regular_stat(path, max_size)[0]


def read_regular_stat(path: str, max_size: int = 0) -> tuple[bytes, os.stat_result]:
    """:func:`read_regular`, and the status of the open file taken before reading it (for
    :class:`tfpar_lint.cache.DigestIndex`)."""
    _check(path, os.stat(path), max_size)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    with open(fd, "rb") as fh:
        st = os.fstat(fd)
        _check(path, st, max_size)
        data = read_bounded(fh, max_size)
    if max_size and len(data) > max_size:  # it grew while being read
        raise FileTooLarge(path)
    return data, st


def read_regular_text(path: str, max_size: int = 0) -> str:
    """:func:`read_regular` decoded as ``open(path, encoding="utf-8").read()`` would
    (universal newlines); UnicodeDecodeError when it is not UTF-8."""
    return io.TextIOWrapper(io.BytesIO(read_regular(path, max_size)), encoding="utf-8").read()


def remove_tree(path: str) -> None:
    """Remove the folder ``path`` and everything below it, as ``shutil.rmtree(path, ignore_errors=True)``
    would, but without recursion and through folder descriptors: a chain of thousands of nested
    folders (deeper than Python's recursion limit, longer than PATH_MAX) goes too, links are removed,
    never followed, and at most two descriptors are open at a time.  Never raises: what cannot be
    removed is left."""
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
        fd = os.open(path, flags)
    except OSError:
        return
    names: list[str] = []  # the folders entered below ``path``, outermost first
    while True:
        sub = None
        try:
            with os.scandir(fd) as it:
                entries = list(it)
        except OSError:
            entries = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if sub is None:
                        sub = e.name
                    continue
                os.unlink(e.name, dir_fd=fd)
            except OSError:
                continue
        if sub is not None:
            try:
                try:
                    os.chmod(sub, 0o700, dir_fd=fd, follow_symlinks=False)  # a folder made unreadable
                except (OSError, NotImplementedError):
                    pass
                child = os.open(sub, flags, dir_fd=fd)
            except OSError:
                child = None
            if child is not None:
                os.close(fd)
                fd = child
                names.append(sub)
                continue
        # Nothing more to enter here (or a folder that cannot be entered): leave it, remove it.
        if not names:
            os.close(fd)
            try:
                os.rmdir(path)
            except OSError:
                pass
            return
        name = names.pop()
        try:
            parent = os.open("..", flags, dir_fd=fd)
        except OSError:
            os.close(fd)
            return
        os.close(fd)
        fd = parent
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            if sub is not None:  # it could not be entered, nor removed: do not loop on it
                os.close(fd)
                return
