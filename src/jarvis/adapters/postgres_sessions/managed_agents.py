"""Managed agent definitions in the session database's ``jarvis_operator_state`` table.

Every server on the database sees the same definitions: they share the connection handling,
timeouts and error translation (password scrubbed) of :class:`PostgresSessionStore`, under
the keys ``managed_agent:<id>``. A page is read in the database, ordered by the record's
``created_us`` (the last ``"created_us":N`` of the canonical record, whose top-level
``created_us`` and ``updated_us`` come last), then the key (the id's order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jarvis.adapters.postgres_sessions.store import PostgresSessionStore
from jarvis.domain.managed_agents import (
    ManagedAgent,
    Position,
    agent_from_record,
    agent_to_record,
    check_agent_id,
)
from jarvis.domain.sessions import SessionStoreCorruptError, to_micros, utc_now

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

PREFIX = "managed_agent:"
_AFTER_PREFIX = "managed_agent;"
_CREATED = "COALESCE(substring(value from '.*\"created_us\":(-?[0-9]{1,19})')::bigint, 0)"
"""A record's creation time; a damaged record sorts first (and is reported when read)."""


class PostgresManagedAgentStore:
    """Definitions in ``sessions``' database (connected and migrated by it)."""

    def __init__(self, sessions: PostgresSessionStore) -> None:
        self.sessions = sessions

    def _decode(self, text: str) -> ManagedAgent:
        try:
            return agent_from_record(text)
        except ValueError as exc:
            raise SessionStoreCorruptError(
                f"A managed agent in {self.sessions.location} is damaged ({exc}).",
                location=self.sessions.location,
            ) from exc

    async def put(self, agent: ManagedAgent) -> None:
        key = PREFIX + check_agent_id(agent.id)
        text = agent_to_record(agent)

        def work(db: psycopg.Connection[TupleRow]) -> None:
            db.execute(
                "INSERT INTO jarvis_operator_state (key, value, updated_us) VALUES (%s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value,"
                " updated_us = EXCLUDED.updated_us",
                (key, text, to_micros(utc_now())),
            )

        await self.sessions._call(work)

    async def get(self, agent_id: str) -> ManagedAgent | None:
        key = PREFIX + check_agent_id(agent_id)

        def work(db: psycopg.Connection[TupleRow]) -> TupleRow | None:
            return db.execute(
                "SELECT value FROM jarvis_operator_state WHERE key = %s", (key,)
            ).fetchone()

        row = await self.sessions._call(work)
        return None if row is None else self._decode(str(row[0]))

    async def list(
        self, *, after: Position | None = None, limit: int | None = None
    ) -> list[ManagedAgent]:
        where = 'key COLLATE "C" >= %s AND key COLLATE "C" < %s'
        arguments: list[object] = [PREFIX, _AFTER_PREFIX]
        if after is not None:
            where += f' AND ({_CREATED}, key COLLATE "C") > (%s, %s)'
            arguments += [after[0], PREFIX + after[1]]
        arguments.append(limit)

        def work(db: psycopg.Connection[TupleRow]) -> list[TupleRow]:
            return db.execute(
                f"SELECT value FROM jarvis_operator_state WHERE {where}"
                f' ORDER BY {_CREATED}, key COLLATE "C" LIMIT %s',
                arguments,
            ).fetchall()

        agents = [self._decode(str(row[0])) for row in await self.sessions._call(work)]
        return sorted(agents, key=lambda a: (a.created_us, a.id))

    async def count(self) -> int:
        def work(db: psycopg.Connection[TupleRow]) -> int:
            row = db.execute(
                "SELECT COUNT(*) FROM jarvis_operator_state"
                ' WHERE key COLLATE "C" >= %s AND key COLLATE "C" < %s',
                (PREFIX, _AFTER_PREFIX),
            ).fetchone()
            return 0 if row is None else int(row[0])

        return await self.sessions._call(work)

    async def delete(self, agent_id: str) -> bool:
        key = PREFIX + check_agent_id(agent_id)

        def work(db: psycopg.Connection[TupleRow]) -> bool:
            cursor = db.execute("DELETE FROM jarvis_operator_state WHERE key = %s", (key,))
            return cursor.rowcount > 0

        return await self.sessions._call(work)
