"""Reading an engine's response body under its caps: whole, as a prefix, or line by line.

Every read is bounded in size (past the cap: :class:`BodyTooLarge`) and a compressed body is
refused (:class:`Compressed`): it was asked for uncompressed, and a small compressed body
could expand far beyond the cap.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

from jarvis.adapters.inference._wire import Streamed


class BodyTooLarge(Exception):
    """A body went past its cap (turned into an ``EngineProtocolError`` by the caller)."""


class Compressed(Exception):
    """A body came compressed although it was asked for uncompressed."""


async def line_blocks(
    raw: AsyncIterator[bytes], deadline: float, max_bytes: int
) -> AsyncGenerator[bytes, None]:
    """``raw``'s bytes in blocks that each end with a line end (the last one: whatever
    follows the last line end), each read before ``deadline``, at most ``max_bytes`` in all
    (past it: ``BodyTooLarge``). Linear in the body's length: a chunk without a line end is
    only kept, and the kept pieces are joined once, when a line end arrives."""
    total = 0
    pending: list[bytes] = []
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                chunk = await anext(raw)
        except StopAsyncIteration:
            break
        total += len(chunk)
        if total > max_bytes:
            raise BodyTooLarge
        end = chunk.rfind(b"\n") + 1
        if not end:
            pending.append(chunk)
            continue
        if pending:
            pending.append(chunk[:end])
            block = b"".join(pending)
            pending.clear()
        else:
            block = chunk if end == len(chunk) else chunk[:end]
        if end < len(chunk):
            pending.append(chunk[end:])
        yield block
    if pending:
        yield b"".join(pending)


async def split_lines(
    raw: AsyncIterator[bytes], deadline: float, max_bytes: int
) -> AsyncGenerator[str, None]:
    """``raw`` cut at newlines, each read before ``deadline``, at most ``max_bytes`` in all."""
    async for block in line_blocks(raw, deadline, max_bytes):
        lines = block.split(b"\n")
        if block.endswith(b"\n"):
            lines.pop()
        for line in lines:
            yield line.decode("utf-8", "replace")


def check_identity(response: Streamed) -> None:
    """Refuse a compressed body: it was asked for uncompressed, and a compressed one could
    expand far beyond its size on the wire (``gzip, gzip`` turns kilobytes into gigabytes)."""
    encoding = response.header("content-encoding").strip().lower()
    if encoding not in ("", "identity"):
        raise Compressed(
            f"a body compressed with {encoding!r}, although it was asked for uncompressed"
        )


async def read_capped(response: Streamed, max_bytes: int) -> bytes:
    """The whole body of a streaming response, or :class:`BodyTooLarge` past ``max_bytes``
    (the response is closed either way; its connection is reused only after a whole body)."""
    complete = False
    try:
        check_identity(response)
        declared = response.header("content-length")
        if declared.isdigit() and int(declared) > max_bytes:
            raise BodyTooLarge
        parts: list[bytes] = []
        total = 0
        async for chunk in response.chunks():
            total += len(chunk)
            if total > max_bytes:
                raise BodyTooLarge
            parts.append(chunk)
        complete = True
    finally:
        await response.close(reusable=complete)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def read_prefix(response: Streamed, max_bytes: int) -> bytes:
    """At most the first ``max_bytes`` of a body (an error body: only its message counts)."""
    check_identity(response)
    parts: list[bytes] = []
    total = 0
    async for chunk in response.chunks():
        parts.append(chunk)
        total += len(chunk)
        if total >= max_bytes:
            break
    return b"".join(parts)[:max_bytes]
