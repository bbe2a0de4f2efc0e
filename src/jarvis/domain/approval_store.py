"""Tool calls of managed agents waiting for approval, kept where every server sees them.

A managed agent's run that meets a call its policy asks about records it here, ``pending``,
before the stream announces it; ``POST .../approvals/{id}`` decides it (``allowed`` or
``denied``), from any server on the same store, also after the server that ran the call
restarted. The run that uses a decision moves it to ``used`` in one conditional update, so
an allowed call runs exactly once however many runs or servers wait for it. A run that
waited in vain marks it ``expired``.

The same call (agent, tool, arguments) recorded and not used yet is found again
(:meth:`ApprovalStorePort.add`): a run started again after a restart is answered by the
decision given meanwhile, or waits on the same id.

A run's own writes (recording a call, taking its decision, marking it expired) name the
definition it runs for (:mod:`jarvis.domain.owners`) and apply only while that very
definition is stored: a run of an agent deleted meanwhile, perhaps on another server,
neither leaves a call for an agent created again under the same id to list, nor takes or
expires one of that agent's (engines reuse call ids: ``call_0`` in every reply).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, Protocol

from jarvis.domain.json_types import JSONObject
from jarvis.domain.owners import Owner

ApprovalStatus = Literal["pending", "allowed", "denied", "used", "expired"]
DECIDED: tuple[ApprovalStatus, ...] = ("allowed", "denied")

MAX_STORED_ARGUMENTS = 64 * 1024
"""The most characters of a call's arguments kept for matching (longer ones are cut: two
calls that differ only beyond are taken for the same call)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredApproval:
    """One call waiting for (or given) a decision. ``request`` is what the stream showed
    (:meth:`~jarvis.domain.approvals.ApprovalRequest.to_json`), as JSON text."""

    agent_id: str
    id: str
    tool: str
    arguments: str
    request: str = "{}"
    status: ApprovalStatus = "pending"
    reason: str = ""
    created_us: int = 0
    decided_us: int = 0

    @property
    def allowed(self) -> bool:
        return self.status == "allowed"

    def to_json(self) -> JSONObject:
        try:
            shown = json.loads(self.request)
        except (ValueError, RecursionError):
            shown = {}
        data: JSONObject = dict(shown) if isinstance(shown, dict) else {}
        data.update({"id": self.id, "tool": self.tool, "status": self.status})
        if self.reason:
            data["reason"] = self.reason
        return data


def matching_arguments(arguments_json: str) -> str:
    """The arguments text kept for matching the same call again (bounded)."""
    return arguments_json[:MAX_STORED_ARGUMENTS]


class ApprovalStorePort(Protocol):
    """Where pending approvals persist (the session store's database).

    Every method raises :class:`~jarvis.domain.sessions.records.SessionStoreError` when the store
    fails. Changes of status are conditional: a row moves ``pending`` → ``allowed`` /
    ``denied`` / ``expired`` and ``allowed`` / ``denied`` → ``used`` once, whoever tries.
    """

    async def add(self, approval: StoredApproval, *, owner: Owner | None = None) -> StoredApproval:
        """Record ``approval`` (``pending``), unless the same call of the same agent (tool
        and arguments) is recorded and not ``used`` or ``expired``: then that one is
        returned and nothing is added. An id already taken returns the row it names.
        ``owner``: the run's definition; ``OwnerGoneError``, and nothing recorded, unless it
        is stored (checked in the same transaction)."""
        ...

    async def get(self, agent_id: str, approval_id: str) -> StoredApproval | None: ...

    async def decide(
        self, agent_id: str, approval_id: str, *, allow: bool, reason: str, now_us: int
    ) -> StoredApproval | None:
        """Decide a ``pending`` approval; the row afterwards (unchanged when it was not
        pending: its status says what it is), ``None`` when there is none."""
        ...

    async def use(
        self, agent_id: str, approval_id: str, *, owner: Owner | None = None
    ) -> StoredApproval | None:
        """Take a decided approval for the run that waits for it (``used``): the row as it
        was decided, or ``None`` when it is not decided or someone took it already.
        ``owner``: as for :meth:`add`."""
        ...

    async def expire(self, agent_id: str, approval_id: str, *, owner: Owner | None = None) -> bool:
        """Mark a ``pending`` approval ``expired``; ``True`` when it was pending. ``owner``:
        as for :meth:`add`."""
        ...

    async def pending(self, agent_id: str, *, limit: int) -> list[StoredApproval]:
        """The agent's approvals not used or expired yet, oldest first (at most ``limit``)."""
        ...

    async def forget(self, agent_id: str, *, owner: Owner | None = None) -> None:
        """Delete every approval of the agent (it is being deleted, or created again).
        ``owner``: the definition they are deleted for; ``OwnerGoneError``, and nothing
        deleted, unless it is stored (checked in the same transaction): they may be those
        of an agent created again since under the same id. With its
        :func:`~jarvis.domain.owners.vacancy`, only while no definition is stored."""
        ...
