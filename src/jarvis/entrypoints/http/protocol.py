"""uvicorn's httptools protocol, writing each response in one piece.

Why: uvicorn writes a response's status line and headers, then its body, each straight to
the socket: two ``send`` system calls (and two wake-ups of the client) for every
non-streamed answer, which against an engine that answers at once cost the server more than
routing the request does. :class:`CoalescingHttpToolsProtocol` gives uvicorn a transport
that gathers what is written during one step of the event loop and hands it to the real
transport once, at the end of that step (``loop.call_soon``): the same bytes in the same
order, in one call. A stream's frames are written as they come (each is its own step), and
closing the connection writes what is pending first.
"""

from __future__ import annotations

import asyncio
from typing import cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


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


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol over a :class:`_CoalescingTransport`."""

    def connection_made(  # type: ignore[override]  # uvicorn narrows it the same way
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(cast(asyncio.Transport, _CoalescingTransport(transport, self.loop)))
