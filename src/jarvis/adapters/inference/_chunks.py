"""A whole completion told as a stream, and a stream gathered into a whole completion."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from jarvis.domain.llm.completion import Completion, StreamChunk, Usage


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


async def collected(chunks: AsyncIterator[StreamChunk], *, model: str) -> Completion:
    """A stream gathered into one completion: its text joined, the last chunk's tool calls,
    finish reason and usage (for an engine that streams internally to bound the reply)."""
    parts: list[str] = []
    last = StreamChunk()
    async for chunk in chunks:
        if chunk.content:
            parts.append(chunk.content)
        if chunk.finish_reason is not None or chunk.tool_calls or chunk.usage is not None:
            last = chunk
        model = chunk.model or model
    return Completion(
        content="".join(parts),
        tool_calls=last.tool_calls,
        finish_reason=last.finish_reason or "stop",
        usage=last.usage or Usage(),
        model=model,
    )
