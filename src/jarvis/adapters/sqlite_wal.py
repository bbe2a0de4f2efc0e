"""Entering SQLite's WAL mode when other processes may be opening the same new file.

SQLite does not call its busy handler when another connection holds the lock that
``PRAGMA journal_mode = WAL`` needs (two processes creating one file at once), so a
connection's ``timeout`` does not apply there and the pragma fails at once with "database is
locked". Every SQLite file of jarvis enters WAL through :func:`enter_wal`, which waits.
"""

from __future__ import annotations

import sqlite3
import time


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another connection holds the lock (worth waiting for)."""
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def enter_wal(connection: sqlite3.Connection, timeout: float) -> str:
    """``PRAGMA journal_mode = WAL``, retried for up to ``timeout`` seconds; the mode set."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            return str(connection.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.Error as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
