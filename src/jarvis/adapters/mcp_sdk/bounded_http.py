"""The HTTP client under the ``mcp`` SDK's streamable-HTTP transport, with replies bounded.

The SDK reads a JSON reply whole (``response.aread()``) however large it is: a remote
server answering a call with gigabytes would take that much memory, several times over.
Here every reply that is not an event stream stops at ``max_bytes`` with an
``httpx2.StreamError``, which the SDK turns into the call's error (an event stream is
bounded per event by the SDK itself, and may rightly run for as long as the session).
The client is the SDK's own default otherwise: its timeouts, no redirects of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT


class ReplyTooLarge(httpx2.StreamError):
    """A server's reply passed the client's bound."""


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, max_bytes: int) -> None:
        self._stream = stream
        self._max_bytes = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._stream:
            total += len(chunk)
            if total > self._max_bytes:
                raise ReplyTooLarge(f"the server's reply passed {self._max_bytes} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class BoundedClient(httpx2.AsyncClient):
    """``httpx2.AsyncClient`` whose replies (event streams aside) stop at ``max_bytes``."""

    def __init__(self, *, headers: Mapping[str, str] | None, max_bytes: int) -> None:
        super().__init__(
            headers=dict(headers) if headers else None,
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        )
        self._max_bytes = max_bytes

    async def send(self, request: httpx2.Request, **options: Any) -> httpx2.Response:
        response = await super().send(request, **options)
        kind = response.headers.get("content-type", "").lower()
        if not kind.startswith("text/event-stream") and isinstance(
            response.stream, httpx2.AsyncByteStream
        ):
            response.stream = _Bounded(response.stream, self._max_bytes)
        return response
