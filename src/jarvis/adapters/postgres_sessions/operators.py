"""Operator state and scheduler leases in the session database's ``jarvis_operator_state``
and ``jarvis_leases`` tables.

Every jarvis process on every machine that shares the database sees the same state and
competes for the same leases. Each write is one statement (atomic in PostgreSQL); a lease
is taken with ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` the row is free, expired or
already the taker's, which PostgreSQL serialises on the row, so exactly one of any number
of concurrent takers wins. Lease times are the database server's clock
(``clock_timestamp()``), so the machines' own clocks never decide who holds a lease.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jarvis.adapters.postgres_sessions.store import PostgresSessionStore
from jarvis.domain.json_types import JSONValue
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
from jarvis.domain.sessions import SessionStoreCorruptError

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

_NOW = "(extract(epoch from clock_timestamp()) * 1000000)::bigint"

_ACQUIRE = f"""
INSERT INTO jarvis_leases (name, holder, expires_us) VALUES (%s, %s, {_NOW} + %s)
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_us = EXCLUDED.expires_us
WHERE jarvis_leases.expires_us <> %s
  AND (jarvis_leases.holder = EXCLUDED.holder OR jarvis_leases.expires_us <= {_NOW})
"""


class PostgresOperatorStore:
    """Operator state and leases in ``sessions``' database (connected and migrated by it)."""

    def __init__(self, sessions: PostgresSessionStore) -> None:
        self.sessions = sessions

    async def get_state(self, key: str) -> JSONValue | None:
        check_state_key(key)

        def work(db: psycopg.Connection[TupleRow]) -> TupleRow | None:
            return db.execute(
                "SELECT value FROM jarvis_operator_state WHERE key = %s", (key,)
            ).fetchone()

        row = await self.sessions._call(work)
        if row is None:
            return None
        try:
            return decode_state(str(row[0]))
        except ValueError as exc:
            raise SessionStoreCorruptError(
                f"Operator state {key!r} in {self.sessions.location} is damaged ({exc}).",
                location=self.sessions.location,
            ) from exc

    async def put_state(self, key: str, value: JSONValue) -> None:
        check_state_key(key)
        text = encode_state(value)

        def work(db: psycopg.Connection[TupleRow]) -> None:
            db.execute(
                "INSERT INTO jarvis_operator_state (key, value, updated_us)"
                f" VALUES (%s, %s, {_NOW})"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value,"
                " updated_us = EXCLUDED.updated_us",
                (key, text),
            )

        await self.sessions._call(work)

    async def delete_state(self, prefix: str) -> int:
        low = check_prefix(prefix)

        def work(db: psycopg.Connection[TupleRow]) -> int:
            cursor = db.execute(
                'DELETE FROM jarvis_operator_state WHERE key COLLATE "C" >= %s'
                ' AND key COLLATE "C" < %s',
                (low, key_after(low)),
            )
            return cursor.rowcount

        return await self.sessions._call(work)

    async def state_keys(self, prefix: str) -> list[str]:
        low = check_state_key(prefix)

        def work(db: psycopg.Connection[TupleRow]) -> list[str]:
            rows = db.execute(
                'SELECT key FROM jarvis_operator_state WHERE key COLLATE "C" >= %s'
                ' AND key COLLATE "C" < %s ORDER BY key COLLATE "C"',
                (low, key_after(low)),
            ).fetchall()
            return [str(row[0]) for row in rows]

        return await self.sessions._call(work)

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        check_state_key(name)
        ttl = lease_ttl_us(ttl_seconds)

        def work(db: psycopg.Connection[TupleRow]) -> bool:
            return db.execute(_ACQUIRE, (name, holder, ttl, COMPLETED_US)).rowcount > 0

        return await self.sessions._call(work)

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        check_state_key(name)
        ttl = lease_ttl_us(ttl_seconds)

        def work(db: psycopg.Connection[TupleRow]) -> bool:
            cursor = db.execute(
                f"UPDATE jarvis_leases SET expires_us = {_NOW} + %s"
                " WHERE name = %s AND holder = %s AND expires_us <> %s",
                (ttl, name, holder, COMPLETED_US),
            )
            return cursor.rowcount > 0

        return await self.sessions._call(work)

    async def release_lease(self, name: str, holder: str) -> None:
        check_state_key(name)

        def work(db: psycopg.Connection[TupleRow]) -> None:
            db.execute(
                "DELETE FROM jarvis_leases WHERE name = %s AND holder = %s AND expires_us <> %s",
                (name, holder, COMPLETED_US),
            )

        await self.sessions._call(work)

    async def claim_tick(
        self, operator_id: str, tick_us: int, holder: str, ttl_seconds: float
    ) -> bool:
        return await self.acquire_lease(tick_lease(operator_id, tick_us), holder, ttl_seconds)

    async def complete_tick(self, operator_id: str, tick_us: int, holder: str) -> bool:
        name = tick_lease(operator_id, tick_us)
        low = tick_lease(operator_id, 0)

        def work(db: psycopg.Connection[TupleRow]) -> bool:
            with db.transaction():
                cursor = db.execute(
                    "UPDATE jarvis_leases SET expires_us = %s WHERE name = %s AND holder = %s",
                    (COMPLETED_US, name, holder),
                )
                done = cursor.rowcount > 0
                if done:
                    db.execute(
                        'DELETE FROM jarvis_leases WHERE name COLLATE "C" >= %s'
                        ' AND name COLLATE "C" < %s AND expires_us = %s',
                        (low, name, COMPLETED_US),
                    )
                return done

        return await self.sessions._call(work)
