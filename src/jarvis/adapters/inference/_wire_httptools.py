"""The fastest wire: HTTP/1.1 over asyncio's own transports, parsed by httptools.

A request to a local engine is a few hundred bytes each way; what it costs the client is
the Python around the bytes. aiohttp's client spends about 0.17 ms of CPU on one request to
the loopback stub (building its request and response objects, its URL and header
multidicts, cookies, tracing hooks), this wire about 0.06 ms: the request head is written
from bytes built once per engine, the answer is parsed by httptools (llhttp, the parser
uvicorn's servers use, in C) straight into the few fields an engine reads.

It sends only what it can send plainly: ``http://host[:port]/path`` with no credentials in
the URL, no proxy named by the environment for it, and headers free of line breaks. Every
other request (``https``, a proxy, a URL or header it would have to escape) goes through
:class:`~._wire_aiohttp.AiohttpWire`, created the first time one needs it.

The bounds stay the engines': a connect timeout of ``min(timeout, 10)`` s (the caller puts
the whole request under its deadline and caps every body), a response head of at most
:data:`MAX_HEAD_BYTES` and :data:`MAX_HEADERS` fields, reading paused while more than
:data:`BUFFERED_BYTES` of body wait for the reader, no redirects, bodies never
decompressed, at most :data:`~._wire.MAX_CONNECTIONS` connections (a request waits for
one). A connection goes back to the pool only after a whole answer that keeps it alive;
what breaks raises the httpx exceptions the caller maps, as the other wires do.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncGenerator, Mapping
from typing import cast
from urllib.parse import urlsplit

import httptools
import httpx

from jarvis.adapters.inference._wire import MAX_CONNECTIONS, Streamed, Wire, environment_proxy

MAX_HEAD_BYTES = 64 * 1024
"""A response's status line and headers, at most."""
MAX_HEADERS = 100
"""Header fields in a response, at most."""
BUFFERED_BYTES = 256 * 1024
"""Body bytes held for a reader that has not taken them yet before reading pauses."""
_ROUTES = 32
"""URLs whose route (plain or through aiohttp) is kept."""


class _Route:
    """How one URL is sent plainly: its pool key, request target and ``Host`` value."""

    __slots__ = ("key", "netloc", "target")

    def __init__(self, key: tuple[str, int], netloc: str, target: str) -> None:
        self.key = key
        self.netloc = netloc
        self.target = target


def plain_route(url: str) -> _Route | None:
    """The route of ``url`` when this wire can send it as it stands, else ``None``."""
    if not url.isascii() or any(c <= " " or c == "\x7f" for c in url):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port or 80
    except ValueError:
        return None
    host = parts.hostname
    if parts.scheme != "http" or not host or "@" in parts.netloc or parts.fragment:
        return None
    if environment_proxy(url) is not None:
        return None
    target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    return _Route((host, port), parts.netloc, target)


class _Connection(asyncio.Protocol):
    """One keep-alive connection and the answer being read on it."""

    def __init__(self, pool: _Pool, key: tuple[str, int]) -> None:
        self._pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self._active = False
        self._parser = httptools.HttpResponseParser(self)
        self._head_bytes = 0
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
        self._head_bytes = 0
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
        assert self.transport is not None
        self.transport.write(request)

    def finish(self) -> bool:
        """The answer is given back: True when the connection can carry another one."""
        self._active = False
        return (
            self.complete
            and not self.lost
            and not self._body
            and self._error is None
            and self._keep_alive
        )

    def close(self) -> None:
        self.lost = True
        self._active = False
        if self.transport is not None:
            self.transport.close()

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body as it arrives: what is buffered, then each piece as it comes."""
        body = self._body
        while True:
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

    # asyncio's side --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, though not always a subclass of asyncio's (uvloop's is not)
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        if not self._active or self.complete:
            # bytes nobody asked for: this connection's state is unknown from here on
            self._fail(httpx.RemoteProtocolError("The engine sent bytes it was not asked for"))
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("The engine switched protocols"))
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, httpx.TransportError):
                self._fail(cause)
            else:  # pragma: no cover - the callbacks raise nothing else
                self._fail(httpx.RemoteProtocolError(f"Malformed HTTP answer: {cause}"))
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"Malformed HTTP answer: {exc}"))

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

    def _count(self, size: int) -> None:
        if self.complete:
            raise httpx.RemoteProtocolError("The engine sent bytes after its answer")
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES or len(self.headers) >= MAX_HEADERS:
            raise httpx.RemoteProtocolError(
                f"An answer head larger than {MAX_HEAD_BYTES} bytes or {MAX_HEADERS} fields"
            )

    def on_status(self, status: bytes) -> None:
        self._count(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        known = self.headers.get(key)
        self.headers[key] = text if known is None else known + ", " + text

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # an interim answer: the real one follows
            self._head_bytes = 0
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


class _Streamed:
    """An answer read from a :class:`_Connection`, seen through :class:`~._wire.Streamed`."""

    __slots__ = ("_connection", "_pool", "status_code", "url")

    def __init__(self, connection: _Connection, pool: _Pool, url: str) -> None:
        self._connection: _Connection | None = connection
        self._pool = pool
        self.status_code = connection.status
        self.url = url

    def header(self, name: str) -> str:
        connection = self._connection
        return "" if connection is None else connection.headers.get(name, "")

    def chunks(self) -> AsyncGenerator[bytes, None]:
        if self._connection is None:
            raise httpx.ReadError("The answer was already given back")
        return self._connection.chunks()

    async def close(self, *, reusable: bool) -> None:
        # once only: a connection given back may already carry another request
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.give_back(connection, reusable=reusable)


class _Pool:
    """Keep-alive connections by host and port, at most :data:`MAX_CONNECTIONS` open."""

    def __init__(self, connect_timeout: float) -> None:
        self._connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def _idle_one(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if not connection.lost:
                return connection
        return None

    async def take(self, key: tuple[str, int]) -> _Connection:
        """An idle live connection to ``key``, else a new one (waiting for a place while
        :data:`MAX_CONNECTIONS` are open and busy)."""
        connection = self._idle_one(key)
        if connection is not None:
            return connection
        while len(self._open) >= MAX_CONNECTIONS:
            if self._close_an_idle():
                continue
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # pass the place on
                raise
            connection = self._idle_one(key)
            if connection is not None:
                return connection
        return await self._connect(key)

    async def _connect(self, key: tuple[str, int]) -> _Connection:
        connection = _Connection(self, key)
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

    def give_back(self, connection: _Connection, *, reusable: bool) -> None:
        if connection.finish() and reusable:
            self._idle.setdefault(connection.key, []).append(connection)
        else:
            connection.close()
            self.forget(connection)
        self._wake_one()

    def forget(self, connection: _Connection) -> None:
        if connection in self._open:
            self._open.discard(connection)
            self._wake_one()

    def _close_an_idle(self) -> bool:
        for idle in self._idle.values():
            while idle:
                connection = idle.pop(0)
                connection.close()
                self.forget(connection)
                return True
        return False

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close_all(self) -> None:
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()


_PLAIN_METHODS = frozenset({"GET", "POST", "PUT", "DELETE"})


class HttptoolsWire:
    """Plain ``http://`` requests over this module's pool; the rest through aiohttp."""

    def __init__(self, *, headers: Mapping[str, str], timeout: float) -> None:
        self._headers = dict(headers)
        self._timeout = timeout
        self._pool = _Pool(min(timeout, 10.0))
        self._routes: dict[str, _Route | None] = {}
        self._heads: dict[tuple[str, str, tuple[tuple[str, str], ...]], bytes | None] = {}
        self._fallback: Wire | None = None
        self._plain = all(_plain_field(k) and _plain_field(v) for k, v in headers.items())

    def _route(self, url: str) -> _Route | None:
        try:
            return self._routes[url]
        except KeyError:
            if len(self._routes) >= _ROUTES:
                self._routes.clear()
            route = self._routes[url] = plain_route(url) if self._plain else None
            return route

    def _head(
        self, method: str, url: str, route: _Route, extra: Mapping[str, str] | None
    ) -> bytes | None:
        """The request's head but for its ``Content-Length``, ``None`` when it cannot be
        written plainly; kept by method, URL and extra headers."""
        fields = tuple(extra.items()) if extra else ()
        key = (method, url, fields)
        head = self._heads.get(key, b"")
        if head == b"":
            if method not in _PLAIN_METHODS or not all(
                _plain_field(k) and _plain_field(v) for k, v in fields
            ):
                return None
            lines = [f"{method} {route.target} HTTP/1.1", f"Host: {route.netloc}"]
            fixed = {"User-Agent": "jarvis", **self._headers, **dict(fields)}
            lines += [f"{name}: {value}" for name, value in fixed.items()]
            head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
            if len(self._heads) >= _ROUTES:
                self._heads.clear()
            self._heads[key] = head
        return head

    async def send(
        self, method: str, url: str, *, content: bytes | None, headers: Mapping[str, str] | None
    ) -> Streamed:
        route = self._route(url)
        head = None if route is None else self._head(method, url, route, headers)
        if route is None or head is None:
            return await self._aiohttp().send(method, url, content=content, headers=headers)
        if content is None:
            request = head + b"\r\n"
        else:
            request = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(content), content)
        connection = await self._pool.take(route.key)
        headed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            connection.start(request, headed)
            await headed
        except BaseException:
            self._pool.give_back(connection, reusable=False)
            raise
        return _Streamed(connection, self._pool, url)

    def _aiohttp(self) -> Wire:
        if self._fallback is None:
            from jarvis.adapters.inference._wire_aiohttp import AiohttpWire

            self._fallback = AiohttpWire(headers=self._headers, timeout=self._timeout)
        return self._fallback

    async def aclose(self) -> None:
        self._pool.close_all()
        fallback, self._fallback = self._fallback, None
        if fallback is not None:
            await fallback.aclose()


def _plain_field(text: str) -> bool:
    """A header name or value written as it stands: Latin-1 with no control character."""
    return all(" " <= c <= "\xff" and c != "\x7f" for c in text)
