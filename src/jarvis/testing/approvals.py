"""Fakes of the approval ports: ``ScriptedApprovals`` answers from a script,
``InMemoryApprovalStore`` keeps pending approvals in a dict."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from jarvis.domain.approval_store import DECIDED, StoredApproval
from jarvis.domain.approvals import ApprovalAnswer, ApprovalRequest
from jarvis.domain.owners import Owner
from jarvis.testing.owned import Owners, check_owner


class ScriptedApprovals:
    """Answers in order from ``answers`` (a bool or an :class:`ApprovalAnswer`); once they
    run out, denies. Records what was submitted and decided. ``gate`` (when given) is
    awaited before each answer, so a test decides when a run resumes."""

    def __init__(
        self, answers: Iterable[bool | ApprovalAnswer] = (), *, gate: asyncio.Event | None = None
    ) -> None:
        self._answers: deque[bool | ApprovalAnswer] = deque(answers)
        self.gate = gate
        self.submitted: list[ApprovalRequest] = []
        self.decided: list[ApprovalRequest] = []

    async def submit(self, request: ApprovalRequest) -> ApprovalRequest:
        self.submitted.append(request)
        return request

    async def decide(self, request: ApprovalRequest) -> ApprovalAnswer:
        if self.gate is not None:
            await self.gate.wait()
        self.decided.append(request)
        if not self._answers:
            return ApprovalAnswer(allow=False, reason="the script ran out", rule="scripted")
        answer = self._answers.popleft()
        if isinstance(answer, bool):
            return ApprovalAnswer(allow=answer, rule="scripted")
        return answer


class InMemoryApprovalStore:
    """Behaves like the SQL stores (same matching, same conditional changes).

    ``owners`` says whether a definition is stored (the ``holds`` of the in-memory
    managed-agent store that shares this store's "database"), for the writes of a run that
    name their owner; without it such a write is refused, as the
    :class:`~jarvis.testing.InMemorySessionStore` refuses it."""

    def __init__(self, *, owners: Owners | None = None) -> None:
        self._rows: dict[tuple[str, str], StoredApproval] = {}
        self._owners = owners

    async def add(self, approval: StoredApproval, *, owner: Owner | None = None) -> StoredApproval:
        check_owner(self._owners, owner, "approval store")
        taken = self._rows.get((approval.agent_id, approval.id))
        if taken is not None:
            return taken
        for row in self._rows.values():
            if (
                row.agent_id == approval.agent_id
                and row.tool == approval.tool
                and row.arguments == approval.arguments
                and row.status not in ("used", "expired")
            ):
                return row
        stored = replace(approval, status="pending", reason="", decided_us=0)
        self._rows[(approval.agent_id, approval.id)] = stored
        return stored

    async def get(self, agent_id: str, approval_id: str) -> StoredApproval | None:
        return self._rows.get((agent_id, approval_id))

    async def decide(
        self, agent_id: str, approval_id: str, *, allow: bool, reason: str, now_us: int
    ) -> StoredApproval | None:
        row = self._rows.get((agent_id, approval_id))
        if row is None or row.status != "pending":
            return row
        row = replace(
            row, status="allowed" if allow else "denied", reason=reason, decided_us=now_us
        )
        self._rows[(agent_id, approval_id)] = row
        return row

    async def use(
        self, agent_id: str, approval_id: str, *, owner: Owner | None = None
    ) -> StoredApproval | None:
        check_owner(self._owners, owner, "approval store")
        row = self._rows.get((agent_id, approval_id))
        if row is None or row.status not in DECIDED:
            return None
        self._rows[(agent_id, approval_id)] = replace(row, status="used")
        return row

    async def expire(self, agent_id: str, approval_id: str, *, owner: Owner | None = None) -> bool:
        check_owner(self._owners, owner, "approval store")
        row = self._rows.get((agent_id, approval_id))
        if row is None or row.status != "pending":
            return False
        self._rows[(agent_id, approval_id)] = replace(row, status="expired")
        return True

    async def pending(self, agent_id: str, *, limit: int) -> list[StoredApproval]:
        rows = [
            row
            for row in self._rows.values()
            if row.agent_id == agent_id and row.status not in ("used", "expired")
        ]
        return sorted(rows, key=lambda r: (r.created_us, r.id))[:limit]

    async def forget(self, agent_id: str, *, owner: Owner | None = None) -> None:
        check_owner(self._owners, owner, "approval store")
        for key in [key for key in self._rows if key[0] == agent_id]:
            del self._rows[key]
