"""The trace store contract on the in-memory fake and on SQLite, and SQLite's own promises."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from contracts.trace_store_contract import TraceStoreContract, make_trace
from jarvis.adapters.sqlite_traces import SqliteTraceStore
from jarvis.domain.traces import TraceQuery, TraceStoreError
from jarvis.testing.traces import InMemoryTraceStore


class TestInMemoryTraceStore(TraceStoreContract[InMemoryTraceStore]):
    @pytest.fixture
    def store(self) -> InMemoryTraceStore:
        return InMemoryTraceStore()


class TestSqliteTraceStore(TraceStoreContract[SqliteTraceStore]):
    @pytest.fixture
    def store(self, tmp_path: Path) -> SqliteTraceStore:
        return SqliteTraceStore(tmp_path / "traces.db")


def test_the_database_is_created_on_first_use_private_and_in_wal(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "traces.db"
    store = SqliteTraceStore(path)
    assert store.list(TraceQuery()) == []
    assert store.get("x") is None
    assert store.prune(older_than=1.0, max_bytes=1) == 0
    assert not path.exists()  # reading creates nothing; the first write does
    store.save(make_trace("t1"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (tmp_path / "sub" / "traces.db-wal").exists()
    store.close()


def test_a_damaged_database_is_a_trace_store_error(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    path.write_bytes(b"this is not a database" * 100)
    store = SqliteTraceStore(path)
    with pytest.raises(TraceStoreError, match=r"traces\.db"):
        store.save(make_trace("t1"))
    with pytest.raises(TraceStoreError):
        store.list(TraceQuery())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only modes")
def test_a_read_only_folder_is_a_trace_store_error(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(TraceStoreError):
            SqliteTraceStore(folder / "traces.db").save(make_trace("t1"))
    finally:
        folder.chmod(0o700)
