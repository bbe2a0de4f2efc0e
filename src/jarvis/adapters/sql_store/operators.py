"""``SqlOperatorStore``: operator state and scheduler leases in the session database.

State is the ``operator_state`` table (key -> JSON value, e.g. ``operator:<id>:state``), leases
the ``leases`` table (a named lease with its holder and expiry). Every process sharing the
database (on one machine for SQLite, on many for PostgreSQL) sees the same state and competes
for the same leases. Each write is one statement, atomic in both databases (a write or a
deletion for a definition, its owner, is one transaction with the check that the very
definition is stored: :mod:`jarvis.adapters.sql_store.owners`; the deletion of the
definition itself locks its row ``FOR UPDATE`` on PostgreSQL). A value put if absent (an
operator's definition, added) is ``INSERT ... ON CONFLICT DO NOTHING``: of concurrent
additions exactly one writes it. A lease is taken
with ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` the row is free, expired or already the
taker's, which the database serialises, so exactly one of any number of concurrent takers
wins. Lease times are the dialect's clock: this machine's for SQLite (which every process
sharing the file reads alike), the database server's for PostgreSQL (so the machines' own
clocks never decide who holds a lease).
"""

from __future__ import annotations

from jarvis.adapters.sql_store.driver import Connection, SqlDriver, call
from jarvis.adapters.sql_store.owners import INSERT_DEFINITION, owned_call
from jarvis.domain.json_types import JSONValue
from jarvis.domain.operator_leases import TicksClaimedByLeases
from jarvis.domain.operators import (
    COMPLETED_US,
    check_prefix,
    check_state_key,
    decode_state,
    encode_state,
    key_after,
    lease_ttl_us,
    tick_lease,
)
from jarvis.domain.owners import Owner
from jarvis.domain.sessions.records import SessionStoreCorruptError

_ACQUIRE = """
INSERT INTO {leases} (name, holder, expires_us) VALUES (?, ?, {now} + ?)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_us = excluded.expires_us
WHERE {leases}.expires_us <> ?
  AND ({leases}.holder = excluded.holder OR {leases}.expires_us <= {now})
"""

PUT_STATE = """
INSERT INTO {state} (key, value, updated_us) VALUES (?, ?, {now})
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_us = excluded.updated_us
"""
"""Writes one ``operator_state`` row (operator state and managed agents alike)."""


class SqlOperatorStore(TicksClaimedByLeases):
    """Operator state and leases in ``driver``'s database (opened and migrated by it)."""

    def __init__(self, driver: SqlDriver) -> None:
        self.driver = driver

    async def get_state(self, key: str) -> JSONValue | None:
        check_state_key(key)

        def work(db: Connection) -> str | None:
            row = db.execute("SELECT value FROM {state} WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        text = await call(self.driver, work)
        if text is None:
            return None
        try:
            return decode_state(text)
        except ValueError as exc:
            location = self.driver.location
            raise SessionStoreCorruptError(
                f"Operator state {key!r} in {location} is damaged ({exc}).", location=location
            ) from exc

    async def put_state(self, key: str, value: JSONValue, *, owner: Owner | None = None) -> None:
        check_state_key(key)
        text = encode_state(value)

        def work(db: Connection) -> None:
            db.execute(PUT_STATE, (key, text))

        await owned_call(self.driver, owner, work)

    async def put_state_if_absent(
        self, key: str, value: JSONValue, *, owner: Owner | None = None
    ) -> bool:
        check_state_key(key)
        text = encode_state(value)

        def work(db: Connection) -> bool:
            return db.execute(INSERT_DEFINITION, (key, text)).rowcount > 0

        return await owned_call(self.driver, owner, work)

    async def delete_state(self, prefix: str, *, owner: Owner | None = None) -> int:
        low = check_prefix(prefix)

        def work(db: Connection) -> int:
            return db.execute(
                "DELETE FROM {state} WHERE key{c} >= ? AND key{c} < ?", (low, key_after(low))
            ).rowcount

        return await owned_call(self.driver, owner, work)

    async def delete_key(self, key: str, *, owner: Owner | None = None) -> bool:
        check_state_key(key)

        def work(db: Connection) -> bool:
            return db.execute("DELETE FROM {state} WHERE key = ?", (key,)).rowcount > 0

        changing = owner is not None and owner.key == key  # the definition itself
        return await owned_call(self.driver, owner, work, changing=changing)

    async def state_keys(self, prefix: str) -> list[str]:
        low = check_state_key(prefix)

        def work(db: Connection) -> list[str]:
            rows = db.execute(
                "SELECT key FROM {state} WHERE key{c} >= ? AND key{c} < ? ORDER BY key{c}",
                (low, key_after(low)),
            ).fetchall()
            return [str(row[0]) for row in rows]

        return await call(self.driver, work)

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        check_state_key(name)
        ttl = lease_ttl_us(ttl_seconds)

        def work(db: Connection) -> bool:
            return db.execute(_ACQUIRE, (name, holder, ttl, COMPLETED_US)).rowcount > 0

        return await call(self.driver, work)

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        check_state_key(name)
        ttl = lease_ttl_us(ttl_seconds)

        def work(db: Connection) -> bool:
            cursor = db.execute(
                "UPDATE {leases} SET expires_us = {now} + ?"
                " WHERE name = ? AND holder = ? AND expires_us <> ?",
                (ttl, name, holder, COMPLETED_US),
            )
            return cursor.rowcount > 0

        return await call(self.driver, work)

    async def release_lease(self, name: str, holder: str) -> None:
        check_state_key(name)

        def work(db: Connection) -> None:
            db.execute(
                "DELETE FROM {leases} WHERE name = ? AND holder = ? AND expires_us <> ?",
                (name, holder, COMPLETED_US),
            )

        await call(self.driver, work)

    async def complete_tick(self, operator_id: str, tick_us: int, holder: str) -> bool:
        name = tick_lease(operator_id, tick_us)
        low = tick_lease(operator_id, 0)

        def work(db: Connection) -> bool:
            with db.transaction():
                cursor = db.execute(
                    "UPDATE {leases} SET expires_us = ? WHERE name = ? AND holder = ?",
                    (COMPLETED_US, name, holder),
                )
                done = cursor.rowcount > 0
                if done:
                    db.execute(
                        "DELETE FROM {leases} WHERE name{c} >= ? AND name{c} < ?"
                        " AND expires_us = ?",
                        (low, name, COMPLETED_US),
                    )
                return done

        return await call(self.driver, work)
