"""The memory of a whole session where no cgroup bounds it: a sampler that kills the
sandbox when all its processes together hold more than the session's limit.

An ordinary user gets no cgroup it may limit on most machines (no delegated subtree, no
user systemd), and ``RLIMIT_AS`` bounds one process only: eight forks of a 200 MB process
hold 1.6 GB. So, for each sandbox, a thread of the host samples what the sandbox holds
and, once the sum is above the limit, sends ``SIGKILL`` to the sandbox's PID namespace
init (through a pidfd: never a reused pid), which takes every process of the namespace
down with it.

What is counted, every :data:`INTERVAL` seconds:

* every process below the ``bwrap`` the host started — the whole PID namespace, found by
  following ``/proc/<pid>/task/<tid>/children`` from it. Forks cannot hide: a new process
  is a child of one already counted, and an orphan (double fork, ``setsid``) is re-parented
  to the namespace's init, which is in the tree and cannot be left. A process re-parented
  between two reads of one walk may be missed by that one sample, never by the next;
* of each, the anonymous and shared-memory pages it has resident. First cheaply, in full
  (``RssAnon`` + ``RssShmem`` of ``/proc/<pid>/status``); when that sum is over the limit,
  each process's proportional share (``Pss_Anon`` + ``Pss_Shmem`` of
  ``/proc/<pid>/smaps_rollup``), so that pages shared after a fork are counted once over
  all the processes sharing them, not once per process (six forks of a process holding
  100 MB are 100 MB, not 700 MB). A share never exceeds the full count, so the cheap sum
  within the limit means the exact one is too;
* the space used in the sandbox's own writable tmpfs mounts, ``/tmp`` and ``/dev/shm``
  (``/dev`` itself is read-only): files there hold memory without being mapped by any
  process (a file that is also mapped is counted twice — on the safe side);
* every :data:`WORKDIR_EVERY` samples, the files of the working directory
  (:func:`directory_bytes`): it lives on the host's filesystem, where only each file is
  bounded (``file_size_mb``), so twenty files of 60 MB held 1.2 GB — memory where the
  host's temporary directory is a tmpfs, disk elsewhere; and the files removed from it
  that a process still holds open or mapped (:func:`removed_files_bytes`);
* every socket of the sandbox's network namespace (``sockets: used`` of its
  ``/proc/<init>/net/sockstat``: it sees no other) at what one socket can hold queued,
  :func:`socket_allowance`. Socket buffers are kernel memory no process maps: sixty
  socket pairs whose send buffers were raised to the host's ``wmem_max`` held 941 MB
  against a limit of 256 MB, 28 forks with the default buffers 1.7 GB. So the seccomp
  filter refuses raising a buffer and each socket is charged the host's default send
  buffer plus one packet (about 270 KB; 208 KB found queued per socket at most), whether
  it holds data or not: a session of 256 MB may have about 950 sockets open.

``memfd_create`` and System V shared memory, which hold memory no process maps and no
mount shows, are refused by the seccomp filter. Pipe buffers are not counted: the kernel
bounds them per user (``fs.pipe-user-pages-soft``: 64 MB, then 8 KB a pipe; measured:
114 MB for 32 processes filling every pipe they could open).

Why a sampler is sound here. It reacts only once per interval, so the sum may exceed the
limit between two samples; by how much is bounded twice over. The code cannot hold more
than ``max_processes`` × ``memory_mb`` plus the two tmpfs sizes plus ``max_processes`` ×
``RLIMIT_NOFILE`` sockets at any instant (each process has ``RLIMIT_AS``, their number
``RLIMIT_NPROC``, each tmpfs its size, each socket the default buffer). And within
one interval plus the time of one sample it can add only what its processes fault in
meanwhile: page faults run at a few GB/s per core, so with the default 25 ms and two cores
a few hundred MB at the very worst, for tens of milliseconds (measured: eight forks of
100 MB against 256 MB were stopped at 258-281 MB). It bounds how long the session stays
above its limit, not the peak as a cgroup does; where a cgroup can be had, it is used.

Cost: one sample reads two small ``/proc`` files per process (its threads' ``children``
and its ``status``; ``smaps_rollup`` only when the first sum is over the limit) and makes
two ``statvfs`` calls and one read of ``sockstat``; every read is bounded in size and
the walk in the number of processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import threading
import time
from collections.abc import Iterable

INTERVAL = 0.025
"""Seconds between two samples."""
_READ_LIMIT = 8192
"""Bytes read of one ``smaps_rollup`` (about 1 KB) or ``children`` file at most."""
MOUNTS = ("tmp", "dev/shm")
"""The sandbox's own tmpfs mounts, below ``/proc/<init>/root``."""
_SOCKET_PACKET = 65536
"""What one send may queue beyond a full send buffer (the kernel checks before it adds)."""
_DEFAULT_SEND_BUFFER = 212992
"""Linux's ``net.core.wmem_default``, when the host's cannot be read."""
_PROPORTIONAL = (b"Pss_Anon:", b"Pss_Shmem:")
_RESIDENT = (b"RssAnon:", b"RssShmem:")


def _read(path: str) -> bytes:
    """At most :data:`_READ_LIMIT` bytes of ``path`` (empty when it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, _READ_LIMIT)
    except OSError:
        return b""
    finally:
        os.close(fd)


def session_pids(root: int, limit: int) -> list[int]:
    """``root`` and the processes below it, parents first, at most ``limit`` of them."""
    found: list[int] = []
    seen: set[int] = set()
    pending = [root]
    while pending and len(found) < limit:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks[:limit]:
            pending.extend(int(n) for n in _read(f"/proc/{pid}/task/{task}/children").split())
    return found


def _kilobytes(text: bytes, fields: tuple[bytes, ...]) -> int:
    """The sum of the ``Name:  N kB`` lines of ``text`` named in ``fields``, in bytes."""
    total = 0
    for field in fields:
        start = text.find(b"\n" + field)
        if start < 0:
            continue
        start += len(field) + 1
        end = text.find(b"kB", start)
        if end < 0:
            continue
        with contextlib.suppress(ValueError):
            total += int(text[start:end]) * 1024
    return total


def resident_bytes(pid: int) -> int:
    """The anonymous and shared memory ``pid`` has resident, shared pages counted in full
    (``RssAnon`` + ``RssShmem`` of ``/proc/<pid>/status``: cheap, an upper bound of
    :func:`process_bytes`)."""
    return _kilobytes(_read(f"/proc/{pid}/status"), _RESIDENT)


def process_bytes(pid: int) -> int:
    """The anonymous and shared memory ``pid`` holds, its share of shared pages."""
    return _kilobytes(_read(f"/proc/{pid}/smaps_rollup"), _PROPORTIONAL)


def mounts_bytes(init: int, mounts: Iterable[str] = MOUNTS) -> int:
    """Space used in the sandbox's tmpfs mounts, seen through its init's root."""
    total = 0
    for mount in mounts:
        with contextlib.suppress(OSError):
            usage = os.statvfs(f"/proc/{init}/root/{mount}")
            total += (usage.f_blocks - usage.f_bfree) * usage.f_frsize
    return total


_ENTRY_BYTES = 4096
"""What one entry of the working directory is charged at least (one block)."""
_MAX_DEPTH = 64
"""Directories nested deeper than this are not walked: the whole walk is then charged over
the limit (legitimate code does not nest so deep; the walk holds one descriptor a level)."""
WORKDIR_EVERY = 10
"""The working directory is walked every this many samples (every 250 ms)."""
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def directory_bytes(path: str, budget: int) -> int:
    """What the files below ``path`` take: their allocated blocks, each inode once, each
    entry at least :data:`_ENTRY_BYTES`. Walked through descriptors without following a
    link (the code can swap a folder for a link to the host's ``/`` mid-walk: it is seen as
    the link it is). The walk stops once the sum is over ``budget``, so its cost is bounded
    by ``budget / _ENTRY_BYTES`` entries; a directory it may not read, or nested deeper
    than :data:`_MAX_DEPTH`, makes the sum ``budget + 1`` (it could hide anything)."""
    try:
        root = os.open(path, _DIRECTORY_FLAGS)
    except OSError:
        return 0
    total = 0
    seen: set[int] = set()
    stack: list[tuple[int, list[str]]] = [(root, [])]
    try:
        opened = True
        while stack:
            fd, folders = stack[-1]
            if opened:
                opened = False
                if len(stack) > _MAX_DEPTH:
                    return budget + 1
                with os.scandir(fd) as entries:
                    for entry in entries:
                        try:
                            info = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue  # removed meanwhile
                        size = max(info.st_blocks * 512, _ENTRY_BYTES)
                        total += _ENTRY_BYTES if info.st_ino in seen else size
                        seen.add(info.st_ino)
                        if total > budget:
                            return total
                        if stat.S_ISDIR(info.st_mode):
                            folders.append(entry.name)
            if not folders:
                os.close(fd)
                stack.pop()
                continue
            try:
                child = os.open(folders.pop(), _DIRECTORY_FLAGS, dir_fd=fd)
            except PermissionError:
                raise
            except OSError:
                continue  # gone, or swapped for a link or a file meanwhile
            stack.append((child, []))
            opened = True
    except PermissionError:
        return budget + 1
    except OSError:
        return total
    finally:
        for fd, _ in stack:
            os.close(fd)
    return total


_MAPS_LIMIT = 1 << 20
"""Bytes of one ``/proc/<pid>/maps`` read at most (about 10,000 mappings): a process with
more is charged over the limit rather than read in part (a mapping past the part read
could hide a removed file)."""


def _maps(pid: int) -> bytes | None:
    """``/proc/<pid>/maps`` (empty when gone), ``None`` when longer than the bound."""
    try:
        fd = os.open(f"/proc/{pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := os.read(fd, 65536):
            size += len(chunk)
            if size > _MAPS_LIMIT:
                return None
            chunks.append(chunk)
    except OSError:
        return b"".join(chunks)
    finally:
        os.close(fd)
    return b"".join(chunks)


def removed_files_bytes(pids: Iterable[int], device: int, budget: int) -> int:
    """What files of ``device`` (the working directory's filesystem) that were removed but
    are still open or mapped by ``pids`` take: the walk of the directory no longer sees
    them, the disk (or tmpfs) still holds them (eight such files of 60 MB held 480 MB).
    An open one counts its blocks, a mapped one the mapping's size; each inode once."""
    held: dict[int, int] = {}
    wanted = f"{os.major(device):02x}:{os.minor(device):02x}".encode()
    for pid in pids:
        with contextlib.suppress(OSError):
            for name in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    info = os.stat(f"/proc/{pid}/fd/{name}")
                    removed = stat.S_ISREG(info.st_mode) and info.st_nlink == 0
                    if removed and info.st_dev == device:
                        blocks = info.st_blocks * 512
                        held[info.st_ino] = max(held.get(info.st_ino, 0), blocks)
        text = _maps(pid)
        if text is None:
            return budget + 1
        for line in text.splitlines():
            if not line.endswith(b" (deleted)"):
                continue
            fields = line.split(maxsplit=5)
            if len(fields) < 6 or fields[3] != wanted:
                continue
            with contextlib.suppress(ValueError):
                start, _, end = fields[0].partition(b"-")
                inode = int(fields[4])
                size = int(end, 16) - int(start, 16)
                held[inode] = max(held.get(inode, 0), size)
    return sum(held.values())


def socket_allowance() -> int:
    """What one socket of the sandbox can hold queued at most: the host's default send
    buffer (the code cannot raise its own: seccomp) plus one packet past it. A Unix
    socket's queued data is charged to its sender's buffer, wherever it waits."""
    try:
        default = int(_read("/proc/sys/net/core/wmem_default").split()[0])
    except (ValueError, IndexError):
        default = _DEFAULT_SEND_BUFFER
    return max(default, _DEFAULT_SEND_BUFFER) + _SOCKET_PACKET


def sockets_bytes(init: int, allowance: int) -> int:
    """The sockets of ``init``'s network namespace (in flight in a message too), each
    charged ``allowance`` bytes."""
    text = _read(f"/proc/{init}/net/sockstat")
    start = text.find(b"sockets: used ")
    if start < 0:
        return 0
    start += len(b"sockets: used ")
    end = text.find(b"\n", start)
    try:
        return int(text[start : end if end >= 0 else len(text)]) * allowance
    except ValueError:
        return 0


def session_bytes(
    root: int,
    init: int,
    *,
    max_processes: int,
    limit_bytes: int,
    mounts: Iterable[str] = MOUNTS,
    socket_bytes: int = 0,
    files_bytes: int = 0,
) -> int:
    """One sample of what the sandbox started at ``root`` holds, in bytes: the cheap upper
    bound (resident pages counted in every process sharing them) when that is within
    ``limit_bytes``, else the proportional count (each shared page once over its sharers).
    The proportional count is exact but costs the kernel a walk of every page table, about
    ten times the cheap one; it is needed only when sharing after forks could be all that
    puts the bound above the limit. ``socket_bytes`` is what each socket of the
    sandbox's network namespace is charged (0: sockets are not counted), ``files_bytes``
    what the working directory holds (:func:`directory_bytes`)."""
    pids = session_pids(root, max_processes)
    tmpfs = mounts_bytes(init, mounts) + files_bytes
    if socket_bytes:
        tmpfs += sockets_bytes(init, socket_bytes)
    bound = sum(resident_bytes(pid) for pid in pids) + tmpfs
    if bound <= limit_bytes:
        return bound
    return sum(process_bytes(pid) for pid in pids) + tmpfs


class MemoryWatch:
    """The sampler of one sandbox: started once its tree is known, stopped with it.

    ``root`` is the host's child (``bwrap``), ``init`` the PID namespace's init below it.
    The watch holds its own pidfds on both, so a kill never reaches a reused pid.
    ``mounts`` are the tmpfs mounts counted, relative to the init's root; ``workdir`` the
    host's path of the sandbox's working directory, walked every :data:`WORKDIR_EVERY`
    samples. ``socket_bytes`` is what each socket of the init's network namespace is
    charged (``None``: :func:`socket_allowance`; ``0``: sockets are not counted, for a tree
    that shares the host's namespace, whose sockets are not its own).
    """

    def __init__(
        self,
        *,
        root: int,
        init: int,
        limit_bytes: int,
        max_processes: int,
        interval: float = INTERVAL,
        mounts: tuple[str, ...] = MOUNTS,
        workdir: str | None = None,
        socket_bytes: int | None = None,
    ) -> None:
        self.limit_bytes = limit_bytes
        self._workdir = workdir
        self._root = root
        self._init = init
        self._max_processes = max_processes + 4  # bwrap, its init, slack for a dying one
        self._interval = interval
        self._mounts = mounts
        self._socket_bytes = socket_allowance() if socket_bytes is None else socket_bytes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.exceeded_bytes: int | None = None
        """What the session held when it was stopped (``None``: it was not)."""
        self.samples = 0
        self.cpu_seconds = 0.0
        """CPU time the sampler has used (its own thread's)."""

    def start(self) -> None:
        """Open the pidfds (while the processes surely exist) and start sampling; the
        thread owns them and closes them when it ends."""
        pidfds: list[int] = []
        for pid in (self._init, self._root):
            with contextlib.suppress(OSError):
                pidfds.append(os.pidfd_open(pid))
        self._thread = threading.Thread(
            target=self._run, args=(pidfds,), name=f"jarvis-repl-memory-{self._root}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (waits for the sampler to end). Idempotent."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    def _files(self) -> int:
        """What the working directory holds: its files, and those removed from it that
        the session's processes still hold open or mapped."""
        assert self._workdir is not None
        files = directory_bytes(self._workdir, self.limit_bytes)
        try:
            device = os.stat(self._workdir).st_dev
        except OSError:
            return files
        pids = session_pids(self._root, self._max_processes)
        return files + removed_files_bytes(pids, device, self.limit_bytes)

    def _run(self, pidfds: list[int]) -> None:
        try:
            files = 0
            while not self._stop.wait(self._interval):
                began = time.thread_time()
                if self._workdir is not None and self.samples % WORKDIR_EVERY == 0:
                    files = self._files()
                used = session_bytes(
                    self._root,
                    self._init,
                    max_processes=self._max_processes,
                    limit_bytes=self.limit_bytes,
                    mounts=self._mounts,
                    socket_bytes=self._socket_bytes,
                    files_bytes=files,
                )
                self.samples += 1
                self.cpu_seconds += time.thread_time() - began
                if used > self.limit_bytes:
                    self.exceeded_bytes = used  # set before the kill: read once the worker ends
                    for fd in pidfds:
                        with contextlib.suppress(OSError):
                            signal.pidfd_send_signal(fd, signal.SIGKILL)
                    return
        finally:
            for fd in pidfds:
                with contextlib.suppress(OSError):
                    os.close(fd)
