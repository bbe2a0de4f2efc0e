"""The SQLite trace store writes a batch of traces as one row and expands it on first read:
what the contract cannot see (the rows, the lock a reader meets, pruning whole batches)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from contracts.trace_store_contract import make_trace, recorded_steps
from jarvis.adapters.sqlite_traces import SqliteTraceStore
from jarvis.adapters.sqlite_traces.batch import STEPS, pack_batch, pack_steps, unpack_batch
from jarvis.adapters.sqlite_traces.record import encode_steps
from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.traces import TraceQuery, TraceRecord, TraceStoreError, trace_to_row


def _counts(path: Path) -> tuple[int, int]:
    """(rows of jarvis_traces, rows of jarvis_trace_batches)"""
    with sqlite3.connect(path) as db:
        (rows,) = db.execute("SELECT count(*) FROM jarvis_traces").fetchone()
        (batches,) = db.execute("SELECT count(*) FROM jarvis_trace_batches").fetchone()
    return int(rows), int(batches)


def _ids(store: SqliteTraceStore, query: TraceQuery | None = None) -> list[str]:
    return [trace.trace_id for trace in store.list(query or TraceQuery(limit=100))]


def test_a_batch_is_one_row_until_read_then_rows_once(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    store.save_many([make_trace(f"t{i}", start=float(i)) for i in range(5)])
    store.save_many([make_trace(f"u{i}", start=10.0 + i) for i in range(3)])
    assert _counts(path) == (0, 2)
    expected = [f"u{i}" for i in (2, 1, 0)] + [f"t{i}" for i in (4, 3, 2, 1, 0)]
    assert _ids(store) == expected
    assert _counts(path) == (8, 0)
    assert _ids(SqliteTraceStore(path)) == expected  # another reader finds rows
    assert _counts(path) == (8, 0)
    store.close()


def test_a_later_batch_replaces_a_trace_of_an_earlier_one(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    store.save_many([make_trace("a", start=1.0), make_trace("b", start=2.0)])
    store.save_many([make_trace("a", start=3.0, ok=False)])
    assert _ids(store) == ["a", "b"]
    assert _ids(store, TraceQuery(failed_only=True)) == ["a"]
    assert _counts(path) == (2, 0)


def test_a_read_while_another_process_writes_expands_the_batches_itself(
    tmp_path: Path,
) -> None:
    """A lock held past the reader's ``busy_timeout``: the read still sees every trace,
    with its filters, and leaves the batches for a later read to expand."""
    path = tmp_path / "traces.db"
    writer = SqliteTraceStore(path)
    writer.save_many([make_trace("old", start=1.0), make_trace("gone", start=2.0)])
    assert _ids(writer) == ["gone", "old"]  # now rows
    writer.save_many([make_trace("gone", start=0.5), make_trace("new", start=5.0, ok=False)])
    writer.save_many([make_trace("newer", start=6.0, agent="other")])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        reader = SqliteTraceStore(path, busy_timeout=0.01)
        assert _ids(reader) == ["newer", "new", "old", "gone"]
        assert _ids(reader, TraceQuery(limit=2)) == ["newer", "new"]
        assert _ids(reader, TraceQuery(since=1.0)) == ["newer", "new", "old"]
        assert _ids(reader, TraceQuery(agent="other")) == ["newer"]
        assert _ids(reader, TraceQuery(failed_only=True)) == ["new"]
        gone = reader.get("gone")
        assert gone is not None
        assert gone.start == 0.5  # the batch's, not the row's
        assert reader.get("ne") is None  # two traces begin so
        newer = reader.get("newe")
        assert newer is not None
        assert newer.trace_id == "newer"
        assert _counts(path) == (2, 2)
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert _ids(reader) == ["newer", "new", "old", "gone"]
    assert _counts(path) == (4, 0)


def test_pruning_by_age_drops_a_batch_once_its_newest_trace_is_older(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    store.save_many([make_trace("a", start=1.0), make_trace("b", start=2.0)])
    store.save_many([make_trace("c", start=3.0), make_trace("d", start=9.0)])
    assert store.prune(older_than=5.0, max_bytes=None) == 2  # a and b; c is kept with d
    assert _counts(path) == (0, 1)
    assert _ids(store) == ["d", "c"]
    assert store.prune(older_than=5.0, max_bytes=None) == 1  # c, a row now


def test_pruning_by_size_drops_rows_and_batches_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    store.save_many([make_trace("row-new", start=8.0), make_trace("row-old", start=1.0)])
    assert len(_ids(store)) == 2  # rows
    store.save_many([make_trace("batch-mid", start=2.0), make_trace("batch-mid2", start=3.0)])
    store.save_many([make_trace("batch-new", start=9.0)])
    size = trace_to_row(make_trace("row-old", start=1.0))[4]
    # the oldest row, then the batch whose newest trace is 3.0 (two traces): three gone
    assert store.prune(older_than=None, max_bytes=2 * size + size // 2) == 3
    assert _ids(store) == ["batch-new", "row-new"]


def test_a_damaged_batch_is_a_trace_store_error(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    store.save_many([make_trace("a"), make_trace("b")])
    with sqlite3.connect(path) as db:
        db.execute('UPDATE jarvis_trace_batches SET heads = \'[["a", "simple", 1.0, 0, 9]]\'')
    with pytest.raises(TraceStoreError, match="a batch of traces is damaged"):
        store.list(TraceQuery())
    with pytest.raises(TraceStoreError, match="a batch of traces is damaged"):
        store.get("a")
    assert _counts(path) == (0, 1)  # kept as it is


def test_records_that_cannot_be_one_row_are_saved_as_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    row = trace_to_row(make_trace("a"))
    spread = (*row[:5], row[5].replace(",", ",\n"))  # JSON with line breaks
    store.save_records([spread])
    assert _counts(path) == (1, 0)
    assert store.get("a") == make_trace("a")
    with pytest.raises(TraceStoreError):  # as a row refuses it
        store.save_records([(*row[:2], float("nan"), *row[3:])])


def test_readers_and_a_writer_at_once_see_every_trace_once(tmp_path: Path) -> None:
    """Two readers expanding the same batches (each in its own connection) while a writer
    adds more: no error, no trace lost or doubled."""
    path = tmp_path / "traces.db"
    SqliteTraceStore(path).save(make_trace("first"))
    stop = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        reader = SqliteTraceStore(path, busy_timeout=10.0)
        try:
            while not stop.is_set():
                reader.list(TraceQuery(limit=10_000))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            reader.close()

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    writer = SqliteTraceStore(path, busy_timeout=10.0)
    for batch in range(40):
        writer.save_many([make_trace(f"b{batch}-{i}", start=float(batch)) for i in range(25)])
    stop.set()
    for thread in readers:
        thread.join()
    assert errors == []
    assert len(set(_ids(writer, TraceQuery(limit=10_000)))) == 1001
    assert _counts(path) == (1001, 0)


def _records(*agents: str) -> list[TraceRecord]:
    return [trace_to_row(make_trace(f"t{i}", agent=agent)) for i, agent in enumerate(agents)]


def test_a_batch_unpacks_to_the_records_it_packed() -> None:
    records = _records("simple", "na\u00efve", "odd\ud800name")  # a lone surrogate
    packed = pack_batch(records)
    assert packed is not None
    assert (packed.traces, packed.size) == (3, sum(r[4] for r in records))
    assert unpack_batch(packed.heads, packed.records) == records
    assert pack_batch([]) is None


@pytest.mark.parametrize(
    ("heads", "records"),
    [
        (None, ""),
        ("[]", "x"),
        ("{}", "x"),
        ('[["a", "s", 1.0, 0]]', "x"),
        ('[["a", "s", "1.0", 0, 1]]', "x"),
        ('[["a", "s", true, 0, 1]]', "x"),
        ('[["a", "s", 1.0, 2, 1]]', "x"),
        ('[["a", 5, 1.0, 0, 1]]', "x"),
        ("not json", "x"),
    ],
)
def test_a_row_pack_batch_did_not_write_is_refused(heads: object, records: object) -> None:
    with pytest.raises(ValueError, match="batch"):
        unpack_batch(heads, records)


def _runs(count: int, *, content: bool = False) -> list[TraceSteps]:
    trace = recorded_steps(content=content)
    return [(f"r{i}", trace[1] + i, *trace[2:]) for i in range(count)]


def test_runs_are_one_row_of_their_steps_then_the_records_encode_steps_makes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    runs = _runs(3, content=True)
    assert store.save_steps(runs) == []
    assert _counts(path) == (0, 1)
    with sqlite3.connect(path) as db:
        heads, records = db.execute("SELECT heads, records FROM jarvis_trace_batches").fetchone()
    assert (heads, type(records)) == (STEPS, bytes)
    assert b"user:pw" not in records  # content is masked before it is written
    assert _ids(store) == ["r2", "r1", "r0"]
    assert _counts(path) == (3, 0)
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT * FROM jarvis_traces ORDER BY start").fetchall()
    assert rows == [encode_steps(run) for run in runs]
    store.close()


def test_steps_that_cannot_be_packed_are_encoded_one_by_one() -> None:
    runs = _runs(2)
    assert pack_steps([]) is None
    assert pack_steps([(runs[0][0], -1.0, *runs[0][2:]), runs[1]]) is None
    assert pack_steps([(runs[0][0], float("inf"), *runs[0][2:])]) is None
    surrogate = recorded_steps(agent="a\ud800")
    assert pack_steps([runs[0], surrogate]) is None
    packed = pack_steps(runs)
    assert packed is not None
    assert (packed.newest, packed.traces, packed.size) == (runs[1][1], 2, len(packed.records))
    assert unpack_batch(packed.heads, packed.records) == [encode_steps(run) for run in runs]


@pytest.mark.parametrize(
    "records",
    [
        b"not json",
        b"{}",
        b"[1]",
        b'[["r", 1.0, null, 0]]',
        b'[["r", 1.0, null, 0, []]]',
        b'[["r", 1.0, null, 0, [[]]]]',
        b'[["r", 1.0, null, 0, [[0]]]]',
        b'[["r", 1.0, [1], 0, [[0, 1.0, -1, "a", null]]]]',
        b'[["r", "1.0", null, 0, [[0, 1.0, -1, "a", null]]]]',
        b'[["r", -5.0, null, 0, [[0, 1.0, -1, "a", null]]]]',
    ],
)
def test_a_row_of_steps_pack_steps_did_not_write_is_refused(tmp_path: Path, records: bytes) -> None:
    with pytest.raises(ValueError, match="batch"):
        unpack_batch(STEPS, records)
    path = tmp_path / "traces.db"
    store = SqliteTraceStore(path)
    store.save_steps(_runs(1))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE jarvis_trace_batches SET records = ?", (records,))
    with pytest.raises(TraceStoreError, match="damaged"):
        store.list(TraceQuery())
    store.close()
