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
    _check(path, os.stat(path), max_size)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    with open(fd, "rb") as fh:
        _check(path, os.fstat(fd), max_size)
        data = read_bounded(fh, max_size)
    if max_size and len(data) > max_size:  # it grew while being read
        raise FileTooLarge(path)
    return data


def read_regular_text(path: str, max_size: int = 0) -> str:
    """:func:`read_regular` decoded as ``open(path, encoding="utf-8").read()`` would
    (universal newlines); UnicodeDecodeError when it is not UTF-8."""
    return io.TextIOWrapper(io.BytesIO(read_regular(path, max_size)), encoding="utf-8").read()
