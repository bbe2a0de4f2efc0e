"""OpenAI's ``chat.completion.chunk`` frames, for an agent's run and for the engine proxy.

Encoders for :func:`~jarvis.entrypoints.http.streaming.encoded`: a chunk with the
assistant's role opens the stream, the text follows chunk by chunk, a last chunk carries the
``finish_reason`` and ``usage``, and ``data: [DONE]`` ends every stream that started (after
an error frame too).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from jarvis.application.ask import Answer
from jarvis.application.run_updates import AnswerUpdate, handle
from jarvis.domain.llm.completion import FinishReason, StreamChunk, Usage
from jarvis.domain.run.updates import (
    ApprovalDecided,
    ApprovalRequired,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.entrypoints.http import events as ev
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.openai_wire import tool_call_out

FINISH: dict[FinishReason, str] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "error": "stop",
}
"""An engine's finish reason as OpenAI names it."""


def finish_for(answer: Answer) -> str:
    """``stop`` for a final answer; ``length`` when a budget (turns, time, tokens) ended it."""
    return "stop" if answer.stop_reason in ("final_answer", "cancelled", "error") else "length"


def usage_out(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


class ChatChunks:
    """What every OpenAI chunk stream shares: its id, its model, its opening and its end."""

    finished = False
    """Every chunk stream reads its run to the end."""

    def __init__(self, model: str, reply_id: str) -> None:
        self.model = model
        self.reply_id = reply_id

    def chunk(
        self,
        delta: ev.Delta,
        finish: str | None = None,
        usage: Usage | None = None,
        summary: ev.RunSummary | None = None,
    ) -> bytes:
        choices = [ev.ChunkChoice(delta=delta, finish_reason=finish)]  # type: ignore[arg-type]  # a FINISH value
        if usage is None and summary is None:  # the text's chunks: the most frequent frame
            chunk = ev.ChatChunk(
                id=self.reply_id, created=int(time.time()), model=self.model, choices=choices
            )
        else:
            chunk = ev.ChatChunk(
                id=self.reply_id,
                created=int(time.time()),
                model=self.model,
                choices=choices,
                usage=None if usage is None else ev.ChunkUsage(**usage_out(usage)),
                jarvis=summary,
            )
        return ev.encode(None, chunk)

    def opening(self) -> Iterable[bytes]:
        return (self.chunk(ev.Delta(role="assistant", content="")),)

    def failure(self, error: ApiError) -> Iterable[bytes]:
        return (ev.encode(None, error_event(error)),)

    def closing(self) -> Iterable[bytes]:
        return (ev.DONE,)


def error_event(error: ApiError) -> ev.ErrorEvent:
    return ev.ErrorEvent(
        error=ev.ErrorBody(message=error.message, type=error.type, code=error.code)
    )


class AgentChunks(ChatChunks):
    """An agent's run as chunks: its text, then its answer's finish reason and usage (the
    tool loop runs on the server and is not shown)."""

    def frames(self, item: AnswerUpdate) -> Iterable[bytes]:
        return handle(item, self)

    def text(self, update: TextDelta) -> Iterable[bytes]:
        return (self.chunk(ev.Delta(content=update.text)),) if update.text else ()

    def tool_calls(self, update: ToolCallsRequested) -> Iterable[bytes]:
        return ()

    def tool_result(self, update: ToolResultReady) -> Iterable[bytes]:
        return ()

    def approval_required(self, update: ApprovalRequired) -> Iterable[bytes]:
        return ()

    def approval_decided(self, update: ApprovalDecided) -> Iterable[bytes]:
        return ()

    def answer(self, update: Answer) -> Iterable[bytes]:
        return (self.chunk(ev.Delta(), finish_for(update), update.usage),)


class ProxyChunks(ChatChunks):
    """An engine's streamed completion as chunks: its text, then the tool calls it asks
    the client for, whole, in one chunk."""

    def frames(self, item: StreamChunk) -> Iterable[bytes]:
        if item.content:
            yield self.chunk(ev.Delta(content=item.content))
        if not item.is_final:
            return
        if item.tool_calls:
            deltas = [
                ev.ToolCallDelta.model_validate(tool_call_out(i, c))
                for i, c in enumerate(item.tool_calls)
            ]
            yield self.chunk(ev.Delta(tool_calls=deltas))
        finish = "tool_calls" if item.tool_calls else FINISH[item.finish_reason or "stop"]
        yield self.chunk(ev.Delta(), finish, item.usage or Usage())
