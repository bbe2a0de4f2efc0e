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
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

import httpx

from jarvis.adapters.inference._body_reading import (
    BodyTooLarge,
    Compressed,
    check_identity,
    raw_chunks,
    read_capped,
    read_prefix,
    release_response,
)
from jarvis.adapters.inference._bounds import ERROR_BODY_BYTES, LIST_BYTES
from jarvis.adapters.inference._json import dumps, loads, names_in
from jarvis.adapters.inference._pool import LeanPool
from jarvis.adapters.inference._retry import RetryPolicy, parse_retry_after
from jarvis.adapters.inference._status_errors import EngineStatusError, default_status_error
from jarvis.domain.errors import (
    EngineProtocolError,
    EngineTimeoutError,
    EngineUnavailableError,
    InferenceError,
)
from jarvis.domain.json_types import JSONObject

_JSON_HEADERS = {"Content-Type": "application/json"}

RETRIED_STATUSES = frozenset({429, 503})
MAX_CONNECTIONS = 100
"""Connections to one engine at most (a plain-HTTP engine's go through :class:`LeanPool`)."""
_CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)
_BROKEN_CONNECTION_ERRORS = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
"""Raised by ``send`` before a response arrived: most often a pooled keep-alive connection
that the server closed while it sat idle (the close was still on its way)."""
DRAIN_SECONDS = 0.2
"""How long the rest of a finished stream (normally only the end of the body, already on its
way) may take to arrive before its connection is given up instead of reused."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole (non-streamed) response with a success status: its body read, under its cap."""

    status: int
    url: str
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


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
        self._headers = {"Accept-Encoding": "identity", **(headers or {})}
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
            transport = self._transport
            if transport is None and self.base_url.startswith("http://") and not _proxied():
                transport = LeanPool(max_connections=MAX_CONNECTIONS)
            self._client = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
                limits=httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=50),
                transport=transport,
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

    async def open(
        self,
        method: str,
        path: str,
        *,
        json: JSONObject | None = None,
        deadline: float | None = None,
        retries: bool = True,
    ) -> httpx.Response:
        """Send a request; return its streaming response, with a success status.

        The body is not read yet: read it with :meth:`lines` under the same ``deadline``
        and give the response back with :meth:`release`. Raises :class:`EngineStatusError`
        for an error status that is not retried.
        """
        response, _ = await self._exchange(
            method, path, json=json, deadline=deadline, retries=retries, max_bytes=None
        )
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: JSONObject | None = None,
        deadline: float | None = None,
        retries: bool = True,
        max_bytes: int = LIST_BYTES,
    ) -> Reply:
        """Send a request and read its whole body, at most ``max_bytes`` of it.

        A body that breaks off is retried like a connection that broke (nothing of it was
        delivered). Raises :class:`EngineStatusError` for an error status not retried.
        """
        response, body = await self._exchange(
            method, path, json=json, deadline=deadline, retries=retries, max_bytes=max_bytes
        )
        return Reply(status=response.status_code, url=str(response.url), body=body or b"")

    async def _exchange(
        self,
        method: str,
        path: str,
        *,
        json: JSONObject | None,
        deadline: float | None,
        retries: bool,
        max_bytes: int | None,
    ) -> tuple[httpx.Response, bytes | None]:
        """The retry loop under the request's deadline; reads the body unless streaming."""
        url = self.url(path)
        target = self._parsed.get(path)
        if target is None:
            target = httpx.URL(url)
            if len(self._parsed) < 32:
                self._parsed[path] = target
        if deadline is None:
            deadline = self.deadline()
        try:
            async with asyncio.timeout_at(deadline):
                return await self._attempts(
                    method,
                    url,
                    target,
                    json=json,
                    deadline=deadline,
                    retries=retries,
                    max_bytes=max_bytes,
                )
        except TimeoutError:
            raise self.timed_out(url) from None

    async def _attempts(
        self,
        method: str,
        url: str,
        target: httpx.URL,
        *,
        json: JSONObject | None,
        deadline: float,
        retries: bool,
        max_bytes: int | None,
    ) -> tuple[httpx.Response, bytes | None]:
        client = self._get_client()
        loop = asyncio.get_running_loop()
        attempt = 0
        max_retries = self.retry.max_retries if retries else 0

        def may_retry(delay: float) -> bool:
            return attempt < max_retries and loop.time() + delay < deadline

        broken_before = False
        # encoded here, not by httpx: text carrying a lone surrogate (a model may send one
        # back in a later turn) would make the strict UTF-8 encoder refuse the whole request
        content = None if json is None else dumps(json).encode("utf-8", "replace")
        headers = None if content is None else _JSON_HEADERS
        while True:
            request = client.build_request(method, target, content=content, headers=headers)
            try:
                response = await client.send(request, stream=True)
                if response.status_code >= 400 or max_bytes is None:
                    body = None
                else:
                    body = await read_capped(response, max_bytes)
            except _CONNECT_ERRORS as exc:
                delay = self.retry.delay(attempt)
                if may_retry(delay):
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                raise self.unavailable(url, _reason(exc)) from exc
            except _BROKEN_CONNECTION_ERRORS as exc:
                # the first one at once (a stale pooled connection, now discarded);
                # a second one means the server itself is in trouble: back off
                delay = self.retry.delay(attempt) if broken_before else 0.0
                if may_retry(delay):
                    if delay:
                        await asyncio.sleep(delay)
                    broken_before = True
                    attempt += 1
                    continue
                raise self.unavailable(url, _reason(exc)) from exc
            except httpx.TimeoutException as exc:
                raise EngineTimeoutError(
                    f"The {self.engine_id} engine at {url} did not answer within "
                    f"{self.timeout:g} s.",
                    engine=self.engine_id,
                    url=url,
                    hint="Raise the engine timeout, lower max_tokens, or use a smaller model.",
                ) from exc
            except httpx.TransportError as exc:
                raise self.unavailable(url, _reason(exc)) from exc
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
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                delay = self.retry.delay(attempt, retry_after)
                if may_retry(delay):
                    await response.aclose()
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
            try:
                text = (await read_prefix(response, ERROR_BODY_BYTES)).decode(
                    "utf-8", errors="replace"
                )
            except (httpx.HTTPError, Compressed):
                text = ""
            finally:
                await self.release(response, reusable=False)
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
                request = self._get_client().build_request("GET", self.url(path), timeout=timeout)
                response = await self._get_client().send(request, stream=True)
                await self.release(response, reusable=False)
        except (httpx.HTTPError, OSError, TimeoutError):
            return False
        return response.is_success

    async def lines(
        self, response: httpx.Response, *, deadline: float, max_bytes: int
    ) -> AsyncGenerator[str, None]:
        """The response body line by line (UTF-8, bad bytes replaced), every read before
        ``deadline`` and at most ``max_bytes`` in all; a cut connection, a stall, the
        deadline or the cap is a typed error."""
        url = str(response.url)
        raw = raw_chunks(response)
        total = 0
        pending: list[bytes] = []
        try:
            check_identity(response)
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        chunk = await anext(raw)
                except StopAsyncIteration:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise self.protocol_error(
                        url, f"a stream larger than the {max_bytes} bytes this request allows"
                    )
                if b"\n" not in chunk:
                    pending.append(chunk)
                    continue
                if pending:
                    pending.append(chunk)
                    chunk = b"".join(pending)
                    pending.clear()
                *complete, rest = chunk.split(b"\n")
                if rest:
                    pending.append(rest)
                for line in complete:
                    yield line.decode("utf-8", "replace")
            if pending:
                yield b"".join(pending).decode("utf-8", "replace")
        except TimeoutError:
            raise self.timed_out(url) from None
        except httpx.TimeoutException as exc:
            raise EngineTimeoutError(
                f"The {self.engine_id} engine at {url} stopped sending within {self.timeout:g} s.",
                engine=self.engine_id,
                url=url,
            ) from exc
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
    async def release(response: httpx.Response, *, reusable: bool) -> None:
        """Close a streamed response (see :func:`release_response`)."""
        await release_response(response, reusable=reusable)

    def protocol_error(self, url: str, what: str) -> EngineProtocolError:
        return EngineProtocolError(
            f"The {self.engine_id} engine at {url} sent {what}",
            engine=self.engine_id,
            url=url,
        )


def _proxied() -> bool:
    """True when the environment names a proxy for plain HTTP (``HTTP_PROXY``,
    ``ALL_PROXY``): httpx's own transport then keeps applying it (and ``NO_PROXY``)."""
    import urllib.request

    proxies = urllib.request.getproxies()
    return "http" in proxies or "all" in proxies


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")
