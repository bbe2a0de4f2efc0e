"""jarvis's tools on the wire, through the official ``mcp`` SDK's low-level ``Server``.

The low-level server rather than ``MCPServer``'s decorators: the managed agents are tools
too, read from the store at each ``tools/list``, so the list is not known when the server
is built. The SDK does the protocol: the handshake, ``notifications/progress`` for a call
that gave a progress token, and ``notifications/cancelled``, which cancels the handler's
scope (its run's generator is closed: the engine's request goes with it).

* stdio (:func:`serve_stdio`): the SDK's transport on the process's stdin and stdout
  (while it serves, fd 1 points at stderr so nothing stray reaches the wire). Stdin at its
  end (the client went away) ends the server, and with it every run still going;
* streamable HTTP (:func:`streamable_http`): the SDK's session manager as an ASGI
  application, to be put behind jarvis's listener guard and API key
  (:mod:`jarvis.entrypoints.http.mcp_listener`); a session whose client is gone is ended
  by the SDK, and its runs with it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from jarvis.entrypoints.mcp_server.catalogue import JarvisTools

if TYPE_CHECKING:
    from jarvis.entrypoints.http.security import App

SERVER_NAME = "jarvis"
INSTRUCTIONS = (
    "jarvis runs agents on the user's own engine. `ask` puts a question to an agent; "
    "`agent_<id>` talks to a managed agent, which keeps its own conversation."
)


def build_server(tools: JarvisTools, *, version: str = "") -> Server[Any]:
    """The MCP server offering ``tools``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        offers = await tools.offers()
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=offer.name,
                    description=offer.description,
                    input_schema=dict(offer.input_schema),
                    annotations=types.ToolAnnotations(read_only_hint=offer.read_only)
                    if offer.read_only
                    else None,
                )
                for offer in offers
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        steps = 0

        async def progress(line: str) -> None:
            nonlocal steps
            steps += 1
            await ctx.session.report_progress(steps, None, line)

        outcome = await tools.call(params.name, params.arguments or {}, progress)
        return types.CallToolResult(
            content=[types.TextContent(text=outcome.text)],
            structured_content=outcome.structured,
            is_error=outcome.is_error,
        )

    return Server(
        SERVER_NAME,
        version=version,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client on stdin/stdout until stdin ends."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def streamable_http(
    server: Server[Any], *, max_body_bytes: int
) -> tuple[App, AbstractAsyncContextManager[None]]:
    """The streamable HTTP application (at ``/mcp``) and the session manager's lifetime,
    to be entered around serving it. The SDK's own Host/Origin check is off: the
    listener guard in front of it does that (and knows ``--allowed-host``)."""
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from mcp.server.transport_security import TransportSecuritySettings

    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=max_body_bytes,
    )
    return StreamableHTTPASGIApp(manager), manager.run()
