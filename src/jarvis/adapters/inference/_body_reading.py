"""Reading an engine's response bodies as they arrive: raw (never decompressed: a body
asked for uncompressed that comes compressed is refused) and bounded."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

import httpcore
import httpx


class BodyTooLarge(Exception):
    """A body went past its cap (turned into an ``EngineProtocolError`` by the caller)."""


class Compressed(Exception):
    """A body came compressed although it was asked for uncompressed."""


async def raw_chunks(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body as it arrives, not decoded. (A response built whole, as a test transport
    builds it, was read when it was made: its content is given as one chunk.)"""
    if response.is_stream_consumed:
        yield response.content
        return
    async for chunk in response.aiter_raw():
        yield chunk


def check_identity(response: httpx.Response) -> None:
    """Refuse a compressed body: it was asked for uncompressed, and a compressed one could
    expand far beyond its size on the wire (``gzip, gzip`` turns kilobytes into gigabytes)."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise Compressed(
            f"a body compressed with {encoding!r}, although it was asked for uncompressed"
        )


async def read_prefix(response: httpx.Response, max_bytes: int) -> bytes:
    """At most the first ``max_bytes`` of a body (an error body: only its message counts)."""
    check_identity(response)
    parts: list[bytes] = []
    total = 0
    async for chunk in raw_chunks(response):
        parts.append(chunk)
        total += len(chunk)
        if total >= max_bytes:
            break
    return b"".join(parts)[:max_bytes]


async def read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    """The whole body of a streaming response, or :class:`BodyTooLarge` past ``max_bytes``
    (the response is closed either way; its connection is reused only after a whole body)."""
    complete = False
    try:
        check_identity(response)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise BodyTooLarge
        parts: list[bytes] = []
        total = 0
        async for chunk in raw_chunks(response):
            total += len(chunk)
            if total > max_bytes:
                raise BodyTooLarge
            parts.append(chunk)
        complete = True
    finally:
        await release_response(response, reusable=complete)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def release_response(response: httpx.Response, *, reusable: bool) -> None:
    """Close a streamed response. Unless ``reusable`` (the stream ended in good order
    and its body was read to the end), its connection is closed instead of going back
    to the pool: a server that cut a stream short may close that connection a moment
    later, and the next request sent on it would fail."""
    if not reusable and response.http_version == "HTTP/1.1":  # one request per connection
        network = response.extensions.get("network_stream")
        if isinstance(network, httpcore.AsyncNetworkStream):
            with contextlib.suppress(Exception):
                await network.aclose()
    await response.aclose()
