"""The managed-agent stream's frames: OpenAI chunks for the text, named events for the tool
loop and its approvals, a final chunk with the run's summary, then ``data: [DONE]``,
whatever happened.

The encoder of :func:`~jarvis.entrypoints.http.managed_routes.run_frames` (see
:mod:`jarvis.entrypoints.http.events` for every event's schema).
"""

from __future__ import annotations

from collections.abc import Iterable

from jarvis.application.ask import Answer
from jarvis.domain.run.updates import (
    ApprovalDecided,
    ApprovalRequired,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.entrypoints.http import events as ev
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.openai_frames import AgentChunks, error_event, finish_for


def memory_chunks(answer: Answer) -> list[ev.MemoryChunk]:
    """The knowledge base's chunks ``answer``'s run received (``metadata.memory_results``,
    which :class:`~jarvis.application.ask.AskService` writes)."""
    found = answer.metadata.get("memory_results")
    if not isinstance(found, list):
        return []
    return [ev.MemoryChunk.model_validate(chunk) for chunk in found]


class ManagedRunFrames(AgentChunks):
    """An agent's run with its tool loop shown (``tool_calls``, ``approval_required``,
    ``approval`` and ``tool_result`` events); a failure is an ``error`` event and a final
    chunk whose ``stop_reason`` is ``error`` (``cancelled`` for a cancelled run)."""

    def __init__(self, model: str, reply_id: str, *, approval_timeout: float = 0.0) -> None:
        super().__init__(model, reply_id)
        self.calls = 0
        """Tool calls the run asked for so far (the summary's ``tool_calls``)."""
        self.approval_timeout = approval_timeout
        """How long a call waits for its decision (``approval_required``'s
        ``timeout_seconds``)."""

    def tool_calls(self, update: ToolCallsRequested) -> Iterable[bytes]:
        self.calls += len(update.calls)
        calls = [
            ev.CallInfo(id=c.id, tool_name=c.name, arguments=c.arguments_json())
            for c in update.calls
        ]
        return (ev.encode("tool_calls", ev.ToolCallsEvent(calls=calls)),)

    def tool_result(self, update: ToolResultReady) -> Iterable[bytes]:
        result = update.result
        event = ev.ToolResultEvent(
            tool_name=result.tool_name,
            output=result.content,
            success=result.success,
            call_id=result.call_id,
            latency_ms=round(result.latency_seconds * 1000, 3),
        )
        return (ev.encode("tool_result", event),)

    def approval_required(self, update: ApprovalRequired) -> Iterable[bytes]:
        """``event: approval_required``: the call waits for ``POST
        /v1/managed-agents/{agent}/approvals/{id}``."""
        request = update.request
        event = ev.ApprovalRequiredEvent(
            id=request.id,
            call_id=request.call.id,
            tool_name=request.tool,
            arguments=request.shown_arguments(),
            effects=request.effects,
            reason=request.reason,
            rule=request.rule,
            timeout_seconds=self.approval_timeout,
        )
        return (ev.encode("approval_required", event),)

    def approval_decided(self, update: ApprovalDecided) -> Iterable[bytes]:
        """``event: approval``: the decision on one call, before the allowed calls run."""
        decision = update.decision
        event = ev.ApprovalEvent(
            call_id=decision.call_id,
            tool_name=decision.tool,
            decision="allow" if decision.allowed else "deny",
            rule=decision.rule,
            reason=decision.reason or None,
            asked=decision.asked,
        )
        return (ev.encode("approval", event),)

    def answer(self, update: Answer) -> Iterable[bytes]:
        summary = ev.RunSummary(
            stop_reason=update.stop_reason,
            turns=update.turns,
            tool_calls=self.calls,
            memory_results=memory_chunks(update) or None,
        )
        return (self.chunk(ev.Delta(), finish_for(update), update.usage, summary),)

    def failure(self, error: ApiError) -> Iterable[bytes]:
        """The ``error`` event, then the final chunk: its ``stop_reason`` is ``cancelled``
        for a run the server cancelled (its agent was deleted), else ``error``."""
        stop = "cancelled" if error.code == "cancelled" else "error"
        summary = ev.RunSummary(stop_reason=stop, turns=0, tool_calls=self.calls)
        return (
            ev.encode("error", error_event(error)),
            self.chunk(ev.Delta(), "stop", None, summary),
        )
