"""An MCP server built with the ``mcp`` SDK's own MCPServer (formerly FastMCP), for tests.

Run as ``python tests/support/mcp_reference_server.py`` (stdio) or with ``--http
PORT_FILE`` (streamable HTTP on 127.0.0.1, a free port written to ``PORT_FILE`` once it
listens). ``--never-start`` plays a server that never answers (startup_timeout),
``--garbage-first`` one that writes a non-JSON line before anything else, ``--stubborn``
one that ignores SIGTERM and leaves a child process behind, ``--require-header NAME=VALUE``
an HTTP server that answers 401 without that header; ``--tag WORD`` marks its
command line (and its child's) so a test can find them in the process table.

Its tools cover what a tool result can be: text (``echo``), structured content (``add``),
an error result (``fail``), an image (``tiny_image``: 68 bytes of PNG), an embedded
resource (``note``), a call that never ends (``hang``, which writes a marker file first so
a test can wait for it), a crash mid-call (``crash``), a stderr flood (``flood``) and the
environment it was given (``env_names``) and its process id (``pid``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp_types import EmbeddedResource, TextResourceContents, ToolAnnotations

TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgYAAAAAMAASsJTYQAAAAASUVORK5CYII="
)

server = MCPServer("reference")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
def echo(text: str) -> str:
    """Repeat the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


@server.tool()
def trace_context(ctx: Context) -> str:
    """The W3C traceparent the call carried in its _meta (empty: none)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent", ""))


@server.tool()
def fail(message: str) -> str:
    """Fail with the message."""
    raise ValueError(message)


@server.tool()
def tiny_image() -> Image:
    """A 1x1 PNG."""
    return Image(data=TINY_PNG, format="png")


@server.tool()
def note() -> EmbeddedResource:
    """An embedded text resource."""
    return EmbeddedResource(
        type="resource",
        resource=TextResourceContents(uri="memo://one", mime_type="text/plain", text="remember"),
    )


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
async def hang(marker: str) -> str:
    """Never answers (writes ``marker`` first)."""
    Path(marker).write_text(str(os.getpid()))  # noqa: ASYNC240 - a few bytes, once
    await asyncio.Event().wait()
    return "unreachable"


@server.tool()
def crash() -> str:
    """The process dies mid-call."""
    os._exit(3)


@server.tool()
def flood(megabytes: int) -> str:
    """Writes megabytes of noise on stderr, then answers."""
    chunk = b"x" * 65535 + b"\n"
    for _ in range(megabytes * 16):
        os.write(2, chunk)
    return "flooded"


@server.tool()
def pid() -> str:
    """This server's process id (one process serving several calls shows one id)."""
    return str(os.getpid())


@server.tool()
def env_names() -> str:
    """The names of the variables in this server's environment."""
    return ",".join(sorted(os.environ))


def _guarded(app: Any, name: str, value: str) -> Any:
    """``app`` answering 401 to a request without header ``name: value``."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(name.lower().encode()) != value.encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="PORT_FILE")
    parser.add_argument("--never-start", action="store_true")
    parser.add_argument("--garbage-first", action="store_true")
    parser.add_argument("--stubborn", action="store_true")
    parser.add_argument("--tag", default="", help="a word tests find this process by")
    parser.add_argument("--require-header", default="", metavar="NAME=VALUE")
    args = parser.parse_args()
    if args.stubborn:  # ignores SIGTERM and leaves a child behind unless its group is killed
        import signal
        import subprocess

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)", args.tag],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    if args.never_start:
        time.sleep(3600)  # killed by the client at its startup_timeout
        return
    if args.garbage_first:
        os.write(1, b"hello from a server that logs on stdout\n")
    if args.http:
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
        app = server.streamable_http_app()
        if args.require_header:
            app = _guarded(app, *args.require_header.split("=", 1))
        config = uvicorn.Config(app, log_level="warning")
        uv = uvicorn.Server(config)
        Path(args.http + ".tmp").write_text(str(port))
        os.replace(args.http + ".tmp", args.http)
        uv.run(sockets=[sock])
        return
    server.run()
    sys.exit(0)


if __name__ == "__main__":
    main()
