"""Answering managed agents' tool calls that wait for approval.

``POST /v1/managed-agents/{id}/approvals/{call_id}`` with ``{"allow": true|false,
"reason": "..."}`` decides a call announced by ``event: approval_required``: the run that
waits for it resumes (in this server at once; in another server on the same store on its
next look). A call can be decided once (409 ``approval_decided`` after); an unknown one is
404 ``approval_not_found``. ``GET .../approvals`` lists the calls not used yet (after a
restart, what a client that lost its stream still has to answer).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from jarvis.application.managed_approvals import (
    MAX_REASON_CHARS,
    ApprovalConflictError,
    ApprovalNotFoundError,
    ManagedApprovals,
)
from jarvis.domain.managed_agents import check_agent_id
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.json_body import JSONBody
from jarvis.entrypoints.http.openai_routes import state_of

router = APIRouter(prefix="/v1/managed-agents", tags=["managed agents"])

_CALL_ID = r"^[A-Za-z0-9_.:-]{1,128}$"


class ApprovalIn(BaseModel):
    """The decision on one call."""

    model_config = ConfigDict(extra="forbid")

    allow: bool
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)


def _approvals(request: Request) -> ManagedApprovals:
    approvals = state_of(request).managed.approvals
    if approvals is None:
        raise ApiError(404, "This server runs every tool call unasked.", code="no_approvals")
    return approvals


@router.post("/{agent_id}/approvals/{call_id}", response_class=JSONBody)
async def answer(
    agent_id: str, call_id: str, body: ApprovalIn, request: Request
) -> dict[str, object]:
    check_agent_id(agent_id)
    if len(call_id) > 128:
        raise ApiError(
            404, f"No approval {call_id[:128]!r}.", "not_found_error", "approval_not_found"
        )
    try:
        decided = await _approvals(request).answer(
            agent_id, call_id, allow=body.allow, reason=body.reason
        )
    except ApprovalNotFoundError as exc:
        raise ApiError(404, str(exc), "not_found_error", "approval_not_found") from exc
    except ApprovalConflictError as exc:
        raise ApiError(409, str(exc), code="approval_decided") from exc
    return {"object": "managed_agent.approval", **decided.to_json()}


@router.get("/{agent_id}/approvals", response_class=JSONBody)
async def pending(agent_id: str, request: Request) -> dict[str, object]:
    """The calls waiting for a decision, or decided and not yet run (oldest first)."""
    await state_of(request).managed.get(agent_id)
    rows = await _approvals(request).pending(agent_id)
    return {"object": "list", "data": [row.to_json() for row in rows]}


__all__ = ["router"]
