"""aiohttp's client under :class:`~._http.EngineHttp`: what the default wire
(:mod:`._wire_httptools`) does not send itself (``https``, proxies), and ``[engine]
transport = "aiohttp"``.

aiohttp's HTTP/1.1 parser and connection pool are written for speed (its parser in C): a
request to a local engine costs about a third of the client CPU it costs through httpx, and
its pool keeps its cost per request flat however many connections it holds. This module is
imported only when the first request it sends is sent.

What the engines enforce stays enforced here: a connect timeout of ``min(timeout, 10)`` s
(the caller adds the request's deadline, ``timeout`` after it started, which every read of
the answer is made under, and the byte caps; aiohttp's own per-read timer, re-armed on
every piece of data that arrives, would add nothing the deadline does not bound); TLS
verified against the system's CA store; the proxy the environment names for the engine's
URL (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, with ``NO_PROXY`` honoured), looked up
once per URL rather than per request as aiohttp's own ``trust_env`` would (two thread
hops per request); no redirects followed; bodies never decompressed. aiohttp's errors are
raised as the httpx exceptions the caller maps, the most specific first, on the line
:mod:`._wire` draws: a connection that closed or broke before the answer was complete
(``ServerDisconnectedError``: closed, most often an idle pooled connection the engine had
closed; ``ClientOSError``: reset; ``ClientPayloadError``: closed mid-body) is a broken
connection, while an answer aiohttp's parser refused (``ClientResponseError``, which
aiohttp raises for every ``http_exceptions`` error its parser meets before the answer is
handed back: a bad status line, field, length or chunk, a head past its limits) or a
``101 Switching Protocols`` it hands back as an answer is a
:class:`~._wire.MalformedAnswer`. (A chunk that does not parse after the answer was handed
back is not reported by aiohttp at all: its body reader waits, and the request's deadline
ends it.)
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

import aiohttp
import httpx

from jarvis.adapters.inference._wire import (
    MAX_CONNECTIONS,
    SWITCHED,
    MalformedAnswer,
    Streamed,
    environment_proxy,
)

_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientProxyConnectionError, httpx.ProxyError),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ClientPayloadError, httpx.ReadError),
    (aiohttp.ClientConnectionResetError, httpx.ReadError),
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.ClientHttpProxyError, httpx.ProxyError),  # a proxy refused to open a tunnel
    (aiohttp.ClientResponseError, MalformedAnswer),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.ClientError, httpx.TransportError),
)


def _ours(exc: aiohttp.ClientError) -> httpx.TransportError:
    """aiohttp's error as the httpx exception the caller maps, the most specific first."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        # its message is what it had parsed of a head cut short, if any: the engine's text
        return httpx.RemoteProtocolError("Server disconnected")
    for theirs, ours in _ERRORS:
        if isinstance(exc, theirs):
            return ours(str(exc) or type(exc).__name__)
    return httpx.TransportError(str(exc))  # pragma: no cover - ClientError is the last entry


class _HeldResponse(aiohttp.ClientResponse):
    """A response that keeps its connection until it is given back.

    aiohttp returns a connection to its pool as soon as the body's last byte is parsed,
    before the reader has seen it. An engine that ended a stream cut short (no ``[DONE]``)
    in good HTTP order may close that connection a moment later: only the reader knows, so
    the connection is held until :meth:`_AiohttpStreamed.close` says whether it is reused.
    """

    def _response_eof(self) -> None:
        return None


class _AiohttpStreamed:
    """An aiohttp response seen through :class:`~._wire.Streamed`."""

    __slots__ = ("_response", "status_code", "url")

    def __init__(self, response: aiohttp.ClientResponse, url: str) -> None:
        self._response = response
        self.status_code = response.status
        self.url = url

    def header(self, name: str) -> str:
        return self._response.headers.get(name, "")

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        content = self._response.content
        try:
            while chunk := await content.readany():
                yield chunk
        except aiohttp.ClientError as exc:
            raise _ours(exc) from exc

    async def close(self, *, reusable: bool) -> None:
        # release() returns the connection to the pool (and closes it all the same when
        # its body was not read to the end); close() always closes it
        if reusable:
            self._response.release()
        else:
            self._response.close()


class AiohttpWire:
    """One ``aiohttp.ClientSession`` per engine, created on the first request."""

    def __init__(self, *, headers: Mapping[str, str], timeout: float) -> None:
        self._headers = dict(headers)
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=min(timeout, 10.0), sock_read=None
        )
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[str, str | None] = {}

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS, ssl=True),
                headers=self._headers,
                timeout=self._timeout,
                auto_decompress=False,
                response_class=_HeldResponse,
                trust_env=False,  # proxies are looked up once per host instead
            )
        return self._session

    def _proxy(self, url: str) -> str | None:
        try:
            return self._proxies[url]
        except KeyError:
            if len(self._proxies) >= 32:
                self._proxies.clear()
            proxy = self._proxies[url] = environment_proxy(url)
            return proxy

    async def send(
        self, method: str, url: str, *, content: bytes | None, headers: Mapping[str, str] | None
    ) -> Streamed:
        session = self._get_session()
        try:
            response = await session.request(
                method,
                url,
                data=content,
                headers=headers,
                allow_redirects=False,
                proxy=self._proxy(url),
            )
        except aiohttp.ClientError as exc:
            raise _ours(exc) from exc
        except ValueError as exc:  # what aiohttp will not write (a line break in a header)
            raise httpx.LocalProtocolError(str(exc)) from exc
        if response.status == 101:  # aiohttp hands it back as an answer, its body empty
            response.close()
            raise MalformedAnswer(SWITCHED)
        return _AiohttpStreamed(response, url)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
