"""Opening a file beneath a folder without following any link, race-free.

Checking a path and then opening it by name is a race: a folder checked as real can be
swapped for a symlink before ``open`` walks through it (``O_NOFOLLOW`` guards only the last
component). So nothing here opens by a full path. With Linux's ``openat2`` (5.6+) the kernel
resolves the path relative to the root's descriptor with ``RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS``: one call that refuses any symlink, any
``/proc`` magic link and any step out of the root. Elsewhere (older kernels, seccomp
profiles that hide the call, other systems) the path is walked one component at a time from
the root's descriptor, each folder opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to the
previous one and the file with ``O_NOFOLLOW``, so a link anywhere is refused as well.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import sys
from collections.abc import Callable, Sequence
from typing import Final, Literal, TypeAlias

Strategy: TypeAlias = Literal["auto", "openat2", "walk"]
"""``auto``: openat2 where the kernel has it, else the walk; the others force one (tests)."""

_SYS_OPENAT2: Final = 437
"""The same number on every architecture with the unified syscall table."""
_UNIFIED_TABLE: Final = frozenset(
    {
        "x86_64",
        "amd64",
        "i386",
        "i686",
        "aarch64",
        "arm64",
        "armv7l",
        "armv6l",
        "riscv64",
        "ppc64le",
        "ppc64",
        "s390x",
        "loongarch64",
    }
)
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08
_FILE_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)
_FOLDER_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_PATH", 0)
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_LINK_ERRORS: Final = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})
_UNAVAILABLE: Final = frozenset({errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP})


class LinkRefused(Exception):
    """The path is, or passes through, a symbolic link (or leaves the folder)."""


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


class BeneathOpener:
    """Opens ``components`` below a root folder, refusing every link on the way.

    Raises :class:`LinkRefused` for a link (or an escape), ``FileNotFoundError`` for a
    missing file or folder, and other ``OSError`` as the kernel reports them.
    """

    def __init__(self, strategy: Strategy = "auto") -> None:
        self._syscall: Callable[..., int] | None = None
        if strategy != "walk" and _openat2_possible():
            syscall = ctypes.CDLL(None, use_errno=True).syscall
            syscall.restype = ctypes.c_long
            self._syscall = syscall
        elif strategy == "openat2":
            raise OSError(errno.ENOSYS, "openat2 is not available on this system")
        self._strict = strategy == "openat2"

    @property
    def uses_openat2(self) -> bool:
        return self._syscall is not None

    def open(self, root: str, components: Sequence[str]) -> int:
        """A read-only descriptor of ``root/components...``; the caller closes it."""
        if any(part in ("", ".", "..") or os.sep in part for part in components):
            raise LinkRefused("only plain names below the root")
        root_fd = os.open(root, _FOLDER_FLAGS)
        try:
            if not components:
                return os.dup(root_fd)
            if self._syscall is not None:
                opened = self._openat2(root_fd, components)
                if opened is not None:
                    return opened
            return _walk(root_fd, components)
        finally:
            os.close(root_fd)

    def _openat2(self, root_fd: int, components: Sequence[str]) -> int | None:
        """The descriptor, or None when the kernel turns out not to offer openat2."""
        assert self._syscall is not None
        how = _OpenHow(
            flags=_FILE_FLAGS,
            mode=0,
            resolve=_RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
        )
        path = os.fsencode(os.sep.join(components))
        for _attempt in range(3):
            result = self._syscall(
                ctypes.c_long(_SYS_OPENAT2),
                ctypes.c_int(root_fd),
                ctypes.c_char_p(path),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
            if result >= 0:
                return int(result)
            code = ctypes.get_errno()
            if code in (errno.EAGAIN, errno.EINTR):
                continue
            if code in _UNAVAILABLE and not self._strict:
                self._syscall = None  # e.g. a seccomp profile that hides the call
                return None
            if code in (errno.ELOOP, errno.EXDEV):
                raise LinkRefused(os.strerror(code))
            if code == errno.ENOTDIR:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
            raise OSError(code, os.strerror(code))
        raise LinkRefused("the path kept changing while it was opened")


def _openat2_possible() -> bool:
    return sys.platform == "linux" and platform.machine().lower() in _UNIFIED_TABLE


def _walk(root_fd: int, components: Sequence[str]) -> int:
    """One component at a time from ``root_fd``, never following a link."""
    folder = os.dup(root_fd)
    try:
        for name in components[:-1]:
            try:
                inner = os.open(name, _FOLDER_FLAGS, dir_fd=folder)
            except OSError as exc:
                _raise_for(exc, name, folder)
                raise
            os.close(folder)
            folder = inner
        name = components[-1]
        try:
            return os.open(name, _FILE_FLAGS, dir_fd=folder)
        except OSError as exc:
            _raise_for(exc, name, folder)
            raise
    finally:
        os.close(folder)


def _raise_for(exc: OSError, name: str, folder: int) -> None:
    """A link as LinkRefused, a file used as a folder as FileNotFoundError."""
    if exc.errno not in _LINK_ERRORS:
        return
    try:
        mode = os.lstat(name, dir_fd=folder).st_mode
    except OSError:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT)) from None
    if stat.S_ISLNK(mode):
        raise LinkRefused(os.strerror(errno.ELOOP)) from None
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT)) from None
