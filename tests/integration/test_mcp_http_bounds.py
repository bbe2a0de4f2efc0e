"""A streamable-HTTP MCP server that answers a call with more than the client takes: the
call fails with why (the reply is read only up to the bound), and the server stays usable."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from jarvis.adapters.mcp_sdk import McpSdkClient
from jarvis.domain.mcp import McpError, McpServerSpec
from tests.support.loopback_engine import LoopbackEngine

MIB = 1024 * 1024


class HugeReplies(LoopbackEngine):
    """Answers ``initialize`` and ``tools/list`` (tools ``huge`` and ``small``); ``huge``'s
    reply is ``size`` MiB of JSON, written in 1 MiB pieces."""

    def __init__(self, size: int) -> None:
        super().__init__()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:  # no event stream of its own
                self.send_response(405)
                self.send_header("content-length", "0")
                self.end_headers()

            do_DELETE = do_GET

            def do_POST(self) -> None:
                message = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if "id" not in message:  # a notification
                    self.send_response(202)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                method, ident = message["method"], message["id"]
                if method == "tools/call" and message["params"]["name"] == "huge":
                    self._huge(ident)
                    return
                if method == "initialize":
                    result: object = {
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "huge", "version": "1"},
                    }
                elif method == "tools/list":
                    schema = {"type": "object"}
                    result = {
                        "tools": [{"name": n, "inputSchema": schema} for n in ("huge", "small")]
                    }
                else:
                    result = {"content": [{"type": "text", "text": "small answer"}]}
                self._json(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode())

            def _json(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _huge(self, ident: object) -> None:
                reply = {"jsonrpc": "2.0", "id": ident, "result": {"content": [
                    {"type": "text", "text": "@"}]}}  # fmt: skip
                head, tail = json.dumps(reply).encode().split(b"@")
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(head) + len(tail) + server.size * MIB))
                self.end_headers()
                try:
                    self.wfile.write(head)
                    for _ in range(server.size):
                        self.wfile.write(b"a" * MIB)
                    self.wfile.write(tail)
                except OSError:  # the client stopped reading, as it should
                    pass

        self.size = size
        self._serve(Handler, "mcp-huge-replies")

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/mcp"


async def test_a_reply_past_the_bound_fails_its_call_and_the_server_stays_usable() -> None:
    with HugeReplies(size=64) as server:
        client = McpSdkClient(
            McpServerSpec(name="huge", url=server.endpoint, timeout=60), max_line_bytes=MIB
        )
        try:
            assert [tool.name for tool in await client.start()] == ["huge", "small"]
            with pytest.raises(McpError, match=f"the server's reply passed {MIB} bytes"):
                await client.call_tool("huge", {}, timeout=60)
            small = await client.call_tool("small", {}, timeout=60)
            assert small.content[0].text == "small answer"
        finally:
            await client.aclose()
