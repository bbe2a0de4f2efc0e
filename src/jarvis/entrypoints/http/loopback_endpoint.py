"""jarvis's Anthropic-compatible endpoint for one external runtime, on loopback.

The ``claude_code`` agent's SDK speaks Anthropic's Messages API only. To run it on the
user's own engine (any engine, the embedded one too), this serves ``/v1/messages`` over
that engine on ``127.0.0.1``, on a free port, with a random API key nobody else knows:
only the runner jarvis starts, which gets the key on its stdin, can call it. Only the
Anthropic routes are mounted (no managed agents, no chat completions).

The server is a task on the event loop of the run that started it, over that loop's
engine (an HTTP engine's connections belong to its loop): started on the first run, kept
for later ones on the same loop and engine, stopped by :meth:`LoopbackEndpoint.aclose`
(or at once, by :meth:`LoopbackEndpoint.close_now`).

The endpoint sits behind the :class:`~.listener_guard.ListenerGuard` like ``jarvis serve``:
a ``Host`` other than its own address (DNS rebinding), a cross-site ``Origin``, and a
connection of another local user are refused before the key is even looked at.

Every local user can reach a loopback port. Without the key a request is refused, but
uvicorn gives a connection no deadline for its request's headers: 300 connections of
another user, each holding half a request, were all still open 8 s later (nothing in
uvicorn would ever close them), each a descriptor of the jarvis process (at the usual
soft limit of 1,024 the runner could not connect any more). So a connection that has
spent :data:`~jarvis.entrypoints.http.protocol.HEADER_DEADLINE` seconds without a request
being served (its headers unfinished, or idle) is closed, as by ``jarvis serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI

from jarvis.entrypoints.http import anthropic_routes
from jarvis.entrypoints.http.app import _CatchAll, answer_errors_as_json
from jarvis.entrypoints.http.listener_guard import ListenerGuard, ListenerPolicy
from jarvis.entrypoints.http.protocol import HEADER_DEADLINE, with_header_deadline
from jarvis.entrypoints.http.security import App, Guard
from jarvis.entrypoints.http.server import uvicorn_config
from jarvis.entrypoints.http.state import ServeLimits, ServerState

if TYPE_CHECKING:
    from jarvis.domain.ports import InferencePort

StateFactory = Callable[["InferencePort", str, ServeLimits], ServerState]
"""The routes' state over one engine and model (the composition root provides it)."""

START_DEADLINE = 30.0


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: Ctrl-C belongs to the command running the
    agent, which stops the runtime (and this server) itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def anthropic_app(state: ServerState, *, api_key: str) -> App:
    """``/v1/messages`` and ``/v1/messages/count_tokens`` over ``state``, behind the key."""
    app = FastAPI(title="jarvis (loopback)", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.jarvis = state

    answer_errors_as_json(app, forward_headers=False)

    app.include_router(anthropic_routes.router)
    app.add_middleware(_CatchAll)
    limits = state.limits
    keyed = Guard(
        app, api_key=api_key, max_body_bytes=limits.max_body_bytes, body_timeout=limits.body_timeout
    )
    # its own names only, same-origin only, and only this process's user, key or not
    return ListenerGuard(keyed, ListenerPolicy(owner_only=True))


class LoopbackEndpoint:
    """The endpoint of one runtime (``ClaudeCodeRuntime``'s ``LoopbackEndpoint``)."""

    def __init__(
        self,
        state: StateFactory,
        *,
        limits: ServeLimits | None = None,
        header_deadline: float = HEADER_DEADLINE,
    ) -> None:
        self._state = state
        self.limits = limits or ServeLimits()
        self.header_deadline = header_deadline
        self._lock = asyncio.Lock()
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self._key = ("", "")
        self._bound: tuple[int, int] = (0, 0)
        """``id`` of the engine and of the loop the running server serves."""

    @property
    def url(self) -> str:
        return self._key[0]

    @property
    def api_key(self) -> str:
        """The running server's key (``""`` when stopped); nothing outside this process
        and the runner it is handed to knows it."""
        return self._key[1]

    async def start(self, engine: InferencePort, model: str) -> tuple[str, str]:
        bound = (id(engine), id(asyncio.get_running_loop()))
        async with self._lock:
            task = self._task
            if task is not None and not task.done() and self._bound == bound:
                return self._key
            await self._stop()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
            key = secrets.token_urlsafe(32)
            app = anthropic_app(self._state(engine, model, self.limits), api_key=key)
            config = uvicorn_config(app, host="127.0.0.1", port=port, log_level="warning")
            config.timeout_graceful_shutdown = 2
            config.http = with_header_deadline(self.header_deadline)
            server = _Server(config)
            self._server, self._socket = server, sock
            self._task = asyncio.create_task(server.serve(sockets=[sock]))
            async with asyncio.timeout(START_DEADLINE):
                while not server.started:  # set once it listens; the task fails otherwise
                    if self._task.done():
                        break
                    await asyncio.sleep(0.002)
            if not server.started:
                await self._stop()
                raise RuntimeError("jarvis's loopback Anthropic endpoint did not start.")
            self._key = (f"http://127.0.0.1:{port}", key)
            self._bound = bound
            return self._key

    async def _stop(self) -> None:
        server, task = self._server, self._task
        self._server = self._task = None
        self._key, self._bound = ("", ""), (0, 0)
        if server is not None:
            server.should_exit = True
        if task is not None:
            try:
                await asyncio.wait_for(task, 5.0)
            except (TimeoutError, asyncio.CancelledError, Exception):
                task.cancel()
        self._close_socket()

    def _close_socket(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    async def aclose(self) -> None:
        async with self._lock:
            await self._stop()

    def close_now(self) -> None:
        """Stops serving without waiting (from synchronous code on or off the loop)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None and not self._task.done():
            with contextlib.suppress(RuntimeError):  # its loop is closed: it went with it
                self._task.cancel()
        self._server = self._task = None
        self._key, self._bound = ("", ""), (0, 0)
        self._close_socket()
