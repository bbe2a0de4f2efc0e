"""Operator state and scheduler leases in the session database's ``operator_state`` and
``leases`` tables.

They share the file, connection, locking and error translation of
:class:`SqliteSessionStore`. Every write is one statement (SQLite makes each atomic, and
WAL lets readers go on meanwhile); lease times are this machine's clock, which every
process sharing the file reads alike.
"""

from __future__ import annotations

import sqlite3
import time

from jarvis.adapters.sqlite_sessions.store import SqliteSessionStore
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

_ACQUIRE = (
    "INSERT INTO leases (name, holder, expires_us) VALUES (?, ?, ?)"
    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
    " expires_us = excluded.expires_us"
    " WHERE leases.expires_us <> ? AND (leases.holder = excluded.holder OR leases.expires_us <= ?)"
)


def _now_us() -> int:
    return time.time_ns() // 1000


class SqliteOperatorStore:
    """Operator state and leases in ``sessions``' database (opened, migrated and locked by it)."""

    def __init__(self, sessions: SqliteSessionStore) -> None:
        self.sessions = sessions

    async def get_state(self, key: str) -> JSONValue | None:
        check_state_key(key)

        def work(db: sqlite3.Connection) -> tuple[str] | None:
            row: tuple[str] | None = db.execute(
                "SELECT value FROM operator_state WHERE key = ?", (key,)
            ).fetchone()
            return row

        row = await self.sessions._call(work)
        if row is None:
            return None
        try:
            return decode_state(str(row[0]))
        except ValueError as exc:
            raise SessionStoreCorruptError(
                f"Operator state {key!r} in {self.sessions.path} is damaged ({exc}).",
                location=str(self.sessions.path),
            ) from exc

    async def put_state(self, key: str, value: JSONValue) -> None:
        check_state_key(key)
        text = encode_state(value)

        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO operator_state (key, value, updated_us) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
                " updated_us = excluded.updated_us",
                (key, text, _now_us()),
            )

        await self.sessions._call(work)

    async def delete_state(self, prefix: str) -> int:
        low = check_prefix(prefix)

        def work(db: sqlite3.Connection) -> int:
            cursor = db.execute(
                "DELETE FROM operator_state WHERE key >= ? AND key < ?", (low, key_after(low))
            )
            return cursor.rowcount

        return await self.sessions._call(work)

    async def state_keys(self, prefix: str) -> list[str]:
        low = check_state_key(prefix)

        def work(db: sqlite3.Connection) -> list[str]:
            rows = db.execute(
                "SELECT key FROM operator_state WHERE key >= ? AND key < ? ORDER BY key",
                (low, key_after(low)),
            )
            return [str(row[0]) for row in rows]

        return await self.sessions._call(work)

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        check_state_key(name)
        ttl = lease_ttl_us(ttl_seconds)

        def work(db: sqlite3.Connection) -> bool:
            now = _now_us()
            cursor = db.execute(_ACQUIRE, (name, holder, now + ttl, COMPLETED_US, now))
            return cursor.rowcount > 0

        return await self.sessions._call(work)

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        check_state_key(name)
        ttl = lease_ttl_us(ttl_seconds)

        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE leases SET expires_us = ? WHERE name = ? AND holder = ?"
                " AND expires_us <> ?",
                (_now_us() + ttl, name, holder, COMPLETED_US),
            )
            return cursor.rowcount > 0

        return await self.sessions._call(work)

    async def release_lease(self, name: str, holder: str) -> None:
        check_state_key(name)

        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "DELETE FROM leases WHERE name = ? AND holder = ? AND expires_us <> ?",
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

        def work(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            try:
                cursor = db.execute(
                    "UPDATE leases SET expires_us = ? WHERE name = ? AND holder = ?",
                    (COMPLETED_US, name, holder),
                )
                done = cursor.rowcount > 0
                if done:
                    db.execute(
                        "DELETE FROM leases WHERE name >= ? AND name < ? AND expires_us = ?",
                        (low, name, COMPLETED_US),
                    )
                db.execute("COMMIT")
                return done
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        return await self.sessions._call(work)
