"""``PostgresSessionStore``: sessions in a PostgreSQL database that many machines share.

* Every append is one transaction whose first statement upserts the session row, which
  locks it: appends to one session from any number of processes and machines queue on that
  row and number their messages without gaps, and a crash mid-append rolls it back.
* psycopg is imported on first use, so jarvis without the ``postgres`` extra runs until a
  PostgreSQL store is asked for, and then says how to install it.
* Connecting is bounded by ``connect_timeout`` and every statement by ``statement_timeout``;
  the driver's errors become :class:`~jarvis.domain.sessions.SessionStoreError` naming the
  URL with its password replaced by ``***`` (and scrubbed from the driver's message).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import unquote

from jarvis.adapters.postgres_sessions.schema import (
    CREATE_VERSION_TABLE,
    MIGRATION_LOCK,
    MIGRATIONS,
    SCHEMA_VERSION,
)
from jarvis.adapters.postgres_sessions.urls import password_of, redact_url
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

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

T = TypeVar("T")

_UPSERT = """
INSERT INTO jarvis_sessions (id, created_us, updated_us, touched, message_count, title)
VALUES (%s, %s, %s, nextval('jarvis_session_touch'), %s, %s)
ON CONFLICT (id) DO UPDATE SET
    updated_us = GREATEST(jarvis_sessions.updated_us, EXCLUDED.updated_us),
    touched = EXCLUDED.touched,
    message_count = jarvis_sessions.message_count + EXCLUDED.message_count,
    title = CASE WHEN jarvis_sessions.title = '' THEN EXCLUDED.title
                 ELSE jarvis_sessions.title END
RETURNING message_count
"""


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise ConfigurationError(f"limit must be >= 0, got {limit}.")


def _require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            "The PostgreSQL session store needs psycopg, which is not installed.",
            hint="Install it with: pip install 'jarvis[postgres]'",
        ) from exc


class PostgresSessionStore:
    """Sessions in the database at ``url`` (``postgresql://user:password@host:port/db``)."""

    def __init__(
        self, url: str, *, connect_timeout: float = 5.0, statement_timeout: float = 30.0
    ) -> None:
        self.url = url
        self.location = redact_url(url)
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self._connection: psycopg.Connection[TupleRow] | None = None
        self._lock = threading.Lock()
        secret = password_of(url)
        self._secrets = {s for s in (secret, unquote(secret)) if s}

    # --- plumbing -------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text.strip()

    def _open(self) -> psycopg.Connection[TupleRow]:
        _require_psycopg()
        import psycopg

        connection = psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=max(1, round(self.connect_timeout)),
            application_name="jarvis",
        )
        try:
            connection.execute(
                "SELECT set_config('statement_timeout', %s, false)",
                (f"{round(self.statement_timeout * 1000)}ms",),
            )
            self._migrate(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _migrate(self, db: psycopg.Connection[TupleRow]) -> None:
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            db.execute(CREATE_VERSION_TABLE)
            row = db.execute("SELECT max(version) FROM jarvis_schema").fetchone()
            version = int(row[0]) if row and row[0] is not None else 0
            if version > SCHEMA_VERSION:
                raise SessionStoreCorruptError(
                    f"The session database {self.location} has schema version {version}; "
                    f"this jarvis knows versions up to {SCHEMA_VERSION}.",
                    location=self.location,
                    hint="Use the newer jarvis that wrote it, or another database.",
                )
            for number in range(version, SCHEMA_VERSION):
                db.execute(MIGRATIONS[number].encode())
            if version < SCHEMA_VERSION:
                db.execute("DELETE FROM jarvis_schema")
                db.execute("INSERT INTO jarvis_schema (version) VALUES (%s)", (SCHEMA_VERSION,))

    def _translate(self, exc: Exception) -> SessionStoreError:
        import psycopg
        import psycopg.errors

        reason = self._scrub(str(exc)) or type(exc).__name__
        if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
            return SessionStoreLockedError(
                f"PostgreSQL at {self.location} did not finish in "
                f"{self.statement_timeout:g} s: {reason}",
                location=self.location,
                hint="Nothing was written; try again.",
            )
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return SessionStoreUnavailableError(
                f"Cannot reach PostgreSQL at {self.location}: {reason}",
                location=self.location,
                hint="Check that the server runs and that [sessions] url is right.",
            )
        return SessionStoreError(
            f"PostgreSQL at {self.location} refused the session store: {reason}",
            location=self.location,
        )

    def _run(self, work: Callable[[psycopg.Connection[TupleRow]], T]) -> T:
        _require_psycopg()
        import psycopg

        with self._lock:
            try:
                if self._connection is None or self._connection.closed:
                    self._connection = self._open()
                return work(self._connection)
            except psycopg.Error as exc:
                if self._connection is not None and self._connection.broken:
                    self._connection.close()
                    self._connection = None
                raise self._translate(exc) from None

    async def _call(self, work: Callable[[psycopg.Connection[TupleRow]], T]) -> T:
        return await asyncio.to_thread(self._run, work)

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _decode(self, session_id: str, rows: list[TupleRow]) -> tuple[SessionMessage, ...]:
        try:
            return tuple(decode_record(str(row[0])) for row in rows)
        except ValueError as exc:
            raise SessionStoreCorruptError(
                f"Session {session_id!r} in {self.location} holds a damaged message ({exc}).",
                location=self.location,
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

        def work(db: psycopg.Connection[TupleRow]) -> list[TupleRow]:
            if limit is None:
                return db.execute(
                    "SELECT record FROM jarvis_messages WHERE session_id = %s ORDER BY seq",
                    (session_id,),
                ).fetchall()
            rows = db.execute(
                "SELECT record FROM jarvis_messages WHERE session_id = %s"
                " ORDER BY seq DESC LIMIT %s",
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

            def work(db: psycopg.Connection[TupleRow], after: int = after) -> list[TupleRow]:
                return db.execute(
                    "SELECT record, seq FROM jarvis_messages WHERE session_id = %s"
                    " AND seq > %s ORDER BY seq LIMIT %s",
                    (session_id, after, page_size),
                ).fetchall()

            rows = await self._call(work)
            for record in self._decode(session_id, rows):
                yield record
            if len(rows) < page_size:
                return
            after = int(rows[-1][1])

    async def load_page(
        self, session_id: str, *, limit: int, before: int | None = None
    ) -> SessionPage:
        """``seq`` is the position (0, 1, ... per session): one range of the primary key."""
        check_session_id(session_id)
        check_page_bounds(limit, before)
        end = (1 << 31) - 1 if before is None else min(before, (1 << 31) - 1)

        def work(db: psycopg.Connection[TupleRow]) -> list[TupleRow]:
            rows = db.execute(
                "SELECT seq, record FROM jarvis_messages WHERE session_id = %s AND seq < %s"
                " ORDER BY seq DESC LIMIT %s",
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

        def work(db: psycopg.Connection[TupleRow]) -> None:
            now = to_micros(utc_now())
            with db.transaction():
                row = db.execute(_UPSERT, (session_id, now, now, len(encoded), title)).fetchone()
                start = int(row[0]) - len(encoded) if row else 0
                with db.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO jarvis_messages (session_id, seq, role, created_us, record)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        [
                            (session_id, start + n, role, at, text)
                            for n, (role, at, text) in enumerate(encoded)
                        ],
                    )

        await self._call(work)

    async def sessions(self) -> list[str]:
        def work(db: psycopg.Connection[TupleRow]) -> list[str]:
            rows = db.execute('SELECT id FROM jarvis_sessions ORDER BY id COLLATE "C"')
            return [str(r[0]) for r in rows.fetchall()]

        return await self._call(work)

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        _check_limit(limit)

        def work(db: psycopg.Connection[TupleRow]) -> list[TupleRow]:
            return db.execute(
                "SELECT id, message_count, created_us, updated_us, title FROM jarvis_sessions"
                " ORDER BY touched DESC LIMIT %s",
                (limit,),
            ).fetchall()

        return list(map(SessionInfo._make, await self._call(work)))

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)

        def work(db: psycopg.Connection[TupleRow]) -> None:
            db.execute("DELETE FROM jarvis_sessions WHERE id = %s", (session_id,))

        await self._call(work)
