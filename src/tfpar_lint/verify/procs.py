"""Process bookkeeping for the driver: process trees, marker scans, kills, output relays.

Linux ``/proc`` only; on other systems the scans find nothing and the
driver relies on process groups.  No TensorFlow import.
"""
from __future__ import annotations

import os
import select
import signal
import threading
from typing import Iterable, Optional

MARKER = "TFPAR_VERIFY_RUN"  # environment variable carried by every process of a run
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat_fields(pid: int) -> Optional[list[bytes]]:
    """The fields of /proc/PID/stat after the command name (field 3 on), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2:].split()


def _stat(pid: int) -> Optional[tuple[int, int]]:
    """(ppid, rss pages) of a live process."""
    rest = _stat_fields(pid)
    if rest is None:
        return None
    try:
        return int(rest[1]), int(rest[21])
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> Optional[int]:
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), None if it is gone.

    A process id is reused once its process is reaped, and thread ids come from the same
    numbers (``kill(tid)`` signals the thread's whole process); with ``pid_max`` at 32768 and
    TensorFlow starting dozens of threads per process, a number taken from /proc a few seconds
    earlier may name another program by now.  (pid, start time) names one process."""
    rest = _stat_fields(pid)
    if rest is None:
        return None
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def identities(pids: Iterable[int]) -> dict[int, int]:
    """pid -> start time of the live ones among ``pids`` (see :func:`start_time`)."""
    out = {}
    for p in pids:
        t = start_time(p)
        if t is not None:
            out[p] = t
    return out


def table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, rss pages) for every visible process."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if n.isdigit():
            st = _stat(int(n))
            if st is not None:
                out[int(n)] = st
    return out


def descendants(roots: Iterable[int], tab: Optional[dict] = None) -> set[int]:
    """The roots and every process below them."""
    tab = table() if tab is None else tab
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in tab.items():
        children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    stack = [r for r in roots if r in tab]
    while stack:
        p = stack.pop()
        if p in out:
            continue
        out.add(p)
        stack.extend(children.get(p, ()))
    return out


def _pss(pid: int) -> Optional[int]:
    """Proportional set size in bytes (pages shared after a fork count once in all), None if unknown."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_rss(roots: Iterable[int]) -> int:
    """Memory of the roots and their descendants, in bytes: the sum of their proportional set
    sizes (resident pages shared by forked processes count once), or of their RSS where /proc
    has no smaps_rollup."""
    tab = table()
    total = 0
    for p in descendants(roots, tab):
        pss = _pss(p)
        total += pss if pss is not None else tab[p][1] * PAGE
    return total


def scratch_bytes(pid: int, root: str) -> int:
    """Bytes a sandboxed run wrote to its scratch tmpfs (that is RAM): an overlay of the run, one whose
    upper layer lies under ``root``, reports the tmpfs's usage.  0 without a sandbox."""
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            lines = f.readlines()
    except OSError:
        return 0
    for line in lines:
        parts = line.split()
        try:
            sep = parts.index("-")
        except ValueError:
            continue
        if parts[sep + 1] == "overlay" and f"upperdir={root.rstrip('/')}/" in parts[-1]:
            try:
                st = os.statvfs(f"/proc/{pid}/root{parts[4]}")
            except OSError:
                continue
            return (st.f_blocks - st.f_bfree) * st.f_frsize
    return 0


def tree_bytes(top: str) -> int:
    """Bytes on disk under ``top`` (the fallback's mirror of what a run wrote); 0 when it is absent."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


def with_marker(value: str) -> set[int]:
    """Processes whose environment carries ``TFPAR_VERIFY_RUN=value`` (or a value under it)."""
    needle = f"{MARKER}={value}".encode()
    out = set()
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if not n.isdigit() or int(n) == me:
            continue
        try:
            with open(f"/proc/{n}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item == needle or item.startswith(needle + b"/"):
                out.add(int(n))
                break
    return out


def kill(pids: Iterable[int], sig: int = signal.SIGKILL, expect: Optional[dict[int, int]] = None) -> None:
    """Send ``sig`` to ``pids``; with ``expect`` (pid -> start time, from :func:`identities`),
    only to those that are still the process that was seen (not a reused number)."""
    me = os.getpid()
    for p in pids:
        if p in (me, 0, 1):
            continue
        if expect is not None and (p not in expect or start_time(p) != expect[p]):
            continue
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def oom_kills() -> Optional[int]:
    """The kernel's count of processes its OOM killer has killed since boot (/proc/vmstat), or None."""
    try:
        with open("/proc/vmstat", "rb") as f:
            for line in f:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those of ``pids`` that are our children (adopted orphans)."""
    for p in pids:
        try:
            os.waitpid(p, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass


def sweep(marker: str, roots: Iterable[int] = (), root_starts: Optional[dict[int, int]] = None) -> int:
    """SIGKILL every process of a run: below ``roots`` or carrying its marker. Returns how many.
    With ``root_starts`` (pid -> start time), a root that is no longer that process (it ended and
    its number was reused) is left out, and so is what lies below it."""
    if root_starts is not None:
        roots = [r for r in roots if r in root_starts and start_time(r) == root_starts[r]]
    found = descendants(roots) | with_marker(marker)
    found.discard(os.getpid())
    seen = identities(found)
    kill(found, expect=seen)
    reap(found)
    return len(seen)


class OutputRelay:
    """Reads a child's stdout or stderr (a FIFO) into a file, up to ``cap`` bytes;
    beyond it the output is dropped, its last ``tail`` bytes kept and written at the
    end after a note saying how much was dropped."""

    def __init__(self, fifo: str, dest: str, cap: int, tail: int = 64 * 1024):
        self.fifo, self.dest, self.cap, self.tail_size = fifo, dest, cap, tail
        self.total = 0
        self.dropped = 0
        self._tail = bytearray()
        self._stop = threading.Event()
        self._opened = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tfpar-verify-output", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            fd = os.open(self.fifo, os.O_RDONLY)  # blocks until the child opens its end
        except OSError:
            self._opened.set()
            return
        self._opened.set()
        out = open(self.dest, "wb")
        written = 0
        try:
            while not self._stop.is_set():
                r, _, _ = select.select([fd], [], [], 0.2)
                if not r:
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                self.total += len(chunk)
                if written < self.cap:
                    k = min(len(chunk), self.cap - written)
                    out.write(chunk[:k])
                    out.flush()  # readable while the script runs
                    written += k
                    chunk = chunk[k:]
                if chunk:
                    self.dropped += len(chunk)
                    self._tail += chunk
                    if len(self._tail) > self.tail_size:
                        del self._tail[:len(self._tail) - self.tail_size]
            if self.dropped:
                kept = len(self._tail)
                out.write(f"\n[tfpar-lint --verify: output truncated: {self.dropped - kept} bytes dropped after the "
                          f"first {self.cap} bytes; the last {kept} bytes follow]\n".encode())
                out.write(bytes(self._tail))
        finally:
            out.close()
            os.close(fd)

    def unblock(self) -> None:
        """The child never opened its end (spawn failed): let the reader see end of file."""
        if not self._opened.is_set():
            try:
                fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass

    def finish(self, timeout: float = 5.0) -> None:
        self.unblock()
        self.thread.join(timeout)
        if self.thread.is_alive():  # a writer escaped the kill and holds the pipe: stop reading
            self._stop.set()
            self.thread.join(2.0)


def read_text(path: str, limit: int) -> str:
    """The end of a captured output file (``limit`` bytes at most)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
