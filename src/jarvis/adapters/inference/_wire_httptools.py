"""The fastest wire: HTTP/1.1 over asyncio's own transports, parsed by httptools.

A request to a local engine is a few hundred bytes each way; what it costs the client is
the Python around the bytes. aiohttp's client spends about 0.17 ms of CPU on one request to
the loopback stub (building its request and response objects, its URL and header
multidicts, cookies, tracing hooks), this wire about 0.06 ms: the request head is written
from bytes built once per engine, the answer is parsed by httptools (llhttp, the parser
uvicorn's servers use, in C) straight into the few fields an engine reads.

It sends only what it can send plainly: ``http://host[:port]/path`` with no credentials in
the URL, no proxy named by the environment for it, and Latin-1 header values. Every other
request (``https``, a proxy, a URL or header it would have to escape) goes through
:class:`~._wire_aiohttp.AiohttpWire`, created the first time one needs it. Header fields no
wire may send (a control character in a value, a name that is no token, a
``Content-Length`` or ``Transfer-Encoding`` of the caller's) are refused on either path
with ``httpx.LocalProtocolError``: nothing of such a request reaches the engine.

The bounds stay the engines': a connect timeout of ``min(timeout, 10)`` s (the caller puts
the whole request under its deadline and caps every body), and those of the connections
(:mod:`._httptools_pool`): a response head of at most
:data:`~._httptools_pool.MAX_HEAD_BYTES` and :data:`~._httptools_pool.MAX_HEADERS` fields,
reading paused while more than :data:`~._httptools_pool.BUFFERED_BYTES` of body wait for
the reader, at most :data:`~._wire.MAX_CONNECTIONS` connections (a request waits in line
for one); no redirects, bodies never decompressed. A connection goes back to the pool only
after a whole answer that keeps it alive; what breaks raises the httpx exceptions the
caller maps, as the other wires do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterable, Mapping
from functools import partial
from urllib.parse import urlsplit

import httpx

from jarvis.adapters.inference._httptools_pool import Connection, Pool
from jarvis.adapters.inference._wire import Streamed, Wire, environment_proxy

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


class _Streamed:
    """An answer read from a :class:`~._httptools_pool.Connection`, seen through
    :class:`~._wire.Streamed`."""

    __slots__ = ("_connection", "_loop", "_pool", "_turn", "status_code", "url")

    def __init__(
        self, connection: Connection, pool: Pool, url: str, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._connection: Connection | None = connection
        self._pool = pool
        self._loop = loop
        self._turn = connection.turn
        self.status_code = connection.status
        self.url = url

    def header(self, name: str) -> str:
        connection = self._connection
        return "" if connection is None else connection.headers.get(name, "")

    def chunks(self) -> AsyncGenerator[bytes, None]:
        if self._connection is None:
            raise httpx.ReadError("The answer was already given back")
        return self._connection.chunks(self._turn, self)

    async def close(self, *, reusable: bool) -> None:
        # once only: a connection given back may already carry another request
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.give_back(connection, reusable=reusable)

    def __del__(self) -> None:
        # an answer dropped unclosed gives its connection back (closed: its body may be
        # unread), or a careless caller would use up the pool's places one by one; on its
        # loop, since the collector may run in any thread
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to free
                self._loop.call_soon_threadsafe(
                    partial(self._pool.give_back, connection, reusable=False)
                )


_PLAIN_METHODS = frozenset({"GET", "POST", "PUT", "DELETE"})


class HttptoolsWire:
    """Plain ``http://`` requests over this module's pool; the rest through aiohttp."""

    def __init__(self, *, headers: Mapping[str, str], timeout: float) -> None:
        self._headers = dict(headers)
        self._timeout = timeout
        self._pool = Pool(min(timeout, 10.0))
        self._routes: dict[str, _Route | None] = {}
        self._heads: dict[tuple[str, str, tuple[tuple[str, str], ...]], bytes | None] = {}
        self._fallback: Wire | None = None
        self._refused = _fault(headers.items())
        self._plain = all(_latin1(value) for value in headers.values())

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
        written plainly; kept by method, URL and extra headers. A field named again (in
        any case) replaces the earlier one: the engine never sees two ``Host`` fields."""
        fields = tuple(extra.items()) if extra else ()
        key = (method, url, fields)
        head = self._heads.get(key, b"")
        if head == b"":
            _refuse(fields)
            if method not in _PLAIN_METHODS or not all(_latin1(v) for _, v in fields):
                return None
            named = {}
            for name, value in (
                ("Host", route.netloc),
                ("User-Agent", "jarvis"),
                *self._headers.items(),
                *fields,
            ):
                named[name.lower()] = f"{name}: {value}"
            lines = [f"{method} {route.target} HTTP/1.1", *named.values()]
            head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
            if len(self._heads) >= _ROUTES:
                self._heads.clear()
            self._heads[key] = head
        return head

    async def send(
        self, method: str, url: str, *, content: bytes | None, headers: Mapping[str, str] | None
    ) -> Streamed:
        if self._refused is not None:
            raise httpx.LocalProtocolError(self._refused)
        route = self._route(url)
        head = None if route is None else self._head(method, url, route, headers)
        if route is None or head is None:
            _refuse(headers.items() if headers else ())
            return await self._aiohttp().send(method, url, content=content, headers=headers)
        if content is None:
            request = head + b"\r\n"
        else:
            request = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(content), content)
        connection = await self._pool.take(route.key)
        loop = asyncio.get_running_loop()
        headed: asyncio.Future[None] = loop.create_future()
        try:
            connection.start(request, headed)
            await headed
        except BaseException:
            self._pool.give_back(connection, reusable=False)
            raise
        return _Streamed(connection, self._pool, url, loop)

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


_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_FRAMING = frozenset({"content-length", "transfer-encoding"})


def _fault(fields: Iterable[tuple[str, str]]) -> str | None:
    """Why header fields cannot be sent by any wire, ``None`` when they can: a name that is
    no token, a value with a control character (a line break would end the field and start
    one the caller never meant: header injection), or the body's framing, which the wire
    writes itself (a second, different ``Content-Length`` would smuggle a request)."""
    for name, value in fields:
        if not name or not _TOKEN.issuperset(name):
            return f"The header name {name!r} is not an HTTP token"
        if name.lower() in _FRAMING:
            return f"The header {name} is the wire's to write"
        if any((c < " " and c != "\t") or c == "\x7f" for c in value):
            return f"The value of the header {name} holds a control character"
    return None


def _refuse(fields: Iterable[tuple[str, str]]) -> None:
    fault = _fault(fields)
    if fault is not None:
        raise httpx.LocalProtocolError(fault)


def _latin1(text: str) -> bool:
    """A header value written as it stands (its control characters refused already)."""
    return all(c <= "\xff" for c in text)
