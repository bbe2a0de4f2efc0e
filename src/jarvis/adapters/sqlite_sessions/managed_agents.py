"""Managed agent definitions in the session database's ``operator_state`` table.

They live next to the conversations they own, in the same file, with the same connection,
locking and error translation as :class:`SqliteSessionStore`, under the keys
``managed_agent:<id>``. A page is read in the database (ordered by the ``created_us`` of the
JSON record, then the key: the id's order), so listing reads no more than the page.
"""

from __future__ import annotations

import sqlite3

from jarvis.adapters.sqlite_sessions.store import SqliteSessionStore
from jarvis.domain.managed_agents import (
    ManagedAgent,
    Position,
    agent_from_record,
    agent_to_record,
    check_agent_id,
)
from jarvis.domain.sessions import SessionStoreCorruptError, to_micros, utc_now

PREFIX = "managed_agent:"
_AFTER_PREFIX = "managed_agent;"  # the next key after every "managed_agent:..." key
_CREATED = "COALESCE(CASE WHEN json_valid(value) THEN json_extract(value, '$.created_us') END, 0)"
"""A record's creation time; a damaged record sorts first (and is reported when read)."""


class SqliteManagedAgentStore:
    """Definitions in ``sessions``' database (opened, migrated and locked by it)."""

    def __init__(self, sessions: SqliteSessionStore) -> None:
        self.sessions = sessions

    def _decode(self, text: str) -> ManagedAgent:
        try:
            return agent_from_record(text)
        except ValueError as exc:
            raise SessionStoreCorruptError(
                f"A managed agent in {self.sessions.path} is damaged ({exc}).",
                location=str(self.sessions.path),
            ) from exc

    async def put(self, agent: ManagedAgent) -> None:
        key = PREFIX + check_agent_id(agent.id)
        text = agent_to_record(agent)

        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO operator_state (key, value, updated_us) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
                " updated_us = excluded.updated_us",
                (key, text, to_micros(utc_now())),
            )

        await self.sessions._call(work)

    async def get(self, agent_id: str) -> ManagedAgent | None:
        key = PREFIX + check_agent_id(agent_id)

        def work(db: sqlite3.Connection) -> tuple[str] | None:
            row: tuple[str] | None = db.execute(
                "SELECT value FROM operator_state WHERE key = ?", (key,)
            ).fetchone()
            return row

        row = await self.sessions._call(work)
        return None if row is None else self._decode(str(row[0]))

    async def list(
        self, *, after: Position | None = None, limit: int | None = None
    ) -> list[ManagedAgent]:
        where = "key >= ? AND key < ?"
        arguments: list[object] = [PREFIX, _AFTER_PREFIX]
        if after is not None:
            where += f" AND ({_CREATED}, key) > (?, ?)"
            arguments += [after[0], PREFIX + after[1]]
        arguments.append(-1 if limit is None else limit)

        def work(db: sqlite3.Connection) -> list[tuple[str]]:
            return db.execute(
                f"SELECT value FROM operator_state WHERE {where} ORDER BY {_CREATED}, key LIMIT ?",
                arguments,
            ).fetchall()

        agents = [self._decode(str(row[0])) for row in await self.sessions._call(work)]
        return sorted(agents, key=lambda a: (a.created_us, a.id))

    async def count(self) -> int:
        def work(db: sqlite3.Connection) -> int:
            row = db.execute(
                "SELECT COUNT(*) FROM operator_state WHERE key >= ? AND key < ?",
                (PREFIX, _AFTER_PREFIX),
            ).fetchone()
            return int(row[0])

        return await self.sessions._call(work)

    async def delete(self, agent_id: str) -> bool:
        key = PREFIX + check_agent_id(agent_id)

        def work(db: sqlite3.Connection) -> bool:
            return db.execute("DELETE FROM operator_state WHERE key = ?", (key,)).rowcount > 0

        return await self.sessions._call(work)
