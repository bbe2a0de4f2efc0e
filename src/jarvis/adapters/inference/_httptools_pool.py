"""The httptools wire's connections: one answer at a time read by httptools over an asyncio
protocol, and the pool that keeps them alive between requests.

Everything an engine sends is bounded here, whatever it sends: a head of at most
:data:`MAX_HEAD_BYTES` and :data:`MAX_HEADERS` fields (its trailers likewise), and never more
than :data:`MAX_HEAD_BYTES` received in a row without a byte of body (interim answers one
after another, a header or trailer that never ends: httptools holds a header until its end,
so without this count one would grow until the deadline); reading pauses while more than
:data:`BUFFERED_BYTES` of body wait for the reader. A connection carries one answer at a
time: bytes nobody asked for (before a request, after a complete answer) make it unusable,
so an engine can never slip bytes into an answer, or an answer to the next request.

What goes wrong is raised as one of two kinds of error, because only one of them is worth
another try (see :mod:`._wire`). Bytes that do not parse as the answer, or pass its bounds,
or come unasked, are a :class:`~._wire.MalformedAnswer`: the parser says so, or these
bounds do. The connection closing or breaking before the answer is complete is told by
asyncio (``connection_lost``), not by the parser, and is a plain
``httpx.RemoteProtocolError`` ("Server disconnected") before the head was complete, an
``httpx.ReadError`` after: the parser never sees an end of file, so a parse error can only
come from bytes received, and a lost connection never reads as a malformed answer.

The pool opens at most :data:`~._wire.MAX_CONNECTIONS` connections; a request that finds
none free waits in line, first come first served: a place (or an idle connection to its
host) is handed to the first in line, so a request that arrives later cannot take it, and
one that gives up passes what it was handed on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncGenerator
from typing import cast

import httptools
import httpx

from jarvis.adapters.inference._wire import MAX_CONNECTIONS, SWITCHED, MalformedAnswer

MAX_HEAD_BYTES = 64 * 1024
"""A response's status line and headers (and its trailers), at most."""
MAX_HEADERS = 100
"""Header fields in a response (and trailer fields after it), at most."""
BUFFERED_BYTES = 256 * 1024
"""Body bytes held for a reader that has not taken them yet before reading pauses."""

Key = tuple[str, int]
"""A pool's key: host and port."""


def _too_large() -> MalformedAnswer:
    return MalformedAnswer(
        f"An answer head (or trailer) larger than {MAX_HEAD_BYTES} bytes or {MAX_HEADERS} fields"
    )


class Connection(asyncio.Protocol):
    """One keep-alive connection and the answer being read on it."""

    def __init__(self, pool: Pool, key: Key) -> None:
        self._pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.turn = 0
        """Counts the answers started and given back: a body reader made for one answer
        stops when the turn changes, so it never reads the next request's answer."""
        self._active = False
        self._parser = httptools.HttpResponseParser(self)
        self._head_bytes = 0
        self._fields = 0
        self._head_run = 0
        """Bytes received since the last body bytes (the head, trailers): what httptools
        may be holding, and what a head that never ends would grow."""
        self.headers: dict[str, str] = {}
        self.status = 0
        self._headed: asyncio.Future[None] | None = None
        self._body: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._paused = False
        self._more: asyncio.Future[None] | None = None
        self.complete = False
        self._keep_alive = False
        self._error: httpx.TransportError | None = None
        self._eof_ends_body = False

    # the request's side ----------------------------------------------------------------

    def start(self, request: bytes, headed: asyncio.Future[None]) -> None:
        """Reset for a new answer and write ``request``; ``headed`` is set once the
        answer's head has arrived (or to the error that came first)."""
        self._parser = httptools.HttpResponseParser(self)
        self._head_bytes = self._fields = self._head_run = 0
        self.headers = {}
        self.status = 0
        self._headed = headed
        self._body.clear()
        self._buffered = 0
        self.complete = False
        self._keep_alive = False
        self._error = None
        self._eof_ends_body = False
        self._active = True
        self.turn += 1
        assert self.transport is not None
        self.transport.write(request)

    def finish(self) -> bool:
        """The answer is given back: True when the connection can carry another one."""
        self._active = False
        self.turn += 1
        return (
            self.complete
            and not self.lost
            and not self._body
            and self._error is None
            and self._keep_alive
        )

    def close(self) -> None:
        """Close the connection; whoever still waits on its answer gets an error at once."""
        self._fail(httpx.ReadError("The connection was closed"))
        self._active = False

    async def chunks(self, turn: int, reader: object) -> AsyncGenerator[bytes, None]:
        """The body of the answer of ``turn`` as it arrives: what is buffered, then each
        piece as it comes. ``reader`` (the answer being read) is held meanwhile, so that it
        is not collected, and its connection given back, under its reader."""
        body = self._body
        while self.turn == turn:
            if body:
                chunk = body.popleft()
                self._buffered -= len(chunk)
                if self._paused and self._buffered < BUFFERED_BYTES and self.transport:
                    self._paused = False
                    self.transport.resume_reading()
                yield chunk
            elif self.complete:
                return
            elif self._error is not None:
                raise self._error
            else:
                more = self._more = asyncio.get_running_loop().create_future()
                await more
        raise httpx.ReadError("The answer was given back before its body was read")

    # asyncio's side --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, though not always a subclass of asyncio's (uvloop's is not)
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        if not self._active or self.complete:
            # bytes nobody asked for: this connection's state is unknown from here on
            self._fail(MalformedAnswer("The engine sent bytes it was not asked for"))
            return
        buffered = self._buffered
        error: httpx.TransportError
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            error = MalformedAnswer(SWITCHED)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__  # what a callback raised: a MalformedAnswer
            error = (
                cause
                if isinstance(cause, MalformedAnswer)
                else MalformedAnswer(str(cause) or type(cause).__name__)
            )
        except httptools.HttpParserError as exc:
            error = MalformedAnswer(str(exc) or type(exc).__name__)
        else:
            if self._buffered != buffered:
                self._head_run = 0
                return
            self._head_run += len(data)
            if self.complete or self._head_run <= MAX_HEAD_BYTES:
                return
            error = _too_large()
        self._fail(error)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._pool.forget(self)
        if self.complete or not self._active:
            return
        if self.status and self._eof_ends_body and exc is None and self._error is None:
            self.complete = True  # a body that runs to the end of the connection
            self._wake()
            return
        reason = f": {exc}" if exc else ""
        if self._headed is not None:
            self._fail(httpx.RemoteProtocolError(f"Server disconnected{reason}"))
        else:
            self._fail(httpx.ReadError(f"The connection closed mid-answer{reason}"))

    # httptools' side -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one request
            raise MalformedAnswer("The engine sent bytes after its answer")

    def on_status(self, status: bytes) -> None:
        self._count(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        self._count(len(name) + len(value))
        if self.status:
            return  # a trailer: the head the caller reads is complete
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        known = self.headers.get(key)
        self.headers[key] = text if known is None else known + ", " + text

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES or self._fields > MAX_HEADERS:
            raise _too_large()

    def on_headers_complete(self) -> None:
        self._head_bytes = self._fields = 0  # the next head, or the trailers, count anew
        status = self._parser.get_status_code()
        if status < 200:  # an interim answer: the real one follows
            self.headers = {}
            return
        self.status = status
        chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self._eof_ends_body = not chunked and "content-length" not in self.headers
        headed, self._headed = self._headed, None
        if headed is not None and not headed.done():
            headed.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered >= BUFFERED_BYTES and not self._paused and self.transport:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.status:  # not the end of an interim answer
            # asked now: once the parser is past the message it no longer knows
            self._keep_alive = self._parser.should_keep_alive()
            self.complete = True
            self._wake()

    # -----------------------------------------------------------------------------------

    def _wake(self) -> None:
        more, self._more = self._more, None
        if more is not None and not more.done():
            more.set_result(None)

    def _fail(self, error: httpx.TransportError) -> None:
        if self._error is None:
            self._error = error
        headed, self._headed = self._headed, None
        if headed is not None and not headed.done():
            headed.set_exception(error)
        self._wake()
        if not self.lost:
            self.lost = True
            if self.transport is not None:
                self.transport.close()


class Pool:
    """Keep-alive connections by host and port, at most :data:`MAX_CONNECTIONS` open."""

    def __init__(self, connect_timeout: float) -> None:
        self._connect_timeout = connect_timeout
        self._idle: dict[Key, list[Connection]] = {}
        self._open: set[Connection] = set()
        self._waiters: collections.deque[tuple[Key, asyncio.Future[Connection | None]]] = (
            collections.deque()
        )
        self._promised = 0
        """Places handed to requests in line that have not connected yet."""

    def _full(self) -> bool:
        return len(self._open) + self._promised >= MAX_CONNECTIONS

    def _idle_one(self, key: Key) -> Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if not connection.lost:
                return connection
        return None

    async def take(self, key: Key) -> Connection:
        """An idle live connection to ``key``, else a new one (waiting in line for a place
        while :data:`MAX_CONNECTIONS` are open and busy)."""
        connection = self._idle_one(key)
        if connection is not None:
            return connection
        while self._full() and self._close_an_idle():
            pass
        if self._full():
            connection = await self._wait(key)
            if connection is not None:
                return connection
        return await self._connect(key)

    async def _wait(self, key: Key) -> Connection | None:
        """Wait in line for an idle connection to ``key``, or (``None``) a place to open
        one; what was handed over to a request that gives up goes to the next in line."""
        waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        entry = (key, waiter)
        self._waiters.append(entry)
        try:
            connection = await waiter
        except BaseException:
            if waiter.cancelled():
                with contextlib.suppress(ValueError):
                    self._waiters.remove(entry)
            elif waiter.exception() is None:  # handed over, then given up
                self._pass_on(waiter.result())
            raise
        if connection is None:
            self._promised -= 1
        return connection

    def _pass_on(self, handed: Connection | None) -> None:
        if handed is None:
            self._promised -= 1
            self._hand_over()
        else:
            self._reuse(handed)

    def _first_in_line(self) -> tuple[Key, asyncio.Future[Connection | None]] | None:
        waiters = self._waiters
        while waiters and waiters[0][1].done():  # gave up; not yet out of line
            waiters.popleft()
        return waiters[0] if waiters else None

    def _hand_over(self) -> None:
        """Free places to the first in line."""
        while not self._full() and (entry := self._first_in_line()) is not None:
            self._waiters.popleft()
            self._promised += 1
            entry[1].set_result(None)

    async def _connect(self, key: Key) -> Connection:
        connection = Connection(self, key)
        self._open.add(connection)
        host, port = key
        try:
            async with asyncio.timeout(self._connect_timeout):
                await asyncio.get_running_loop().create_connection(lambda: connection, host, port)
        except TimeoutError:
            self.forget(connection)
            raise httpx.ConnectTimeout(f"Connecting to {host}:{port} timed out") from None
        except OSError as exc:
            self.forget(connection)
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            self.forget(connection)
            connection.close()
            raise
        return connection

    def give_back(self, connection: Connection, *, reusable: bool) -> None:
        if connection.finish() and reusable:
            self._reuse(connection)
        else:
            connection.close()
            self.forget(connection)

    def _reuse(self, connection: Connection) -> None:
        """A connection free for another answer: to the first in line if it is for its
        host, else closed to make room for the first in line, else kept idle."""
        entry = self._first_in_line()
        if entry is None:
            self._idle.setdefault(connection.key, []).append(connection)
        elif entry[0] == connection.key:
            self._waiters.popleft()
            entry[1].set_result(connection)
        else:
            connection.close()
            self.forget(connection)

    def forget(self, connection: Connection) -> None:
        if connection in self._open:
            self._open.discard(connection)
            self._hand_over()

    def _close_an_idle(self) -> bool:
        for idle in self._idle.values():
            if idle:
                connection = idle.pop(0)
                connection.close()
                self.forget(connection)
                return True
        return False

    def close_all(self) -> None:
        """Close every connection: requests waiting for one, or for an answer on one,
        get an error at once."""
        waiters, self._waiters = self._waiters, collections.deque()
        for _, waiter in waiters:
            if not waiter.done():
                waiter.set_exception(httpx.ConnectError("The engine's connections were closed"))
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()
