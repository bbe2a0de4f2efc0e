"""``POST /v1/chat/completions`` answered without FastAPI's per-request layers.

Why: against an engine that answers at once, FastAPI's middleware stack, routing, request
object and dependency solving cost the server more per request than the route itself does
(the non-streamed throughput benchmark). This dispatcher sits between the
:class:`~.security.Guard` (authentication, bounded and timed body read: unchanged) and
FastAPI, and takes only what FastAPI would hand to the route as it is: a ``POST`` to that
exact path with a JSON content type whose body parses and validates **the way FastAPI does
it** (``json.loads``, then the request model's ``validate_python`` with
``from_attributes``). The answer comes from the one handler both share,
:func:`~.openai_routes.complete`, and a failure is answered as FastAPI's exception handlers
and :class:`~.errors.CatchAll` answer it.

Anything else (another path or method, another content type, malformed JSON, a field that
fails validation) falls through to FastAPI with the body replayed as it arrived, so every
refusal of a request is FastAPI's own, and the route stays declared in FastAPI for the
OpenAPI document.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.responses import JSONResponse, Response

from jarvis.entrypoints.http.errors import ResponseStartWatch, api_error, body_for
from jarvis.entrypoints.http.openai_routes import complete
from jarvis.entrypoints.http.openai_wire import ChatRequest
from jarvis.entrypoints.http.security import READ_BODY, App, Message, Receive, Scope, Send
from jarvis.entrypoints.http.state import ServerState

PATH = "/v1/chat/completions"


class ChatFastPath:
    """In front of FastAPI (``app``): serves the chat completions it can, passes on the rest."""

    def __init__(self, app: App, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != PATH
            or scope["method"] != "POST"
            or scope.get("root_path")
        ):
            await self.app(scope, receive, send)
            return
        body = scope.get(READ_BODY)  # read by the Guard in front: nothing to receive
        received: list[Message] = []
        if not isinstance(body, bytes):
            body = await _read_body(receive, received)
        request = None if body is None or not _is_json(scope) else validated(body)
        if request is None:
            await self.app(scope, _replay(received, receive), send)
            return
        await self._answer(request, scope, receive, send)

    async def _answer(
        self, request: ChatRequest, scope: Scope, receive: Receive, send: Send
    ) -> None:
        tracked = ResponseStartWatch(send)
        try:
            try:
                response = await complete(self.state, request, scope, receive)
            except Exception as exc:  # what FastAPI's exception handlers answer
                response = _error_reply(exc)
            await response(scope, receive, tracked)
        except Exception as exc:  # what CatchAll answers
            if tracked.started:
                raise
            await _error_reply(exc)(scope, receive, send)


def validated(body: bytes) -> ChatRequest | None:
    """The request ``body`` as FastAPI validates it, or None when it would refuse it."""
    try:
        return ChatRequest.model_validate(json.loads(body), from_attributes=True)
    except Exception:  # FastAPI then refuses it its own way
        return None


def _error_reply(exc: BaseException) -> Response:
    error = api_error(exc)
    return JSONResponse(body_for(PATH, error), status_code=error.status)


def _is_json(scope: Scope) -> bool:
    """A plain ``application/json`` content type (parameters allowed): one FastAPI parses
    as JSON too. Any other (``+json``, none) is left to FastAPI."""
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            return bool(value.split(b";", 1)[0].strip().lower() == b"application/json")
    return False


async def _read_body(receive: Receive, received: list[Message]) -> bytes | None:
    """The whole body (the guard hands it over in one message), or None when something
    else arrives; every message read is kept in ``received`` for a replay."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay(received: list[Message], receive: Receive) -> Callable[[], Awaitable[Message]]:
    """``receive`` for FastAPI: the messages already read, then the server's own."""
    pending = list(received)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
