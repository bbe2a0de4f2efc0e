"""The files of a jarvis SQLite database kept to their owner (mode 0600); the ``jsonl``
session store keeps its files so through :func:`owner_only` too.

Creating a database with mode 0600 protects only a new file: a ``sessions.db`` or
``traces.db`` made earlier (``touch`` under umask 022, an OpenJarvis install that made
``traces.db`` first, a copy) keeps a mode that lets every local user read the
conversations, traces or memories jarvis writes into it. So every store tightens its file
to 0600 each time it opens it, and its ``-wal``, ``-shm`` and ``-journal`` files that exist
then; SQLite makes the ones it creates later with the main file's mode, so they are 0600
too.

Only a file this user owns is changed: another user's file is theirs to set (they read
whatever is written there whatever its mode), and a file that cannot be changed (a file
system without modes) is used all the same: the database still works, and the store is
told, in one sentence it may show, that others may read it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

SIDE_FILES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database, holding its latest writes."""

_OPEN = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
"""Read-only is enough to change the mode of a file one owns; non-blocking, so that a FIFO
in the file's place cannot hang the open."""


def owner_only(fd: int, path: Path) -> str:
    """Take every permission but the owner's from the open file ``fd``; a notice when it
    stays open to other users."""
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        return ""  # SQLite refuses it with its own error
    if status.st_uid != os.geteuid():
        return (
            f"{path} belongs to another user (uid {status.st_uid}), who can read what jarvis "
            "writes there; move it aside to have jarvis start a file of its own."
        )
    if stat.S_IMODE(status.st_mode) & 0o077 == 0:
        return ""
    try:
        os.fchmod(fd, 0o600)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        return f"{path} stays readable by other users: its mode cannot be set to 0600 ({why})."
    return ""


def private_database(path: Path, notice: Callable[[str], None] | None = None) -> None:
    """Create the database file ``path`` (mode 0600) when it is missing, and make it and its
    side files 0600 when they exist and this user owns them; what stays open to other users
    (see the module) is told to ``notice``. ``OSError`` when ``path`` can be neither opened
    nor created (a folder that cannot be written, a file that cannot be read)."""
    notices: list[str] = []
    fd = os.open(path, _OPEN | os.O_CREAT, 0o600)
    try:
        notices.append(owner_only(fd, path))
    finally:
        os.close(fd)
    for suffix in SIDE_FILES:
        side = path.with_name(path.name + suffix)
        try:
            fd = os.open(side, _OPEN)
        except OSError:
            continue  # absent (the usual case), or not readable: SQLite will say so
        try:
            notices.append(owner_only(fd, side))
        finally:
            os.close(fd)
    for line in notices:
        if line and notice is not None:
            notice(line)
