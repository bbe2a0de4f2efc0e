"""The streaming edge of every route: one skeleton for the run, an encoder per wire format.

:func:`encoded` drives a run's items (a use case's updates, an engine's chunks) through an
:class:`Encoder`, which knows only its wire format (OpenAI chunks, Anthropic events, the
managed-agent stream). The skeleton owns what every stream shares: the server's count of
active runs, the stream's deadline (``stream_timeout``), a failure before the first item
answered with a status and a JSON error (:class:`BeforeStream`) and one after it as the
encoder's error frames, and the run closed however the stream ends.

An SSE response that runs its producer only while the client listens.

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
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    MutableMapping,
)
from itertools import chain
from typing import Any, Protocol, TypeVar

from starlette.responses import JSONResponse, Response

from jarvis.entrypoints.http.errors import ApiError, api_error, body_for
from jarvis.entrypoints.http.state import ServerState

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


Item = TypeVar("Item", contravariant=True)


class Encoder(Protocol[Item]):
    """One wire format: the frames of a stream, item by item (an encoder serves one stream)."""

    finished: bool
    """Whether the stream is complete: no further item is read."""

    def opening(self) -> Iterable[bytes]:
        """The frames before the first item's (sent once the run has started)."""
        ...

    def frames(self, item: Item) -> Iterable[bytes]:
        """The frames of one item."""
        ...

    def failure(self, error: ApiError) -> Iterable[bytes]:
        """The frames that say the run failed after the stream started."""
        ...

    def closing(self) -> Iterable[bytes]:
        """The frames that end a stream that started, whether its run failed or not."""
        ...


async def encoded(
    state: ServerState, items: AsyncIterator[Item], encoder: Encoder[Item]
) -> AsyncGenerator[bytes, None]:
    """The frames of ``items`` in ``encoder``'s wire format, for an :class:`EventStream`.

    The run counts as active from the first frame asked for until the stream ends; it has
    ``stream_timeout`` seconds in all (its timeout is a failure like any other). A failure
    before the first item is raised as :class:`BeforeStream` (the response answers it with
    a status); one after it becomes the encoder's error frames. ``items`` is closed however
    the stream ends, a client that went away included."""
    state.active_runs += 1
    try:
        async with asyncio.timeout(state.limits.stream_timeout):
            for first in await _first(items):
                for frame in chain(encoder.opening(), encoder.frames(first)):
                    yield frame
            if _reading(encoder):
                async for item in items:
                    for frame in encoder.frames(item):
                        yield frame
                    if encoder.finished:
                        break
    except BeforeStream:
        raise
    except Exception as exc:
        for frame in encoder.failure(api_error(exc)):
            yield frame
    finally:
        state.active_runs -= 1
        await aclose(items)
    for frame in encoder.closing():
        yield frame


async def _first(items: AsyncIterator[Item]) -> list[Item]:
    """The run's first item (none: the run said nothing); its failure as :class:`BeforeStream`."""
    try:
        return [await anext(items)]
    except StopAsyncIteration:
        return []
    except Exception as exc:
        raise BeforeStream(exc) from exc


def _reading(encoder: Encoder[Item]) -> bool:
    """Whether ``encoder`` takes further items (asked anew after each: its frames decide)."""
    return not encoder.finished


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
