"""A loopback engine of raw bytes, for tests of the engine wires: a few lines of asyncio on a
port, scripted by the test. It writes raw bytes, records every request it reads, counts
its connections, and holds an answer until the test opens its gate, so that every test
waits for what it needs to have happened, never for a clock. ``GUARD`` only turns a hang
into a failure.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct
from collections.abc import Awaitable, Callable

GUARD = 30.0
"""Seconds after which a wait of the engine's is a failure, not a hang."""


class Link:
    """One connection the engine accepted."""

    def __init__(
        self, engine: Engine, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.engine = engine
        self.reader = reader
        self.writer = writer
        self.number = engine.connections

    async def request(self) -> bytes:
        """The next request, head and body (``b""`` once the client hung up)."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return b""
        length = re.search(rb"(?im)^content-length: *(\d+)\r$", head)
        request = head + await self.reader.readexactly(int(length[1]) if length else 0)
        self.engine.note(request)
        return request

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def reset(self) -> None:
        """Drop the connection with a TCP reset, not a polite close."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


Handler = Callable[[Link], Awaitable[None]]


class Engine:
    """A loopback engine: its n-th connection is served by the n-th of ``handlers`` (the
    last one serves every later connection). It records every request its handlers read
    (:meth:`Link.request`), counts its connections, and holds answers behind gates the
    test opens."""

    def __init__(self, *handlers: Handler, host: str = "127.0.0.1") -> None:
        assert handlers, "an engine needs a handler"
        self._handlers = handlers
        self._host = host
        self.requests: list[bytes] = []
        self.connections = 0
        self.open = 0
        self._gates: dict[str, asyncio.Event] = {}
        self._all_open = False
        self._changed = asyncio.Event()
        self._serving: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._server: asyncio.Server | None = None
        self.port = 0
        self.url = ""

    def paths(self) -> list[str]:
        return [request.split(b" ", 2)[1].decode() for request in self.requests]

    def note(self, request: bytes) -> None:
        self.requests.append(request)
        self._changed.set()

    async def until(self, test: Callable[[], bool]) -> None:
        async with asyncio.timeout(GUARD):
            while not test():
                self._changed.clear()
                await self._changed.wait()

    async def received(self, count: int) -> None:
        await self.until(lambda: len(self.requests) >= count)

    async def let_go(self) -> None:
        """Until the client has closed every connection."""
        await self.until(lambda: self.open == 0)

    def gate(self, path: str) -> asyncio.Event:
        gate = self._gates.setdefault(path, asyncio.Event())
        if self._all_open:
            gate.set()
        return gate

    def close_gates(self) -> None:
        self._all_open = False
        self._gates.clear()

    def release_all(self) -> None:
        self._all_open = True
        for gate in self._gates.values():
            gate.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._serving[task] = writer
        self.connections += 1
        self.open += 1
        try:
            handler = self._handlers[min(self.connections, len(self._handlers)) - 1]
            await handler(Link(self, reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self.open -= 1
            self._changed.set()
            del self._serving[task]

    async def __aenter__(self) -> Engine:
        self._server = await asyncio.start_server(self._serve, self._host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.url = f"http://{host}:{self.port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stop: every handler still serving is let through its gate and cut off."""
        assert self._server is not None
        self._server.close()
        self.release_all()
        for writer in self._serving.values():
            writer.transport.abort()
        async with asyncio.timeout(GUARD):
            await asyncio.gather(*self._serving)
