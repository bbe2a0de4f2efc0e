"""``SqlApprovalStore``: managed agents' pending approvals in the session database.

They are the ``approvals`` table (SQLite; ``jarvis_approvals`` on PostgreSQL), so every
process or server on the database sees them, also after the one that ran the call
restarted. Recording a call looks for the same call and inserts in one transaction that
first takes the agent's write lock (SQLite's ``BEGIN IMMEDIATE`` holds the whole file; on
PostgreSQL an advisory lock on the agent), so two writers cannot both add it; every change
of status is one conditional ``UPDATE``, so exactly one caller wins it. A run's writes that
name their owner check its definition in the same transaction
(:mod:`jarvis.adapters.sql_store.owners`).
"""

from __future__ import annotations

from jarvis.adapters.sql_store.driver import Connection, Row, SqlDriver, call
from jarvis.adapters.sql_store.owners import owned_call, owner_holds
from jarvis.domain.approval_store import ApprovalStatus, StoredApproval
from jarvis.domain.owners import Owner, OwnerGoneError

_COLUMNS = "agent_id, id, tool, arguments, request, status, reason, created_us, decided_us"
_OPEN = "('pending', 'allowed', 'denied')"
_KNOWN: dict[str, ApprovalStatus] = {
    "pending": "pending",
    "allowed": "allowed",
    "denied": "denied",
    "used": "used",
    "expired": "expired",
}

_SELECT_ONE = "SELECT " + _COLUMNS + " FROM {approvals} WHERE agent_id = ? AND id = ?"
_SELECT_SAME_CALL = (
    "SELECT " + _COLUMNS + " FROM {approvals} WHERE agent_id = ? AND tool = ?"
    " AND status IN " + _OPEN + " AND arguments = ? ORDER BY created_us LIMIT 1"
)
_INSERT = "INSERT INTO {approvals} (" + _COLUMNS + ") VALUES (?, ?, ?, ?, ?, 'pending', '', ?, 0)"
_DECIDE = (
    "UPDATE {approvals} SET status = ?, reason = ?, decided_us = ?"
    " WHERE agent_id = ? AND id = ? AND status = 'pending'"
)
_USE = "UPDATE {approvals} SET status = 'used' WHERE agent_id = ? AND id = ? AND status = ?"
_EXPIRE = (
    "UPDATE {approvals} SET status = 'expired' WHERE agent_id = ? AND id = ? AND status = 'pending'"
)
_PENDING = (
    "SELECT " + _COLUMNS + " FROM {approvals} WHERE agent_id = ? AND status IN " + _OPEN
) + " ORDER BY created_us, id LIMIT ?"
_FORGET = "DELETE FROM {approvals} WHERE agent_id = ?"


def _approval(row: Row) -> StoredApproval:
    return StoredApproval(
        agent_id=str(row[0]),
        id=str(row[1]),
        tool=str(row[2]),
        arguments=str(row[3]),
        request=str(row[4]),
        # a status this jarvis does not know is never run
        status=_KNOWN.get(str(row[5]), "expired"),
        reason=str(row[6]),
        created_us=int(row[7]),
        decided_us=int(row[8]),
    )


def _select(db: Connection, agent_id: str, approval_id: str) -> StoredApproval | None:
    row = db.execute(_SELECT_ONE, (agent_id, approval_id)).fetchone()
    return None if row is None else _approval(row)


class SqlApprovalStore:
    """Pending approvals in ``driver``'s database (opened and migrated by it)."""

    def __init__(self, driver: SqlDriver) -> None:
        self.driver = driver

    async def add(self, approval: StoredApproval, *, owner: Owner | None = None) -> StoredApproval:
        a = approval

        def work(db: Connection) -> list[StoredApproval]:
            with db.transaction():
                db.execute("SELECT {lock_agent}", (a.agent_id,))
                if owner is not None and not owner_holds(db, owner):
                    return []
                found = _select(db, a.agent_id, a.id)
                if found is None:
                    row = db.execute(_SELECT_SAME_CALL, (a.agent_id, a.tool, a.arguments))
                    same = row.fetchone()
                    found = None if same is None else _approval(same)
                if found is None:
                    db.execute(
                        _INSERT, (a.agent_id, a.id, a.tool, a.arguments, a.request, a.created_us)
                    )
                    found = _select(db, a.agent_id, a.id)
            assert found is not None
            return [found]

        recorded = await call(self.driver, work)
        if owner is not None and not recorded:
            raise OwnerGoneError(owner)
        return recorded[0]

    async def get(self, agent_id: str, approval_id: str) -> StoredApproval | None:
        return await call(self.driver, lambda db: _select(db, agent_id, approval_id))

    async def decide(
        self, agent_id: str, approval_id: str, *, allow: bool, reason: str, now_us: int
    ) -> StoredApproval | None:
        status = "allowed" if allow else "denied"

        def work(db: Connection) -> StoredApproval | None:
            db.execute(_DECIDE, (status, reason, now_us, agent_id, approval_id))
            return _select(db, agent_id, approval_id)

        return await call(self.driver, work)

    async def use(
        self, agent_id: str, approval_id: str, *, owner: Owner | None = None
    ) -> StoredApproval | None:
        def work(db: Connection) -> StoredApproval | None:
            found = _select(db, agent_id, approval_id)
            if found is None or found.status not in ("allowed", "denied"):
                return None
            taken = db.execute(_USE, (agent_id, approval_id, found.status)).rowcount
            return found if taken == 1 else None

        return await owned_call(self.driver, owner, work)

    async def expire(self, agent_id: str, approval_id: str, *, owner: Owner | None = None) -> bool:
        def work(db: Connection) -> bool:
            return db.execute(_EXPIRE, (agent_id, approval_id)).rowcount == 1

        return await owned_call(self.driver, owner, work)

    async def pending(self, agent_id: str, *, limit: int) -> list[StoredApproval]:
        def work(db: Connection) -> list[Row]:
            return db.execute(_PENDING, (agent_id, limit)).fetchall()

        return [_approval(row) for row in await call(self.driver, work)]

    async def forget(self, agent_id: str, *, owner: Owner | None = None) -> None:
        def work(db: Connection) -> None:
            db.execute(_FORGET, (agent_id,))

        await owned_call(self.driver, owner, work)
