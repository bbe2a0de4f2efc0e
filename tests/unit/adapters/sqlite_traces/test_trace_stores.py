"""The trace store contract on the in-memory fake and on SQLite, and SQLite's own promises."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from contracts.trace_store_contract import TraceStoreContract, make_trace
from jarvis.adapters.sqlite_traces import SqliteTraceStore
from jarvis.application.trace_writer import TraceWriter
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


def _sizes(path: Path) -> tuple[int, int]:
    """The kept total and the true sum of the records' sizes."""
    with sqlite3.connect(path) as db:
        (kept,) = db.execute("SELECT total FROM jarvis_traces_size").fetchone()
        (true,) = db.execute(
            "SELECT (SELECT COALESCE(SUM(size), 0) FROM jarvis_traces)"
            " + (SELECT COALESCE(SUM(size), 0) FROM jarvis_trace_batches)"
        ).fetchone()
    return int(kept), int(true)


def test_the_kept_size_follows_every_write_replace_and_prune(tmp_path: Path) -> None:
    """Pruning by size reads a total the triggers keep, not a scan: it must stay exact."""
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    store.save_many([make_trace(f"t{i}", start=float(i)) for i in range(20)])
    assert _sizes(path)[0] == _sizes(path)[1] > 0
    store.save(make_trace("t3", start=3.0, agent="a-much-longer-agent-name" * 20))  # replaced
    assert _sizes(path)[0] == _sizes(path)[1]
    assert len(store.list(TraceQuery(limit=100))) == 20
    assert store.prune(older_than=5.0, max_bytes=None) == 5
    kept, true = _sizes(path)
    assert kept == true
    half = true // 2
    assert store.prune(older_than=None, max_bytes=half) > 0
    kept, true = _sizes(path)
    assert kept == true <= half
    store.close()


def test_a_file_written_before_the_kept_size_is_counted_once(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    store.save_many([make_trace(f"t{i}", start=float(i)) for i in range(10)])
    assert len(store.list(TraceQuery(limit=100))) == 10  # expanded into rows
    store.close()
    with sqlite3.connect(path) as db:  # as an earlier jarvis left it
        for name in ("jarvis_traces_added", "jarvis_traces_changed", "jarvis_traces_dropped"):
            db.execute(f"DROP TRIGGER {name}")
        db.execute("DROP TABLE jarvis_traces_size")
        db.execute("DROP TABLE jarvis_trace_batches")
    for _ in range(2):  # opened twice: counted once
        reopened = SqliteTraceStore(path)
        assert len(reopened.list(TraceQuery(limit=100))) == 10
        reopened.close()
    kept, true = _sizes(path)
    assert kept == true > 0
    assert SqliteTraceStore(path).prune(older_than=None, max_bytes=true - 1) == 1


def test_the_writer_records_again_once_another_process_lets_go_of_the_file(
    tmp_path: Path,
) -> None:
    """A real lock held by another connection: the batch of that time fails (told once), the
    next one is written, and the writer says it is recording again."""
    path = tmp_path / "traces.db"
    SqliteTraceStore(path).save(make_trace("before"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    notices: list[str] = []
    writer = TraceWriter(
        lambda: SqliteTraceStore(path, busy_timeout=0.01), notice=notices.append, retry_seconds=0
    )
    writer.save(make_trace("during"))
    writer.flush()
    holder.execute("COMMIT")
    holder.close()
    writer.save(make_trace("after"))
    writer.flush()
    writer.close()
    assert len(notices) == 2, notices
    assert notices[0].startswith("traces are not being recorded:")
    assert "locked" in notices[0]
    assert notices[1] == "traces are being recorded again"
    kept = {t.trace_id for t in SqliteTraceStore(path).list(TraceQuery(limit=10))}
    assert kept == {"before", "after"}
