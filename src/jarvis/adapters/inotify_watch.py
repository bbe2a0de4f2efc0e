"""Readings of small files kept between runs, dropped the moment one of the files changes.

Every run puts the persona files, the ``AGENTS.md`` files of the working directory and the
skill folders into its prompt, and an edit of any of them must count from the next run
on, also in a long-running server. Looking at the disk for each run costs about eight
system calls, and a system call between two requests costs several times what it costs
in a tight loop: it was a quarter of jarvis's own CPU per run. Linux's inotify says the
same with one ``read`` that finds nothing: :class:`KeptReading` keeps a reading with the
names it depended on, each name watched in its folder (and every folder on the way, so a
renamed or relinked folder counts too), and reads the disk again only after a notice.

No timing is involved: the kernel queues the notice inside the writer's own system call,
before the edit returns, so the run after an edit sees it. Each name is watched as the
kernel resolves the path (every link on the way, and where it leads), and the file itself
too (a write through another hard link is told only there). A notice about a name no
reading depended on (the traces database beside the persona files) changes nothing. Two
changes send no notice at all: a write through a shared memory map, until it is unmapped,
and a mount over a folder on the way.

Where inotify cannot be used (not Linux, the per-user limit of instances or watches
reached, a folder that cannot be watched, a child process after ``fork``), the reading
is made from disk at every call, as without a watch. A process that makes a reading only
once (``jarvis ask``) never opens a watch: a reading is kept from its second call on.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")

_MODIFY, _ATTRIB, _CLOSE_WRITE = 0x2, 0x4, 0x8
_MOVED_FROM, _MOVED_TO, _CREATE, _DELETE = 0x40, 0x80, 0x100, 0x200
_DELETE_SELF, _MOVE_SELF, _UNMOUNT, _OVERFLOW, _IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
_ONLYDIR = 0x01000000
_FOLDER_MASK = (
    _MODIFY
    | _ATTRIB
    | _CLOSE_WRITE
    | _MOVED_FROM
    | _MOVED_TO
    | _CREATE
    | _DELETE
    | _DELETE_SELF
    | _MOVE_SELF
    | _ONLYDIR
)
_FILE_MASK = _MODIFY | _ATTRIB | _CLOSE_WRITE | _DELETE_SELF | _MOVE_SELF
_START_OVER = _DELETE_SELF | _MOVE_SELF | _UNMOUNT | _OVERFLOW | _IGNORED
"""A watched folder gone, moved or unmounted, or notices lost: every reading is stale and
the watches are set up again."""

_HEADER = struct.Struct("iIII")
_REMOTE_FILESYSTEMS = frozenset(
    {
        0x6969,  # NFS
        0x517B,  # SMB
        0xFF534D42,  # CIFS
        0xFE534D42,  # SMB2
        0x65735546,  # FUSE (sshfs, virtiofs, ...)
        0x00C36400,  # Ceph
        0x01021997,  # 9P (WSL's and many VMs' shared folders)
        0x5346414F,  # AFS
        0x73757245,  # Coda
        0x01161970,  # GFS2
        0x7461636F,  # OCFS2
        0x0BD00BD0,  # Lustre
        0x564C,  # NCP
        0x786F4256,  # VirtualBox shared folders
    }
)
"""Filesystems whose files other machines (or the host) change without a notice here: a
folder on one of them is never watched, and every reading is made from disk."""
MAX_FOLDERS = 512
"""Folders watched at most by one watch; past it, it starts over (a long-lived server that
changes its working directory often)."""
MAX_KEPT = 16
"""Readings one :class:`KeptReading` keeps (one per working directory or persona)."""

Reader = Callable[[_K], "Read[_V]"]


@dataclass(frozen=True, slots=True)
class Read(Generic[_V]):
    """A reading from disk and what it depended on: ``paths`` (files or folders, present
    or not) and ``listed`` (folders whose every entry counts, as a listing's)."""

    value: _V
    paths: tuple[str, ...] = ()
    listed: tuple[str, ...] = ()


_Calls = tuple[Callable[[int], int], Callable[[int, bytes, int], int], Callable[[bytes], int]]
"""``inotify_init1``, ``inotify_add_watch``, and the filesystem type of a folder."""


def _libc_inotify() -> _Calls | None:
    import ctypes  # on the first watch only: a process that reads once never needs it

    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the C library Python itself is linked to
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):  # not Linux
        return None
    init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
    add.argtypes, add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
    statfs = libc.statfs
    statfs.argtypes, statfs.restype = [ctypes.c_char_p, ctypes.c_void_p], ctypes.c_int

    def filesystem(folder: bytes) -> int:
        """``f_type`` of ``statfs(2)`` (its first field on every Linux), -1 if unknown."""
        buffer = ctypes.create_string_buffer(512)  # larger than any struct statfs
        if statfs(folder, buffer) != 0:
            return -1
        return ctypes.c_ulong.from_buffer(buffer).value & 0xFFFFFFFF

    return init, add, filesystem


MAX_LINKS = 40
"""Links followed at most while resolving one path (the kernel's own limit)."""


def _resolution(path: str) -> tuple[list[str], str]:
    """Every path met while resolving ``path`` one component at a time (each link's own
    path, then each one it leads through, ``..`` taken after the link as the kernel takes
    it), and where it ends: a change of any of them can change what ``path`` reads."""
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    pending = [name for name in reversed(path.split(os.sep)) if name]
    current, visited, links = os.sep, [], 0
    while pending:
        name = pending.pop()
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, name)
        visited.append(step)
        try:
            link = stat.S_ISLNK(os.lstat(step).st_mode) and links < MAX_LINKS
            target = os.readlink(step) if link else ""
        except OSError:  # missing (its creation is watched by name) or unreadable
            link = False
        if link:
            links += 1
            pending.extend(name for name in reversed(target.split(os.sep)) if name)
            current = os.sep if os.path.isabs(target) else current
        else:
            current = step
    return visited, current


@dataclass(slots=True)
class _Watches:
    fd: int
    close: Callable[[], object]
    """Closes ``fd`` once (also when the watch is collected, never twice: a second close
    could close a file opened since under the same number)."""
    folders: dict[str, int] = field(default_factory=dict)
    """Folder path → watch descriptor (two paths of one folder share one)."""
    names: dict[int, set[str] | None] = field(default_factory=dict)
    """Watch descriptor → the names of that folder a reading depended on; ``None``: all."""


class InotifyWatch:
    """One inotify instance and the names readings depended on; safe to share between
    threads. :meth:`generation` changes whenever one of those names may have changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._watches: _Watches | None = None
        self._usable = True
        self._calls: _Calls | None = None
        self._fork_hooked = False

    def generation(self) -> int | None:
        """The count of notices so far (after reading those queued), or ``None`` when
        nothing can be watched: then every reading is to be made from disk."""
        with self._lock:
            if not self._usable:
                return None
            if self._watches is not None:
                self._drain(self._watches)
            return self._generation if self._usable else None

    def watch(self, paths: Iterable[str], listed: Iterable[str] = ()) -> bool | None:
        """Watch each of ``paths`` by name in its folder, and every folder on its way; and
        every entry of each of ``listed``. ``True``: something was not watched before;
        ``False``: all of it was; ``None``: it cannot be watched (keep nothing)."""
        with self._lock:
            if not self._usable:
                return None
            watches = self._watches or self._open()
            if watches is None:
                return None
            added = False
            try:
                for path in paths:
                    added |= self._watch_path(watches, path)
                for folder in listed:
                    visited, real = _resolution(folder)
                    for step in visited:
                        added |= bool(self._watch_name(watches, *os.path.split(step)))
                    added |= bool(self._watch_name(watches, real, None))
            except _CannotWatch:  # for good: trying again would cost more than reading
                self._usable = False
                self._start_over()
                return None
            if len(watches.names) > MAX_FOLDERS:
                self._start_over()
                return None
            return added

    def _watch_path(self, watches: _Watches, path: str) -> bool:
        """Watch every name met on the way to ``path``, links and where they lead included,
        and the file it ends at itself: a write through another hard link of it is told
        only there."""
        visited, real = _resolution(path)
        added = False
        for step in visited:
            result = self._watch_name(watches, *os.path.split(step))
            if result is None:
                break  # the folder is missing: its creation is watched above
            added |= result
        else:
            added |= self._watch_file(watches, real)
        return added

    def _watch_file(self, watches: _Watches, path: str) -> bool:
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                return False
        except OSError:
            return False
        if path in watches.folders:
            return False
        assert self._calls is not None
        wd = self._calls[1](watches.fd, os.fsencode(path), _FILE_MASK)
        if wd < 0:
            return False  # gone since: its folder's watch tells
        watches.folders[path] = wd
        added = wd not in watches.names
        watches.names[wd] = None
        return added

    def close(self) -> None:
        """Close the inotify instance (a later reading opens a new one)."""
        with self._lock:
            self._start_over()

    # -- inside the lock ---------------------------------------------------------------

    def _open(self) -> _Watches | None:
        if self._calls is None:
            self._calls = _libc_inotify()
            if self._calls is None:  # not Linux
                self._usable = False
                return None
        if self._watches is None and not self._fork_hooked:
            # once, when a watch is first opened (a process that reads once never gets
            # here): the hook, a few hundred bytes, stays for the process's life
            self._fork_hooked = True
            self_ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _forked(self_ref))
        fd = self._calls[0](os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:  # the per-user limit of instances: read from disk
            self._usable = False
            return None
        self._watches = _Watches(fd, weakref.finalize(self, _close_quietly, fd))
        return self._watches

    def _watch_name(self, watches: _Watches, folder: str, name: str | None) -> bool | None:
        """Watch ``name`` (``None``: every name) in ``folder``; ``None`` if the folder is
        missing, True if this was not watched yet."""
        wd = watches.folders.get(folder)
        if wd is None:
            assert self._calls is not None
            encoded = os.fsencode(folder)
            wd = self._calls[1](watches.fd, encoded, _FOLDER_MASK)
            if wd < 0:
                import ctypes

                code = ctypes.get_errno()
                if code in (errno.ENOENT, errno.ENOTDIR):
                    return None
                raise _CannotWatch(code)  # EACCES, ENOSPC (the watch limit)...
            if self._calls[2](encoded) in _REMOTE_FILESYSTEMS:
                raise _CannotWatch(folder)
            watches.folders[folder] = wd
        names = watches.names.get(wd, set())
        if names is None:
            return False
        if name is None:
            watches.names[wd] = None
            return True
        if name in names:
            watches.names.setdefault(wd, names)
            return False
        names.add(name)
        watches.names[wd] = names
        return True

    def _drain(self, watches: _Watches) -> None:
        while True:
            try:
                data = os.read(watches.fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                self._start_over()
                return
            if not data:
                return
            if self._any_relevant(watches, data) and self._watches is None:  # started over
                return

    def _any_relevant(self, watches: _Watches, data: bytes) -> bool:
        offset, relevant = 0, False
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size : offset + _HEADER.size + length]
            offset += _HEADER.size + length
            if mask & _START_OVER:
                self._start_over()
                return True
            names = watches.names.get(wd, set())
            if names is None or os.fsdecode(raw.rstrip(b"\x00")) in names:
                relevant = True
        if relevant:
            self._generation += 1
            # a folder's path may lead elsewhere now (a link retargeted): the next watch
            # adds each path again, and the kernel gives a folder it has its number back
            watches.folders.clear()
        return relevant

    def _start_over(self) -> None:
        self._generation += 1
        watches, self._watches = self._watches, None
        if watches is not None:
            watches.close()


class _CannotWatch(Exception):
    pass


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _forked(ref: weakref.ref[InotifyWatch]) -> None:
    """In a child after ``fork``: the instance is shared with the parent, whose reads take
    the notices; the child reads from disk."""
    watch = ref()
    if watch is not None:
        watch._lock = threading.Lock()  # another thread of the parent may have held it
        watch._usable = False
        watch._watches = None


class KeptReading(Generic[_K, _V]):
    """``read(key)``, kept per key until ``watch`` has a notice about what it depended on.

    With no watch (or one that cannot watch) every call reads. The first call of a key is
    read without a watch: a process that asks once opens none."""

    def __init__(self, read: Reader[_K, _V], watch: InotifyWatch | None) -> None:
        self._read = read
        self._watch = watch
        self._kept: dict[_K, tuple[int, _V]] = {}
        self._seen: set[_K] = set()

    def __call__(self, key: _K) -> _V:
        watch = self._watch
        if watch is None:
            return self._read(key).value
        generation = watch.generation()
        if generation is None:
            return self._read(key).value
        kept = self._kept.get(key)
        if kept is not None and kept[0] == generation:
            return kept[1]
        read = self._read(key)
        if key not in self._seen:
            if len(self._seen) >= MAX_KEPT:
                self._seen.clear()
            self._seen.add(key)
            return read.value
        added = watch.watch(read.paths, read.listed)
        if added is None:
            return read.value
        if added:  # read again, now that a change to any of it is noticed
            generation = watch.generation()
            read = self._read(key)
            if generation is None or watch.watch(read.paths, read.listed) is not False:
                return read.value
        if len(self._kept) >= MAX_KEPT:
            self._kept.clear()
        self._kept[key] = (generation, read.value)
        return read.value
