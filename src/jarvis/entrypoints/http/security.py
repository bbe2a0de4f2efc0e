"""The server's outer guard (plain ASGI, before any route runs).

* **API key**: when one is configured, every request but ``GET /health`` must carry it as
  ``Authorization: Bearer KEY`` or ``x-api-key: KEY``. The comparison is constant-time over
  SHA-256 digests (``hmac.compare_digest``), so neither the key's content nor its length
  leaks through timing. The key is never logged nor echoed.
* **Body size**: a declared ``content-length`` over the limit is refused (413) before any
  byte is read; a body sent without one is read up to the limit and refused beyond it.
* **Body time**: the whole body must arrive within ``body_timeout`` seconds (408), so a
  client dripping bytes cannot hold a request open.

The body is read here and handed to the route whole; afterwards the route's ``receive``
is the server's own, so a streaming route still hears the client disconnect.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from jarvis.entrypoints.http.client_connection import connection_of
from jarvis.entrypoints.http.errors import ApiError, body_for

Scope = MutableMapping[str, Any]
READ_BODY = "jarvis.body"
"""The scope key under which :class:`Guard` leaves the request body it read (``bytes``)."""
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PATHS = frozenset({"/health"})


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def supplied_key(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The key a request carries (``x-api-key`` first, then a bearer token)."""
    bearer: bytes | None = None
    for name, value in headers:
        if name == b"x-api-key":
            return value.strip()
        if name == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                bearer = token.strip()
    return bearer


class Guard:
    """Wraps the application: authentication, then a bounded, timed body read."""

    def __init__(
        self, app: App, *, api_key: str | None, max_body_bytes: int, body_timeout: float
    ) -> None:
        self.app = app
        self._key = _digest(api_key.encode()) if api_key else None
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        if self._key is not None and path not in PUBLIC_PATHS:
            key = supplied_key(list(scope.get("headers") or ()))
            if key is None or not hmac.compare_digest(_digest(key), self._key):
                await _refuse(
                    scope,
                    send,
                    ApiError(
                        401,
                        "Missing or wrong API key: send it as 'Authorization: Bearer KEY' "
                        "or 'x-api-key: KEY'.",
                        "authentication_error",
                        "invalid_api_key",
                    ),
                )
                return
        try:
            body = await self._read_body_in_time(scope, receive)
        except ApiError as error:
            await _refuse(scope, send, error)
            return
        except TimeoutError:
            await _refuse(
                scope,
                send,
                ApiError(
                    408,
                    f"The request body did not arrive within {self.body_timeout:g} s.",
                    "invalid_request_error",
                    "request_timeout",
                ),
            )
            return
        if body is None:  # the client left while sending
            return
        scope[READ_BODY] = body  # for a layer that reads it as it is (no replay to await)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read_body_in_time(self, scope: Scope, receive: Receive) -> bytes | None:
        """The body, read before :attr:`body_timeout` (``TimeoutError`` after it). No timer
        when the server's protocol says the whole body is in already: nothing to wait for
        (:mod:`.client_connection`)."""
        connection = connection_of(scope)
        if connection is not None and connection.body_arrived:
            return await self._read_body(scope, receive)
        async with asyncio.timeout(self.body_timeout):  # no task per request (wait_for's)
            return await self._read_body(scope, receive)

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        for name, value in scope.get("headers") or ():
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    raise ApiError(400, "Invalid Content-Length header.") from None
                if declared > self.max_body_bytes:
                    raise self._too_large()
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_large(self) -> ApiError:
        return ApiError(
            413,
            f"The request body is larger than the server accepts ({self.max_body_bytes} bytes).",
            "invalid_request_error",
            "request_too_large",
        )


async def _refuse(scope: Scope, send: Send, error: ApiError) -> None:
    body = json.dumps(body_for(str(scope.get("path", "")), error)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if error.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


refuse = _refuse
"""Answer ``error`` as JSON without running the application (for the other guards)."""
