"""``SqlSessionStore``: sessions in an SQL database (SQLite on one machine, PostgreSQL on many).

* Every append is one transaction whose first write upserts the session row: on SQLite a
  ``BEGIN IMMEDIATE`` that writers in several processes queue on, on PostgreSQL the row lock
  that appends to one session from any number of machines queue on. Either way messages are
  numbered without gaps, and a crash mid-append rolls that append back, losing nothing else.
* ``touched`` numbers appends across sessions: each append moves its session to the end, so
  listing the most recent sessions first reads one index in order.
* ``seq`` is a message's position (0, 1, ... per session): a page is one range of the
  primary key.
* An append for a managed agent's or an operator's run names its owner: the definition is
  checked in the append's transaction (:mod:`jarvis.adapters.sql_store.owners`); so is a
  deletion that names the definition whose conversation it deletes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from jarvis.adapters.sql_store.driver import Connection, Row, SqlDriver, call
from jarvis.adapters.sql_store.owners import owned_call, owner_holds
from jarvis.domain.owners import Owner, OwnerGoneError
from jarvis.domain.sessions.ids import check_session_id
from jarvis.domain.sessions.records import (
    PAGE_SIZE,
    SessionInfo,
    SessionMessage,
    SessionPage,
    SessionStoreCorruptError,
    check_page_bounds,
    check_page_size,
    decode_record,
    encode_record,
    title_of,
    to_micros,
    utc_now,
)
from jarvis.domain.sessions.store_defaults import MessagesFromRecords, check_limit

_UPSERT = """
INSERT INTO {sessions} (id, created_us, updated_us, touched, message_count, title)
VALUES (?, ?, ?, {next_touch}, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    updated_us = CASE WHEN {sessions}.updated_us > excluded.updated_us
                      THEN {sessions}.updated_us ELSE excluded.updated_us END,
    touched = excluded.touched,
    message_count = {sessions}.message_count + excluded.message_count,
    title = CASE WHEN {sessions}.title = '' THEN excluded.title ELSE {sessions}.title END
{returning}
"""
"""Creates or moves a session to the end, counting the appended messages; the new count comes
back (``RETURNING``) where the dialect has it cheaper than a ``SELECT``."""


class SqlSessionStore(MessagesFromRecords):
    """Sessions in ``driver``'s database (opened and migrated by it on first use)."""

    def __init__(self, driver: SqlDriver) -> None:
        self.driver = driver

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        self.driver.close()

    def _decode(self, session_id: str, texts: list[str]) -> tuple[SessionMessage, ...]:
        try:
            return tuple(decode_record(text) for text in texts)
        except ValueError as exc:
            location = self.driver.location
            raise SessionStoreCorruptError(
                f"Session {session_id!r} in {location} holds a damaged message ({exc}).",
                location=location,
            ) from exc

    async def load_records(
        self, session_id: str, *, limit: int | None = None
    ) -> tuple[SessionMessage, ...]:
        check_session_id(session_id)
        check_limit(limit)
        if limit == 0:
            return ()

        def work(db: Connection) -> list[Row]:
            if limit is None:
                return db.execute(
                    "SELECT record FROM {messages} WHERE session_id = ? ORDER BY seq",
                    (session_id,),
                ).fetchall()
            rows = db.execute(
                "SELECT record FROM {messages} WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (session_id, limit),
            ).fetchall()
            rows.reverse()
            return rows

        return self._decode(session_id, [str(row[0]) for row in await call(self.driver, work)])

    async def iter_records(
        self, session_id: str, *, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[SessionMessage]:
        check_session_id(session_id)
        check_page_size(page_size)
        after = -1
        while True:

            def work(db: Connection, after: int = after) -> list[Row]:
                return db.execute(
                    "SELECT seq, record FROM {messages} WHERE session_id = ? AND seq > ?"
                    " ORDER BY seq LIMIT ?",
                    (session_id, after, page_size),
                ).fetchall()

            rows = await call(self.driver, work)
            for record in self._decode(session_id, [str(text) for _, text in rows]):
                yield record
            if len(rows) < page_size:
                return
            after = int(rows[-1][0])

    async def load_page(
        self, session_id: str, *, limit: int, before: int | None = None
    ) -> SessionPage:
        check_session_id(session_id)
        check_page_bounds(limit, before)
        top = self.driver.dialect.max_seq
        end = top if before is None else min(before, top)

        def work(db: Connection) -> list[Row]:
            rows = db.execute(
                "SELECT seq, record FROM {messages} WHERE session_id = ? AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (session_id, end, limit),
            ).fetchall()
            rows.reverse()
            return rows

        rows = await call(self.driver, work)
        records = self._decode(session_id, [str(text) for _, text in rows])
        return SessionPage(start=int(rows[0][0]) if rows else 0, records=records)

    async def append_records(
        self, session_id: str, records: Sequence[SessionMessage], *, owner: Owner | None = None
    ) -> None:
        check_session_id(session_id)
        if not records:
            return
        encoded = [
            (r.message.role.value, to_micros(r.created_at), encode_record(r)) for r in records
        ]
        title = title_of(list(records))

        def work(db: Connection) -> bool:
            now = to_micros(utc_now())
            with db.transaction():
                if owner is not None and not owner_holds(db, owner):
                    return False
                rows = db.execute(_UPSERT, (session_id, now, now, len(encoded), title)).fetchall()
                if not rows:
                    rows = db.execute(
                        "SELECT message_count FROM {sessions} WHERE id = ?", (session_id,)
                    ).fetchall()
                start = int(rows[0][0]) - len(encoded)
                db.executemany(
                    "INSERT INTO {messages} (session_id, seq, role, created_us, record)"
                    " VALUES (?, ?, ?, ?, ?)",
                    [
                        (session_id, start + n, role, at, text)
                        for n, (role, at, text) in enumerate(encoded)
                    ],
                )
            return True

        if not await call(self.driver, work) and owner is not None:
            raise OwnerGoneError(owner)

    async def sessions(self) -> list[str]:
        def work(db: Connection) -> list[str]:
            rows = db.execute("SELECT id FROM {sessions} ORDER BY id{c}").fetchall()
            return [str(row[0]) for row in rows]

        return await call(self.driver, work)

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        check_limit(limit)
        bound = self.driver.dialect.unlimited if limit is None else limit

        def work(db: Connection) -> list[Row]:
            return db.execute(
                "SELECT id, message_count, created_us, updated_us, title FROM {sessions}"
                " ORDER BY touched DESC LIMIT ?",
                (bound,),
            ).fetchall()

        return list(map(SessionInfo._make, await call(self.driver, work)))

    async def delete(self, session_id: str, *, owner: Owner | None = None) -> None:
        check_session_id(session_id)

        def work(db: Connection) -> None:
            db.execute("DELETE FROM {messages} WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM {sessions} WHERE id = ?", (session_id,))

        if owner is not None:
            await owned_call(self.driver, owner, work)
            return

        def whole(db: Connection) -> None:
            with db.transaction():
                work(db)

        await call(self.driver, whole)
