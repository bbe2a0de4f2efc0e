"""Server-sent events, read from a line iterator.

Only what chat-completion streams use: ``data:`` fields (several lines are joined with a
newline), ``event:`` names, comments (``:`` keep-alive pings) skipped, and an event
dispatched at each blank line or at the end of the stream.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str
    event: str = "message"


async def server_sent_events(
    lines: AsyncIterable[str],
) -> AsyncGenerator[ServerSentEvent, None]:
    data: list[str] = []
    event = ""
    async for raw in lines:
        line = raw.rstrip("\r")
        if not line:
            if data:
                yield ServerSentEvent(data="\n".join(data), event=event or "message")
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
    if data:
        yield ServerSentEvent(data="\n".join(data), event=event or "message")
