"""One pooled HTTP client per engine, bounded retries, and typed transport errors.

Every HTTP engine adapter talks through :class:`EngineHttp`. It owns a single
``httpx.AsyncClient`` (created on first use, so building an engine costs nothing and no
client or TLS context is rebuilt per request), retries what is worth retrying, and turns
what httpx raises into the errors of :mod:`jarvis.domain.errors`:

* connect errors, and HTTP 429 / 503, are retried ``max_retries`` times with exponential
  backoff and jitter (``Retry-After`` is honoured, capped at ``backoff_cap``); after that
  a connect error is an ``EngineUnavailableError`` naming the engine, the URL and how to
  start it, a 429 a ``RateLimitedError``, a 503 an ``EngineUnavailableError``;
* a connection that breaks before any response arrived (read / write error, the peer
  closing it) is retried too, counted against the same ``max_retries``: the first such
  retry at once, because the usual cause is a pooled keep-alive connection the server had
  closed while it sat idle (the pool discards the broken connection, and one the server
  closed long enough ago is seen as closed before use, so the retry goes out on a live or
  a new connection); further ones back off like connect errors. Nothing of the answer was
  received, so nothing can be delivered twice. (Connect errors never happen on a reused
  connection: they keep their backoff from the first retry on — the server is not up.)
* a read timeout is an ``EngineTimeoutError`` at once (the engine is up but slow: retrying
  would double the wait);
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
import contextlib
import email.utils
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

import httpcore
import httpx

from jarvis.adapters.inference._error_bodies import error_message
from jarvis.adapters.inference._json import loads
from jarvis.domain.errors import (
    EngineProtocolError,
    EngineTimeoutError,
    EngineUnavailableError,
    InferenceError,
    RateLimitedError,
)
from jarvis.domain.json_types import JSONObject

RETRIED_STATUSES = frozenset({429, 503})
_CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)
_BROKEN_CONNECTION_ERRORS = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
"""Raised by ``send`` before a response arrived: most often a pooled keep-alive connection
that the server closed while it sat idle (the close was still on its way)."""
DRAIN_SECONDS = 0.2
"""How long the rest of a finished stream (normally only the end of the body, already on its
way) may take to arrive before its connection is given up instead of reused."""


class EngineStatusError(Exception):
    """An error status that was not retried (or no longer): for the adapter to map."""

    def __init__(self, status: int, body: str, url: str) -> None:
        super().__init__(f"HTTP {status} from {url}")
        self.status = status
        self.body = body
        self.url = url


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to wait before trying a request again."""

    max_retries: int = 2
    backoff: float = 0.5
    """The first delay in seconds; each further retry doubles it."""
    backoff_cap: float = 8.0
    """No single wait is longer, whatever ``Retry-After`` asks for."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1`` ("equal jitter")."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.backoff_cap))
        ceiling: float = min(self.backoff_cap, self.backoff * 2.0**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: either a number or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, moment.timestamp() - current)


def default_status_error(engine: str, status: int, body: str, url: str) -> InferenceError:
    """The error for a status no adapter-specific rule claimed."""
    message = error_message(body) or httpx.codes.get_reason_phrase(status)
    if status == 429:
        return RateLimitedError(
            f"The {engine} engine at {url} is rate limiting requests: {message}",
            engine=engine,
            url=url,
            hint="Wait a moment and try again, or lower the request rate.",
        )
    if status in (502, 503, 504):
        return EngineUnavailableError(
            f"The {engine} engine at {url} is unavailable (HTTP {status}): {message}",
            engine=engine,
            url=url,
        )
    if status in (401, 403):
        return InferenceError(
            f"The {engine} engine at {url} refused the credentials (HTTP {status}): {message}",
            engine=engine,
            url=url,
            hint="Check the API key (OPENAI_API_KEY or the api_key setting).",
        )
    return InferenceError(
        f"The {engine} engine at {url} answered HTTP {status}: {message}",
        engine=engine,
        url=url,
    )


class EngineHttp:
    """The HTTP side of one engine instance: a lazily created, pooled client with retries."""

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
    ) -> None:
        self.engine_id = engine_id
        self.base_url = base_url.rstrip("/")
        self.start_hint = start_hint
        self.timeout = timeout
        self.retry = retry
        self._headers = dict(headers or {})
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._parsed: dict[str, httpx.URL] = {}
        """Parsed request URLs by path: parsing one costs more than the rest of building a
        request, and an engine asks the same few URLs again and again."""

    def url(self, path: str) -> str:
        """An absolute URL below the base URL (``path`` starts with ``/``) or as given."""
        return path if "://" in path else self.base_url + path

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=50),
                transport=self._transport,
                # Every request goes to the base URL: a plain-HTTP engine (a local server)
                # never uses TLS, so skip loading the CA bundle (~50 ms per process).
                verify=not self.base_url.startswith("http://"),
            )
        return self._client

    async def aclose(self) -> None:
        """Close the pool. Idempotent; a later request opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def unavailable(self, url: str, reason: str) -> EngineUnavailableError:
        return EngineUnavailableError(
            f"Cannot reach the {self.engine_id} engine at {url} ({reason}).",
            engine=self.engine_id,
            url=url,
            hint=self.start_hint,
        )

    async def open(
        self,
        method: str,
        path: str,
        *,
        json: JSONObject | None = None,
        stream: bool = False,
        timeout: float | None = None,
        retries: bool = True,
    ) -> httpx.Response:
        """Send a request; return a response with a success status.

        With ``stream`` the body is not read yet and the caller must ``aclose()`` the
        response. Raises :class:`EngineStatusError` for an error status that is not retried.
        """
        url = self.url(path)
        target = self._parsed.get(path)
        if target is None:
            target = httpx.URL(url)
            if len(self._parsed) < 32:
                self._parsed[path] = target
        client = self._get_client()
        attempt = 0
        max_retries = self.retry.max_retries if retries else 0
        broken_before = False
        while True:
            request = client.build_request(
                method,
                target,
                json=json,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
            try:
                response = await client.send(request, stream=stream)
            except _CONNECT_ERRORS as exc:
                if attempt < max_retries:
                    await asyncio.sleep(self.retry.delay(attempt))
                    attempt += 1
                    continue
                raise self.unavailable(url, _reason(exc)) from exc
            except _BROKEN_CONNECTION_ERRORS as exc:
                if attempt < max_retries:
                    # the first one at once (a stale pooled connection, now discarded);
                    # a second one means the server itself is in trouble: back off
                    if broken_before:
                        await asyncio.sleep(self.retry.delay(attempt))
                    broken_before = True
                    attempt += 1
                    continue
                raise self.unavailable(url, _reason(exc)) from exc
            except httpx.TimeoutException as exc:
                limit = self.timeout if timeout is None else timeout
                raise EngineTimeoutError(
                    f"The {self.engine_id} engine at {url} did not answer within {limit:g} s.",
                    engine=self.engine_id,
                    url=url,
                    hint="Raise the engine timeout, lower max_tokens, or use a smaller model.",
                ) from exc
            except httpx.TransportError as exc:
                raise self.unavailable(url, _reason(exc)) from exc
            status = response.status_code
            if status < 400:
                return response
            if status in RETRIED_STATUSES and attempt < max_retries:
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                await response.aclose()
                await asyncio.sleep(self.retry.delay(attempt, retry_after))
                attempt += 1
                continue
            try:
                body = (await response.aread()).decode("utf-8", errors="replace")
            except httpx.HTTPError:
                body = ""
            finally:
                await response.aclose()
            raise EngineStatusError(status, body, url)

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        json: JSONObject | None = None,
        timeout: float | None = None,
        retries: bool = True,
    ) -> object:
        """Send a request and decode its JSON body (garbage is an ``EngineProtocolError``)."""
        response = await self.open(method, path, json=json, timeout=timeout, retries=retries)
        try:
            return loads(response.content)
        except ValueError as exc:
            raise self.protocol_error(
                str(response.url), f"a body that is not JSON: {_snippet(response.text)}"
            ) from exc

    async def probe(self, path: str, *, timeout: float) -> bool:
        """True when ``GET path`` answers 2xx within ``timeout``; never raises."""
        try:
            response = await self._get_client().get(self.url(path), timeout=timeout)
        except (httpx.HTTPError, OSError):
            return False
        return response.is_success

    async def lines(self, response: httpx.Response) -> AsyncGenerator[str, None]:
        """The response body line by line; a cut connection or a stall is a typed error."""
        try:
            async for line in response.aiter_lines():
                yield line
        except httpx.TimeoutException as exc:
            url = str(response.url)
            raise EngineTimeoutError(
                f"The {self.engine_id} engine at {url} stopped sending within {self.timeout:g} s.",
                engine=self.engine_id,
                url=url,
            ) from exc
        except httpx.TransportError as exc:
            url = str(response.url)
            raise EngineUnavailableError(
                f"The connection to the {self.engine_id} engine at {url} dropped mid-stream "
                f"({_reason(exc)}).",
                engine=self.engine_id,
                url=url,
                hint=self.start_hint,
            ) from exc
        except httpx.DecodingError as exc:
            raise self.protocol_error(
                str(response.url), f"a stream that cannot be decoded ({_reason(exc)})"
            ) from exc

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
    async def release(response: httpx.Response, *, reusable: bool) -> None:
        """Close a streamed response. Unless ``reusable`` (the stream ended in good order
        and its body was read to the end), its connection is closed instead of going back
        to the pool: a server that cut a stream short may close that connection a moment
        later, and the next request sent on it would fail."""
        if not reusable and response.http_version == "HTTP/1.1":  # one request per connection
            network = response.extensions.get("network_stream")
            if isinstance(network, httpcore.AsyncNetworkStream):
                with contextlib.suppress(Exception):
                    await network.aclose()
        await response.aclose()

    def protocol_error(self, url: str, what: str) -> EngineProtocolError:
        return EngineProtocolError(
            f"The {self.engine_id} engine at {url} sent {what}",
            engine=self.engine_id,
            url=url,
        )


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")
