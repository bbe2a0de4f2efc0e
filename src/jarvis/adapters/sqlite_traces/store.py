"""The trace store in SQLite: one row per trace, its spans as one JSON record
(:mod:`.record`).

The trace writer saves a batch as one row of ``jarvis_trace_batches`` (:mod:`.batch`): a
fourth of the CPU of a row a trace, in the thread that shares the machine with the runs.
The first read after it expands the batches into rows, once; a read that cannot (a lock
held past ``busy_timeout``) reads them in memory for itself.
Pruning drops a batch not yet expanded as a whole, by its newest trace.

The database is opened on first use (``jarvis ask`` pays nothing for tracing before its
run ends), kept at mode 0600 (a trace shows what a user asked their tools to do: a file
made earlier with a wider mode is tightened, :mod:`jarvis.adapters.sqlite_files`), in WAL
mode so that ``jarvis traces list`` reads while a run writes. Every SQLite failure (a
full or read-only disk, a lock held past ``busy_timeout``, a damaged file) is raised as
:class:`~jarvis.domain.traces.TraceStoreError`. On a read-only filesystem, where SQLite
cannot make the side files WAL mode reads through, the file is opened immutable: its
traces are read, and a write is the error it is. The tables are named ``jarvis_…``, so the file
may be the one OpenJarvis keeps its own ``traces`` table in (both default to
``<config dir>/traces.db``): neither reads or breaks the other's.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

from jarvis.adapters.sqlite_files import private_database
from jarvis.adapters.sqlite_traces.batch import PackedBatch, pack_batch, pack_steps, unpack_batch
from jarvis.adapters.sqlite_traces.record import encode_steps, encode_trace
from jarvis.adapters.sqlite_wal import enter_wal
from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.trace_steps import encoded_runs, read_trace
from jarvis.domain.traces import (
    Trace,
    TraceQuery,
    TraceRecord,
    TraceStoreError,
)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jarvis_traces (
    trace_id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    start REAL NOT NULL,
    failed INTEGER NOT NULL,
    size INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jarvis_traces_by_start ON jarvis_traces (start);
CREATE TABLE IF NOT EXISTS jarvis_traces_size (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    total INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS jarvis_traces_added AFTER INSERT ON jarvis_traces BEGIN
    UPDATE jarvis_traces_size SET total = total + NEW.size WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS jarvis_traces_changed AFTER UPDATE OF size ON jarvis_traces BEGIN
    UPDATE jarvis_traces_size SET total = total + NEW.size - OLD.size WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS jarvis_traces_dropped AFTER DELETE ON jarvis_traces BEGIN
    UPDATE jarvis_traces_size SET total = total - OLD.size WHERE id = 0;
END;
CREATE TABLE IF NOT EXISTS jarvis_trace_batches (
    id INTEGER PRIMARY KEY,
    newest REAL NOT NULL,
    count INTEGER NOT NULL,
    size INTEGER NOT NULL,
    heads TEXT NOT NULL,
    records TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jarvis_trace_batches_by_newest ON jarvis_trace_batches (newest);
CREATE TRIGGER IF NOT EXISTS jarvis_trace_batches_added AFTER INSERT ON jarvis_trace_batches
BEGIN
    UPDATE jarvis_traces_size SET total = total + NEW.size WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS jarvis_trace_batches_dropped AFTER DELETE ON jarvis_trace_batches
BEGIN
    UPDATE jarvis_traces_size SET total = total - OLD.size WHERE id = 0;
END;
INSERT OR IGNORE INTO jarvis_traces_size (id, total) SELECT 0,
    (SELECT COALESCE(SUM(size), 0) FROM jarvis_traces)
    + (SELECT COALESCE(SUM(size), 0) FROM jarvis_trace_batches);
"""
"""The size of every record is kept in ``jarvis_traces_size`` by triggers, in the writing
transaction (whichever process writes), so that pruning by size reads one row instead of
scanning every trace. A file written before the table existed gets it, counted once.
``jarvis_trace_batches`` holds the batches written since the store was last read
(:mod:`.batch`); a file written before it existed gets it, empty."""


_SCHEMA_OBJECTS = (
    "jarvis_traces_size",
    "jarvis_traces_added",
    "jarvis_traces_changed",
    "jarvis_traces_dropped",
    "jarvis_trace_batches",
    "jarvis_trace_batches_by_newest",
    "jarvis_trace_batches_added",
    "jarvis_trace_batches_dropped",
)

_UPSERT = (
    "INSERT INTO jarvis_traces (trace_id, agent, start, failed, size, record)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (trace_id) DO UPDATE SET agent = excluded.agent,"
    " start = excluded.start, failed = excluded.failed, size = excluded.size,"
    " record = excluded.record"
)


class _DamagedBatch(Exception):
    """A row of ``jarvis_trace_batches`` that is not one this store wrote."""


class SqliteTraceStore:
    """Traces in the SQLite database at ``path`` (created, with its folder, on first use).
    ``notice`` is told when the file stays readable by other users
    (:func:`~jarvis.adapters.sqlite_files.private_database`)."""

    def __init__(
        self,
        path: Path | str,
        *,
        busy_timeout: float = 2.0,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._notice = notice
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _open(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        if _read_only_filesystem(self.path):
            self._db = sqlite3.connect(
                f"{self.path.absolute().as_uri()}?immutable=1",
                uri=True,
                check_same_thread=False,
                isolation_level=None,
            )
            return self._db
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        private_database(self.path, self._notice)  # an older file may be open to others
        db = sqlite3.connect(
            self.path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None
        )
        try:
            enter_wal(db, self.busy_timeout)
            db.execute("PRAGMA synchronous=NORMAL")
            (present,) = db.execute(
                "SELECT count(*) FROM sqlite_master WHERE name IN"
                f" ({', '.join('?' * len(_SCHEMA_OBJECTS))})",
                _SCHEMA_OBJECTS,
            ).fetchone()
            if present != len(_SCHEMA_OBJECTS):  # a reader of a complete file takes no lock
                db.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;")
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return work(self._open())
            except (sqlite3.Error, OSError) as exc:
                raise TraceStoreError(f"{self.path}: {exc}") from exc

    def save(self, trace: Trace) -> None:
        self.save_many((trace,))

    def save_many(self, traces: Sequence[Trace]) -> None:
        self.save_records([encode_trace(trace) for trace in traces])

    def encode(self, trace: Trace) -> TraceRecord:
        return encode_trace(trace)

    def encode_steps(self, trace: TraceSteps) -> TraceRecord:
        return encode_steps(trace)

    def save_records(self, records: Sequence[TraceRecord]) -> None:
        """One row for the whole batch (:mod:`.batch`): a fourth of the CPU of a row a
        trace. Records that cannot be packed are inserted as rows."""
        if not records:
            return
        packed = pack_batch(records)
        self._call(partial(_insert, records=records, packed=packed))

    def save_steps(self, runs: Sequence[TraceSteps]) -> list[str]:
        """One row for the whole batch, the runs' steps as they were recorded
        (:func:`~.batch.pack_steps`: a third of the CPU of encoding each run's record);
        when some run cannot be kept so, each is encoded and saved as a record."""
        if not runs:
            return []
        packed = pack_steps(runs)
        if packed is not None:
            self._call(partial(_insert, records=(), packed=packed))
            return []
        records, refused = encoded_runs(runs, encode_steps)
        self.save_records(records)
        return refused

    def _settle(self) -> bool:
        """Expands the batches written before this read into rows of ``jarvis_traces``,
        one batch a transaction (a writer in another process waits for one batch at most,
        never past its ``busy_timeout``). ``False`` when the file cannot be written now (a
        lock held past ``busy_timeout``; any other failure to write): the read then reads
        the batches itself (:meth:`_pending`). A batch that is not one this store wrote is a
        :class:`TraceStoreError`, as a damaged trace is."""
        try:
            batch_ids = self._call(
                lambda db: [
                    int(row[0])
                    for row in db.execute("SELECT id FROM jarvis_trace_batches ORDER BY id")
                ]
            )
            for batch_id in batch_ids:
                self._call(partial(_settle_batch, batch_id=batch_id))
        except _DamagedBatch as exc:
            raise TraceStoreError(f"{self.path}: a batch of traces is damaged ({exc})") from exc
        except TraceStoreError:
            return False
        return True

    def _pending(self) -> list[TraceRecord]:
        """The records of the batches not yet expanded, in the order they were saved."""

        def work(db: sqlite3.Connection) -> list[TraceRecord]:
            out: list[TraceRecord] = []
            for heads, records in db.execute(
                "SELECT heads, records FROM jarvis_trace_batches ORDER BY id"
            ):
                out.extend(_unpack(heads, records))
            return out

        try:
            return self._call(work)
        except _DamagedBatch as exc:
            raise TraceStoreError(f"{self.path}: a batch of traces is damaged ({exc})") from exc

    def _decode(self, record: str) -> Trace:
        try:
            return read_trace(record)
        except ValueError as exc:
            raise TraceStoreError(f"{self.path}: a trace is damaged ({exc})") from exc

    def _absent(self) -> bool:
        """Nothing was ever written: reading creates no database."""
        return self._db is None and not self.path.exists()

    def get(self, trace_id: str) -> Trace | None:
        if not trace_id or self._absent():
            return None
        settled = self._settle()
        escaped = trace_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

        def work(db: sqlite3.Connection) -> list[tuple[str, str]]:
            return db.execute(
                "SELECT trace_id, record FROM jarvis_traces"
                " WHERE trace_id LIKE ? ESCAPE '\\' LIMIT 2",
                (escaped + "%",),
            ).fetchall()

        found = dict(self._call(work))
        if not settled:
            found.update((r[0], r[5]) for r in self._pending() if r[0].startswith(trace_id))
        if trace_id in found:
            return self._decode(found[trace_id])
        return self._decode(next(iter(found.values()))) if len(found) == 1 else None

    def list(self, query: TraceQuery) -> Sequence[Trace]:
        if self._absent():
            return []
        latest = {} if self._settle() else {r[0]: r for r in self._pending()}  # last wins
        pending = [r for r in latest.values() if _matches(query, r)]
        clauses: list[str] = []
        params: list[object] = []
        if query.since is not None:
            clauses.append("start >= ?")
            params.append(query.since)
        if query.agent is not None:
            clauses.append("agent = ?")
            params.append(query.agent)
        if query.failed_only:
            clauses.append("failed = 1")
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        limit = max(query.limit, 0)
        params.append(limit + len(latest))  # a pending record may replace a row

        def work(db: sqlite3.Connection) -> list[tuple[str, float, str]]:
            return db.execute(
                f"SELECT trace_id, start, record FROM jarvis_traces{where}"
                " ORDER BY start DESC, trace_id DESC LIMIT ?",
                params,
            ).fetchall()

        rows = self._call(work)
        if latest:
            rows = [row for row in rows if row[0] not in latest]
            rows.extend((r[0], r[2], r[5]) for r in pending)
            rows.sort(key=lambda row: (row[1], row[0]), reverse=True)
        return [self._decode(row[2]) for row in rows[:limit]]

    def prune(self, *, older_than: float | None, max_bytes: int | None) -> int:
        """Drops rows, and whole batches not yet expanded (a batch is dropped by age once
        its newest trace is older, and by size in the order of its newest trace): the
        writer prunes without expanding what it has just written."""
        if self._absent():
            return 0

        def work(db: sqlite3.Connection) -> int:
            dropped = 0
            if older_than is not None:
                dropped += db.execute(
                    "DELETE FROM jarvis_traces WHERE start < ?", (older_than,)
                ).rowcount
                (batched,) = db.execute(
                    "SELECT COALESCE(SUM(count), 0) FROM jarvis_trace_batches WHERE newest < ?",
                    (older_than,),
                ).fetchone()
                if batched:
                    db.execute("DELETE FROM jarvis_trace_batches WHERE newest < ?", (older_than,))
                    dropped += int(batched)
            if max_bytes is not None:
                (total,) = db.execute("SELECT total FROM jarvis_traces_size").fetchone()
                if int(total) > max_bytes:
                    dropped += _drop_oldest(db, int(total) - max_bytes)
            return dropped

        return self._call(work)

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()


def _read_only_filesystem(path: Path) -> bool:
    """Whether the folder of ``path`` is on a filesystem mounted read-only: nothing can
    change the file through it, so it may be read immutable (no locks, no side files)."""
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:  # absent: the first write makes it
        return False


def _insert(
    db: sqlite3.Connection, *, records: Sequence[TraceRecord], packed: PackedBatch | None
) -> None:
    """``packed`` as a row of batches, else ``records`` as rows: one transaction."""
    with db:
        db.execute("BEGIN")
        if packed is None:
            db.executemany(_UPSERT, records)
        else:
            db.execute(
                "INSERT INTO jarvis_trace_batches (newest, count, size, heads, records)"
                " VALUES (?, ?, ?, ?, ?)",
                packed,
            )


def _unpack(heads: object, records: object) -> list[TraceRecord]:
    try:
        return unpack_batch(heads, records)
    except ValueError as exc:
        raise _DamagedBatch(str(exc)) from exc


def _settle_batch(db: sqlite3.Connection, *, batch_id: int) -> None:
    """Expands one batch into rows and deletes it, in one transaction (another reader may
    have expanded it meanwhile: then there is nothing to do)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute(
            "SELECT heads, records FROM jarvis_trace_batches WHERE id = ?", (batch_id,)
        ).fetchone()
        if row is not None:
            records = _unpack(*row)
            try:
                db.executemany(_UPSERT, records)
            except ValueError as exc:  # text SQLite cannot hold (a lone surrogate)
                raise _DamagedBatch(str(exc)) from exc
            db.execute("DELETE FROM jarvis_trace_batches WHERE id = ?", (batch_id,))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        raise


def _matches(query: TraceQuery, record: TraceRecord) -> bool:
    """What :meth:`SqliteTraceStore.list`'s ``WHERE`` keeps, for a record not yet a row."""
    return (
        (query.since is None or record[2] >= query.since)
        and (query.agent is None or record[1] == query.agent)
        and (not query.failed_only or record[3] == 1)
    )


def _drop_oldest(db: sqlite3.Connection, excess: int) -> int:
    """Drops the oldest rows and batches until ``excess`` bytes are gone; how many traces."""
    batches = db.execute(
        "SELECT newest, 1, id, size, count FROM jarvis_trace_batches ORDER BY newest, id"
    ).fetchall()
    rows = db.execute(
        "SELECT start, 0, trace_id, size, 1 FROM jarvis_traces ORDER BY start, trace_id"
    )
    doomed_rows: list[tuple[str]] = []
    doomed_batches: list[tuple[int]] = []
    dropped = 0
    for _, is_batch, key, size, count in heapq.merge(rows, batches):
        if excess <= 0:
            break
        if is_batch:
            doomed_batches.append((int(key),))
        else:
            doomed_rows.append((str(key),))
        excess -= int(size)
        dropped += int(count)
    rows.close()
    db.executemany("DELETE FROM jarvis_traces WHERE trace_id = ?", doomed_rows)
    db.executemany("DELETE FROM jarvis_trace_batches WHERE id = ?", doomed_batches)
    return dropped
