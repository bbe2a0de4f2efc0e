"""``SqlManagedAgentStore``: managed agent definitions in the session database.

They live next to the conversations they own, in the ``operator_state`` table under the keys
``managed_agent:<id>``, so every server on the database sees the same definitions. A page is
read in the database, ordered by the record's ``created_us`` (the dialect reads it from the
JSON record; a damaged record sorts first and is reported when read), then the key (the
id's order), so listing reads no more than the page. A creation writes its row only where
there is none, in one statement (of concurrent creations of an id exactly one wins). An
update replaces, and a deletion
removes, a definition only while it is the one read (its incarnation, checked in the same
transaction, its row locked on PostgreSQL: :mod:`jarvis.adapters.sql_store.owners`), so an
update never brings back one deleted meanwhile, and neither touches one created again since.
"""

from __future__ import annotations

from jarvis.adapters.sql_store.driver import Connection, SqlDriver, call
from jarvis.adapters.sql_store.operators import PUT_STATE
from jarvis.adapters.sql_store.owners import INSERT_DEFINITION, owner_holds
from jarvis.domain.managed_agents import (
    DEFINITION_PREFIX,
    ManagedAgent,
    Position,
    agent_from_record,
    agent_to_record,
    check_agent_id,
    definition_owner,
    owner_of,
)
from jarvis.domain.owners import Owner
from jarvis.domain.sessions.records import SessionStoreCorruptError

PREFIX = DEFINITION_PREFIX
_AFTER_PREFIX = "managed_agent;"  # the next key after every "managed_agent:..." key
_MINE = "key{c} >= ? AND key{c} < ?"
_REPLACE = "UPDATE {state} SET value = ?, updated_us = {now} WHERE key = ?"
_DELETE = "DELETE FROM {state} WHERE key = ?"


class SqlManagedAgentStore:
    """Definitions in ``driver``'s database (opened and migrated by it)."""

    def __init__(self, driver: SqlDriver) -> None:
        self.driver = driver

    def _decode(self, text: str) -> ManagedAgent:
        try:
            return agent_from_record(text)
        except ValueError as exc:
            location = self.driver.location
            raise SessionStoreCorruptError(
                f"A managed agent in {location} is damaged ({exc}).", location=location
            ) from exc

    async def put(self, agent: ManagedAgent) -> None:
        key = PREFIX + check_agent_id(agent.id)
        text = agent_to_record(agent)

        def work(db: Connection) -> None:
            db.execute(PUT_STATE, (key, text))

        await call(self.driver, work)

    async def create(self, agent: ManagedAgent) -> bool:
        key = PREFIX + check_agent_id(agent.id)
        text = agent_to_record(agent)

        def work(db: Connection) -> bool:
            return db.execute(INSERT_DEFINITION, (key, text)).rowcount > 0

        return await call(self.driver, work)

    async def _change(self, owner: Owner, statement: str, arguments: tuple[str, ...]) -> bool:
        """``statement`` in one transaction with the check that ``owner``'s very definition
        is stored (its row locked for the change); whether it ran."""

        def work(db: Connection) -> bool:
            with db.transaction():
                if not owner_holds(db, owner, changing=True):
                    return False
                db.execute(statement, arguments)
                return True

        return await call(self.driver, work)

    async def update(self, agent: ManagedAgent) -> bool:
        key = PREFIX + check_agent_id(agent.id)
        return await self._change(owner_of(agent), _REPLACE, (agent_to_record(agent), key))

    async def get(self, agent_id: str) -> ManagedAgent | None:
        key = PREFIX + check_agent_id(agent_id)

        def work(db: Connection) -> str | None:
            row = db.execute("SELECT value FROM {state} WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        text = await call(self.driver, work)
        return None if text is None else self._decode(text)

    async def list(
        self, *, after: Position | None = None, limit: int | None = None
    ) -> list[ManagedAgent]:
        where = _MINE
        arguments: list[object] = [PREFIX, _AFTER_PREFIX]
        if after is not None:
            where += " AND ({created}, key{c}) > (?, ?)"
            arguments += [after[0], PREFIX + after[1]]
        arguments.append(self.driver.dialect.unlimited if limit is None else limit)

        def work(db: Connection) -> list[str]:
            rows = db.execute(
                f"SELECT value FROM {{state}} WHERE {where} ORDER BY {{created}}, key{{c}} LIMIT ?",
                arguments,
            ).fetchall()
            return [str(row[0]) for row in rows]

        agents = [self._decode(text) for text in await call(self.driver, work)]
        return sorted(agents, key=lambda a: (a.created_us, a.id))

    async def count(self) -> int:
        def work(db: Connection) -> int:
            row = db.execute(
                f"SELECT COUNT(*) FROM {{state}} WHERE {_MINE}", (PREFIX, _AFTER_PREFIX)
            ).fetchone()
            return 0 if row is None else int(row[0])

        return await call(self.driver, work)

    async def delete(self, agent_id: str, incarnation: str) -> bool:
        key = PREFIX + check_agent_id(agent_id)
        return await self._change(definition_owner(agent_id, incarnation), _DELETE, (key,))
