"""Managed agents' pending approvals in the session database's ``jarvis_approvals`` table.

Every server on the database sees them, through the connection handling and error
translation of :class:`PostgresSessionStore`. Recording a call looks for the same call and
inserts in one transaction holding an advisory lock on the agent (two servers cannot both
add it); every change of status is one conditional ``UPDATE``, so exactly one server wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jarvis.adapters.postgres_sessions.store import PostgresSessionStore
from jarvis.domain.approval_store import StoredApproval

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

_COLUMNS = "agent_id, id, tool, arguments, request, status, reason, created_us, decided_us"
_OPEN = "('pending', 'allowed', 'denied')"


def _row(row: TupleRow) -> StoredApproval:
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


def _select(
    db: psycopg.Connection[TupleRow], agent_id: str, approval_id: str
) -> StoredApproval | None:
    row = db.execute(
        f"SELECT {_COLUMNS} FROM jarvis_approvals WHERE agent_id = %s AND id = %s",
        (agent_id, approval_id),
    ).fetchone()
    return None if row is None else _row(row)


class PostgresApprovalStore:
    """Pending approvals in ``sessions``' database (connected and migrated by it)."""

    def __init__(self, sessions: PostgresSessionStore) -> None:
        self.sessions = sessions

    async def add(self, approval: StoredApproval) -> StoredApproval:
        a = approval

        def work(db: psycopg.Connection[TupleRow]) -> StoredApproval:
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (a.agent_id,))
                found = _select(db, a.agent_id, a.id)
                if found is None:
                    row = db.execute(
                        f"SELECT {_COLUMNS} FROM jarvis_approvals WHERE agent_id = %s AND tool = %s"
                        f" AND status IN {_OPEN} AND arguments = %s ORDER BY created_us LIMIT 1",
                        (a.agent_id, a.tool, a.arguments),
                    ).fetchone()
                    found = None if row is None else _row(row)
                if found is None:
                    db.execute(
                        f"INSERT INTO jarvis_approvals ({_COLUMNS})"
                        " VALUES (%s, %s, %s, %s, %s, 'pending', '', %s, 0)",
                        (a.agent_id, a.id, a.tool, a.arguments, a.request, a.created_us),
                    )
                    found = _select(db, a.agent_id, a.id)
            assert found is not None
            return found

        return await self.sessions._call(work)

    async def get(self, agent_id: str, approval_id: str) -> StoredApproval | None:
        return await self.sessions._call(lambda db: _select(db, agent_id, approval_id))

    async def decide(
        self, agent_id: str, approval_id: str, *, allow: bool, reason: str, now_us: int
    ) -> StoredApproval | None:
        status = "allowed" if allow else "denied"

        def work(db: psycopg.Connection[TupleRow]) -> StoredApproval | None:
            db.execute(
                "UPDATE jarvis_approvals SET status = %s, reason = %s, decided_us = %s"
                " WHERE agent_id = %s AND id = %s AND status = 'pending'",
                (status, reason, now_us, agent_id, approval_id),
            )
            return _select(db, agent_id, approval_id)

        return await self.sessions._call(work)

    async def use(self, agent_id: str, approval_id: str) -> StoredApproval | None:
        def work(db: psycopg.Connection[TupleRow]) -> StoredApproval | None:
            found = _select(db, agent_id, approval_id)
            if found is None or found.status not in ("allowed", "denied"):
                return None
            taken = db.execute(
                "UPDATE jarvis_approvals SET status = 'used' WHERE agent_id = %s AND id = %s"
                " AND status = %s",
                (agent_id, approval_id, found.status),
            ).rowcount
            return found if taken == 1 else None

        return await self.sessions._call(work)

    async def expire(self, agent_id: str, approval_id: str) -> bool:
        def work(db: psycopg.Connection[TupleRow]) -> bool:
            return (
                db.execute(
                    "UPDATE jarvis_approvals SET status = 'expired'"
                    " WHERE agent_id = %s AND id = %s AND status = 'pending'",
                    (agent_id, approval_id),
                ).rowcount
                == 1
            )

        return await self.sessions._call(work)

    async def pending(self, agent_id: str, *, limit: int) -> list[StoredApproval]:
        def work(db: psycopg.Connection[TupleRow]) -> list[TupleRow]:
            return db.execute(
                f"SELECT {_COLUMNS} FROM jarvis_approvals WHERE agent_id = %s AND status IN {_OPEN}"
                " ORDER BY created_us, id LIMIT %s",
                (agent_id, limit),
            ).fetchall()

        return [_row(row) for row in await self.sessions._call(work)]

    async def forget(self, agent_id: str) -> None:
        def work(db: psycopg.Connection[TupleRow]) -> None:
            db.execute("DELETE FROM jarvis_approvals WHERE agent_id = %s", (agent_id,))

        await self.sessions._call(work)
