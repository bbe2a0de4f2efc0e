"""uvicorn's httptools protocol, writing each response in one piece, with a header deadline.

Why: uvicorn writes a response's status line and headers, then its body, each straight to
the socket: two ``send`` system calls (and two wake-ups of the client) for every
non-streamed answer, which against an engine that answers at once cost the server more than
routing the request does. :class:`JarvisHttpProtocol` gives uvicorn a transport
that gathers what is written during one step of the event loop and hands it to the real
transport once, at the end of that step (``loop.call_soon``): the same bytes in the same
order, in one call. A stream's frames are written as they come (each is its own step), and
closing the connection writes what is pending first.

uvicorn gives a connection no deadline for its request's headers: 300 connections each
holding half a request were all still open 8 s later (nothing in uvicorn would ever close
them), each a descriptor of the server (at the usual soft limit of 1,024 nobody else could
connect). So a connection that has spent :attr:`JarvisHttpProtocol.header_deadline`
seconds without a request being served (its headers unfinished, or idle) is closed.

Nor does uvicorn bound a request's head with this parser (its ``h11_max_incomplete_event_size``
applies to its h11 protocol only, and llhttp keeps no limit of its own): one connection sending
``x-a: b`` lines without end, before any API key is checked, grew a server to 2 GB, and one
``traceparent`` of 105 MB peaked at 314 MB. So the head of each request is counted as it
arrives: past :data:`MAX_HEAD_BYTES` bytes (request line and headers together) or
:data:`MAX_HEADERS` headers the request is answered 431, past :data:`MAX_TARGET_BYTES`
bytes of URL 414, as a JSON error, and the connection is closed. Bytes are counted before
they reach the parser (which keeps a header's name and value whole until the header ends),
so nothing past the bound is ever buffered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from http import HTTPStatus
from typing import Any, ClassVar, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from jarvis.entrypoints.http.client_connection import CLIENT_CONNECTION, ClientConnection
from jarvis.entrypoints.http.errors import ApiError, openai_body
from jarvis.entrypoints.http.listener_guard import PEER_CELL
from jarvis.entrypoints.http.peer_user import PeerCell, unix_peer


class _CoalescingTransport:
    """A transport that forwards everything to ``transport``, writes once per loop step."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: list[bytes | bytearray | memoryview]) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        if not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(p) for p in self._pending)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


HEADER_DEADLINE = 10.0
"""Seconds a connection may spend waiting for (the rest of) a request's headers."""

MAX_HEAD_BYTES = 64 * 1024
"""The request line and headers of one request, together: past it, 431. nginx refuses a
head past 4 × 8 KiB, Node.js past 16 KiB, h11 (uvicorn's other parser) past 16 KiB; this
allows a few large cookies or tokens more."""

MAX_HEADERS = 100
"""Headers of one request: past it, 431 (Apache's ``LimitRequestFields`` default)."""

MAX_TARGET_BYTES = 8 * 1024
"""The URL (request target) of one request: past it, 414 (about Apache's
``LimitRequestLine`` and nginx's one 8 KiB buffer for the request line)."""


class _HeadRefused(Exception):
    """Raised in a parser callback to stop parsing a head past a bound (the parser then
    raises, and uvicorn answers through :meth:`JarvisHttpProtocol.send_400_response`)."""


class _ConnectionLogger:
    """uvicorn's logger, for one connection, without uvicorn's generic warning about a
    request its parser refused when one of jarvis's bounds stopped the parser: that request
    was answered 431 or 414 with its reason, and "Invalid HTTP request received." would
    mislead whoever reads the log (jarvis says, at info level, what it refused)."""

    __slots__ = ("_logger", "_protocol")

    def __init__(self, logger: logging.Logger, protocol: JarvisHttpProtocol) -> None:
        self._logger = logger
        self._protocol = protocol

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self._protocol._refusal is None:
            self._logger.warning(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> object:
        return getattr(self._logger, name)


class JarvisHttpProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol over a :class:`_CoalescingTransport`, closing a
    connection that spends :attr:`header_deadline` s without a request being served: the
    phase starts when the connection opens and again when a response completes. Defined at
    module level so that ``--workers`` can hand it to its worker processes."""

    header_deadline: ClassVar[float] = HEADER_DEADLINE
    _timer: asyncio.TimerHandle | None = None
    _phase = 0.0
    _in_head = True
    """Between the end of a request (or the connection's start) and its successor's last
    header."""
    _head_bytes = 0
    _refusal: ApiError | None = None
    _connection: ClientConnection
    """What this connection's requests are told of it (made as it opens)."""

    def connection_made(  # type: ignore[override]  # uvicorn narrows it the same way
        self, transport: asyncio.Transport
    ) -> None:
        self._connection = ClientConnection()
        self.logger = cast(logging.Logger, _ConnectionLogger(self.logger, self))
        super().connection_made(cast(asyncio.Transport, _CoalescingTransport(transport, self.loop)))
        # the connection's owner, looked up once by the listener guard for all its requests
        self.app_state = {
            **self.app_state,
            PEER_CELL: unix_peer(transport) or PeerCell(),
            CLIENT_CONNECTION: self._connection,
        }
        self._phase = time.monotonic()
        self._timer = self.loop.call_later(self.header_deadline, self._check)

    def data_received(self, data: bytes) -> None:
        """Hand ``data`` to the parser, never more than :data:`MAX_HEAD_BYTES` of one head:
        what would go past it is refused unread. A head that starts in the read that ends
        the previous request is counted from the next read on (at most one read more)."""
        while self._in_head and self._refusal is None:
            room = MAX_HEAD_BYTES - self._head_bytes
            if room <= 0:
                self._answer(_head_too_large())
                return
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            if not data or self._left():
                return
        if data and self._refusal is None:
            super().data_received(data)

    def _left(self) -> bool:
        """True once the connection is closing or was handed to another protocol."""
        return self.transport.is_closing() or self.transport.get_protocol() is not self

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_TARGET_BYTES:
            self._stop(
                ApiError(
                    414,
                    f"The request's URL is longer than the server accepts ({MAX_TARGET_BYTES} "
                    "bytes).",
                    "invalid_request_error",
                    "url_too_long",
                )
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        if len(self.headers) > MAX_HEADERS:
            self._stop(
                ApiError(
                    431,
                    f"The request has more headers than the server accepts ({MAX_HEADERS}).",
                    "invalid_request_error",
                    "headers_too_large",
                )
            )

    def on_message_begin(self) -> None:
        self._connection.body_arrived = False
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._connection.body_arrived = True

    def _stop(self, error: ApiError) -> None:
        self._refusal = error
        raise _HeadRefused(error.message)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request the parser refused: the bound's own answer when a
        callback stopped the parser for one."""
        if self._refusal is None:
            super().send_400_response(msg)
        else:
            self._answer(self._refusal)

    def _answer(self, error: ApiError) -> None:
        """Answer ``error`` as JSON (OpenAI's shape: the path may not be known yet) and
        close the connection."""
        self._refusal = error
        self.logger.info("refused a request: %s %s", error.status, error.code)
        body = json.dumps(openai_body(error)).encode()
        head = [f"HTTP/1.1 {error.status} {HTTPStatus(error.status).phrase}\r\n".encode()]
        head += [
            name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers
        ]
        head.append(
            b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % len(body)
        )
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    def on_response_complete(self) -> None:
        """uvicorn's, but for its keep-alive timer: the header deadline closes an idle
        connection already (its phase starts again here), and a second timer armed and
        cancelled for every request cost the server about 1.5 us of each."""
        self._phase = time.monotonic()
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()  # (none is armed: kept for uvicorn's own paths)
        self.flow.resume_reading()
        if self.pipeline:  # a request that came while this one was served: start it
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)

    def _check(self) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:  # a request is being served
            self._timer = self.loop.call_later(self.header_deadline, self._check)
            return
        left = self._phase + self.header_deadline - time.monotonic()
        if left > 0:
            self._timer = self.loop.call_later(left, self._check)
            return
        self._timer = None
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)
        self._connection.left()  # a run this connection's request waits for is cancelled


def _head_too_large() -> ApiError:
    return ApiError(
        431,
        f"The request's headers are larger than the server accepts ({MAX_HEAD_BYTES} bytes for "
        "the request line and headers together).",
        "invalid_request_error",
        "headers_too_large",
    )


def with_header_deadline(deadline: float) -> type[JarvisHttpProtocol]:
    """:class:`JarvisHttpProtocol` with another header deadline (one process only)."""
    if deadline == HEADER_DEADLINE:
        return JarvisHttpProtocol
    return type("JarvisHttpProtocol", (JarvisHttpProtocol,), {"header_deadline": deadline})
