"""Managed agents' pending approvals in the session database's ``approvals`` table.

Same file, connection, locking and error translation as :class:`SqliteSessionStore`.
Recording a call looks for the same call and inserts in one ``BEGIN IMMEDIATE``
transaction (two processes cannot both add it); every change of status is one conditional
``UPDATE``, so exactly one caller wins it.
"""

from __future__ import annotations

import sqlite3

from jarvis.adapters.sqlite_sessions.store import SqliteSessionStore
from jarvis.domain.approval_store import StoredApproval

_COLUMNS = "agent_id, id, tool, arguments, request, status, reason, created_us, decided_us"
_OPEN = "('pending', 'allowed', 'denied')"

Row = tuple[str, str, str, str, str, str, str, int, int]


def _row(row: Row) -> StoredApproval:
    status = str(row[5])
    if status not in ("pending", "allowed", "denied", "used", "expired"):
        status = "expired"  # a status this jarvis does not know is never run
    return StoredApproval(
        agent_id=str(row[0]),
        id=str(row[1]),
        tool=str(row[2]),
        arguments=str(row[3]),
        request=str(row[4]),
        status=status,  # type: ignore[arg-type]
        reason=str(row[6]),
        created_us=int(row[7]),
        decided_us=int(row[8]),
    )


def _select(db: sqlite3.Connection, agent_id: str, approval_id: str) -> StoredApproval | None:
    row = db.execute(
        f"SELECT {_COLUMNS} FROM approvals WHERE agent_id = ? AND id = ?", (agent_id, approval_id)
    ).fetchone()
    return None if row is None else _row(row)


class SqliteApprovalStore:
    """Pending approvals in ``sessions``' database (opened, migrated and locked by it)."""

    def __init__(self, sessions: SqliteSessionStore) -> None:
        self.sessions = sessions

    async def add(self, approval: StoredApproval) -> StoredApproval:
        a = approval

        def work(db: sqlite3.Connection) -> StoredApproval:
            db.execute("BEGIN IMMEDIATE")
            try:
                found = _select(db, a.agent_id, a.id)
                if found is None:
                    row = db.execute(
                        f"SELECT {_COLUMNS} FROM approvals WHERE agent_id = ? AND tool = ?"
                        f" AND status IN {_OPEN} AND arguments = ? ORDER BY created_us LIMIT 1",
                        (a.agent_id, a.tool, a.arguments),
                    ).fetchone()
                    found = None if row is None else _row(row)
                if found is None:
                    db.execute(
                        f"INSERT INTO approvals ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, 'pending',"
                        " '', ?, 0)",
                        (a.agent_id, a.id, a.tool, a.arguments, a.request, a.created_us),
                    )
                    found = _select(db, a.agent_id, a.id)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            assert found is not None
            return found

        return await self.sessions._call(work)

    async def get(self, agent_id: str, approval_id: str) -> StoredApproval | None:
        return await self.sessions._call(lambda db: _select(db, agent_id, approval_id))

    async def decide(
        self, agent_id: str, approval_id: str, *, allow: bool, reason: str, now_us: int
    ) -> StoredApproval | None:
        status = "allowed" if allow else "denied"

        def work(db: sqlite3.Connection) -> StoredApproval | None:
            db.execute(
                "UPDATE approvals SET status = ?, reason = ?, decided_us = ?"
                " WHERE agent_id = ? AND id = ? AND status = 'pending'",
                (status, reason, now_us, agent_id, approval_id),
            )
            return _select(db, agent_id, approval_id)

        return await self.sessions._call(work)

    async def use(self, agent_id: str, approval_id: str) -> StoredApproval | None:
        def work(db: sqlite3.Connection) -> StoredApproval | None:
            found = _select(db, agent_id, approval_id)
            if found is None or found.status not in ("allowed", "denied"):
                return None
            taken = db.execute(
                "UPDATE approvals SET status = 'used' WHERE agent_id = ? AND id = ? AND status = ?",
                (agent_id, approval_id, found.status),
            ).rowcount
            return found if taken == 1 else None

        return await self.sessions._call(work)

    async def expire(self, agent_id: str, approval_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            return (
                db.execute(
                    "UPDATE approvals SET status = 'expired'"
                    " WHERE agent_id = ? AND id = ? AND status = 'pending'",
                    (agent_id, approval_id),
                ).rowcount
                == 1
            )

        return await self.sessions._call(work)

    async def pending(self, agent_id: str, *, limit: int) -> list[StoredApproval]:
        def work(db: sqlite3.Connection) -> list[Row]:
            return db.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE agent_id = ? AND status IN {_OPEN}"
                " ORDER BY created_us, id LIMIT ?",
                (agent_id, limit),
            ).fetchall()

        return [_row(row) for row in await self.sessions._call(work)]

    async def forget(self, agent_id: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM approvals WHERE agent_id = ?", (agent_id,))

        await self.sessions._call(work)
