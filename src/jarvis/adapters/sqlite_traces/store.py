"""The trace store in SQLite: one row per trace, its spans as one JSON record
(:mod:`.record`).

The database is opened on first use (``jarvis ask`` pays nothing for tracing before its
run ends), kept at mode 0600 (a trace shows what a user asked their tools to do: a file
made earlier with a wider mode is tightened, :mod:`jarvis.adapters.sqlite_files`), in WAL
mode so that ``jarvis traces list`` reads while a run writes. Every SQLite failure (a
full or read-only disk, a lock held past ``busy_timeout``, a damaged file) is raised as
:class:`~jarvis.domain.traces.TraceStoreError`. The table is ``jarvis_traces``, so the file
may be the one OpenJarvis keeps its own ``traces`` table in (both default to
``<config dir>/traces.db``): neither reads or breaks the other's.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from jarvis.adapters.sqlite_files import private_database
from jarvis.adapters.sqlite_traces.record import encode_steps, encode_trace
from jarvis.adapters.sqlite_wal import enter_wal
from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.trace_steps import read_trace
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
INSERT OR IGNORE INTO jarvis_traces_size (id, total)
    SELECT 0, COALESCE(SUM(size), 0) FROM jarvis_traces;
"""
"""The size of every record is kept in ``jarvis_traces_size`` by triggers, in the writing
transaction (whichever process writes), so that pruning by size reads one row instead of
scanning every trace. A file written before the table existed gets it, counted once."""


_SIZE_OBJECTS = (
    "jarvis_traces_size",
    "jarvis_traces_added",
    "jarvis_traces_changed",
    "jarvis_traces_dropped",
)


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
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        private_database(self.path, self._notice)  # an older file may be open to others
        db = sqlite3.connect(
            self.path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None
        )
        try:
            enter_wal(db, self.busy_timeout)
            db.execute("PRAGMA synchronous=NORMAL")
            (present,) = db.execute(
                "SELECT count(*) FROM sqlite_master WHERE name IN (?, ?, ?, ?)", _SIZE_OBJECTS
            ).fetchone()
            if present != len(_SIZE_OBJECTS):  # a reader of a complete file takes no lock
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
        def work(db: sqlite3.Connection) -> None:
            with db:  # one transaction
                db.execute("BEGIN")
                db.executemany(
                    "INSERT INTO jarvis_traces"
                    " (trace_id, agent, start, failed, size, record) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (trace_id) DO UPDATE SET agent = excluded.agent,"
                    " start = excluded.start, failed = excluded.failed, size = excluded.size,"
                    " record = excluded.record",
                    records,
                )

        if records:
            self._call(work)

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
        escaped = trace_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

        def work(db: sqlite3.Connection) -> list[tuple[str, str]]:
            return db.execute(
                "SELECT trace_id, record FROM jarvis_traces"
                " WHERE trace_id LIKE ? ESCAPE '\\' LIMIT 2",
                (escaped + "%",),
            ).fetchall()

        rows = self._call(work)
        exact = [record for key, record in rows if key == trace_id]
        if exact:
            return self._decode(exact[0])
        return self._decode(rows[0][1]) if len(rows) == 1 else None

    def list(self, query: TraceQuery) -> Sequence[Trace]:
        if self._absent():
            return []
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
        params.append(max(query.limit, 0))

        def work(db: sqlite3.Connection) -> list[tuple[str]]:
            return db.execute(
                f"SELECT record FROM jarvis_traces{where}"
                " ORDER BY start DESC, trace_id DESC LIMIT ?",
                params,
            ).fetchall()

        return [self._decode(row[0]) for row in self._call(work)]

    def prune(self, *, older_than: float | None, max_bytes: int | None) -> int:
        if self._absent():
            return 0

        def work(db: sqlite3.Connection) -> int:
            dropped = 0
            if older_than is not None:
                dropped += db.execute(
                    "DELETE FROM jarvis_traces WHERE start < ?", (older_than,)
                ).rowcount
            if max_bytes is not None:
                (total,) = db.execute("SELECT total FROM jarvis_traces_size").fetchone()
                if int(total) > max_bytes:
                    excess = int(total) - max_bytes
                    doomed: list[str] = []
                    for trace_id, size in db.execute(
                        "SELECT trace_id, size FROM jarvis_traces ORDER BY start, trace_id"
                    ):
                        if excess <= 0:
                            break
                        doomed.append(str(trace_id))
                        excess -= int(size)
                    db.executemany(
                        "DELETE FROM jarvis_traces WHERE trace_id = ?", [(d,) for d in doomed]
                    )
                    dropped += len(doomed)
            return dropped

        return self._call(work)

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()
