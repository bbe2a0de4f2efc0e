"""Removal of a session's leftovers, in the host and by a reaper process that outlives it.

:func:`remove_tree` deletes a working directory whatever the code did to it: folders it
made read-only (``chmod 500``) are made writable again first, symbolic links are removed,
never followed, and nesting depth costs no recursion. It raises when something stays.

Run as a script (``python -I -S -B reaper.py``), this is the reaper: one small process per
REPL factory, started with the first session, in a session of its own so that a terminal's
Ctrl-C or hang-up does not reach it. The host writes to its stdin which directories and
cgroups exist (``+dir PATH``, ``-dir PATH``, ``+cgroup PATH``, ``-cgroup PATH``). When the
host ends in any way — return, exception, SIGTERM, SIGHUP, even SIGKILL — its end of the pipe
closes; the reaper then kills whatever is left in the registered cgroups, removes them and
the registered directories, and exits. (The sandbox processes themselves die with the host
already: bubblewrap's ``--die-with-parent``.)

Standard library only: it runs on the host's interpreter without jarvis on its path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import time

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RemovalError(OSError):
    """A working directory could not be removed completely."""


def _unlock(name: str, dir_fd: int | None = None) -> None:
    """Give the owner back read, write and search on the folder ``name`` (below ``dir_fd``)
    that the code made unreadable (``chmod 300`` or ``000``): as an ordinary user it could
    not be opened to be emptied. Opened with ``O_PATH`` and changed through its descriptor,
    so a link put in its place is never followed."""
    with contextlib.suppress(OSError):
        handle = os.open(
            name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd
        )
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)
        finally:
            os.close(handle)


def _open_folder(name: str, dir_fd: int | None = None) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        _unlock(name, dir_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _empty(fd: int) -> None:
    """Remove everything inside the directory open at ``fd``, depth first, iteratively."""
    stack: list[tuple[int, str]] = []  # (parent fd, name of the directory below it)
    current = fd
    try:
        while True:
            with contextlib.suppress(OSError):
                os.fchmod(current, 0o700)
            child: str | None = None
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        child = entry.name
                        break
                    os.unlink(entry.name, dir_fd=current)
            if child is not None:
                below = _open_folder(child, current)
                stack.append((current, child))
                current = below
                continue
            if not stack:
                return
            parent, name = stack.pop()
            os.close(current)
            current = parent
            os.rmdir(name, dir_fd=current)
    finally:
        if current != fd:
            os.close(current)
        for parent, _ in stack:
            if parent != fd:
                os.close(parent)


def remove_tree(path: str) -> None:
    """Delete ``path`` and everything in it; raises :class:`RemovalError` when it stays."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    last: OSError | None = None
    for _ in range(3):  # a process still dying may add an entry once
        try:
            fd = _open_folder(path)
            try:
                _empty(fd)
            finally:
                os.close(fd)
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            last = exc
            time.sleep(0.01)
    raise RemovalError(f"could not remove {path}: {last}")


def _remove_cgroup(path: str) -> None:
    for _ in range(500):
        try:
            with open(os.path.join(path, "cgroup.procs")) as members:
                pids = [int(n) for n in members.read().split()]
        except OSError:
            pids = []
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def main() -> None:
    for number in (signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    directories: dict[str, None] = {}
    cgroups: dict[str, None] = {}
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
        kind, _, path = line.partition(" ")
        if not path.startswith("/"):
            continue
        if kind == "+dir":
            directories[path] = None
        elif kind == "-dir":
            directories.pop(path, None)
        elif kind == "+cgroup":
            cgroups[path] = None
        elif kind == "-cgroup":
            cgroups.pop(path, None)
    for path in cgroups:
        _remove_cgroup(path)
    time.sleep(0.05)  # let the sandboxes killed with the host finish dying
    for path in directories:
        try:
            remove_tree(path)
        except OSError as exc:
            sys.stderr.write(f"jarvis repl reaper: {exc}\n")


if __name__ == "__main__":
    main()
