"""Anthropic's Messages events for an engine's streamed completion.

The encoder of ``POST /v1/messages`` with ``stream`` (for
:func:`~jarvis.entrypoints.http.streaming.encoded`): ``message_start``, a text block
streamed delta by delta, one ``tool_use`` block per tool call (its ``input`` whole, in one
``input_json_delta``), then ``message_delta`` with the stop reason and usage and
``message_stop``; a failure after the start is an ``error`` event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from jarvis.domain.llm.completion import FinishReason, StreamChunk, Usage
from jarvis.entrypoints.http import events as ev
from jarvis.entrypoints.http.errors import ApiError

STOP: dict[FinishReason, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "end_turn",
    "error": "end_turn",
}
"""An engine's finish reason as Anthropic names it."""


def event(body: ev._Event) -> bytes:
    return ev.encode(getattr(body, "type"), body)  # noqa: B009  # every event has its type


class MessageEvents:
    """One message's events; the stream is complete after ``message_stop``."""

    def __init__(self, model: str, message_id: str, estimate: int) -> None:
        self.model = model
        self.message_id = message_id
        self.estimate = estimate
        """The input tokens estimated, for an engine that reports none."""
        self.index = 0
        self.text_open = False
        self.finished = False

    def opening(self) -> Iterable[bytes]:
        shell = ev.AnthropicMessage(
            id=self.message_id,
            content=[],
            model=self.model,
            stop_reason=None,
            usage=ev.AnthropicUsage(input_tokens=self.estimate, output_tokens=0),
        )
        return (event(ev.MessageStart(message=shell)),)

    def frames(self, item: StreamChunk) -> Iterable[bytes]:
        frames = []
        if item.content:
            if not self.text_open:
                self.text_open = True
                frames.append(self._block_start(ev.TextBlock(text="")))
            delta = ev.TextDeltaBody(text=item.content)
            frames.append(event(ev.ContentBlockDelta(index=self.index, delta=delta)))
        if item.is_final:
            frames.extend(self._ending(item))
        return frames

    def _ending(self, item: StreamChunk) -> Iterator[bytes]:
        """The last chunk's frames: the blocks closed, the tool calls, the message's end."""
        if self.text_open or not item.tool_calls:
            if not self.text_open:
                yield self._block_start(ev.TextBlock(text=""))
            yield self._block_stop()
            self.text_open = False
        for call in item.tool_calls:
            yield self._block_start(ev.ToolUseBlock(id=call.id, name=call.name, input={}))
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            delta_json = ev.InputJsonDelta(partial_json=arguments)
            yield event(ev.ContentBlockDelta(index=self.index, delta=delta_json))
            yield self._block_stop()
        yield self._message_delta(item)
        yield event(ev.MessageStop())
        self.finished = True

    def _block_start(self, block: ev.TextBlock | ev.ToolUseBlock) -> bytes:
        return event(ev.ContentBlockStart(index=self.index, content_block=block))

    def _block_stop(self) -> bytes:
        stop = event(ev.ContentBlockStop(index=self.index))
        self.index += 1
        return stop

    def _message_delta(self, item: StreamChunk) -> bytes:
        usage = item.usage or Usage()
        stop = "tool_use" if item.tool_calls else STOP[item.finish_reason or "stop"]
        return event(
            ev.MessageDelta(
                delta=ev.MessageDeltaBody(stop_reason=stop),  # type: ignore[arg-type]  # a STOP value
                usage=ev.MessageDeltaUsage(
                    output_tokens=usage.completion_tokens,
                    input_tokens=usage.prompt_tokens or self.estimate,
                ),
            )
        )

    def failure(self, error: ApiError) -> Iterable[bytes]:
        body = ev.AnthropicErrorBody(
            type="overloaded_error" if error.status == 503 else "api_error",
            message=error.message,
        )
        return (event(ev.AnthropicError(error=body)),)

    def closing(self) -> Iterable[bytes]:
        return ()
