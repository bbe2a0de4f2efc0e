"""``SqliteDriver``: the SQL stores in one SQLite file, shared by the processes of a machine.

* WAL journal: readers never wait for a writer, and a reader sees a session as of one
  committed append, never half of one.
* Every transaction is ``BEGIN IMMEDIATE``: writers in several processes queue on the
  database lock (for up to ``busy_timeout`` seconds) instead of failing or interleaving, and
  a crash mid-append rolls that append back, losing nothing else.
* WAL's ``synchronous=NORMAL`` by default, as SQLite recommends for WAL: a committed append
  survives any process crash and the file is never corrupted, but the latest appends may be
  lost on a power cut; ``durable=True`` adds one fsync per append (``synchronous=FULL``,
  about 4 ms on a busy disk against 0.08 ms) for machines where that matters.
* The file is kept at mode 0600 (one made earlier with a wider mode is tightened, with its
  ``-wal`` and ``-shm``: :mod:`jarvis.adapters.sqlite_files`) in a folder made 0700.
* The driver's errors become :class:`~jarvis.domain.sessions.records.SessionStoreError` naming the
  file; a damaged or foreign file is never rewritten.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from jarvis.adapters.sql_store.driver import Connection, Cursor, Dialect, Renderer
from jarvis.adapters.sql_store.run_guard import GuardedDriver, RunGuard
from jarvis.adapters.sql_store.sqlite_schema import migrate
from jarvis.adapters.sqlite_files import private_database
from jarvis.adapters.sqlite_wal import enter_wal, is_busy
from jarvis.domain.sessions.records import (
    SessionStoreCorruptError,
    SessionStoreError,
    SessionStoreLockedError,
    SessionStoreUnavailableError,
)

T = TypeVar("T")

SQLITE = Dialect(
    placeholder="?",
    fields=(
        ("sessions", "sessions"),
        ("messages", "messages"),
        ("state", "operator_state"),
        ("leases", "leases"),
        ("approvals", "approvals"),
        ("now", "jarvis_now_us()"),
        ("c", ""),
        (
            "created",
            "COALESCE(CASE WHEN json_valid(value) THEN json_extract(value, '$.created_us') END, 0)",
        ),
        ("next_touch", "(SELECT coalesce(max(touched), 0) + 1 FROM sessions)"),
        ("returning", ""),  # RETURNING costs SQLite more than a SELECT
        ("lock_agent", "?"),  # BEGIN IMMEDIATE holds the whole file already
        ("share", ""),  # the same
        ("lock", ""),  # the same
    ),
    unlimited=-1,
    max_seq=1 << 62,
)
"""SQLite's spelling: this machine's clock (read in Python), ``BINARY`` text order."""


def _now_us() -> int:
    return time.time_ns() // 1000


class _SqliteConnection:
    """A ``sqlite3`` connection in autocommit mode, speaking the stores' SQL."""

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw
        self._sql = Renderer(SQLITE)

    def execute(self, template: str, parameters: Sequence[object] = ()) -> Cursor:
        return self.raw.execute(self._sql(template), parameters)

    def executemany(self, template: str, rows: Sequence[Sequence[object]]) -> None:
        self.raw.executemany(self._sql(template), rows)

    def transaction(self) -> _Immediate:
        return _Immediate(self.raw)


class _Immediate:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` when the block raises (a class, not
    a generator: an append pays for it every time)."""

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw

    def __enter__(self) -> None:
        self.raw.execute("BEGIN IMMEDIATE")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is None:
            try:
                self.raw.execute("COMMIT")
                return
            except BaseException:
                self._roll_back()
                raise
        self._roll_back()

    def _roll_back(self) -> None:
        if self.raw.in_transaction:
            self.raw.execute("ROLLBACK")


class SqliteDriver(GuardedDriver):
    """The SQLite database at ``path`` (created, mode 0600, on first use). ``notice`` is
    told when the file stays readable by other users."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 10.0,
        durable: bool = False,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.durable = durable
        self._notice = notice
        self._connection: _SqliteConnection | None = None
        self._guard = RunGuard(self._close_now)

    @property
    def location(self) -> str:
        return str(self.path)

    def _open(self) -> _SqliteConnection:
        location = self.location
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        private_database(self.path, self._notice)  # an older file may be open to others
        connection = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            mode = enter_wal(connection, self.busy_timeout)
            if str(mode).lower() != "wal":
                raise SessionStoreUnavailableError(
                    f"The session database {location} cannot use WAL (it is in {mode} mode).",
                    location=location,
                    hint="Keep it on a local file system.",
                )
            connection.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'NORMAL'}")
            connection.execute("PRAGMA foreign_keys = ON")
            connection.create_function("jarvis_now_us", 0, _now_us)
            migrate(connection, location)
        except BaseException:
            connection.close()
            raise
        return _SqliteConnection(connection)

    def _translate(self, exc: sqlite3.Error) -> SessionStoreError:
        location = self.location
        text = str(exc)
        if is_busy(exc):
            return SessionStoreLockedError(
                f"The session database {location} stayed locked by another process for "
                f"{self.busy_timeout:g} s.",
                location=location,
                hint="Nothing was written; try again when the other jarvis is done.",
            )
        if isinstance(exc, sqlite3.OperationalError):
            return SessionStoreUnavailableError(
                f"Cannot use the session database {location}: {text}.", location=location
            )
        return SessionStoreCorruptError(
            f"The session database {location} is damaged ({text}); nothing was changed.",
            location=location,
            hint=f"Move it aside to start afresh, or try `sqlite3 {location} .recover`.",
        )

    def run(self, work: Callable[[Connection], T]) -> T:
        return self._guard.run(lambda: self._run(work))

    def _run(self, work: Callable[[Connection], T]) -> T:
        try:
            if self._connection is None:
                self._connection = self._open()
            return work(self._connection)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        except OSError as exc:
            raise SessionStoreUnavailableError(
                f"Cannot open the session database {self.path}: {exc.strerror}.",
                location=self.location,
            ) from exc
