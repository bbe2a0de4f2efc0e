"""The ASGI application: FastAPI routes inside the :class:`~.security.Guard`.

``create_app`` takes everything it serves (the ask use case and the managed-agent service
through :class:`~.state.ServerState`), so tests build it over in-memory fakes and
``jarvis serve`` over the configured engine and session store. FastAPI publishes the
OpenAPI document at ``/openapi.json`` (and ``/docs``).
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from jarvis.entrypoints.http import anthropic_routes, managed_routes, openai_routes
from jarvis.entrypoints.http.errors import ApiError, api_error, body_for
from jarvis.entrypoints.http.security import App, Guard, Message, Receive, Scope, Send
from jarvis.entrypoints.http.state import ServerState

MAX_ERROR_DETAILS = 8


def _reply(request: Request, error: ApiError) -> JSONResponse:
    return JSONResponse(body_for(request.url.path, error), status_code=error.status)


def _validation_message(exc: RequestValidationError) -> str:
    """What is wrong and where, never the values sent (they may hold secrets)."""
    problems = []
    for item in exc.errors()[:MAX_ERROR_DETAILS]:
        where = ".".join(str(p) for p in item.get("loc", ()) if p != "body") or "body"
        problems.append(f"{where}: {item.get('msg', 'invalid')}")
    more = len(exc.errors()) - MAX_ERROR_DETAILS
    if more > 0:
        problems.append(f"and {more} more")
    return "Invalid request: " + "; ".join(problems)


class _CatchAll:
    """Any exception a route lets through becomes a JSON error (500 for the unexpected,
    logged without the request) instead of Starlette's plain-text 500 and a dropped
    connection."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started or scope["type"] != "http":
                raise
            error = api_error(exc)
            reply = JSONResponse(
                body_for(str(scope.get("path", "")), error), status_code=error.status
            )
            await reply(scope, receive, send)


def create_app(
    state: ServerState, *, api_key: str | None = None, cors_origins: Sequence[str] = ()
) -> App:
    """The application for ``state``: an API key makes every route but ``/health`` ask
    for it; ``cors_origins`` switches CORS on for those origins (off by default)."""
    app = FastAPI(
        title="jarvis",
        summary="Managed agents over SSE, OpenAI- and Anthropic-compatible endpoints.",
        version="1",
    )
    app.state.jarvis = state

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return _reply(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _reply(request, ApiError(400, _validation_message(exc)))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        reply = _reply(request, ApiError(exc.status_code, str(exc.detail), kind))
        if exc.headers:
            reply.headers.update(exc.headers)
        return reply

    @app.get("/health", summary="Liveness (no API key needed)")
    async def health() -> dict[str, object]:
        return {"status": "ok", "active_runs": state.active_runs}

    app.include_router(openai_routes.router)
    app.include_router(anthropic_routes.router)
    app.include_router(managed_routes.router)
    app.add_middleware(_CatchAll)
    asgi: App = app
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        asgi = CORSMiddleware(
            app, allow_origins=list(cors_origins), allow_methods=["*"], allow_headers=["*"]
        )
    limits = state.limits
    return Guard(
        asgi,
        api_key=api_key,
        max_body_bytes=limits.max_body_bytes,
        body_timeout=limits.body_timeout,
    )
