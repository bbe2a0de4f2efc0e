"""A connection pool for plain-HTTP engines whose cost per request does not grow with its size.

httpx's own pool (httpcore's ``AsyncConnectionPool``) walks every connection it holds on
each request and on each response closed, asking each idle one whether its socket is
readable (a ``poll`` system call and a fresh attribute dictionary per connection), and for
each idle connection counts the whole pool again: with 50 requests in flight to a local
engine that is some 2 500 calls and 100 system calls per request, more than half of the
CPU a served request costs. And once it holds many connections it stays in that slow state.

:class:`LeanPool` keeps the idle connections of each origin in a stack instead: a request
takes the most recently used one (checked, expired or closed by the server, with one
``has_expired``), else opens a new one while fewer than ``max_connections`` exist, else
waits for one to be given back. A connection goes back when its response is closed, only
when HTTP/1.1 left it idle (the body read to the end); any other connection is closed.
Expired connections at the bottom of a stack are closed as they are met. The connections
themselves are httpcore's (``AsyncHTTPConnection``): HTTP/1.1 parsing, connect timeouts
and keep-alive expiry are unchanged, and httpcore's errors become httpx's, as httpx's own
transport maps them, so :mod:`._http` sees the same exceptions either way.

Only plain HTTP (a local engine) goes through it, and only when no proxy is configured in
the environment; an ``https`` engine, or one behind a proxy, keeps httpx's pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Iterator

import httpcore
import httpx

# most specific first: an httpcore.ReadTimeout is also a TimeoutException
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
)


@contextlib.contextmanager
def _mapped() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for theirs, ours in _ERRORS:
            if isinstance(exc, theirs):
                raise ours(str(exc)) from exc
        raise


_Key = tuple[bytes, bytes, int]


def _key(origin: httpcore.Origin) -> _Key:
    return (origin.scheme, origin.host, origin.port)


class LeanPool(httpx.AsyncBaseTransport):
    """HTTP/1.1 keep-alive connections, at most ``max_connections`` at once."""

    def __init__(self, *, max_connections: int = 100, keepalive_expiry: float = 5.0) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._idle: dict[_Key, deque[httpcore.AsyncHTTPConnection]] = {}
        self._open = 0
        """Connections that exist now: idle, in use, or being opened."""
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @property
    def open_connections(self) -> int:
        return self._open

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        origin = core.url.origin
        connection = await self._acquire(origin)
        try:
            with _mapped():
                response = await connection.handle_async_request(core)
        except BaseException:
            await self.give_back(origin, connection)
            raise
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream, self, origin, connection),
            extensions=response.extensions,
        )

    async def _acquire(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        while True:
            if self._closed:
                raise httpx.PoolTimeout("The engine connection pool is closed.")
            idle = self._idle.get(_key(origin))
            while idle:
                connection = idle.pop()
                if connection.is_available() and not connection.has_expired():
                    return connection
                await self._drop(connection)
            if self._open < self.max_connections:
                self._open += 1
                return httpcore.AsyncHTTPConnection(origin, keepalive_expiry=self.keepalive_expiry)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled: the turn passes to the next
                raise

    async def give_back(
        self, origin: httpcore.Origin, connection: httpcore.AsyncHTTPConnection
    ) -> None:
        """Keep an idle connection (its response read to the end), close any other."""
        if not self._closed and connection.is_idle() and not connection.is_closed():
            idle = self._idle.setdefault(_key(origin), deque())
            idle.append(connection)
            while len(idle) > 1 and idle[0].has_expired():
                await self._drop(idle.popleft())
            self._wake()
        else:
            await self._drop(connection)

    async def _drop(self, connection: httpcore.AsyncHTTPConnection) -> None:
        self._open -= 1
        self._wake()
        with contextlib.suppress(Exception):
            await connection.aclose()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        self._closed = True
        idle = [c for stack in self._idle.values() for c in stack]
        self._idle.clear()
        for connection in idle:
            await self._drop(connection)
        while self._waiters:
            self._wake()


class _Body(httpx.AsyncByteStream):
    """A response body; closing it gives its connection back to the pool, once."""

    def __init__(
        self,
        stream: AsyncIterable[bytes],
        pool: LeanPool,
        origin: httpcore.Origin,
        connection: httpcore.AsyncHTTPConnection,
    ) -> None:
        self._stream = stream
        self._pool = pool
        self._origin = origin
        self._connection: httpcore.AsyncHTTPConnection | None = connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped():
            async for chunk in self._stream:
                yield chunk

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            closer = getattr(self._stream, "aclose", None)
            if closer is not None:
                with _mapped():
                    await closer()
        finally:
            await self._pool.give_back(self._origin, connection)
