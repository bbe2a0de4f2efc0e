"""Entering SQLite's WAL mode when other processes may be opening the same new file.

SQLite does not call its busy handler when another connection holds the lock that
``PRAGMA journal_mode = WAL`` needs (two processes creating one file at once), so a
connection's ``timeout`` does not apply there and the pragma fails at once with "database is
locked". Every SQLite file of jarvis enters WAL through :func:`enter_wal`, which waits.
"""

from __future__ import annotations

import sqlite3
import time

_BUSY = sqlite3.SQLITE_BUSY


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is ``SQLITE_BUSY``: another connection holds the lock, worth waiting
    for. (``SQLITE_LOCKED``, a conflict inside one connection, is not: waiting cannot end it.)"""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == _BUSY


def enter_wal(connection: sqlite3.Connection, timeout: float) -> str:
    """``PRAGMA journal_mode = WAL``, retried for up to ``timeout`` seconds in all; the
    mode set. While it retries, the connection's own busy handler is given only the time
    left (it applies to some of the locks the pragma meets), then its own again."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    own = int(connection.execute("PRAGMA busy_timeout").fetchone()[0])
    try:
        while True:
            left = deadline - time.monotonic()
            connection.execute(f"PRAGMA busy_timeout = {max(0, int(left * 1000))}")
            try:
                return str(connection.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.Error as exc:
                left = deadline - time.monotonic()
                if not is_busy(exc) or left <= 0:
                    raise
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)
    finally:
        connection.execute(f"PRAGMA busy_timeout = {own}")
