"""An SSE response that runs its producer only while the client listens.

The status and headers wait for the first frame, so a run that cannot start (no engine, an
unknown model) is answered with a proper status and a JSON error body instead of a stream
that fails at once. From the moment the request is handled, the client's connection is
watched: when it goes away, the producer is cancelled at once, wherever it waits (an
engine's answer, a tool), and closed, so nothing of the run keeps going. This holds whatever
ASGI version the server speaks (Starlette's own streaming response only notices a
disconnect on its next write when the server speaks ASGI 2.4).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse, Response

from jarvis.entrypoints.http.errors import api_error, body_for

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SSE_HEADERS = {
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


class BeforeStream(Exception):  # a wrapper, not an error kind of its own
    """Raised by a producer that failed before its first frame: answer with a status."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class EventStream(Response):
    """``text/event-stream`` from ``frames``; the producer is cancelled on disconnect."""

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncGenerator[bytes, None]) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            *((name.encode(), value.encode()) for name, value in SSE_HEADERS.items()),
        ]
        self.frames = frames

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        producer = asyncio.ensure_future(self._produce(scope, receive, send))
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({producer, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (producer, watcher):
                task.cancel()
            for task in (producer, watcher):
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await task
            await self.frames.aclose()
        if producer.done() and not producer.cancelled() and producer.exception() is not None:
            raise producer.exception()  # type: ignore[misc]  # checked just above

    async def _produce(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            first = await anext(self.frames)
        except StopAsyncIteration:
            first = b""
        except BeforeStream as early:
            error = api_error(early.cause)
            reply = JSONResponse(body_for(scope.get("path", ""), error), status_code=error.status)
            await reply(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        if first:
            await send({"type": "http.response.body", "body": first, "more_body": True})
        async for frame in self.frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def aclose(iterator: object) -> None:
    """Close an async generator typed as a plain iterator (idempotent)."""
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
