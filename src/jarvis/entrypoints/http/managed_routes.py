"""The managed-agent API: definitions, their conversations, and streamed runs.

``POST /v1/managed-agents/{id}/messages`` stores the user message first. With ``stream``
the agent runs at once and the reply is Server-Sent Events (see
:mod:`jarvis.entrypoints.http.events`): OpenAI chunks for the text, ``event: tool_calls``,
``event: approval_required`` / ``event: approval`` (see :mod:`.approval_routes`) and
``event: tool_result`` while its tool loop runs, ``event: error`` if the run fails, a
final chunk with ``finish_reason``, ``usage`` and the run's ``stop_reason``, then
``data: [DONE]``, whatever happened. Without ``stream`` the message is only queued;
``POST .../run`` answers what waits. A client that disconnects cancels the run, streamed or
not; what it completed is stored. Deleting the agent cancels its runs in this process at
once: a stream ends with ``event: error`` (code ``cancelled``), a final chunk whose
``stop_reason`` is ``cancelled`` and ``[DONE]``; ``POST .../run`` answers 409 ``cancelled``.

Quotas (:class:`~jarvis.application.managed_agents.ManagedAgentService`): definitions and
messages waiting per agent are bounded (409 ``quota_exceeded``); the list of definitions is
paginated (``limit``, ``after``; ``has_more`` and ``next`` in the body), and so is a
conversation, newest page first (``limit``, ``before``; ``has_more`` and ``next``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncGenerator
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from jarvis.application.managed_agents import MAX_PAGE
from jarvis.domain.errors import JarvisError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.managed_agents import ManagedAgent
from jarvis.domain.sessions.records import SessionMessage
from jarvis.entrypoints.http.json_body import JSONBody
from jarvis.entrypoints.http.managed_frames import ManagedRunFrames, memory_chunks
from jarvis.entrypoints.http.managed_wire import (
    ManagedAgentIn,
    ManagedAgentOut,
    ManagedAgentPatch,
    MessageIn,
    MessageOut,
    RunIn,
)
from jarvis.entrypoints.http.openai_frames import usage_out
from jarvis.entrypoints.http.openai_routes import state_of
from jarvis.entrypoints.http.state import ServerState
from jarvis.entrypoints.http.streaming import EventStream, encoded
from jarvis.entrypoints.http.watched import while_connected

router = APIRouter(prefix="/v1/managed-agents", tags=["managed agents"])

MAX_POSITION = (1 << 31) - 1
"""The largest ``before`` accepted: a message position every store can hold."""
_ID = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_SSE: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {}}}}


async def allowed(state: ServerState, agent: str, options: JSONObject) -> None:
    """Refuse what the operator did not allow over HTTP (see :mod:`.run_policy`)."""
    state.policy.check((await state.service()).registry, agent, options)


async def allowed_to_run(state: ServerState, agent_id: str) -> None:
    """Check a stored definition again before it runs (the server's flags may have changed)."""
    agent = await state.managed.get(agent_id)
    await allowed(state, agent.agent, agent.agent_options)


@router.post("", status_code=201, response_model=ManagedAgentOut)
async def create(body: ManagedAgentIn, request: Request) -> ManagedAgentOut:
    state = state_of(request)
    await allowed(state, body.agent, dict(body.agent_options))
    return ManagedAgentOut.of(await state.managed.create(body.spec()))


@router.get("")
async def list_agents(
    request: Request,
    limit: int | None = Query(default=None, ge=1, le=MAX_PAGE),
    after: str | None = Query(default=None, max_length=128),
) -> dict[str, object]:
    """A page of definitions, oldest first (``limit``: 100 unless given); ``next`` is the
    ``after`` of the page that follows, ``null`` on the last one."""
    page = await state_of(request).managed.page(limit=limit, after=after)
    return {
        "object": "list",
        "data": [ManagedAgentOut.of(a).model_dump() for a in page.agents],
        "has_more": page.next is not None,
        "next": page.next,
    }


@router.get("/{agent_id}", response_model=ManagedAgentOut)
async def get(agent_id: str, request: Request) -> ManagedAgentOut:
    return ManagedAgentOut.of(await state_of(request).managed.get(agent_id))


@router.patch("/{agent_id}", response_model=ManagedAgentOut)
async def update(agent_id: str, body: ManagedAgentPatch, request: Request) -> ManagedAgentOut:
    """Change the fields sent; 404 also when the agent was deleted while this ran (the
    change is never stored then, see :meth:`ManagedAgentService.update`)."""
    spec, fields = body.spec()
    state = state_of(request)

    async def allow(changed: ManagedAgent) -> None:
        await allowed(state, changed.agent, changed.agent_options)

    return ManagedAgentOut.of(await state.managed.update(agent_id, spec, fields, allow=allow))


@router.delete("/{agent_id}")
async def delete(agent_id: str, request: Request) -> dict[str, object]:
    await state_of(request).managed.delete(agent_id)
    return {"id": agent_id, "object": "managed_agent", "deleted": True}


@router.get("/{agent_id}/messages", response_class=JSONBody)  # stored text: see JSONBody
async def list_messages(
    agent_id: str,
    request: Request,
    limit: int | None = Query(default=None, ge=0, le=1000),
    before: int | None = Query(default=None, ge=0, le=MAX_POSITION),
) -> dict[str, object]:
    """The newest ``limit`` messages (1000 unless given) older than position ``before``,
    oldest first; ``next`` is the ``before`` of the page of older ones, ``null`` once the
    first message was returned. Positions never change (a conversation is only appended
    to), so a walk back neither repeats nor skips a message while new ones arrive."""
    page = await state_of(request).managed.message_page(agent_id, limit=limit, before=before)
    data = [MessageOut.of(r).model_dump() for r in page.records]
    older = page.start > 0
    return {
        "object": "list",
        "data": data,
        "has_more": older,
        "next": page.start if older else None,
    }


@router.post("/{agent_id}/messages", responses=_SSE)
async def post_message(agent_id: str, body: MessageIn, request: Request) -> Response:
    state = state_of(request)
    if len(body.content) > state.limits.max_message_chars:
        from jarvis.entrypoints.http.errors import ApiError

        raise ApiError(
            413,
            f"The message is longer than {state.limits.max_message_chars} characters.",
            code="message_too_large",
        )
    if body.memory is not None and not body.stream and body.mode == "queued":
        from jarvis.entrypoints.http.errors import ApiError

        raise ApiError(
            400,
            "memory applies to a run: send it with stream or mode 'immediate', or to "
            "POST /v1/managed-agents/{id}/run for a queued message.",
        )
    if body.stream:
        await allowed_to_run(state, agent_id)
    record = await state.managed.post(agent_id, body.content)
    if body.stream:
        return EventStream(run_frames(state, agent_id, record, memory=body.memory))
    if body.mode == "immediate":
        from starlette.background import BackgroundTask

        return JSONBody(
            {"status": "running", "message": MessageOut.of(record).model_dump()},
            status_code=202,
            background=BackgroundTask(_run_in_background, state, agent_id, record, body.memory),
        )
    return JSONBody(
        {"status": "queued", "message": MessageOut.of(record).model_dump()}, status_code=202
    )


async def _run_in_background(
    state: ServerState, agent_id: str, record: SessionMessage, memory: bool | None
) -> None:
    """An ``immediate`` message's run, after its 202: its answer is stored with the agent's
    messages (read with ``GET .../messages``); a run that fails leaves the message waiting
    for ``/run``, as a queued one."""
    with contextlib.suppress(JarvisError, TimeoutError):
        async with asyncio.timeout(state.limits.request_timeout):
            async for _ in state.managed.stream(agent_id, record, memory=memory):
                pass


@router.post("/{agent_id}/run", responses=_SSE)
async def run(agent_id: str, request: Request, body: RunIn | None = None) -> Response:
    state = state_of(request)
    await allowed_to_run(state, agent_id)
    memory = None if body is None else body.memory
    if body is not None and body.stream:
        await state.managed.prepare(agent_id)  # 404 / 409 before the stream starts
        return EventStream(run_frames(state, agent_id, memory=memory))
    ran = state.managed.run(agent_id, memory=memory)
    answer = await while_connected(state, request.scope, request.receive, ran)
    return JSONBody(
        {
            "status": "completed",
            "content": answer.content,
            "stop_reason": answer.stop_reason,
            "turns": answer.turns,
            "model": answer.model,
            "usage": usage_out(answer.usage),
            "tool_results": [
                {
                    "tool_name": r.tool_name,
                    "output": r.content,
                    "success": r.success,
                    "call_id": r.call_id,
                }
                for r in answer.tool_results
            ],
            "memory_results": [c.model_dump() for c in memory_chunks(answer)],
        }
    )


def run_frames(
    state: ServerState,
    agent_id: str,
    pending: SessionMessage | None = None,
    *,
    memory: bool | None = None,
) -> AsyncGenerator[bytes, None]:
    """The run's SSE frames; ``[DONE]`` ends every stream that started. ``memory``: this
    run's override of the definition's ``memory``."""
    reply_id = "chatcmpl-" + secrets.token_hex(12)
    approvals = state.managed.approvals
    timeout = approvals.timeout if approvals is not None else 0.0
    updates = state.managed.stream(agent_id, pending, memory=memory)
    return encoded(state, updates, ManagedRunFrames(agent_id, reply_id, approval_timeout=timeout))


__all__ = ["router"]
