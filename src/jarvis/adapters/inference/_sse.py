"""Server-sent events: read from a line iterator, or straight from a body's bytes.

Only what chat-completion streams use: ``data:`` fields (several lines are joined with a
newline), ``event:`` names, comments (``:`` keep-alive pings) skipped, and an event
dispatched at each blank line or at the end of the stream.

:func:`sse_data` is what the engines read streams with: one pass over the bytes as they
arrive (lines found with ``bytes.find``, only the data decoded), under the same bounds as
:func:`~._bodies.split_lines` (each read before the deadline, a cap on the bytes in all),
without a generator for the lines between the body and the events.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from dataclasses import dataclass

from jarvis.adapters.inference._bodies import line_blocks


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


async def sse_data(
    raw: AsyncIterator[bytes], deadline: float, max_bytes: int
) -> AsyncGenerator[str, None]:
    """The data of each event of the stream ``raw`` (UTF-8, bad bytes replaced), each read
    before ``deadline``, at most ``max_bytes`` in all (past it: ``BodyTooLarge``).

    Linear in the stream's length: a chunk without a line end is only kept, and the kept
    pieces are joined once, when a line end arrives."""
    data: list[bytes] = []
    async for block in line_blocks(raw, deadline, max_bytes):
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            line = block[start:end].rstrip(b"\r")
            start = end + 1
            if line:
                _take(line, data)
            elif data:
                yield b"\n".join(data).decode("utf-8", "replace")
                data = []
        if start < len(block):  # the body's end, after its last line end
            _take(block[start:].rstrip(b"\r"), data)
    if data:
        yield b"\n".join(data).decode("utf-8", "replace")


def _take(line: bytes, data: list[bytes]) -> None:
    """Keep a ``data`` field's value; comments and every other field are not used."""
    if line.startswith(b"data"):
        field, _, value = line.partition(b":")
        if field == b"data":
            data.append(value[1:] if value.startswith(b" ") else value)
