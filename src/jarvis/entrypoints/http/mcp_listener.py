"""``jarvis mcp serve --http``: an MCP streamable-HTTP application behind ``jarvis serve``'s
guards, served by uvicorn until interrupted.

The same rules as ``jarvis serve``: the :class:`~.listener_guard.ListenerGuard` (Host
against DNS rebinding, Origin on requests that change something, and without an API key
only the server's own user), then the :class:`~.security.Guard` (the API key, a bounded
and timed request body). Only ``/mcp`` is served (404 elsewhere). The SDK's session
manager runs for the server's lifetime: leaving it ends every session, and the runs they
started.
"""

from __future__ import annotations

import socket
import sys
from contextlib import AbstractAsyncContextManager

import uvicorn

from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.listener_guard import ListenerGuard, ListenerPolicy, listener_policy
from jarvis.entrypoints.http.security import App, Guard, Receive, Scope, Send, refuse
from jarvis.entrypoints.http.server import uvicorn_config

MCP_PATH = "/mcp"
BODY_TIMEOUT_SECONDS = 30.0


class _McpOnly:
    """``/mcp`` to the MCP application, 404 for any other path."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).rstrip("/") != MCP_PATH:
            await refuse(
                scope,
                send,
                ApiError(404, f"Not found: MCP is served at {MCP_PATH}.", "not_found_error"),
            )
            return
        await self.app(scope, receive, send)


def guarded_mcp_app(
    app: App, *, api_key: str | None, policy: ListenerPolicy, max_body_bytes: int
) -> App:
    """``app`` behind the listener guard and the API key (``jarvis serve``'s order)."""
    inner = Guard(
        _McpOnly(app),
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        body_timeout=BODY_TIMEOUT_SECONDS,
    )
    return ListenerGuard(inner, listener_policy(policy, api_key=api_key))


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        from jarvis.domain.errors import ConfigurationError

        raise ConfigurationError(
            f"Could not listen on {host}:{port} ({exc.strerror or exc}).",
            hint="Is another server using that port? Choose one with --port.",
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve_mcp(
    app: App,
    lifetime: AbstractAsyncContextManager[None],
    *,
    host: str,
    port: int,
    log_level: str = "warning",
) -> None:
    """Serve ``app`` on ``host:port`` (0: a free port; the line on stderr names it) with
    ``lifetime`` entered around it, until Ctrl-C or SIGTERM."""
    import asyncio

    sock = _listening_socket(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    server = uvicorn.Server(uvicorn_config(app, host=host, port=bound, log_level=log_level))

    async def main() -> None:
        async with lifetime:
            sys.stderr.write(f"jarvis: serving MCP on http://{shown}:{bound}{MCP_PATH}\n")
            sys.stderr.flush()
            await server.serve(sockets=[sock])

    try:
        asyncio.run(main())
    finally:
        sock.close()
