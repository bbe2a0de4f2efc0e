"""Two processes creating one SQLite file at once: the second waits instead of failing.

The lock is taken by a connection still in rollback-journal mode, as a process that has just
created the file holds it; SQLite then fails ``PRAGMA journal_mode = WAL`` at once, without
calling its busy handler, and only :func:`enter_wal`'s own wait keeps the opener going.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver
from jarvis.adapters.sqlite_memory.store import SqliteMemory
from jarvis.adapters.sqlite_traces.store import SqliteTraceStore
from jarvis.adapters.sqlite_wal import enter_wal, is_busy
from jarvis.domain.sessions.records import SessionStoreLockedError


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A connection holding the write lock of a new rollback-journal file."""
    connection = sqlite3.connect(tmp_path / "shared.db", isolation_level=None)
    connection.execute("CREATE TABLE other (x)")
    connection.execute("BEGIN IMMEDIATE")
    yield connection
    connection.close()


def test_enter_wal_waits_for_the_lock_and_then_enters(
    tmp_path: Path, holder: sqlite3.Connection
) -> None:
    tried = threading.Event()
    opener = sqlite3.connect(tmp_path / "shared.db", isolation_level=None, check_same_thread=False)

    def traced(statement: str) -> None:
        if "journal_mode" in statement:
            tried.set()

    opener.set_trace_callback(traced)
    with ThreadPoolExecutor(1) as pool:
        entered = pool.submit(enter_wal, opener, 60.0)
        assert tried.wait(60)  # it has met the lock at least once
        holder.execute("COMMIT")
        assert entered.result(60) == "wal"
    opener.close()


def test_enter_wal_gives_up_at_its_timeout(tmp_path: Path, holder: sqlite3.Connection) -> None:
    opener = sqlite3.connect(tmp_path / "shared.db", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enter_wal(opener, 0.0)
    opener.close()


def test_enter_wal_keeps_to_its_timeout_where_the_busy_handler_would_wait_longer(
    tmp_path: Path,
) -> None:
    """A reader of a rollback-journal file makes the pragma wait in SQLite's busy handler;
    that wait is held to the time ``enter_wal`` has left, not the connection's timeout."""
    reader = sqlite3.connect(tmp_path / "shared.db", isolation_level=None)
    reader.execute("CREATE TABLE other (x)")
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM other").fetchall()  # a shared lock, held
    opener = sqlite3.connect(tmp_path / "shared.db", isolation_level=None, timeout=30.0)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enter_wal(opener, 0.2)
    assert time.monotonic() - started < 10  # not the connection's 30 s
    assert opener.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000  # its own again
    reader.close()
    opener.close()


def test_only_sqlite_busy_counts_as_busy(tmp_path: Path, holder: sqlite3.Connection) -> None:
    opener = sqlite3.connect(tmp_path / "shared.db", isolation_level=None, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as busy:
        opener.execute("BEGIN IMMEDIATE")
    assert is_busy(busy.value)
    with pytest.raises(sqlite3.OperationalError) as missing:
        opener.execute("SELECT * FROM locked")  # "no such table: locked"
    assert not is_busy(missing.value)
    assert not is_busy(sqlite3.OperationalError("database is locked"))  # not from SQLite
    opener.close()


def test_the_session_database_says_locked_when_the_lock_outlasts_its_timeout(
    tmp_path: Path, holder: sqlite3.Connection
) -> None:
    driver = SqliteDriver(tmp_path / "shared.db", busy_timeout=0.0)
    with pytest.raises(SessionStoreLockedError, match="stayed locked"):
        driver.run(lambda connection: connection.execute("SELECT 1").fetchone())


def test_every_sqlite_file_of_jarvis_opens_beside_a_process_creating_it(tmp_path: Path) -> None:
    """Many openers of one new file at once (as the processes of `jarvis serve --workers`)."""

    def open_all(index: int) -> None:
        SqliteDriver(tmp_path / f"sessions-{index % 2}.db").run(
            lambda connection: connection.execute("SELECT count(*) FROM sessions").fetchone()
        )
        traces = SqliteTraceStore(tmp_path / f"traces-{index % 2}.db")
        traces.prune(older_than=None, max_bytes=None)
        traces.close()
        memory = SqliteMemory(str(tmp_path / f"memory-{index % 2}.db"))
        asyncio.run(memory.stats())
        memory.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(open_all, range(64)))
