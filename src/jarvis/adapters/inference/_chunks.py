"""A whole completion told as a stream, for an engine that had to generate instead."""

from __future__ import annotations

from collections.abc import Iterator

from jarvis.domain.completion import Completion, StreamChunk


def completion_chunks(completion: Completion) -> Iterator[StreamChunk]:
    """``completion`` as ``stream()`` delivers an answer: its text (if any) in one chunk,
    then a last chunk with the tool calls, the finish reason and the usage."""
    if completion.content:
        yield StreamChunk(content=completion.content, model=completion.model)
    yield StreamChunk(
        tool_calls=completion.tool_calls,
        finish_reason=completion.finish_reason,
        usage=completion.usage,
        model=completion.model,
    )
