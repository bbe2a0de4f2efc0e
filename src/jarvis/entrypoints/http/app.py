"""The ASGI application: FastAPI routes inside the :class:`~.security.Guard` (the API key),
inside CORS when it is on, inside the :class:`~.listener_guard.ListenerGuard`.

``create_app`` takes everything it serves (the ask use case and the managed-agent service
through :class:`~.state.ServerState`), so tests build it over in-memory fakes and
``jarvis serve`` over the configured engine and session store. FastAPI publishes the
OpenAPI document at ``/openapi.json`` (and ``/docs``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from jarvis.entrypoints.http import (
    anthropic_routes,
    approval_routes,
    managed_routes,
    openai_routes,
)
from jarvis.entrypoints.http.errors import ApiError, CatchAll, body_for
from jarvis.entrypoints.http.fast_path import ChatFastPath
from jarvis.entrypoints.http.listener_guard import ListenerGuard, ListenerPolicy, listener_policy
from jarvis.entrypoints.http.security import App, Guard
from jarvis.entrypoints.http.state import ServerState
from jarvis.entrypoints.http.trace_parent import TraceParentLayer

MAX_ERROR_DETAILS = 8

_CatchAll = CatchAll  # the name the loopback endpoint imports


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


def answer_errors_as_json(app: FastAPI, *, forward_headers: bool) -> None:
    """Make ``app`` answer an :class:`ApiError`, a request that fails validation and an
    ``HTTPException`` as the JSON error of its API (OpenAI or Anthropic, by path);
    ``forward_headers``: an ``HTTPException``'s own headers go with the reply."""

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
        if forward_headers and exc.headers:
            reply.headers.update(exc.headers)
        return reply


def _lifespan(
    at_shutdown: Callable[[], None],
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """A lifespan that calls ``at_shutdown`` once the server has stopped serving. Why: a
    ``--workers`` process is stopped by ``SIGTERM``, which uvicorn raises again once it has
    shut down, ending the process before Python's exit handlers run (the trace writer's
    last batch was lost with them); the lifespan's end comes before that."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(at_shutdown)

    return lifespan


def create_app(
    state: ServerState,
    *,
    api_key: str | None = None,
    cors_origins: Sequence[str] = (),
    fast_path: bool = True,
    listener: ListenerPolicy | None = None,
    at_shutdown: Callable[[], None] | None = None,
) -> App:
    """The application for ``state``: an API key makes every route but ``/health`` ask
    for it; ``cors_origins`` switches CORS on for those origins (off by default).
    ``fast_path=False`` leaves ``POST /v1/chat/completions`` to FastAPI as well (the tests
    compare both ways of serving it). Everything sits behind the
    :class:`~.listener_guard.ListenerGuard` (Host, Origin, and, without an API key, the
    connecting user: ``listener``, by default the server's own names and user).
    ``at_shutdown`` is called (in a thread: it may wait for a write) when a server that runs
    the ASGI lifespan protocol stops, before it ends its process (see :func:`_lifespan`)."""
    app = FastAPI(
        title="jarvis",
        summary="Managed agents over SSE, OpenAI- and Anthropic-compatible endpoints.",
        version="1",
        lifespan=None if at_shutdown is None else _lifespan(at_shutdown),
    )
    app.state.jarvis = state

    answer_errors_as_json(app, forward_headers=True)

    @app.get("/health", summary="Liveness (no API key needed)")
    async def health() -> dict[str, object]:
        return {"status": "ok", "active_runs": state.active_runs}

    app.include_router(openai_routes.router)
    app.include_router(anthropic_routes.router)
    app.include_router(managed_routes.router)
    app.include_router(approval_routes.router)
    app.add_middleware(CatchAll)
    limits = state.limits
    asgi: App = Guard(
        TraceParentLayer(ChatFastPath(app, state) if fast_path else app),
        api_key=api_key,
        max_body_bytes=limits.max_body_bytes,
        body_timeout=limits.body_timeout,
    )
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        # Outside the key: a browser's preflight never carries credentials, so a key checked
        # first refused every one (401) and no page could send the key at all. The middleware
        # answers a preflight (OPTIONS with Origin and Access-Control-Request-Method) itself,
        # granting only the allowed origins, and never passes one on; every other request
        # goes through the key, its answer (a 401 too) readable by an allowed page.
        asgi = CORSMiddleware(
            asgi, allow_origins=list(cors_origins), allow_methods=["*"], allow_headers=["*"]
        )
    return ListenerGuard(asgi, listener_policy(listener, api_key=api_key, cors=cors_origins))
