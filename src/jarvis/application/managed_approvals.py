"""Approvals of managed agents' tool calls, answered over HTTP by any server on the store.

A run that meets a call to ask about records it in the :class:`ApprovalStorePort`
(:meth:`StoredApprovals.submit`), the stream announces it (``event: approval_required``),
and the run waits, at most ``timeout`` seconds, for ``POST
/v1/managed-agents/{id}/approvals/{call_id}``. The answer is stored, and the waiting run is
woken at once when it waits in this process, else finds it on its next look at the store
(every ``poll_seconds``: another server on the same PostgreSQL answered). Whoever runs the
call first takes the decision (``used``), so an approved call runs exactly once; a run
started again after a restart finds the call recorded and its decision, if one was given.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from jarvis.application.approvals import ApprovalChoice
from jarvis.domain.approval_store import (
    DECIDED,
    ApprovalStorePort,
    StoredApproval,
    matching_arguments,
)
from jarvis.domain.approvals import ApprovalAnswer, ApprovalRequest
from jarvis.domain.errors import JarvisError
from jarvis.domain.owners import Owner
from jarvis.domain.sessions.records import to_micros, utc_now

MAX_PENDING_LISTED = 100
MAX_REASON_CHARS = 2000


class ApprovalNotFoundError(JarvisError):
    """No pending approval has this id for this agent."""


class ApprovalConflictError(JarvisError):
    """The approval was decided already, used or expired."""

    def __init__(self, approval: StoredApproval) -> None:
        super().__init__(
            f"Approval {approval.id!r} is {approval.status} already.",
            hint="Only a pending approval can be answered.",
        )
        self.approval = approval


@dataclass(slots=True)
class _Waiters:
    """The runs of this process waiting for a decision, woken when it is given here."""

    events: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)

    def event(self, key: tuple[str, str]) -> asyncio.Event:
        return self.events.setdefault(key, asyncio.Event())

    def wake(self, key: tuple[str, str]) -> None:
        event = self.events.get(key)
        if event is not None:
            event.set()

    def done(self, key: tuple[str, str]) -> None:
        self.events.pop(key, None)


def _same_call(stored: StoredApproval, record: StoredApproval) -> bool:
    """Whether ``stored`` records ``record``'s call and can still be decided or used."""
    return (
        stored.tool == record.tool
        and stored.arguments == record.arguments
        and stored.status not in ("used", "expired")
    )


class ManagedApprovals:
    """The approvals of every managed agent of a server."""

    def __init__(
        self,
        store: ApprovalStorePort,
        *,
        timeout: float = 300.0,
        poll_seconds: float = 0.5,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.timeout = timeout
        """``[tools.approval] approval_timeout``: how long a run waits for a decision."""
        self.poll_seconds = poll_seconds
        self.clock = clock or (lambda: to_micros(utc_now()))
        self._waiters = _Waiters()

    def choice_for(self, agent_id: str, owner: Owner | None = None) -> ApprovalChoice:
        """The approvals of one run of ``agent_id``, whose writes are ``owner``'s (the
        definition the run started with: see :mod:`jarvis.domain.owners`)."""
        port = StoredApprovals(self, agent_id, owner)
        return ApprovalChoice(port=port, mode_source="approve")

    async def answer(
        self, agent_id: str, approval_id: str, *, allow: bool, reason: str
    ) -> StoredApproval:
        """Decide a pending approval; wakes the run of this process that waits for it."""
        now = self.clock()
        decided = await self.store.decide(
            agent_id, approval_id, allow=allow, reason=reason[:MAX_REASON_CHARS], now_us=now
        )
        if decided is None:
            raise ApprovalNotFoundError(
                f"Managed agent {agent_id!r} has no approval {approval_id!r}.",
                hint="GET .../approvals lists the pending ones.",
            )
        if decided.status != ("allowed" if allow else "denied") or decided.decided_us != now:
            raise ApprovalConflictError(decided)
        self._waiters.wake((agent_id, approval_id))
        return decided

    async def pending(self, agent_id: str) -> list[StoredApproval]:
        return await self.store.pending(agent_id, limit=MAX_PENDING_LISTED)

    async def forget(self, agent_id: str, *, owner: Owner | None = None) -> None:
        """Delete every approval of the agent (see :meth:`ApprovalStorePort.forget`)."""
        await self.store.forget(agent_id, owner=owner)


@dataclass(slots=True)
class StoredApprovals:
    """The :class:`~jarvis.domain.approvals.ApprovalPort` of one run of a managed agent.

    Three store round-trips per call when it is answered in this process: the record, the
    answer, and taking it (the run is woken by the answer, it does not look before)."""

    approvals: ManagedApprovals
    agent_id: str
    owner: Owner | None = None
    """The definition the run started with: what it records, takes or lets expire is
    refused (``OwnerGoneError``) once that definition was deleted, even if an agent of the
    same id was created since."""
    _fresh: set[str] = field(default_factory=set)
    """Ids recorded by this run just now: nothing can have decided them before it waits."""

    async def submit(self, request: ApprovalRequest) -> ApprovalRequest:
        approvals = self.approvals
        created = approvals.clock()
        record = StoredApproval(
            agent_id=self.agent_id,
            id=request.id or "call",
            tool=request.tool,
            arguments=matching_arguments(request.call.arguments_json()),
            request=json.dumps(request.to_json(), ensure_ascii=False),
            created_us=created,
        )
        stored = await approvals.store.add(record, owner=self.owner)
        if stored.id == record.id and not _same_call(stored, record):
            # engines reuse call ids ("call_0" in every reply): this one names another call
            record = replace(record, id=f"{record.id}.{secrets.token_hex(4)}")
            stored = await approvals.store.add(record, owner=self.owner)
        approvals._waiters.event((self.agent_id, stored.id))  # an answer from now on wakes it
        if stored.status == "pending" and stored.created_us == created:
            self._fresh.add(stored.id)
        if stored.id == request.id:
            return request
        return ApprovalRequest(
            id=stored.id,
            call=request.call,
            effects=request.effects,
            reason=request.reason,
            rule=request.rule,
        )

    async def decide(self, request: ApprovalRequest) -> ApprovalAnswer:
        approvals = self.approvals
        key = (self.agent_id, request.id)
        event = approvals._waiters.event(key)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + approvals.timeout
        look = request.id not in self._fresh
        try:
            while True:
                if look:
                    answer = await self._look(request.id)
                    if answer is not None:
                        return answer
                look = True
                remaining = deadline - loop.time()
                if remaining <= 0:
                    if await approvals.store.expire(self.agent_id, request.id, owner=self.owner):
                        return ApprovalAnswer(
                            allow=False,
                            reason=f"nobody answered within {approvals.timeout:g} s",
                            rule="approval_timeout",
                        )
                    continue  # decided at the last moment: take it
                try:
                    async with asyncio.timeout(min(approvals.poll_seconds, remaining)):
                        await event.wait()
                except TimeoutError:
                    pass
                event.clear()
        finally:
            approvals._waiters.done(key)

    async def _look(self, approval_id: str) -> ApprovalAnswer | None:
        """The decision when there is one to take (``None``: still pending)."""
        store = self.approvals.store
        used = await store.use(self.agent_id, approval_id, owner=self.owner)
        if used is not None:
            verb = "allowed" if used.allowed else "denied"
            return ApprovalAnswer(allow=used.allowed, reason=used.reason, rule=f"HTTP: {verb}")
        row = await store.get(self.agent_id, approval_id)
        if row is None:
            return ApprovalAnswer(
                allow=False, reason="the approval was withdrawn", rule="approval deleted"
            )
        if row.status == "pending":
            return None
        if row.status in DECIDED:  # decided between the two reads: take it next time
            return await self._look(approval_id)
        return ApprovalAnswer(
            allow=False,
            reason="the decision was taken by another run"
            if row.status == "used"
            else "nobody answered in time",
            rule=f"approval {row.status}",
        )
