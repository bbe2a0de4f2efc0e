"""The SQLite driver of the SQL stores on real files: several processes, crashes, damage, a
file the earlier store wrote (the contract runs in ``test_sql_store_contracts.py``)."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jarvis.adapters.sql_store.sqlite_schema import SCHEMA_VERSION
from jarvis.domain.llm.messages import Message
from jarvis.domain.sessions.records import (
    SessionStoreCorruptError,
    SessionStoreLockedError,
    SessionStoreUnavailableError,
)
from tests.support.sql_stores import sqlite_backend, sqlite_sessions, the_earlier_data_goes_on

pytestmark = pytest.mark.integration


def _writer(path: str, worker: int, start: multiprocessing.synchronize.Event) -> None:
    store = sqlite_sessions(path)
    start.wait(60)

    async def go() -> None:
        for i in range(50):
            await store.append(
                "shared", [Message.user(f"{worker}-{i}"), Message.assistant(f"re {worker}-{i}")]
            )
            await store.append(f"own-{worker}", [Message.user(str(i))])

    asyncio.run(go())


def test_eight_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "sessions.db")
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [context.Process(target=_writer, args=(path, w, start)) for w in range(8)]
    for process in workers:
        process.start()
    start.set()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    store = sqlite_sessions(path)
    loaded = asyncio.run(store.load("shared"))
    assert len(loaded) == 8 * 50 * 2
    pairs = [(loaded[i].content, loaded[i + 1].content) for i in range(0, len(loaded), 2)]
    assert sorted(pairs) == sorted((f"{w}-{i}", f"re {w}-{i}") for w in range(8) for i in range(50))
    for worker in range(8):  # each process's own appends keep their order
        own = asyncio.run(store.load(f"own-{worker}"))
        assert [m.content for m in own] == [str(i) for i in range(50)]
    counts = {i.id: i.message_count for i in asyncio.run(store.list_sessions())}
    assert counts["shared"] == 800
    with sqlite3.connect(path) as db:
        seqs = [r[0] for r in db.execute("SELECT seq FROM messages WHERE session_id = 'shared'")]
    assert sorted(seqs) == list(range(800))


_CRASHING_WRITER = """
import asyncio, sys
from jarvis.adapters.sql_store import SqlBackend
from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver
from jarvis.domain.llm.messages import Message
store = SqlBackend(SqliteDriver(sys.argv[1])).sessions
async def go():
    i = 0
    while True:
        await store.append("s", [Message.user(f"q{i}"), Message.assistant("a" * 5000 + str(i))])
        i += 1
asyncio.run(go())
"""


def test_a_writer_killed_mid_append_loses_only_that_append(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    child = subprocess.Popen([sys.executable, "-c", _CRASHING_WRITER, str(path)])
    store = sqlite_sessions(path)
    try:
        deadline = time.monotonic() + 60
        while len(asyncio.run(store.load("s"))) < 40:  # wait until it is writing for real
            assert child.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    store.close()
    loaded = asyncio.run(sqlite_sessions(path).load("s"))
    assert len(loaded) % 2 == 0
    for n in range(0, len(loaded), 2):
        assert loaded[n].content == f"q{n // 2}"
        assert loaded[n + 1].content == "a" * 5000 + str(n // 2)
    fresh = sqlite_sessions(path)
    asyncio.run(fresh.append("s", [Message.user("after the crash")]))
    [info] = asyncio.run(fresh.list_sessions())
    assert info.message_count == len(loaded) + 1
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_the_database_is_wal_versioned_and_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "sessions.db"
    asyncio.run(sqlite_sessions(path).append("s", [Message.user("x")]))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"sessions", "messages", "operator_state", "leases"} <= tables


def test_a_locked_database_is_a_clear_error_and_nothing_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    asyncio.run(sqlite_sessions(path).append("s", [Message.user("before")]))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO operator_state VALUES ('k', 'v', 0)")
    store = sqlite_sessions(path, busy_timeout=0.2)
    try:
        with pytest.raises(SessionStoreLockedError, match=r"sessions\.db stayed locked") as info:
            asyncio.run(store.append("s", [Message.user("while locked")]))
        assert info.value.retryable
        assert [m.content for m in asyncio.run(store.load("s"))] == ["before"]  # reads go on
    finally:
        holder.execute("COMMIT")
        holder.close()
    asyncio.run(store.append("s", [Message.user("after")]))
    assert [m.content for m in asyncio.run(store.load("s"))] == ["before", "after"]


def test_a_damaged_file_is_a_clear_error_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    path.write_bytes(b"this is not a database\n" * 200)
    before = path.read_bytes()
    store = sqlite_sessions(path)
    with pytest.raises(SessionStoreCorruptError, match=r"sessions\.db is damaged") as info:
        asyncio.run(store.append("s", [Message.user("x")]))
    assert "Move it aside" in str(info.value)
    with pytest.raises(SessionStoreCorruptError):
        asyncio.run(store.load("s"))
    assert path.read_bytes() == before


def test_a_damaged_message_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    asyncio.run(sqlite_sessions(path).append("s", [Message.user("x")]))
    with sqlite3.connect(path) as db:
        db.execute('UPDATE messages SET record = \'{"role": "nobody"}\'')
    with pytest.raises(SessionStoreCorruptError, match=r"Session 's'.*damaged message"):
        asyncio.run(sqlite_sessions(path).load("s"))


def test_another_programs_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE invoices (n INTEGER)")
    with pytest.raises(SessionStoreCorruptError, match="invoices"):
        asyncio.run(sqlite_sessions(path).sessions())
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert tables == {"invoices"}


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    asyncio.run(sqlite_sessions(path).sessions())
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(SessionStoreCorruptError, match="schema version"):
        asyncio.run(sqlite_sessions(path).sessions())


def test_an_unusable_place_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SessionStoreUnavailableError, match="Cannot open") as info:
        asyncio.run(sqlite_sessions(tmp_path / "a-file" / "sessions.db").sessions())
    assert info.value.location.endswith("sessions.db")


async def test_a_file_the_earlier_store_wrote_opens_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with sqlite3.connect(path) as db:
        db.executescript((Path(__file__).parent / "data" / "sessions_v1.sql").read_text())
    backend = sqlite_backend(path)
    try:
        await the_earlier_data_goes_on(backend)
    finally:
        backend.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
