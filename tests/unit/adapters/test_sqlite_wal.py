"""Two processes creating one SQLite file at once: the second waits instead of failing.

The lock is taken by a connection still in rollback-journal mode, as a process that has just
created the file holds it; SQLite then fails ``PRAGMA journal_mode = WAL`` at once, without
calling its busy handler, and only :func:`enter_wal`'s own wait keeps the opener going.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver
from jarvis.adapters.sqlite_memory.store import SqliteMemory
from jarvis.adapters.sqlite_traces.store import SqliteTraceStore
from jarvis.adapters.sqlite_wal import enter_wal
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
    opener.set_trace_callback(lambda statement: tried.set())
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
