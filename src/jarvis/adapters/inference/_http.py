"""One pooled HTTP client per engine, bounded retries, and typed transport errors.

Every HTTP engine adapter talks through :class:`EngineHttp`. It owns a single wire (see
:mod:`._wire`: httptools' by default, aiohttp's or httpx's on request; created on first use, so
building an engine costs nothing and no client or TLS context is rebuilt per request),
retries what is worth retrying, and turns what the wire raises (httpx's exception types,
whichever the wire) into the errors of :mod:`jarvis.domain.errors`:

* connect errors, and HTTP 429 / 503, are retried ``max_retries`` times with exponential
  backoff and jitter (``Retry-After`` is honoured, capped at ``backoff_cap``); after that
  a connect error is an ``EngineUnavailableError`` naming the engine, the URL and how to
  start it, a 429 a ``RateLimitedError``, a 503 an ``EngineUnavailableError``;
* a **broken connection** — one that the engine closed or reset, or that failed to read or
  write, before the answer was complete (``httpx.ReadError``, ``httpx.WriteError``, or an
  ``httpx.RemoteProtocolError`` that is no :class:`~._wire.MalformedAnswer`) — is retried
  too, counted against the same ``max_retries``: the first such retry at once, because the
  usual cause is a pooled keep-alive connection the server had closed while it sat idle
  (the pool discards the broken connection, and one the server closed long enough ago is
  seen as closed before use, so the retry goes out on a live or a new connection); further
  ones back off like connect errors. Most often not a byte of the answer had arrived (the
  idle connection; an engine that closed it on reading the request); an answer cut off
  part way (before the end of its head; for :meth:`EngineHttp.request`, of its body) is a
  broken connection all the same. Nothing of the answer was handed to the caller, so
  nothing can be delivered twice. (Connect errors never happen on a reused connection:
  they keep their backoff from the first retry on — the server is not up.)
* a **malformed answer** — bytes that are no HTTP/1.1 answer the wire accepts: garbage
  instead of a status line, a head past the wire's bounds, a field, length or chunk that
  does not parse, ``101 Switching Protocols`` — is an ``EngineProtocolError`` at once,
  never retried, streamed or not, wherever in the answer it is met (but for a bad chunk
  that aiohttp never reports, see :mod:`._wire_aiohttp`): the engine received the request
  and answered it, and asking again would only cost it the answer again. Each
  wire tells the two apart and raises the malformed answer as a
  :class:`~._wire.MalformedAnswer` (see :mod:`._wire`); its reason is quoted masked and
  cut, like every text of the engine's;
* a read timeout is an ``EngineTimeoutError`` at once (the engine is up but slow: retrying
  would double the wait);
* every request has one **deadline**, ``timeout`` seconds after it started: connecting,
  retries and their waits, the answer's headers and every byte of its body or stream must
  fit before it, or the request ends with an ``EngineTimeoutError`` (a retry whose wait
  would pass the deadline is not made). ``timeout`` also bounds each single read, and
  connecting to ``min(timeout, 10)`` s. An engine that keeps sending, slowly or forever,
  is cut off at the deadline all the same;
* every body and stream is read with a size cap (see :mod:`._bounds`): past it the request
  ends with an ``EngineProtocolError``. Replies are asked for uncompressed
  (``Accept-Encoding: identity``) and one that is compressed all the same is refused, so no
  small body can expand into a large one behind the cap;
* any other error status is raised as :class:`EngineStatusError` (status, body, URL) for
  the adapter to read: only it knows what its engine's error bodies mean.

Streaming requests are retried only until the response headers arrive; once content has
flowed, a dropped connection is reported, never silently replayed. A streamed response is
given back with :meth:`EngineHttp.release`: its connection returns to the pool only when
the stream ended in good order and its body was read to the end; after anything else (a
stream cut short, a server error mid-stream, a reader that stopped early) the connection
is closed, so the next request never inherits a connection in an unknown state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import TypedDict, Unpack

import httpx

from jarvis.adapters.inference._bodies import (
    BodyTooLarge,
    Compressed,
    check_identity,
    read_capped,
    read_prefix,
    split_lines,
)
from jarvis.adapters.inference._bounds import ERROR_BODY_BYTES, LIST_BYTES
from jarvis.adapters.inference._json import encode, loads, names_in
from jarvis.adapters.inference._replies import EngineStatusError, Reply, default_status_error
from jarvis.adapters.inference._retry import RetryPolicy, parse_retry_after
from jarvis.adapters.inference._wire import (
    EngineTransport,
    HttpxWire,
    MalformedAnswer,
    Streamed,
    Wire,
)
from jarvis.domain.cut_text import masked_prefix
from jarvis.domain.errors import (
    EngineProtocolError,
    EngineTimeoutError,
    EngineUnavailableError,
    InferenceError,
)

__all__ = [
    "DRAIN_SECONDS",
    "RETRIED_STATUSES",
    "EngineHttp",
    "EngineStatusError",
    "EngineTransport",
    "Reply",
    "RetryPolicy",
    "Streamed",
    "default_status_error",
    "parse_retry_after",
]
from jarvis.domain.json_types import JSONObject

_JSON_HEADERS = {"Content-Type": "application/json"}

RETRIED_STATUSES = frozenset({429, 503})
_CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)
_BROKEN_CONNECTION_ERRORS = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
"""A connection that broke before the answer was complete: most often a pooled keep-alive
connection that the server closed while it sat idle (the close was still on its way).
A :class:`~._wire.MalformedAnswer` is a ``RemoteProtocolError`` too: it is told apart
first, and never retried."""
Splitter = Callable[[AsyncIterator[bytes], float, int], AsyncGenerator[str, None]]
"""Cuts a body's chunks into pieces, each read before a deadline, under a cap in bytes."""
DRAIN_SECONDS = 0.2
"""How long the rest of a finished stream (normally only the end of the body, already on its
way) may take to arrive before its connection is given up instead of reused."""


class Send(TypedDict, total=False):
    """How :meth:`EngineHttp.open` and :meth:`EngineHttp.request` send a request: ``json``,
    its body (none: no body); ``deadline``, the ``loop.time()`` it must end by (default:
    the engine timeout from now); ``retries``, whether a failure worth another try gets
    one (default: yes)."""

    json: JSONObject | None
    deadline: float | None
    retries: bool


class EngineHttp:
    """The HTTP side of one engine instance: a lazily created, pooled wire with retries."""

    def __init__(
        self,
        *,
        engine_id: str,
        base_url: str,
        start_hint: str,
        timeout: float,
        retry: RetryPolicy,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        wire: EngineTransport = "httptools",
    ) -> None:
        self.engine_id = engine_id
        self.base_url = base_url.rstrip("/")
        self.start_hint = start_hint
        self.timeout = timeout
        self.retry = retry
        self._headers = {"Accept-Encoding": "identity", **(headers or {})}
        self._transport = transport
        self.wire_kind: EngineTransport = "httpx" if transport is not None else wire
        self._wire: Wire | None = None

    def url(self, path: str) -> str:
        """An absolute URL below the base URL (``path`` starts with ``/``) or as given."""
        return path if "://" in path else self.base_url + path

    def _get_wire(self) -> Wire:
        if self._wire is None:
            self._wire = make_wire(
                self.wire_kind,
                base_url=self.base_url,
                headers=self._headers,
                timeout=self.timeout,
                transport=self._transport,
            )
        return self._wire

    async def aclose(self) -> None:
        """Close the pool. Idempotent; a later request opens a new one."""
        wire, self._wire = self._wire, None
        if wire is not None:
            await wire.aclose()

    def unavailable(self, url: str, reason: str) -> EngineUnavailableError:
        return EngineUnavailableError(
            f"Cannot reach the {self.engine_id} engine at {url} ({reason}).",
            engine=self.engine_id,
            url=url,
            hint=self.start_hint,
        )

    def deadline(self) -> float:
        """The event-loop time by which a request started now must be over."""
        return asyncio.get_running_loop().time() + self.timeout

    def timed_out(self, url: str) -> EngineTimeoutError:
        return EngineTimeoutError(
            f"The {self.engine_id} engine at {url} did not finish answering within "
            f"{self.timeout:g} s (the engine timeout bounds each request as a whole).",
            engine=self.engine_id,
            url=url,
            hint="Raise the engine timeout, lower max_tokens, or use a smaller model.",
        )

    async def open(self, method: str, path: str, **send: Unpack[Send]) -> Streamed:
        """Send a request; return its streaming response, with a success status.

        The body is not read yet: read it with :meth:`lines` under the same ``deadline``
        and give the response back with :meth:`release`. Raises :class:`EngineStatusError`
        for an error status that is not retried.
        """
        response, _ = await self._exchange(method, path, send, max_bytes=None)
        return response

    async def request(
        self, method: str, path: str, *, max_bytes: int = LIST_BYTES, **send: Unpack[Send]
    ) -> Reply:
        """Send a request and read its whole body, at most ``max_bytes`` of it.

        A body that breaks off is retried like a connection that broke (nothing of it was
        delivered); one that is malformed is not. Raises :class:`EngineStatusError` for an
        error status not retried.
        """
        response, body = await self._exchange(method, path, send, max_bytes=max_bytes)
        return Reply(status=response.status_code, url=response.url, body=body or b"")

    async def _exchange(
        self, method: str, path: str, send: Send, *, max_bytes: int | None
    ) -> tuple[Streamed, bytes | None]:
        """The retry loop under the request's deadline; reads the body unless streaming."""
        url = self.url(path)
        json, retries = send.get("json"), send.get("retries", True)
        deadline = send.get("deadline")
        if deadline is None:
            deadline = self.deadline()
        content = None if json is None else encode(json)
        attempt = _Attempts(self, url, deadline, retries)
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    outcome = await self._attempt(method, url, content, max_bytes, attempt)
                    if outcome is not None:
                        return outcome
        except TimeoutError:
            raise self.timed_out(url) from None

    async def _attempt(
        self,
        method: str,
        url: str,
        content: bytes | None,
        max_bytes: int | None,
        attempt: _Attempts,
    ) -> tuple[Streamed, bytes | None] | None:
        """One try: the response (and body), or ``None`` when it is to be tried again."""
        headers = None if content is None else _JSON_HEADERS
        try:
            response = await self._get_wire().send(method, url, content=content, headers=headers)
            body = None
            if response.status_code < 400 and max_bytes is not None:
                body = await read_capped(response, max_bytes)
        except httpx.TransportError as exc:
            await attempt.after_transport_error(exc)
            return None
        except BodyTooLarge:
            raise self.protocol_error(
                url, f"a body larger than the {max_bytes} bytes this request allows"
            ) from None
        except Compressed as exc:
            raise self.protocol_error(url, str(exc)) from None
        status = response.status_code
        if status < 400:
            return response, body
        if status in RETRIED_STATUSES:
            retry_after = parse_retry_after(response.header("retry-after"))
            if await attempt.after_status(response, retry_after):
                return None
        try:
            text = (await read_prefix(response, ERROR_BODY_BYTES)).decode("utf-8", "replace")
        except (httpx.HTTPError, Compressed):
            text = ""
        finally:
            await response.close(reusable=False)
        raise EngineStatusError(status, text, url)

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        json: JSONObject | None = None,
        retries: bool = True,
    ) -> object:
        """Send a request and decode its JSON body (garbage is an ``EngineProtocolError``)."""
        reply = await self.request(method, path, json=json, retries=retries)
        try:
            return loads(reply.body)
        except ValueError as exc:
            raise self.protocol_error(
                reply.url, f"a body that is not JSON: {_snippet(reply.text)}"
            ) from exc

    async def model_names(self, path: str, list_key: str, *name_keys: str) -> list[str]:
        """The models the engine lists at ``path``: each entry of ``list_key``, named by its
        first non-empty ``name_keys``. An error status or a reply that is no such list is
        the engine's error."""
        try:
            data = await self.request_json("GET", path)
        except EngineStatusError as exc:
            raise default_status_error(self.engine_id, exc.status, exc.body, exc.url) from None
        names = names_in(data, list_key, *name_keys)
        if names is None:
            raise self.protocol_error(self.url(path), "a model list that is not a JSON object")
        return names

    async def probe(self, path: str, *, timeout: float) -> bool:
        """True when ``GET path`` answers 2xx within ``timeout``; never raises.

        Only the status is looked at: the body is never read.
        """
        try:
            async with asyncio.timeout(timeout):
                wire = self._get_wire()
                response = await wire.send("GET", self.url(path), content=None, headers=None)
                await response.close(reusable=False)
        except (httpx.HTTPError, OSError, TimeoutError):
            return False
        return 200 <= response.status_code < 300

    async def lines(
        self,
        response: Streamed,
        *,
        deadline: float,
        max_bytes: int,
        split: Splitter = split_lines,
    ) -> AsyncGenerator[str, None]:
        """The response body line by line (UTF-8, bad bytes replaced), every read before
        ``deadline`` and at most ``max_bytes`` in all; a cut connection, a stall, the
        deadline or the cap is a typed error. ``split`` cuts the body into its pieces
        (lines; :func:`~._sse.sse_data` cuts a stream of server-sent events into their
        data), under those bounds."""
        url = response.url
        raw = response.chunks()
        try:
            check_identity(response)
            async for line in split(raw, deadline, max_bytes):
                yield line
        except TimeoutError:
            raise self.timed_out(url) from None
        except BodyTooLarge:
            raise self.protocol_error(
                url, f"a stream larger than the {max_bytes} bytes this request allows"
            ) from None
        except httpx.TimeoutException as exc:
            raise EngineTimeoutError(
                f"The {self.engine_id} engine at {url} stopped sending within {self.timeout:g} s.",
                engine=self.engine_id,
                url=url,
            ) from exc
        except MalformedAnswer as exc:
            raise self.malformed(url, exc) from exc
        except httpx.TransportError as exc:
            raise EngineUnavailableError(
                f"The connection to the {self.engine_id} engine at {url} dropped mid-stream "
                f"({_reason(exc)}).",
                engine=self.engine_id,
                url=url,
                hint=self.start_hint,
            ) from exc
        except Compressed as exc:
            raise self.protocol_error(url, str(exc)) from None
        finally:
            await raw.aclose()

    @staticmethod
    async def drain(rest: AsyncIterator[object]) -> bool:
        """Read what is left of a stream whose answer is complete (normally just the end
        of the body). True when the body ended in good order within ``DRAIN_SECONDS``, so
        that its connection can be reused."""
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                async for _ in rest:
                    pass
        except (TimeoutError, httpx.HTTPError, InferenceError):
            return False
        return True

    @staticmethod
    async def release(response: Streamed, *, reusable: bool) -> None:
        """Close a streamed response. Unless ``reusable`` (the stream ended in good order
        and its body was read to the end), its connection is closed instead of going back
        to the pool: a server that cut a stream short may close that connection a moment
        later, and the next request sent on it would fail."""
        await response.close(reusable=reusable)

    def protocol_error(self, url: str, what: str) -> EngineProtocolError:
        return EngineProtocolError(
            f"The {self.engine_id} engine at {url} sent {what}",
            engine=self.engine_id,
            url=url,
        )

    def malformed(self, url: str, exc: MalformedAnswer) -> EngineProtocolError:
        """The error of an answer the wire could not read as HTTP (its reason may quote
        the engine's bytes: masked and cut)."""
        return self.protocol_error(url, f"a malformed HTTP answer: {_snippet(str(exc))}")


class _Attempts:
    """How many tries a request has left, and the wait before the next one."""

    __slots__ = ("_broken_before", "_deadline", "_http", "_max", "_url", "count")

    def __init__(self, http: EngineHttp, url: str, deadline: float, retries: bool) -> None:
        self._http = http
        self._url = url
        self._deadline = deadline
        self._max = http.retry.max_retries if retries else 0
        self.count = 0
        self._broken_before = False

    async def _wait(self, delay: float) -> bool:
        """Wait ``delay`` and count a try, if one is left and fits before the deadline."""
        if self.count >= self._max or asyncio.get_running_loop().time() + delay >= self._deadline:
            return False
        if delay:
            await asyncio.sleep(delay)
        self.count += 1
        return True

    async def after_transport_error(self, exc: httpx.TransportError) -> None:
        """Wait for the next try after ``exc``, or raise the error it ends in."""
        http, url = self._http, self._url
        if isinstance(exc, _CONNECT_ERRORS):
            if await self._wait(http.retry.delay(self.count)):
                return
            raise http.unavailable(url, _reason(exc)) from exc
        if isinstance(exc, MalformedAnswer):  # the engine answered: never asked again
            raise http.malformed(url, exc) from exc
        if isinstance(exc, _BROKEN_CONNECTION_ERRORS):
            # the first one at once (a stale pooled connection, now discarded);
            # a second one means the server itself is in trouble: back off
            delay = http.retry.delay(self.count) if self._broken_before else 0.0
            if await self._wait(delay):
                self._broken_before = True
                return
            raise http.unavailable(url, _reason(exc)) from exc
        if isinstance(exc, httpx.TimeoutException):
            raise EngineTimeoutError(
                f"The {http.engine_id} engine at {url} did not answer within {http.timeout:g} s.",
                engine=http.engine_id,
                url=url,
                hint="Raise the engine timeout, lower max_tokens, or use a smaller model.",
            ) from exc
        raise http.unavailable(url, _reason(exc)) from exc

    async def after_status(self, response: Streamed, retry_after: float | None) -> bool:
        """True (after the wait) when a retried status is to be tried again."""
        delay = self._http.retry.delay(self.count, retry_after)
        if self.count >= self._max or asyncio.get_running_loop().time() + delay >= self._deadline:
            return False
        await response.close(reusable=False)
        return await self._wait(delay)


def make_wire(
    kind: EngineTransport,
    *,
    base_url: str,
    headers: Mapping[str, str],
    timeout: float,
    transport: httpx.AsyncBaseTransport | None,
) -> Wire:
    """The wire of one engine: httpx's when a test transport is given or it is asked for."""
    if transport is not None or kind == "httpx":
        return HttpxWire(base_url=base_url, headers=headers, timeout=timeout, transport=transport)
    if kind == "aiohttp":
        from jarvis.adapters.inference._wire_aiohttp import AiohttpWire

        return AiohttpWire(headers=headers, timeout=timeout)
    from jarvis.adapters.inference._wire_httptools import HttptoolsWire

    return HttptoolsWire(headers=headers, timeout=timeout)


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return repr(masked_prefix(text, limit) + ("..." if len(text) > limit else ""))
