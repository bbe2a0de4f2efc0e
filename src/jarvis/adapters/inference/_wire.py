"""The transport under :class:`~._http.EngineHttp`: what sends a request and streams back
its answer, behind one small seam so that the retry, deadline and cap logic is written once.

Three wires exist. :class:`~._wire_httptools.HttptoolsWire` (the default) writes HTTP/1.1
itself over asyncio's transports and parses answers with httptools: a request costs about
half the client CPU of aiohttp's, a seventh of httpx's (see the README's section on
engines); what it does not send itself (``https``, proxies) goes through
:class:`~._wire_aiohttp.AiohttpWire`, aiohttp's client and pool (``[engine] transport =
"aiohttp"``). :class:`HttpxWire` sends over an ``httpx.AsyncClient``; it is the one a
test's mock transport plugs into (``transport=``), and ``transport = "httpx"``.

All raise httpx's transport exceptions (``httpx.ConnectError``, ``httpx.ReadError``,
``httpx.ReadTimeout``...), so the caller maps one family of errors whichever wire it has,
and all draw the same line through the errors of an answer:

* a connection that closed or broke before the answer was complete (the engine closed it,
  reset it, the network failed) is ``httpx.ReadError`` or a plain
  ``httpx.RemoteProtocolError`` (what httpcore itself raises for a connection closed before
  any answer, "Server disconnected without sending a response."): a broken connection,
  worth another try;
* an answer whose bytes are no HTTP/1.1 answer the wire accepts (garbage instead of a
  status line, a head past the wire's bounds, a field that does not parse, a bad chunk,
  ``101 Switching Protocols``, bytes nobody asked for) is :class:`MalformedAnswer`, a
  subclass of ``httpx.RemoteProtocolError``: the engine did answer, and would answer the
  same again, so it is never retried.

The malformed answer is the one marked, by a type of its own, rather than the closed
connection: a closed connection keeps the type and message users, logs and tests know
("RemoteProtocolError: Server disconnected..."), and the caller checks for the one error
that must never be retried before it retries the rest. Each wire knows which is which where
it reads the answer: :mod:`._httptools_pool` from its own parser and asyncio,
:mod:`._wire_aiohttp` from aiohttp's exception types, :class:`HttpxWire` from httpcore's
messages (see :func:`_raise_classified`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Literal, NoReturn, Protocol
from urllib.parse import urlsplit

import httpx

EngineTransport = Literal["httptools", "aiohttp", "httpx"]
"""Which wire an engine sends over (``[engine] transport``)."""

MAX_CONNECTIONS = 100
"""Connections to one engine at most."""
SWITCHED = "The engine switched protocols"
"""Why a ``101 Switching Protocols`` answer is refused: the wire never asks to switch."""
_DISCONNECTED = (
    "Server disconnected",
    "peer closed connection without sending complete message body",
)
"""How httpcore and h11 begin the message of the ``RemoteProtocolError`` they raise for a
connection closed before the answer was complete (before the end of its head, whether or
not part of it had come: "Server disconnected without sending a response."; in its body:
"peer closed connection without sending complete message body (...)"). Every other
``RemoteProtocolError`` of theirs is about bytes that were received and did not parse."""


class MalformedAnswer(httpx.RemoteProtocolError):
    """The engine answered with bytes that are no HTTP/1.1 answer the wire accepts (see the
    module): never a broken connection, so never retried."""


class Streamed(Protocol):
    """A response whose headers arrived; its body is read with :meth:`chunks`."""

    @property
    def status_code(self) -> int: ...

    @property
    def url(self) -> str: ...

    def header(self, name: str) -> str:
        """The header's value (``name`` in lower case), ``""`` when absent."""
        ...

    def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body as it arrives, not decoded."""
        ...

    async def close(self, *, reusable: bool) -> None:
        """Give the response back: its connection is reused only when ``reusable`` (the
        body was read to the end in good order), else closed."""
        ...


class Wire(Protocol):
    """Sends one request and returns its response as soon as the headers arrived."""

    async def send(
        self, method: str, url: str, *, content: bytes | None, headers: Mapping[str, str] | None
    ) -> Streamed: ...

    async def aclose(self) -> None: ...


class _HttpxStreamed:
    """An ``httpx.Response`` seen through :class:`Streamed`."""

    __slots__ = ("_response", "status_code", "url")

    def __init__(self, response: httpx.Response, url: str) -> None:
        self._response = response
        self.status_code = response.status_code
        self.url = url

    def header(self, name: str) -> str:
        value: str = self._response.headers.get(name, "")
        return value

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        # a response built whole (as a test's mock transport builds it) was read when it
        # was made: its content comes as one chunk
        if self._response.is_stream_consumed:
            yield self._response.content
            return
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.RemoteProtocolError as exc:
            _raise_classified(exc)

    async def close(self, *, reusable: bool) -> None:
        response = self._response
        if not reusable and response.http_version == "HTTP/1.1":  # one request per connection
            import contextlib

            import httpcore

            network = response.extensions.get("network_stream")
            if isinstance(network, httpcore.AsyncNetworkStream):
                with contextlib.suppress(Exception):
                    await network.aclose()
        await response.aclose()


class HttpxWire:
    """An ``httpx.AsyncClient`` (proxies from the environment, TLS verified for ``https``),
    created on first use."""

    def __init__(
        self,
        *,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._base_url = base_url
        self._headers = dict(headers)
        self._timeout = timeout
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._parsed: dict[str, httpx.URL] = {}
        """Parsed URLs: parsing one costs more than the rest of building a request, and an
        engine asks the same few URLs again and again."""

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(self._timeout, connect=min(self._timeout, 10.0)),
                limits=httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=50),
                transport=self._transport,
                # a plain-HTTP engine (a local server) never uses TLS: skip loading the CA
                # bundle (~50 ms per process)
                verify=not self._base_url.startswith("http://"),
            )
        return self._client

    async def send(
        self, method: str, url: str, *, content: bytes | None, headers: Mapping[str, str] | None
    ) -> Streamed:
        client = self._get_client()
        target = self._parsed.get(url)
        if target is None:
            target = httpx.URL(url)
            if len(self._parsed) < 32:
                self._parsed[url] = target
        request = client.build_request(method, target, content=content, headers=headers)
        try:
            response = await client.send(request, stream=True)
        except httpx.RemoteProtocolError as exc:
            _raise_classified(exc)
        if response.status_code == 101:  # h11 refuses one itself; a test transport may not
            await response.aclose()
            raise MalformedAnswer(SWITCHED)
        return _HttpxStreamed(response, url)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _raise_classified(exc: httpx.RemoteProtocolError) -> NoReturn:
    """Raise httpx's ``RemoteProtocolError`` as it is when it says the connection closed
    before the answer was complete, else as a :class:`MalformedAnswer`.

    httpcore and h11 raise the one type for both, and tell them apart only by the message
    (see :data:`_DISCONNECTED`): the two messages of a closed connection are matched by
    their start, and everything else, which h11 raises for bytes it received and could not
    parse, is a malformed answer. A read error (``httpx.ReadError``: a reset) is a broken
    connection and never reaches here."""
    if isinstance(exc, MalformedAnswer) or str(exc).startswith(_DISCONNECTED):
        raise exc
    raise MalformedAnswer(str(exc)) from exc


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``None`` when none, or ``NO_PROXY``
    exempts its host), as ``urllib`` (and httpx) read it."""
    import urllib.request  # only when a wire first sends to a URL: it costs start-up

    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or (parts.hostname and urllib.request.proxy_bypass(parts.hostname)):
        return None
    return proxy if "://" in proxy else "http://" + proxy
