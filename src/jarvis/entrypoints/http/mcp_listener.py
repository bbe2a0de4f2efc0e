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

import asyncio
import json
import socket
import sys
from contextlib import AbstractAsyncContextManager

import uvicorn

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.listener_guard import ListenerGuard, ListenerPolicy, listener_policy
from jarvis.entrypoints.http.security import App, Guard, Message, Receive, Scope, Send, refuse
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


SESSION_HEADER = b"mcp-session-id"
MAX_PARSED_BODY_BYTES = 1024 * 1024
"""A request body larger than this is not looked into for request ids (a ``tools/call``
carrying more is still served; only its cancellation on a dropped stream is skipped)."""


def _request_ids(body: bytes) -> list[object]:
    """The ids of the JSON-RPC requests in ``body`` (one message or a batch)."""
    if len(body) > MAX_PARSED_BODY_BYTES:
        return []
    try:
        value = json.loads(body)
    except ValueError:
        return []
    messages = value if isinstance(value, list) else [value]
    return [
        m["id"]
        for m in messages
        if isinstance(m, dict) and "id" in m and isinstance(m.get("method"), str)
    ]


class _CancelsWhenDropped:
    """Cancels, in its session, a request whose client went away before its answer."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        first = await receive()  # the whole body (the Guard read it)
        headers = list(scope.get("headers") or ())
        session = next((v for k, v in headers if k == SESSION_HEADER), None)
        ids = _request_ids(bytes(first.get("body", b""))) if session is not None else []
        finished = False
        replayed = False

        async def watched_send(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        async def watched_receive() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            message = await receive()
            if message["type"] == "http.disconnect" and not finished and ids:
                task = asyncio.create_task(self._cancel(scope, headers, ids))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return message

        await self.app(scope, watched_receive, watched_send)

    async def _cancel(
        self, scope: Scope, headers: list[tuple[bytes, bytes]], ids: list[object]
    ) -> None:
        keep = {SESSION_HEADER, b"mcp-protocol-version", b"host", b"authorization"}
        base = [(k, v) for k, v in headers if k in keep]
        for request_id in ids:
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": request_id, "reason": "the client went away"},
                }
            ).encode()
            synthetic = {
                **scope,
                "headers": [
                    *base,
                    (b"content-type", b"application/json"),
                    (b"accept", b"application/json, text/event-stream"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
            await _post_once(self.app, synthetic, body)


async def _post_once(app: App, scope: Scope, body: bytes) -> None:
    """One request of ``body`` to ``app``, its answer discarded."""
    sent = False

    async def once() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def discard(message: Message) -> None:
        return

    await app(scope, once, discard)


def guarded_mcp_app(
    app: App, *, api_key: str | None, policy: ListenerPolicy, max_body_bytes: int
) -> App:
    """``app`` behind the listener guard and the API key (``jarvis serve``'s order)."""
    inner = Guard(
        _McpOnly(_CancelsWhenDropped(app)),
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
