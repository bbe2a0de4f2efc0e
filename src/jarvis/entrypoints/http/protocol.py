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
"""

from __future__ import annotations

import asyncio
import time
from typing import ClassVar, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

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


class JarvisHttpProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol over a :class:`_CoalescingTransport`, closing a
    connection that spends :attr:`header_deadline` s without a request being served: the
    phase starts when the connection opens and again when a response completes. Defined at
    module level so that ``--workers`` can hand it to its worker processes."""

    header_deadline: ClassVar[float] = HEADER_DEADLINE
    _timer: asyncio.TimerHandle | None = None
    _phase = 0.0

    def connection_made(  # type: ignore[override]  # uvicorn narrows it the same way
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(cast(asyncio.Transport, _CoalescingTransport(transport, self.loop)))
        # the connection's owner, looked up once by the listener guard for all its requests
        self.app_state = {**self.app_state, PEER_CELL: unix_peer(transport) or PeerCell()}
        self._phase = time.monotonic()
        self._timer = self.loop.call_later(self.header_deadline, self._check)

    def on_response_complete(self) -> None:
        self._phase = time.monotonic()
        super().on_response_complete()

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


def with_header_deadline(deadline: float) -> type[JarvisHttpProtocol]:
    """:class:`JarvisHttpProtocol` with another header deadline (one process only)."""
    if deadline == HEADER_DEADLINE:
        return JarvisHttpProtocol
    return type("JarvisHttpProtocol", (JarvisHttpProtocol,), {"header_deadline": deadline})
