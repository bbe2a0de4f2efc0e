"""``SqliteSessionStore``: sessions in one SQLite database, shared by the processes of a machine.

* WAL journal: readers never wait for a writer, and a reader sees a session as of one
  committed append, never half of one.
* Every append is one ``BEGIN IMMEDIATE`` transaction: writers in several processes queue
  on the database lock (for up to ``busy_timeout`` seconds) instead of failing or
  interleaving, and a crash mid-append rolls that append back, losing nothing else.
* WAL's ``synchronous=NORMAL`` by default, as SQLite recommends for WAL: a committed append
  survives any process crash and the file is never corrupted, but the latest appends may be
  lost on a power cut; ``durable=True`` adds one fsync per append (``synchronous=FULL``,
  about 4 ms on a busy disk against 0.08 ms) for machines where that matters.
* The driver's errors become :class:`~jarvis.domain.sessions.SessionStoreError` naming the
  file; a damaged or foreign file is never rewritten.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from jarvis.adapters.sqlite_sessions.schema import migrate
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.messages import Message
from jarvis.domain.session_ids import check_session_id
from jarvis.domain.sessions import (
    PAGE_SIZE,
    SessionInfo,
    SessionMessage,
    SessionPage,
    SessionStoreCorruptError,
    SessionStoreError,
    SessionStoreLockedError,
    SessionStoreUnavailableError,
    check_page_bounds,
    check_page_size,
    decode_record,
    encode_record,
    title_of,
    to_micros,
    utc_now,
)

T = TypeVar("T")


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise ConfigurationError(f"limit must be >= 0, got {limit}.")


class SqliteSessionStore:
    """Sessions in the SQLite database at ``path`` (created, mode 0600, on first use)."""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 10.0, durable: bool = False
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.durable = durable
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    # --- plumbing -------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        location = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        connection = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise SessionStoreUnavailableError(
                    f"The session database {location} cannot use WAL (it is in {mode} mode).",
                    location=location,
                    hint="Keep it on a local file system.",
                )
            connection.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'NORMAL'}")
            connection.execute("PRAGMA foreign_keys = ON")
            migrate(connection, location)
        except BaseException:
            connection.close()
            raise
        return connection

    def _translate(self, exc: sqlite3.Error) -> SessionStoreError:
        location = str(self.path)
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
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

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                if self._connection is None:
                    self._connection = self._open()
                return work(self._connection)
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc
            except OSError as exc:
                raise SessionStoreUnavailableError(
                    f"Cannot open the session database {self.path}: {exc.strerror}.",
                    location=str(self.path),
                ) from exc

    async def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._run, work)

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _decode(self, session_id: str, rows: list[tuple[str]]) -> tuple[SessionMessage, ...]:
        try:
            return tuple(decode_record(row[0]) for row in rows)
        except ValueError as exc:
            raise SessionStoreCorruptError(
                f"Session {session_id!r} in {self.path} holds a damaged message ({exc}).",
                location=str(self.path),
            ) from exc

    # --- the port -------------------------------------------------------------------------

    async def load(self, session_id: str, *, limit: int | None = None) -> tuple[Message, ...]:
        return tuple(r.message for r in await self.load_records(session_id, limit=limit))

    async def load_records(
        self, session_id: str, *, limit: int | None = None
    ) -> tuple[SessionMessage, ...]:
        check_session_id(session_id)
        _check_limit(limit)
        if limit == 0:
            return ()

        def work(db: sqlite3.Connection) -> list[tuple[str]]:
            if limit is None:
                return db.execute(
                    "SELECT record FROM messages WHERE session_id = ? ORDER BY seq",
                    (session_id,),
                ).fetchall()
            rows = db.execute(
                "SELECT record FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (session_id, limit),
            ).fetchall()
            rows.reverse()
            return rows

        return self._decode(session_id, await self._call(work))

    async def iter_records(
        self, session_id: str, *, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[SessionMessage]:
        check_session_id(session_id)
        check_page_size(page_size)
        after = -1
        while True:

            def work(db: sqlite3.Connection, after: int = after) -> list[tuple[int, str]]:
                return db.execute(
                    "SELECT seq, record FROM messages WHERE session_id = ? AND seq > ?"
                    " ORDER BY seq LIMIT ?",
                    (session_id, after, page_size),
                ).fetchall()

            rows = await self._call(work)
            for record in self._decode(session_id, [(text,) for _, text in rows]):
                yield record
            if len(rows) < page_size:
                return
            after = int(rows[-1][0])

    async def load_page(
        self, session_id: str, *, limit: int, before: int | None = None
    ) -> SessionPage:
        """``seq`` is the position (0, 1, ... per session): one range of the primary key."""
        check_session_id(session_id)
        check_page_bounds(limit, before)
        end = (1 << 62) if before is None else min(before, 1 << 62)

        def work(db: sqlite3.Connection) -> list[tuple[int, str]]:
            rows = db.execute(
                "SELECT seq, record FROM messages WHERE session_id = ? AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (session_id, end, limit),
            ).fetchall()
            rows.reverse()
            return rows

        rows = await self._call(work)
        records = self._decode(session_id, [(text,) for _, text in rows])
        return SessionPage(start=int(rows[0][0]) if rows else 0, records=records)

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        await self.append_records(session_id, [SessionMessage(message=m) for m in messages])

    async def append_records(self, session_id: str, records: Sequence[SessionMessage]) -> None:
        check_session_id(session_id)
        if not records:
            return
        encoded = [
            (r.message.role.value, to_micros(r.created_at), encode_record(r)) for r in records
        ]
        title = title_of(list(records))

        def work(db: sqlite3.Connection) -> None:
            now = to_micros(utc_now())
            db.execute("BEGIN IMMEDIATE")
            try:
                touched = db.execute("SELECT coalesce(max(touched), 0) + 1 FROM sessions")
                tick = int(touched.fetchone()[0])
                row = db.execute(
                    "SELECT message_count FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                if row is None:
                    start = 0
                    db.execute(
                        "INSERT INTO sessions (id, created_us, updated_us, touched,"
                        " message_count, title) VALUES (?, ?, ?, ?, ?, ?)",
                        (session_id, now, now, tick, len(encoded), title),
                    )
                else:
                    start = int(row[0])
                    db.execute(
                        "UPDATE sessions SET updated_us = max(updated_us, ?), touched = ?,"
                        " message_count = message_count + ?,"
                        " title = CASE WHEN title = '' THEN ? ELSE title END WHERE id = ?",
                        (now, tick, len(encoded), title, session_id),
                    )
                db.executemany(
                    "INSERT INTO messages (session_id, seq, role, created_us, record)"
                    " VALUES (?, ?, ?, ?, ?)",
                    [
                        (session_id, start + n, role, at, text)
                        for n, (role, at, text) in enumerate(encoded)
                    ],
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        await self._call(work)

    async def sessions(self) -> list[str]:
        def work(db: sqlite3.Connection) -> list[str]:
            return [str(r[0]) for r in db.execute("SELECT id FROM sessions ORDER BY id")]

        return await self._call(work)

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        _check_limit(limit)

        def work(db: sqlite3.Connection) -> list[tuple[str, int, int, int, str]]:
            return db.execute(
                "SELECT id, message_count, created_us, updated_us, title FROM sessions"
                " ORDER BY touched DESC LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()

        return list(map(SessionInfo._make, await self._call(work)))

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)

        def work(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
                db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        await self._call(work)
