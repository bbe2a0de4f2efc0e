"""Every failure becomes a JSON error body with a 4xx or 5xx status, never a traceback.

Two shapes, as the clients expect: OpenAI's ``{"error": {"message", "type", "code"}}``
everywhere, Anthropic's ``{"type": "error", "error": {"type", "message"}}`` under
``/v1/messages``. Messages come from jarvis's own errors (which name what went wrong and
how to fix it) with credentials in URLs masked; request bodies are never echoed back, so a
secret a client sent cannot come back in an error (or a log line).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

from jarvis.application.managed_agents import (
    ManagedAgentNotFoundError,
    NothingToRunError,
    QuotaExceededError,
)
from jarvis.domain.errors import (
    ContainerRuntimeUnavailableError,
    ContextTooLongError,
    EngineProtocolError,
    EngineTimeoutError,
    EngineUnavailableError,
    InferenceError,
    JarvisError,
    ModelNotFoundError,
    OutputValidationError,
    RateLimitedError,
    RunCancelledError,
    SandboxError,
    ToolsNotSupportedError,
)
from jarvis.domain.knowledge import MemoryStoreBusyError, MemoryStoreDamagedError
from jarvis.domain.owners import OwnerGoneError
from jarvis.domain.sessions.records import SessionStoreError, SessionStoreUnavailableError
from jarvis.domain.url_masks import redact_urls

LOG = logging.getLogger("jarvis.serve")


@dataclass(eq=False)  # not frozen: Starlette clears a handled exception's __traceback__
class ApiError(Exception):
    """An error with its HTTP status, OpenAI ``type`` and optional ``code``."""

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None


_BY_CLASS: tuple[tuple[type[BaseException], int, str, str | None], ...] = (
    (ManagedAgentNotFoundError, 404, "not_found_error", "agent_not_found"),
    (OwnerGoneError, 404, "not_found_error", "agent_not_found"),  # deleted while it ran
    (RunCancelledError, 409, "invalid_request_error", "cancelled"),  # ... in this process
    (NothingToRunError, 409, "invalid_request_error", "nothing_to_run"),
    (QuotaExceededError, 409, "invalid_request_error", "quota_exceeded"),
    (ModelNotFoundError, 404, "not_found_error", "model_not_found"),
    (RateLimitedError, 429, "rate_limit_error", "engine_rate_limited"),
    (EngineTimeoutError, 504, "timeout_error", "engine_timeout"),
    (EngineUnavailableError, 503, "engine_unavailable", "engine_unavailable"),
    (ContextTooLongError, 400, "invalid_request_error", "context_length_exceeded"),
    (ToolsNotSupportedError, 400, "invalid_request_error", "tools_not_supported"),
    (EngineProtocolError, 502, "engine_error", "engine_protocol_error"),
    (OutputValidationError, 502, "engine_error", "output_validation_failed"),
    (InferenceError, 502, "engine_error", None),
    (ContainerRuntimeUnavailableError, 503, "sandbox_unavailable", None),
    (SandboxError, 503, "sandbox_error", None),
    (SessionStoreUnavailableError, 503, "store_unavailable", None),
    (SessionStoreError, 500, "store_error", None),
    (MemoryStoreBusyError, 503, "store_unavailable", None),
    (MemoryStoreDamagedError, 500, "store_error", None),
)


def api_error(exc: BaseException) -> ApiError:
    """The :class:`ApiError` for any exception (an unexpected one is logged, not shown)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, TimeoutError):
        return ApiError(504, "The request took longer than the server allows.", "timeout_error")
    if isinstance(exc, JarvisError):
        message = redact_urls(str(exc))
        for cls, status, kind, code in _BY_CLASS:
            if isinstance(exc, cls):
                return ApiError(status, message, kind, code)
        return ApiError(400, message, "invalid_request_error")  # configuration, persona...
    LOG.error("unexpected %s while serving a request", type(exc).__name__, exc_info=exc)
    return ApiError(500, "Internal server error.", "server_error")


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def openai_body(error: ApiError) -> dict[str, object]:
    return {"error": {"message": error.message, "type": error.type, "code": error.code}}


def anthropic_body(error: ApiError) -> dict[str, object]:
    kind = _ANTHROPIC_TYPES.get(error.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def body_for(path: str, error: ApiError) -> dict[str, object]:
    """The error body in the shape the endpoint's clients read."""
    if path.startswith("/v1/messages"):
        return anthropic_body(error)
    return openai_body(error)


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class ResponseStartWatch:
    """An ASGI ``send`` that passes every message on and notes whether the response has
    started: before that an exception can still be answered as a JSON error, after it
    only raised."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self.send(message)


class CatchAll:
    """Any exception a route lets through becomes a JSON error (500 for the unexpected,
    logged without the request) instead of Starlette's plain-text 500 and a dropped
    connection."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracked = ResponseStartWatch(send)
        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if tracked.started or scope["type"] != "http":
                raise
            error = api_error(exc)
            reply = JSONResponse(
                body_for(str(scope.get("path", "")), error), status_code=error.status
            )
            await reply(scope, receive, send)
