"""The managed-agent stream's frames: OpenAI chunks for the text, named events for the tool
loop, a final chunk with the run's summary, then ``data: [DONE]``, whatever happened.

The encoder of :func:`~jarvis.entrypoints.http.managed_routes.run_frames` (see
:mod:`jarvis.entrypoints.http.events` for every event's schema).
"""

from __future__ import annotations

from collections.abc import Iterable

from jarvis.application.ask import Answer
from jarvis.domain.updates import ToolCallsRequested, ToolResultReady
from jarvis.entrypoints.http import events as ev
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.openai_frames import AgentChunks, error_event, finish_for


class ManagedRunFrames(AgentChunks):
    """An agent's run with its tool loop shown (``tool_calls`` and ``tool_result`` events);
    a failure is an ``error`` event and a final chunk whose ``stop_reason`` is ``error``."""

    def __init__(self, model: str, reply_id: str) -> None:
        super().__init__(model, reply_id)
        self.calls = 0
        """Tool calls the run asked for so far (the summary's ``tool_calls``)."""

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

    def answer(self, update: Answer) -> Iterable[bytes]:
        summary = ev.RunSummary(
            stop_reason=update.stop_reason, turns=update.turns, tool_calls=self.calls
        )
        return (self.chunk(ev.Delta(), finish_for(update), update.usage, summary),)

    def failure(self, error: ApiError) -> Iterable[bytes]:
        summary = ev.RunSummary(stop_reason="error", turns=0, tool_calls=self.calls)
        return (
            ev.encode("error", error_event(error)),
            self.chunk(ev.Delta(), "stop", None, summary),
        )
