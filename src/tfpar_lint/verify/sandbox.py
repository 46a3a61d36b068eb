"""Containment of a verified script (Linux namespaces; Python-level guard as the fallback).

``namespaces`` mode (used when :func:`probe` succeeds):

* the child enters a new user, mount and PID namespace (the user namespace
  maps the caller's own uid and gid, so files keep their owners);
* the whole file tree is bound read-only, and every directory that can be
  (the highest folders with no mount point below them: ``/work``, ``/home``,
  ``/tmp``, ``/root``, ...) gets an overlay whose upper layer is a tmpfs
  private to the run: the script reads every file it would read under
  ``python script.py`` and its writes land in that tmpfs, which disappears
  with the run (AutoGraph's temp files and the script's temp folders too);
* ``/dev/shm`` is a fresh tmpfs and ``/proc`` a fresh procfs of the new
  PID namespace (the script sees its own processes only);
* the script runs as PID 1 of its PID namespace: when it ends, or when its
  relay process outside the namespace is killed (``PR_SET_PDEATHSIG``), the
  kernel kills every process it started (``setsid`` children, children that
  ignore SIGTERM, ``multiprocessing`` workers, double forks);
* workers of a local cluster share the user, mount and network namespaces of
  a holder process (:class:`ClusterHolder`): one file view, as on one machine,
  and a network whose only interface is loopback, so TensorFlow's gRPC servers
  cannot be reached from outside it.

``python`` mode (no namespaces on this machine): writes outside the run's
scratch folder are redirected, copy-on-write, to a mirror under it
(:mod:`tfpar_lint.verify.redirect`): from Python, ``os``, ``shutil`` and
``pathlib``, from ``h5py`` files opened by name, and through TensorFlow's file
layer (gfile, ``tf.io.write_file``/``read_file``, checkpoints, SavedModel,
summaries).  The script reads back what it wrote and goes on running.  An
audit hook still refuses what could not be redirected (a write Python's file
layer sees outside those entry points), starting other programs, and killing
the verifier's processes.

No TensorFlow import at module level (the driver probes from the CLI process).
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import Optional

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}

# Mount points never overlaid nor made read-only: the kernel's own trees.
PSEUDO = ("/proc", "/sys", "/dev")
PSEUDO_FS = {"proc", "sysfs", "devtmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "securityfs", "debugfs",
             "tracefs", "pstore", "bpf", "fusectl", "configfs", "hugetlbfs", "autofs", "binfmt_misc", "nsfs",
             "efivarfs", "rpc_pipefs"}
TMPFS_SIZE = os.environ.get("TFPAR_VERIFY_SCRATCH_SIZE", "50%")  # of RAM: writes beyond it get ENOSPC

_libc = None
_STATE: dict = {}


def _lib():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(ret: int, what: str) -> None:
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(src: Optional[str], target: str, fstype: Optional[str], flags: int, data: Optional[str] = None) -> None:
    lib = _lib()
    _check(lib.mount(src.encode() if src else None, target.encode(), fstype.encode() if fstype else None,
                     ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def prctl(option: int, arg: int) -> None:
    _check(_lib().prctl(option, ctypes.c_ulong(arg), 0, 0, 0), "prctl")


def is_subreaper() -> bool:
    try:
        v = ctypes.c_int(0)
        lib = _lib()
        return lib.prctl(37, ctypes.byref(v), 0, 0, 0) == 0 and bool(v.value)  # PR_GET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def set_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented to it (Linux). True when this call set it."""
    if is_subreaper():
        return False
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        return True
    except (OSError, AttributeError):
        return False


def die_with_parent(expected_parent: Optional[int] = None) -> None:
    """``PR_SET_PDEATHSIG`` = SIGKILL: this process dies when the thread that started it does (every
    link of a run's chain of processes sets it, so SIGKILL of tfpar-lint takes the whole tree
    down).  With ``expected_parent``, leave at once when that parent is already gone (it died
    before the call)."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(137)


def reaper_split(stacks: Optional[int] = None, dirfd: Optional[int] = None) -> None:
    """The fallback's process cleanup (no PID namespace): this process becomes the run's subreaper
    and stays outside the script (:func:`_reaper`, never returns); the script runs in the forked
    child, which returns.  Whatever the script starts (``setsid``, a double fork, ``execve``) is
    re-parented to the reaper when its parent dies, and the reaper kills all that is left once the
    script has ended.  Every process the script forks from Python dies with its parent
    (``PR_SET_PDEATHSIG``, set after each fork), so SIGKILL of the chain above leaves nothing.
    ``stacks``, the read end of the stack dumps' pipe: the reaper keeps their last part in
    ``stacks.txt`` of the run folder ``dirfd``, as the relay does in the sandbox."""
    set_subreaper()
    sys.stdout.flush()
    sys.stderr.flush()
    me = os.getpid()
    pid = os.fork()
    if pid:
        if stacks is not None and dirfd is not None:
            threading.Thread(target=_keep_stacks, args=(stacks, dirfd), daemon=True).start()
        _reaper(pid)  # never returns
    if stacks is not None:
        os.close(stacks)
    die_with_parent(me)
    try:
        os.register_at_fork(after_in_child=_pdeathsig_after_fork)
    except AttributeError:  # pragma: no cover
        pass


def _keep_stacks(fd: int, dirfd: int) -> None:
    """The reaper's thread: the last :data:`STACKS_MAX` bytes of the stack dumps, in ``stacks.txt``."""
    import select
    import time

    tail = _Tail(STACKS_MAX)
    dirty, last = False, 0.0
    try:
        while True:
            if select.select([fd], [], [], 0.2)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                tail.add(chunk)
                dirty = True
                if time.monotonic() - last < 0.5:
                    continue  # a stream of writes: the file is rewritten at most twice a second
            if dirty:
                _write_result(dirfd, STACKS_NAME, bytes(tail.buf))
                dirty, last = False, time.monotonic()
        if dirty:
            _write_result(dirfd, STACKS_NAME, bytes(tail.buf))
    except OSError:
        return


def _pdeathsig_after_fork() -> None:
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _reaper(pid: int) -> None:
    code = 70
    try:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # the driver's SIGTERM is for the script
        status = None
        while status is None:
            try:
                done, st = os.waitpid(-1, 0)  # adopted orphans are reaped here as they end
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if done == pid:
                status = st
        kill_below()
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        code = os.waitstatus_to_exitcode(status) if status is not None else 70
    except BaseException:  # pragma: no cover
        pass
    os._exit(code if code >= 0 else 70)


def kill_below(seconds: float = 5.0) -> int:
    """SIGKILL every process below this one, again and again (a process forked meanwhile, an
    orphan re-parented here), reaping them, until none is left or ``seconds`` have passed.
    Returns how many were killed."""
    import time

    from tfpar_lint.verify import procs

    me = os.getpid()
    end = time.time() + seconds
    killed: set = set()
    while True:
        below = procs.descendants([me]) - {me}
        live = {p for p in below if not _is_zombie(p)}
        procs.kill(live)
        killed |= live
        while True:
            try:
                done, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                done = 0
            if not done:
                break
        if not below or time.time() > end:
            return len(killed)
        time.sleep(0.01)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return True
    return data[data.rfind(b")") + 2:][:1] in (b"Z", b"X")


def _unescape(s: str) -> str:
    """Mount points in mountinfo escape space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) + 0 and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _mounts() -> list[tuple[str, set, str]]:
    """(mount point, per-mount options, fs type) in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            try:
                sep = parts.index("-")
            except ValueError:
                continue
            out.append((_unescape(parts[4]), set(parts[5].split(",")), parts[sep + 1]))
    return out


_FLAG_OF = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
            "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}


def _flags(opts: set) -> int:
    fl = 0
    for o in opts:
        fl |= _FLAG_OF.get(o, 0)
    if not fl & (MS_NOATIME | MS_RELATIME):
        fl |= MS_STRICTATIME
    return fl


def _escape_opt(path: str) -> str:
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


class Contained:
    """What :func:`enter` set up (reported by the child)."""

    def __init__(self, mode: str, detail: str):
        self.mode = mode
        self.detail = detail


def enter(scratch: str, cwd: str, cluster_pid: Optional[int] = None, result: Optional[tuple[int, str]] = None,
          sync: Optional[str] = None, keep: tuple = (), stacks: Optional[int] = None,
          writable: tuple = ()) -> Contained:
    """Called by the child before the script: split into a relay (this process,
    outside the namespaces; never returns) and the contained process (returns).

    ``scratch`` is an empty folder of the run (a tmpfs is mounted on it inside
    the namespace); ``cwd`` is where the script runs.  A worker of a local
    cluster joins the cluster's namespaces instead (``cluster_pid``, see
    :class:`ClusterHolder`): the workers share one file view (what one writes,
    the other reads, as on one machine) and one loopback-only network.

    ``result`` is ``(dirfd, name)``: the run folder, opened before the sandbox.
    Only the relay keeps that descriptor (a directory descriptor from outside
    would let the script walk up to the real tree with ``..``); the contained
    process sends its result through a pipe (:func:`send_result`) and the relay
    writes the file, at most :data:`RESULT_MAX` bytes.  ``stacks`` is the read end of the
    pipe the contained process's stack dumps go to (``faulthandler``): the relay keeps its last
    :data:`STACKS_MAX` bytes and writes them to ``stacks.txt`` in the run folder.  The relay also
    answers the seccomp filter's refusals and writes their list to ``refused.json``
    (:func:`lock`).  ``sync`` is a real folder bound, writable, at :data:`SYNC_DIR` inside (only
    when a cluster's worker has no holder; a holder keeps that folder in its scratch tmpfs).
    ``writable``: folders the script must be able to write in (its temporary folder and
    ``HOME``), besides ``cwd``.  Before returning, the contained process locks the sandbox
    (:func:`lock`), closing every inherited descriptor of a real file or folder but ``keep`` (the
    verifier's own files of the run)."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    lib = _lib()
    if cluster_pid:
        for ns, fl in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET), ("mnt", CLONE_NEWNS)):
            fd = os.open(f"/proc/{cluster_pid}/ns/{ns}", os.O_RDONLY)
            try:
                _check(lib.setns(fd, fl), f"setns {ns}")
            finally:
                os.close(fd)
        _check(lib.unshare(flags), "unshare")
    else:
        _unshare_user(flags | CLONE_NEWUSER, uid, gid)
    sys.stdout.flush()
    sys.stderr.flush()
    rfd, wfd = os.pipe()
    relay_sock, inner_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid:
        os.close(wfd)
        inner_sock.close()
        _relay(pid, rfd, result, stacks=stacks, notify=relay_sock)  # never returns
    os.close(rfd)
    relay_sock.close()
    if stacks is not None:
        os.close(stacks)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if result is not None:
        os.close(result[0])
    _STATE["result_fd"] = wfd
    _STATE["notify_sock"] = inner_sock
    if cluster_pid:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        proc = _fresh_proc()
        os.chdir(cwd)
        detail = (f"the cluster's user/mount/network namespaces, own PID/IPC namespaces, {proc}; "
                  f"writes go to the cluster's private overlay")
    else:
        detail = _build_root(scratch, cwd, sync=sync, writable=writable)
    return Contained("namespaces", detail + "; " + lock(keep=(wfd, inner_sock.fileno()) + tuple(keep)))


# Where a local cluster's workers find their shared folder inside the sandbox (see ``sync`` of :func:`enter`).
SYNC_DIR = "/dev/shm/.tfpar-verify-sync"


def send_result(data: bytes) -> bool:
    """Inside the sandbox: hand the run's result to the relay, which writes it outside.  False
    when this process is not in the sandbox (the caller writes the file itself)."""
    fd = _STATE.pop("result_fd", None)
    if fd is None:
        return False
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)
    return True


# Parts of /proc that change the kernel for the whole machine: read-only inside (bubblewrap's list,
# and Docker's /proc/fs).
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")


def _fresh_proc() -> str:
    """A procfs of this PID namespace on /proc, its kernel settings read-only.  Before that, the
    System V shared memory limits of this process's own IPC namespace are set to the scratch
    quota (a 1 GiB ``shmget`` segment would otherwise be allowed, outside every quota)."""
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        what = "fresh /proc"
    except OSError:
        what = "host /proc"
    quota = scratch_bytes()
    for name, value in (("shmmax", quota), ("shmall", max(1, quota // 4096))):
        try:
            with open(f"/proc/sys/kernel/{name}", "w") as f:
                f.write(str(value))
        except OSError:
            pass
    ro = []
    for part in PROC_READONLY:
        path = "/proc/" + part
        if not os.path.exists(path):
            continue
        try:
            _mount(path, path, None, MS_BIND | MS_REC)
            _readonly_below(path)
            ro.append(part)
        except OSError:
            return f"{what} (its {path} could not be made read-only)"
    return f"{what} ({', '.join('/proc/' + p for p in ro)} read-only)"


def _readonly_below(top: str) -> None:
    """Remount read-only every mount at or below ``top`` (keeping its locked flags)."""
    for mp, opts, _fstype in _mounts():
        if _under(mp, top) and "ro" not in opts:
            _mount(None, mp, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _flags(opts))


def scratch_bytes() -> int:
    """The scratch quota (``TFPAR_VERIFY_SCRATCH_SIZE``: bytes, a k/m/g suffix, or a percentage of
    RAM, as tmpfs reads it) in bytes."""
    text = str(TMPFS_SIZE).strip().lower()
    try:
        if text.endswith("%"):
            return int(_ram_bytes() * float(text[:-1]) / 100)
        mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
        return int(float(text[:-1] if text[-1:] in "kmg" else text) * mult)
    except ValueError:
        return _ram_bytes() // 2


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return 8 << 30


def _unshare_user(flags: int, uid: int, gid: int, what: str = "unshare") -> None:
    """``unshare(flags)`` (a new user namespace among them), then its id maps.

    Where this process may map every id of its user namespace (root, or root of a user namespace
    with its capabilities), a helper forked before the unshare, still outside, writes an identity
    map of all of them: files of other users and groups keep their owners inside, so an overlay
    can copy them up (with one id mapped, a file of another owner gets EOVERFLOW on its first
    write).  An ordinary user may map only their own uid and gid (the kernel's rule, without a
    setuid helper): :func:`_write_maps`."""
    lib = _lib()
    maps = _identity_maps() if os.geteuid() == 0 else None
    if not maps:
        _check(lib.unshare(flags), what)
        _write_maps(uid, gid)
        return
    me = os.getpid()
    go_r, go_w = os.pipe()
    ok_r, ok_w = os.pipe()
    helper = os.fork()
    if helper == 0:  # pragma: no cover - runs in the forked helper
        done = b"0"
        try:
            os.close(go_w)
            os.close(ok_r)
            if os.read(go_r, 1) == b"x":  # the parent has unshared
                # setgroups stays allowed: a process mapping every id from outside may leave it so,
                # and the lock (:func:`_drop_caps`) must drop root's supplementary groups.
                for name, text in (("uid_map", maps[0]), ("gid_map", maps[1])):
                    with open(f"/proc/{me}/{name}", "w") as fh:
                        fh.write(text)
                done = b"1"
        except BaseException:  # noqa: BLE001
            pass
        try:
            os.write(ok_w, done)
        finally:
            os._exit(0)
    os.close(go_r)
    os.close(ok_w)
    try:
        ret = lib.unshare(flags)
        err = ctypes.get_errno()
        os.write(go_w, b"x" if ret == 0 else b"-")
    finally:
        os.close(go_w)
    try:
        done = os.read(ok_r, 1)
    finally:
        os.close(ok_r)
        os.waitpid(helper, 0)
    if ret != 0:
        raise OSError(err, f"{what}: {os.strerror(err)}")
    if done != b"1":  # the full map was refused: the caller's own ids only
        _write_maps(uid, gid)


def _identity_maps() -> Optional[tuple[str, str]]:
    """Identity maps of every uid and gid this user namespace maps (``uid_map``, ``gid_map`` text)."""
    out = []
    for name in ("uid_map", "gid_map"):
        try:
            with open(f"/proc/self/{name}") as fh:
                lines = [ln.split() for ln in fh.read().splitlines() if ln.strip()]
        except OSError:
            return None
        out.append("\n".join(f"{a} {a} {n}" for a, _b, n in lines))
    return (out[0], out[1]) if all(out) else None


def _write_maps(uid: int, gid: int) -> None:
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


# What the relay takes from the contained process (the script can write to every one of these
# channels: it runs in that process).  A result larger than RESULT_MAX is dropped whole, never cut.
RESULT_MAX = 16 << 20
STACKS_MAX = 64 << 10  # the last bytes of the stack dumps kept (stacks.txt)
REFUSED_MAX = 64  # distinct refused calls listed (refused.json); the count goes on
STACKS_NAME = "stacks.txt"
REFUSED_NAME = "refused.json"


class _Tail:
    """The last ``cap`` bytes of a stream, and how many came in all."""

    def __init__(self, cap: int):
        self.cap = cap
        self.buf = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buf += chunk
        if len(self.buf) > self.cap:
            del self.buf[:len(self.buf) - self.cap]


class _Refusals:
    """The answers to the seccomp filter's notifications (:func:`lock`): every call the filter
    stops is refused here with EPERM and counted by name."""

    # <linux/seccomp.h>: struct seccomp_notif (80 bytes), struct seccomp_notif_resp (24 bytes)
    RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV
    SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND

    def __init__(self):
        self.fd: Optional[int] = None
        self.counts: dict = {}
        self.total = 0
        self._names: dict = {}

    def name(self, nr: int) -> str:
        if nr not in self._names:
            label = f"syscall {nr}"
            try:
                import pyseccomp as sc

                label = sc.resolve_syscall(sc.system_arch(), nr).decode() or label
            except Exception:  # noqa: BLE001 - a number is still a name
                pass
            self._names[nr] = label
        return self._names[nr]

    def answer(self) -> bool:
        """Take one notification and refuse its call.  False when the filter has no process left."""
        import fcntl

        buf = bytearray(80)
        try:
            fcntl.ioctl(self.fd, self.RECV, buf, True)
        except InterruptedError:
            return True
        except OSError as e:
            return e.errno == errno.ENOENT  # the caller died before we read it
        nid, _pid, _fl, nr = struct.unpack_from("=QIIi", buf, 0)
        try:
            fcntl.ioctl(self.fd, self.SEND, bytearray(struct.pack("=QqiI", nid, 0, -errno.EPERM, 0)), True)
        except OSError:
            pass
        self.total += 1
        label = self.name(nr)
        if label in self.counts or len(self.counts) < REFUSED_MAX:
            self.counts[label] = self.counts.get(label, 0) + 1
        return True


def _relay(pid: int, rfd: int, result: Optional[tuple[int, str]], stacks: Optional[int] = None,
           notify: Optional[socket.socket] = None) -> None:
    """Outside the PID namespace: wait for its init (the script), write the result it sent
    through ``rfd`` into the run folder, keep the tail of its stack dumps (``stacks``), answer
    its seccomp filter (the listener arrives through ``notify``), and leave with its status.
    The driver's SIGTERM reaches the script directly (same process group); this process ignores
    it so that the script can write its result.  Never blocks on the contained process: every
    wait has a timeout, so a refused call is answered while the script still runs."""
    code = 70
    try:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        data = bytearray()
        too_big = False
        tail = _Tail(STACKS_MAX)
        refusals = _Refusals()
        status = None
        reading = {rfd} | ({stacks} if stacks is not None else set())
        sock = notify
        import select
        import time

        dirty = False
        last_flush = 0.0
        drain_until = None
        while True:
            watch_fds = list(reading) + ([sock.fileno()] if sock is not None else []) + (
                [refusals.fd] if refusals.fd is not None else [])
            if status is not None:
                # The namespace's init is gone, and the kernel ended its other processes first: read
                # what is left, briefly.
                drain_until = drain_until or time.monotonic() + 2.0
                if not reading or time.monotonic() > drain_until:
                    break
            ready = select.select(watch_fds, [], [], 0.2)[0] if watch_fds else []
            for fd in ready:
                if sock is not None and fd == sock.fileno():
                    try:
                        _msg, fds, _fl, _addr = socket.recv_fds(sock, 16, 1)
                    except OSError:
                        fds = []
                    if fds:
                        refusals.fd = fds[0]
                    sock.close()
                    sock = None
                elif fd == refusals.fd:
                    if not refusals.answer():
                        os.close(refusals.fd)
                        refusals.fd = None
                else:
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        reading.discard(fd)
                    elif fd == rfd:
                        if not too_big and len(data) + len(chunk) <= RESULT_MAX:
                            data += chunk
                        else:  # dropped whole: a cut JSON text is no result
                            too_big = True
                            data = bytearray()
                    else:
                        tail.add(chunk)
                        dirty = True
            if dirty and result is not None and time.monotonic() - last_flush > 0.2:
                # Written as it comes: the driver's SIGKILL may end this process before the script.
                _write_result(result[0], STACKS_NAME, bytes(tail.buf))
                dirty = False
                last_flush = time.monotonic()
            if status is None:
                try:
                    done, st = os.waitpid(pid, os.WNOHANG)
                except InterruptedError:
                    continue
                if done:
                    status = st
        if result is not None:
            if data and not too_big:
                _write_result(result[0], result[1], bytes(data))
            if dirty:
                _write_result(result[0], STACKS_NAME, bytes(tail.buf))
            if refusals.total or too_big:
                _write_result(result[0], REFUSED_NAME, json.dumps(
                    {"refused": refusals.counts, "total": refusals.total,
                     "result_dropped": RESULT_MAX if too_big else 0}).encode())
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        code = os.waitstatus_to_exitcode(status)
    except BaseException:  # pragma: no cover
        pass
    os._exit(code if code >= 0 else 70)


def _write_result(dfd: int, name: str, data: bytes) -> None:
    """Write ``name`` in the folder ``dfd`` atomically.  Never through a link: the script
    could have put one there (a cluster's workers can write their shared folder)."""
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        os.unlink(tmp, dir_fd=dfd)
    except OSError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)


# Device nodes of the fresh /dev (bubblewrap's --dev set), bound from the host's; GPU nodes are
# bound too where the machine has them (a run on the GPUs needs them).
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_NODES = ("nvidia", "dri", "nvidia-caps", "kfd")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}
NOBODY = 65534  # the script's uid and gid when tfpar-lint runs as root and root owns its folder
GRANT_MAX = 4000  # folders of the working tree handed to that uid (see :func:`_grant`)


def _build_root(scratch: str, cwd: str, proc: bool = True, sync: Optional[str] = None,
                writable: tuple = (), cluster: bool = False) -> str:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    original = _mounts()
    os.makedirs(scratch, exist_ok=True)
    _mount("tfpar-verify", scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"size={TMPFS_SIZE},mode=700")
    root = os.path.join(scratch, "root")
    os.mkdir(root)
    _mount("/", root, None, MS_BIND | MS_REC)
    # Everything read-only first: the kernel's trees too (/sys, cgroups, debugfs, binfmt_misc ...);
    # /dev and /proc are replaced below.
    for mp, opts, _fstype in _mounts():
        if not _under(mp, root) or "ro" in opts:
            continue
        # A mount left writable here would be the user's real files: no sandbox rather than a leaky one.
        _mount(None, mp, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _flags(opts))
    points = {mp for mp, _, _ in original}
    kinds = {mp: (opts, fstype) for mp, opts, fstype in original}
    counter = [0]
    overlaid: list[str] = []
    readonly: list[str] = []

    def overlay(d: str) -> bool:
        counter[0] += 1
        up = os.path.join(scratch, "up", str(counter[0]))
        wk = os.path.join(scratch, "wk", str(counter[0]))
        os.makedirs(up)
        os.makedirs(wk)
        try:  # the top of the overlay shows the upper folder's owner and mode: give it the real one's
            st = os.stat(d)
            os.chmod(up, st.st_mode & 0o7777)
            os.lchown(up, st.st_uid, st.st_gid)
        except OSError:
            pass  # an ordinary user maps only their own ids
        data = f"lowerdir={_escape_opt(d)},upperdir={_escape_opt(up)},workdir={_escape_opt(wk)}"
        for extra in (",userxattr", ""):
            try:
                _mount("overlay", root + d, "overlay", 0, data + extra)
                return True
            except OSError:
                continue
        return False

    def cover(d: str) -> None:
        if any(_under(d, p) for p in PSEUDO) or _under(d, scratch):
            return
        kind = kinds.get(d)
        if kind is not None and (kind[1] in PSEUDO_FS or "ro" in kind[0]):
            return  # read-only file systems stay read-only
        below = [p for p in points if p != d and _under(p, d)]
        if not below:
            if overlay(d):
                overlaid.append(d)
            else:
                readonly.append(d)
            return
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    cover(os.path.join(d, e.name) if d != "/" else "/" + e.name)
            except OSError:
                continue

    cover("/")
    dev = _fresh_dev(root, scratch)
    _hide_cgroups(root)
    if sync:  # a worker without a holder: the cluster's shared folder, a bind mount (``..`` stays inside)
        os.makedirs(root + SYNC_DIR, exist_ok=True)
        _mount(sync, root + SYNC_DIR, None, MS_BIND)
    elif cluster:  # the holder: the workers' shared folder lives in /dev/shm, inside the scratch quota
        os.makedirs(root + SYNC_DIR, mode=0o1777, exist_ok=True)
        os.chmod(root + SYNC_DIR, 0o1777)
    os.chdir(root)
    nr = _PIVOT_ROOT.get(platform.machine())
    if nr is None:
        raise OSError(errno.ENOSYS, f"pivot_root: unknown machine {platform.machine()}")
    _check(_lib().syscall(nr, b".", b"."), "pivot_root")
    _check(_lib().umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir("/")
    procfs = _fresh_proc() if proc else "host /proc"
    who = _grant((cwd,) + tuple(writable), reach=_python_paths())
    os.chdir(cwd)
    return (f"user/mount/PID/IPC namespaces, {procfs}, {dev}, /sys read-only without cgroups; "
            f"writes go to a private overlay on {len(overlaid)} folder{'s' if len(overlaid) != 1 else ''}"
            + (f"; read-only: {', '.join(readonly[:5])}" if readonly else "") + (f"; {who}" if who else ""))


def _fresh_dev(root: str, scratch: str) -> str:
    """A new /dev (a small read-only tmpfs): the harmless nodes and the GPU's bound from the host's,
    a new devpts, and /dev/shm as a folder of the run's scratch tmpfs (inside its quota)."""
    dev = root + "/dev"
    _mount("tfpar-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=512,mode=755")
    bound = []

    def bind(name: str) -> None:
        src, dst = "/dev/" + name, dev + "/" + name
        try:
            if os.path.isdir(src) and not os.path.islink(src):
                os.makedirs(dst, exist_ok=True)
                _mount(src, dst, None, MS_BIND | MS_REC)
            else:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                open(dst, "a").close()
                _mount(src, dst, None, MS_BIND)
            bound.append(name)
        except OSError:
            pass

    for name in DEV_NODES:
        if os.path.exists("/dev/" + name):
            bind(name)
    try:
        host = sorted(os.listdir("/dev"))
    except OSError:
        host = []
    gpu = [n for n in host if any(n == g or (g == "nvidia" and n.startswith("nvidia")) for g in GPU_NODES)]
    for name in gpu:
        bind(name)
    for name, target in DEV_LINKS.items():
        try:
            os.symlink(target, f"{dev}/{name}")
        except OSError:
            pass
    os.makedirs(dev + "/pts", exist_ok=True)
    try:
        _mount("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    except OSError:
        pass
    shm = os.path.join(scratch, "shm")
    os.makedirs(shm, exist_ok=True)
    os.chmod(shm, 0o1777)
    os.makedirs(dev + "/shm", exist_ok=True)
    _mount(shm, dev + "/shm", None, MS_BIND)
    _mount(None, dev, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    return "fresh /dev (" + ", ".join(bound[:len(DEV_NODES)]) + (f"; GPU: {', '.join(gpu)}" if gpu else "") + ")"


def _hide_cgroups(root: str) -> None:
    """The host's cgroup trees are no business of the script: an empty read-only tmpfs covers them."""
    top = root + "/sys/fs/cgroup"
    if os.path.isdir(top):
        _mount("tfpar-nocgroup", top, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=555")


def script_ids(cwd: str) -> Optional[tuple[int, int]]:
    """The uid and gid the script runs as when tfpar-lint is root: the owner of its working folder,
    or :data:`NOBODY` when that is root.  None when tfpar-lint is not root (the script keeps the
    user's own ids, already unprivileged)."""
    if os.geteuid() != 0:
        return None
    try:
        st = os.stat(cwd)
    except OSError:
        return NOBODY, NOBODY
    if st.st_uid == 0:
        return NOBODY, NOBODY
    return st.st_uid, (st.st_gid if st.st_gid != 0 else NOBODY)


def _python_paths() -> list:
    """The folders the script's interpreter reads from: its prefixes, its executable's folder and
    ``sys.path`` (modules it has not imported yet, TensorFlow's plug-ins)."""
    out = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    out += [p for p in sys.path if p and os.path.isabs(p)]
    seen: list = []
    for p in out:
        for q in (p, os.path.realpath(p)):
            if q not in seen:
                seen.append(q)
    return seen


def _reach(path: str, uid: int, gid: int) -> int:
    """Let ``uid`` search every folder above ``path`` (and ``path`` itself) in the view, where it
    could not: ``o+x`` on the overlay's copy (``/root`` is 0700, and Python often lives below it).
    Nothing is listed or read that was not: only the way through.  Returns how many changed."""
    import stat as stat_mod

    n = 0
    parts = os.path.abspath(path).split("/")
    for i in range(2, len(parts) + 1):
        a = "/".join(parts[:i]) or "/"
        try:
            st = os.stat(a)
        except OSError:
            return n
        if not stat_mod.S_ISDIR(st.st_mode):
            return n
        bit = stat_mod.S_IXUSR if st.st_uid == uid else stat_mod.S_IXGRP if st.st_gid == gid else stat_mod.S_IXOTH
        if not st.st_mode & bit:
            try:
                os.chmod(a, stat_mod.S_IMODE(st.st_mode) | stat_mod.S_IXOTH | (stat_mod.S_IXGRP if bit ==
                                                                              stat_mod.S_IXGRP else 0))
                n += 1
            except OSError:
                pass
    return n


GRANT_FILE_MAX = 1 << 20  # files of the working tree handed over too: each at most this large,
GRANT_FILES_BYTES = 16 << 20  # at most this much in all (each is copied into the overlay's tmpfs)


def _grant(tops: tuple, reach: list = ()) -> str:
    """Run as root, the script runs as an unprivileged uid (:func:`script_ids`): in its view (the
    overlay; the real files keep their owners), what it writes in is handed to that uid: the
    working folder and the folders below it (at most :data:`GRANT_MAX`, hidden ones left out, the
    nearest first), its temporary folder and ``HOME``; and the small files there (each at most
    :data:`GRANT_FILE_MAX`, :data:`GRANT_FILES_BYTES` in all: handing a file over copies it into the
    tmpfs).  It creates, replaces and deletes files there; a larger file owned by root stays root's,
    and writing it in place fails, as it would for any unprivileged user (the report says so)."""
    ids = script_ids(tops[0]) if tops else None
    if ids is None:
        return ""
    uid, gid = ids
    _STATE["script_ids"] = ids
    for p in list(reach) + [t for t in tops if t]:
        _reach(p, uid, gid)
    import collections
    import stat as stat_mod

    n = files = 0
    budget = GRANT_FILES_BYTES
    for top in tops:
        if not top or not os.path.isdir(top):
            continue
        todo = collections.deque([top])
        while todo and n < GRANT_MAX:
            d = todo.popleft()
            try:
                os.lchown(d, uid, gid)
                n += 1
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                try:
                    st = e.stat(follow_symlinks=False)
                    if stat_mod.S_ISDIR(st.st_mode):
                        if not e.name.startswith(".") and not os.path.ismount(e.path):
                            todo.append(e.path)
                    elif (stat_mod.S_ISREG(st.st_mode) and st.st_uid != uid and st.st_size <= GRANT_FILE_MAX
                          and st.st_size <= budget and st.st_nlink == 1):
                        os.lchown(e.path, uid, gid)
                        budget -= st.st_size
                        files += 1
                except OSError:
                    continue
    return (f"the script runs as uid {uid}, gid {gid} (tfpar-lint is root), owning {n} folder{'s' if n != 1 else ''} "
            f"and {files} file{'s' if files != 1 else ''} of its view")


# -------------------------------------------------------------------- lock
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED... with their locks: uid 0 gets no
# capability back through execve or setuid.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200
# System calls that change mounts or namespaces.  Inside the sandbox a seccomp filter makes them fail
# with EPERM; an audit hook notes each attempt the script makes through ctypes or another program
# (:func:`watch`), so the report can say that the script tried and was refused.
MOUNT_CALLS = ("mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
               "move_mount", "open_tree", "mount_setattr", "setns", "unshare")
REFUSED_CALLS = MOUNT_CALLS + ("ptrace", "kexec_load", "init_module", "finit_module", "delete_module")
_MOUNT_PROGRAMS = {"mount", "umount", "unshare", "nsenter", "pivot_root", "chroot", "bwrap", "newuidmap",
                   "newgidmap", "fusermount", "fusermount3"}
_CLONE_NS = (CLONE_NEWNS, 0x02000000, 0x04000000, 0x08000000, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET)


def lock(keep: tuple = ()) -> str:
    """Make the sandbox unchangeable from the script, in the contained process, once its mounts are
    built: the script holds CAP_SYS_ADMIN in the user namespace that built them and could otherwise
    unmount an overlay and remount the read-only bind below it writable.

    * descriptors of folders and files opened before the sandbox are closed (``..`` from a folder
      descriptor, or ``/proc/self/fd/N`` reopened, reaches the real tree), except ``keep``;
    * a nested user namespace with a copy of the mount namespace: the kernel locks every mount
      and its read-only flag against a less privileged namespace;
    * every capability dropped (bounding set, ambient set, securebits so that uid 0 gets none
      back), ``no_new_privs`` set;
    * a seccomp filter (libseccomp through ``pyseccomp``) refuses the mount and namespace calls,
      ``clone`` with namespace flags, and ``ptrace``.

    Returns what it did, for the run's notes.  Raises OSError when the namespace lock fails (the
    caller falls back rather than run an unlocked sandbox)."""
    _close_inherited(keep)
    uid, gid = os.getuid(), os.getgid()
    _unshare_user(CLONE_NEWUSER | CLONE_NEWNS, uid, gid, "unshare (lock)")
    ids = (_STATE.get("script_ids") or script_ids(os.getcwd())) if os.geteuid() == 0 else None
    _drop_caps(ids)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    how = ["mounts locked (nested user namespace)"]
    if ids:
        how.append(f"uid {ids[0]}, gid {ids[1]}, no supplementary groups")
    how += ["no capabilities", "no_new_privs"]
    how.append(_seccomp(_STATE.pop("notify_sock", None)))
    return ", ".join(how)


def _close_inherited(keep: tuple) -> None:
    import stat

    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            fds.append(int(name))
        except ValueError:
            continue
    for fd in fds:
        if fd <= 2 or fd in keep:
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
            try:
                os.close(fd)
            except OSError:
                pass


def _drop_caps(ids: Optional[tuple[int, int]] = None) -> None:
    """Every capability dropped for good; with ``ids``, first become that uid and gid, with no
    supplementary group (root's group 0 would open files of group root)."""
    lib = _lib()
    lib.prctl(PR_SET_SECUREBITS, ctypes.c_ulong(_SECUREBITS), 0, 0, 0)  # needs CAP_SETPCAP: before the drop
    for cap in range(64):
        if lib.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the kernel's last capability
    lib.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)
    if ids:
        u, g = ids
        os.setgroups([])
        os.setresgid(g, g, g)
        os.setresuid(u, u, u)
        if os.getuid() != u or os.getgid() != g or os.getgroups():
            raise OSError(errno.EPERM, f"could not become uid {u}, gid {g}")
        # A change of credentials clears the parent-death signal: set it again (the relay's death
        # must still take the script down), and leave if the relay died meanwhile.
        # (PID 1 of its namespace sees its parent as 0: the check is for a process that sees it.)
        parent = os.getppid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(137)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: none (two 32-bit words each)
    _check(lib.capset(header, data), "capset")


def _seccomp(notify: Optional[socket.socket] = None) -> str:
    """Load the filter; say which, or why none (the namespace lock alone already holds the mounts).

    With ``notify`` (a socket to the relay, outside), every call the filter refuses is sent to the
    relay as a seccomp user notification, which it answers with EPERM and counts by name
    (``refused.json``): a call made through ``syscall()``, machine code or another program is
    reported as well as one made from Python.  Without it (a kernel or libseccomp without
    notifications), the filter answers EPERM itself and only calls seen from Python are reported."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as e:  # no binding, or no libseccomp on this machine
        if notify is not None:
            notify.close()
        return f"no seccomp filter ({type(e).__name__}: {e})"

    def build(action):
        f = sc.SyscallFilter(sc.ALLOW)
        for name in REFUSED_CALLS:
            try:
                f.add_rule(action, name)
            except (OSError, ValueError, RuntimeError):
                continue  # a call this architecture lacks
        for flag in _CLONE_NS:
            f.add_rule(action, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        # clone3 passes its flags in memory, out of a filter's reach: "not implemented" makes the C
        # library fall back to clone, whose flags the rules above see.
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        return f

    try:
        if notify is not None:
            try:
                f = build(sc.NOTIFY)
                f.load()
                fd = sc._libseccomp.seccomp_notify_fd(f._filter)  # the listener of the filter just loaded
                if fd < 0:
                    raise OSError(-fd, "seccomp_notify_fd")
                socket.send_fds(notify, [b"n"], [fd])
                os.close(fd)
                return "seccomp filter on mount/namespace calls (each refusal reported)"
            except (OSError, ValueError, RuntimeError, AttributeError):
                pass  # loading a filter is all or nothing: none is in force, the plain one follows
            finally:
                notify.close()
        f = build(sc.ERRNO(errno.EPERM))
        f.load()
    except (OSError, ValueError, RuntimeError) as e:
        return f"no seccomp filter ({type(e).__name__}: {e})"
    return "seccomp filter on mount/namespace calls"


_ATTEMPTS: list = []  # what the script tried and was refused (see :func:`watch`)
_CTYPES_SYSCALL: dict = {}  # syscall number -> name, for the calls in MOUNT_CALLS


def watch(refuse: bool) -> None:
    """Note every attempt to change mounts or namespaces that the script makes through ctypes or
    another program (an audit hook; ``attempts()`` reads them).  With ``refuse`` (no sandbox: the
    Python-level guard), the attempt itself fails with PermissionError."""
    names = set(MOUNT_CALLS)
    try:
        import pyseccomp as sc

        arch = sc.system_arch()
        for n in MOUNT_CALLS:
            try:
                _CTYPES_SYSCALL[int(sc.resolve_syscall(arch, n))] = n
            except (OSError, ValueError, RuntimeError, TypeError):
                continue
    except (ImportError, OSError):
        pass
    syscall_addr: list = []

    def seen(what: str) -> None:
        if what not in _ATTEMPTS:
            _ATTEMPTS.append(what)
        if refuse:
            raise PermissionError(errno.EPERM, f"tfpar-lint --verify: {what} changes mounts or namespaces and "
                                               f"is refused")

    def hook(event, args):
        if getattr(_OWN, "on", False):
            return
        if event == "ctypes.dlsym" and len(args) > 1 and isinstance(args[1], str):
            if args[1] in names:
                seen(args[1])
            elif args[1] == "syscall" and not syscall_addr:
                syscall_addr.append(True)
        elif event == "ctypes.call_function" and syscall_addr and len(args) > 1 and args[1]:
            first = args[1][0]
            nr = getattr(first, "value", first)
            if isinstance(nr, int) and nr in _CTYPES_SYSCALL and _is_syscall(args[0]):
                seen(f"syscall({_CTYPES_SYSCALL[nr]})")
        elif event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn") and args:
            prog = os.path.basename(os.fsdecode(args[0])) if isinstance(args[0], (str, bytes, os.PathLike)) else ""
            if prog in _MOUNT_PROGRAMS:
                seen(f"the {prog} program")
        elif event == "os.system" and args:
            cmd = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else ""
            first = os.path.basename(cmd.split()[0]) if cmd.split() else ""
            if first in _MOUNT_PROGRAMS:
                seen(f"the {first} program")

    sys.addaudithook(hook)


def _is_syscall(addr) -> bool:
    """Whether ``addr`` is the C library's ``syscall`` (the script calls it through ctypes)."""
    if "syscall" not in _STATE:
        try:
            _STATE["syscall"] = ctypes.cast(_lib().syscall, ctypes.c_void_p).value
        except (AttributeError, OSError):
            _STATE["syscall"] = None
    return addr is not None and addr == _STATE["syscall"]


def attempts() -> list:
    return list(_ATTEMPTS)


# ----------------------------------------------------------------- network
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def _loopback_up() -> None:
    import fcntl

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
    finally:
        s.close()


def cluster_holder_main() -> int:
    """``python -m tfpar_lint.verify.sandbox --cluster SCRATCH CWD [WRITABLE ...]``: user, mount and
    network namespaces for one local cluster (the sandboxed file tree, loopback only; the workers'
    shared folder :data:`SYNC_DIR` in its scratch tmpfs), held open until stdin closes; the
    workers join them.  ``WRITABLE``: the folders of the workers' runs (their ``HOME`` and
    temporary folders)."""
    uid, gid = os.getuid(), os.getgid()
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _unshare_user(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS, uid, gid)
        _loopback_up()
        detail = _build_root(sys.argv[2], sys.argv[3], proc=False, writable=tuple(sys.argv[4:]), cluster=True)
    except OSError as e:
        print(json.dumps({"error": str(e)}), flush=True)
        return 1
    print(json.dumps({"ready": True, "pid": os.getpid(), "detail": detail}), flush=True)
    sys.stdin.read()
    return 0


class ClusterHolder:
    """Driver side: the namespaces of one local cluster."""

    def __init__(self, env: dict, scratch: str, cwd: str, writable: tuple = ()):
        os.makedirs(scratch, exist_ok=True)
        self.p = subprocess.Popen([sys.executable, "-m", "tfpar_lint.verify.sandbox", "--cluster", scratch, cwd]
                                  + list(writable),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, start_new_session=True, cwd=scratch)
        line = self.p.stdout.readline() if self.p.stdout else b""
        try:
            msg = json.loads(line or b"{}")
        except ValueError:
            msg = {}
        if not msg.get("ready"):
            self.close()
            raise OSError(msg.get("error") or "the cluster's namespaces could not be created")
        self.pid = int(msg["pid"])

    def close(self) -> None:
        try:
            if self.p.stdin:
                self.p.stdin.close()
            self.p.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            try:
                self.p.kill()
                self.p.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass


# ------------------------------------------------------------------- probe
def probe_main() -> int:
    """``python -m tfpar_lint.verify.sandbox --probe SCRATCH``: set the sandbox up once,
    write a file into the working directory from inside, check it did not land outside."""
    scratch = sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    cwd = os.getcwd()
    marker = os.path.join(scratch, "outside.txt")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            c = enter(os.path.join(scratch, "fs"), cwd)
            with open(marker, "w") as f:  # inside: lands in the overlay
                f.write("x")
            ok = os.path.exists(marker) and os.getpid() == 1
            os.write(w, json.dumps({"ok": ok, "detail": c.detail}).encode())
        except BaseException as e:
            os.write(w, json.dumps({"ok": False, "detail": f"{type(e).__name__}: {e}"}).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.waitpid(pid, 0)
    try:
        msg = json.loads(data or b"{}")
    except ValueError:
        msg = {"ok": False, "detail": "no answer"}
    if os.path.exists(marker):
        msg = {"ok": False, "detail": "a write from inside reached the real file system"}
    print(json.dumps(msg), flush=True)
    return 0 if msg.get("ok") else 1


_PROBED: dict = {}


SANDBOX_ENV = "TFPAR_VERIFY_SANDBOX"
MODES = ("auto", "namespaces", "none")


class Unavailable(OSError):
    """No sandbox on this machine, and running without one was not asked for by name."""


def requested(mode: Optional[str] = None) -> str:
    """The sandbox asked for: ``mode`` (``--sandbox``), else ``TFPAR_VERIFY_SANDBOX``, else auto.
    ``python`` (the fallback's earlier name) means none."""
    value = (mode or os.environ.get(SANDBOX_ENV, "") or "auto").strip().lower()
    value = "none" if value == "python" else value
    if value not in MODES:
        raise ValueError(f"unknown sandbox {value!r} (use one of: {', '.join(MODES)})")
    return value


def probe(scratch: str, env: dict, mode: Optional[str] = None) -> tuple[str, str]:
    """``("namespaces", detail)`` when the sandbox works here; ``("none", why)`` only when running
    without isolation was asked for by name (``--sandbox none`` or ``TFPAR_VERIFY_SANDBOX=none``).
    Raises :class:`Unavailable` otherwise: never a silent fall back."""
    want = requested(mode)
    if want == "none":
        return "none", ("--sandbox none" if mode else f"{SANDBOX_ENV}=none") + ": NOTHING IS ISOLATED"
    if not sys.platform.startswith("linux"):
        raise Unavailable(errno.ENOSYS, f"no Linux namespaces on {sys.platform}")
    if "result" not in _PROBED:
        try:
            os.makedirs(scratch, exist_ok=True)
            p = subprocess.run([sys.executable, "-m", "tfpar_lint.verify.sandbox", "--probe", scratch],
                               capture_output=True, env=env, timeout=30, cwd=scratch)
            msg = json.loads(p.stdout or b"{}")
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            msg = {"ok": False, "detail": str(e)}
        _PROBED["result"] = (bool(msg.get("ok")), str(msg.get("detail", "unknown")))
    ok, detail = _PROBED["result"]
    if not ok:
        raise Unavailable(errno.EPERM, f"the sandbox cannot be set up on this machine ({detail})")
    return "namespaces", detail


# ------------------------------------------------------- python-level guard
_OWN = threading.local()  # the verifier's own writes (its result) pass the guard


class own_writes:
    """``with own_writes(): ...`` lets the calling thread write (the child's result)."""

    def __enter__(self):
        _OWN.on = True

    def __exit__(self, *exc):
        _OWN.on = False


def install_python_guard(allowed: list[str], tf_too: bool = True, protected_pids=(),
                         overlay: Optional[str] = None) -> None:
    """Fallback: redirect writes outside ``allowed`` folders to a copy-on-write mirror under
    ``overlay`` (see :mod:`tfpar_lint.verify.redirect`), refuse what cannot be redirected
    (other programs, killing the verifier, writes through a way the mirror does not cover)."""
    protected = {int(p) for p in protected_pids if p}
    allow = [os.path.realpath(a).rstrip(os.sep) + os.sep for a in allowed]
    allow += ["/dev/null", "/dev/shm/", "/proc/self/", "/dev/fd/"]

    def inside(full: str) -> bool:
        return any(full == a.rstrip(os.sep) or full.startswith(a) for a in allow)

    def ok(path, dir_fd=None) -> bool:
        if isinstance(path, int) or path is None:
            return True
        try:
            p = os.fsdecode(path)
        except (TypeError, ValueError):
            return True
        if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(p):
            try:  # relative to a directory descriptor (shutil.rmtree, os.* with dir_fd=)
                p = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), p)
            except OSError:
                return False
        # the link itself (not its target) for symlink/unlink; realpath for the rest
        full = os.path.realpath(os.path.abspath(p))
        parent = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(p))), os.path.basename(p))
        return inside(full) and inside(parent)

    def refuse(what, path):
        raise PermissionError(errno.EACCES, f"tfpar-lint --verify: {what} outside the run's scratch folder refused "
                              f"(no sandbox: the Python-level guard runs, and this write could not be redirected)",
                              os.fsdecode(path) if not isinstance(path, int) else str(path))

    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def hook(event, args):
        if getattr(_OWN, "on", False):
            return
        if event in ("os.kill", "os.killpg") and args and isinstance(args[0], int) and (
                abs(args[0]) in protected or args[0] == -1):
            raise PermissionError(errno.EPERM, f"tfpar-lint --verify: {event}({args[0]}) would kill the verifier "
                                               f"and is refused")
        if event == "open" and args:
            path, mode = args[0], args[1] if len(args) > 1 else "r"
            flags = args[2] if len(args) > 2 else 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags)
            if writing and not ok(path):
                refuse("writing", path)
        elif event in ("os.rename", "os.link"):  # (src, dst, src_dir_fd, dst_dir_fd)
            for p, fd in ((args[0], _arg(args, 2)), (args[1], _arg(args, 3))):
                if not ok(p, fd):
                    refuse(event, p)
        elif event == "os.symlink":  # (target, link, dir_fd): the link is what gets written
            if not ok(args[1], _arg(args, 2)):
                refuse(event, args[1])
        elif event in _DIR_FD_AT:
            if args and not ok(args[0], _arg(args, _DIR_FD_AT[event])):
                refuse(event, args[0])
        elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn"):
            raise PermissionError(errno.EACCES, f"tfpar-lint --verify: starting another program ({event}) is "
                                                f"refused without a sandbox (the Python-level guard runs)")

    # The mirror: what the script writes outside ``allowed`` lands there, and it reads it back.
    from tfpar_lint.verify import redirect

    def allowed_path(a: str) -> bool:
        return inside(os.path.realpath(a)) and inside(a)

    _refuse_process_and_node_calls()
    ov = redirect.Overlay(overlay or os.path.join(os.path.realpath(allowed[0]), "overlay"), allowed_path)

    def own() -> bool:
        return getattr(_OWN, "on", False)

    redirect.install_python(ov, own)
    if tf_too:
        redirect.install_h5py(ov, own)
        redirect.install_tensorflow(ov, own)
    _STATE["overlay"] = ov
    sys.addaudithook(hook)  # last: what a wrapper above passes on is already mapped


# C library functions that start programs or make FIFOs and device nodes: refused through ctypes in
# the fallback (Python's own entry points to them are replaced by :func:`_refuse_process_and_node_calls`).
_PROCESS_SYMBOLS = {"execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve", "execveat",
                    "posix_spawn", "posix_spawnp", "system", "popen", "fork", "vfork", "clone", "clone3",
                    "mkfifo", "mkfifoat", "mknod", "mknodat"}


def _refuse_process_and_node_calls() -> None:
    """Fallback: the ways to start a program or make a FIFO or device node that no audit event
    announces (``_posixsubprocess.fork_exec``, behind subprocess and multiprocessing's spawn;
    ``os.posix_spawn``; ``os.mkfifo``, ``os.mknod``) raise PermissionError, and so do the C
    library's own through ctypes."""
    def refused(what):
        def f(*a, **kw):
            raise PermissionError(errno.EACCES, f"tfpar-lint --verify: {what} is refused without a sandbox "
                                                f"(the Python-level guard runs)")
        f.__name__ = what.rsplit(".", 1)[-1]
        return f

    try:
        import _posixsubprocess

        _posixsubprocess.fork_exec = refused("_posixsubprocess.fork_exec")
    except ImportError:  # pragma: no cover
        pass
    sp = sys.modules.get("subprocess")
    if sp is not None and getattr(sp, "_fork_exec", None) is not None:  # its own name for it
        sp._fork_exec = refused("_posixsubprocess.fork_exec")
    for name in ("posix_spawn", "posix_spawnp", "mkfifo", "mknod"):
        if hasattr(os, name):
            setattr(os, name, refused(f"os.{name}"))

    def hook(event, args):
        if event == "ctypes.dlsym" and len(args) > 1 and args[1] in _PROCESS_SYMBOLS and not getattr(_OWN, "on", 0):
            raise PermissionError(errno.EACCES, f"tfpar-lint --verify: {args[1]} through ctypes is refused "
                                                f"without a sandbox (the Python-level guard runs)")

    sys.addaudithook(hook)


# audit event -> position of its dir_fd argument (None: it has none)
_DIR_FD_AT = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 2, "os.chmod": 2, "os.chown": 3, "os.utime": 3,
              "os.truncate": None, "os.chflags": None, "os.lchflags": None, "os.setxattr": None,
              "os.removexattr": None, "shutil.rmtree": 1, "os.mkfifo": 2, "os.mknod": 3}


def _arg(args, i):
    return args[i] if i is not None and len(args) > i else None


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--cluster":
        sys.exit(cluster_holder_main())
    if len(sys.argv) > 2 and sys.argv[1] == "--probe":
        sys.exit(probe_main())
    sys.exit(2)
