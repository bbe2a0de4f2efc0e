"""An in-memory MCP server connection, for tests of MCP tool sources without a process.

Its tools are Python coroutines; a fault can be set up front (``fail_start``) or caused by
a tool (raise :class:`ServerCrash` to play a server that died mid-call). It passes the
same ``contracts/mcp_client_contract.py`` as the SDK adapter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from jarvis.domain.json_types import JSONObject
from jarvis.domain.mcp import (
    McpCallResult,
    McpContent,
    McpError,
    McpServerDownError,
    McpTimeoutError,
    McpToolInfo,
)

McpHandler = Callable[[JSONObject], Awaitable[McpCallResult]]


class ServerCrash(Exception):
    """Raised by a fake tool: the fake server dies during the call."""


class InMemoryMcpClient:
    """A ``McpClientPort`` over ``tools``: tool infos and the coroutines that answer them."""

    def __init__(
        self,
        name: str,
        tools: Mapping[str, tuple[McpToolInfo, McpHandler]],
        *,
        fail_start: str = "",
        stderr: str = "",
    ) -> None:
        self._name = name
        self._tools = dict(tools)
        self.fail_start = fail_start
        """When set, :meth:`start` fails with this message (a server that cannot start)."""
        self._stderr = stderr
        self._running = False
        self.starts = 0
        self.calls: list[tuple[str, JSONObject]] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def running(self) -> bool:
        return self._running

    async def start(self) -> tuple[McpToolInfo, ...]:
        self.starts += 1
        if self.fail_start:
            raise McpServerDownError(self.fail_start, server=self._name)
        self._running = True
        return tuple(info for info, _ in self._tools.values())

    async def call_tool(self, name: str, arguments: JSONObject, *, timeout: float) -> McpCallResult:
        if not self._running:
            raise McpServerDownError(
                f"MCP server '{self._name}' is not running.", server=self._name
            )
        entry = self._tools.get(name)
        if entry is None:
            raise McpError(f"MCP server '{self._name}' has no tool '{name}'.", server=self._name)
        self.calls.append((name, arguments))
        try:
            return await asyncio.wait_for(entry[1](arguments), timeout)
        except TimeoutError:
            raise McpTimeoutError(
                f"MCP server '{self._name}' did not answer '{name}' within {timeout:g} s.",
                server=self._name,
            ) from None
        except ServerCrash:
            self._running = False
            raise McpServerDownError(
                f"MCP server '{self._name}' died during '{name}'.", server=self._name
            ) from None

    def stderr_tail(self) -> str:
        return self._stderr

    async def aclose(self) -> None:
        self._running = False

    def close_now(self) -> None:
        self._running = False


def _text(text: str, structured: JSONObject | None = None) -> McpCallResult:
    return McpCallResult(content=(McpContent(kind="text", text=text),), structured=structured)


async def _echo(arguments: JSONObject) -> McpCallResult:
    text = str(arguments.get("text", ""))
    return _text(text, {"result": text})


async def _add(arguments: JSONObject) -> McpCallResult:
    a, b = arguments.get("a"), arguments.get("b")
    total = (a if isinstance(a, int) else 0) + (b if isinstance(b, int) else 0)
    return _text(f'{{"sum": {total}}}', {"sum": total})


async def _fail(arguments: JSONObject) -> McpCallResult:
    return McpCallResult(
        content=(McpContent(kind="text", text=f"Error: {arguments.get('message')}"),),
        is_error=True,
    )


async def _tiny_image(_arguments: JSONObject) -> McpCallResult:
    return McpCallResult(content=(McpContent(kind="image", mime_type="image/png", size_bytes=68),))


async def _hang(_arguments: JSONObject) -> McpCallResult:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _crash(_arguments: JSONObject) -> McpCallResult:
    raise ServerCrash


def _object(properties: JSONObject, required: list[str]) -> JSONObject:
    return {"type": "object", "properties": properties, "required": list(required)}


REFERENCE_TOOLS: dict[str, tuple[McpToolInfo, McpHandler]] = {
    "echo": (
        McpToolInfo(
            name="echo",
            description="Repeat the text back.",
            input_schema=_object({"text": {"type": "string"}}, ["text"]),
            read_only=True,
            destructive=False,
        ),
        _echo,
    ),
    "add": (
        McpToolInfo(
            name="add",
            description="Add two integers.",
            input_schema=_object({"a": {"type": "integer"}, "b": {"type": "integer"}}, ["a", "b"]),
        ),
        _add,
    ),
    "fail": (
        McpToolInfo(
            name="fail",
            description="Fail with the message.",
            input_schema=_object({"message": {"type": "string"}}, ["message"]),
        ),
        _fail,
    ),
    "tiny_image": (McpToolInfo(name="tiny_image", description="A 1x1 PNG."), _tiny_image),
    "hang": (
        McpToolInfo(
            name="hang",
            description="Never answers.",
            input_schema=_object({"marker": {"type": "string"}}, ["marker"]),
            destructive=True,
        ),
        _hang,
    ),
    "crash": (McpToolInfo(name="crash", description="The process dies mid-call."), _crash),
}
"""The tools of ``tests/support/mcp_reference_server.py``, played in memory."""


def reference_client(name: str = "ref") -> InMemoryMcpClient:
    """A fake of the reference server (what the contract suite runs against)."""
    return InMemoryMcpClient(name, REFERENCE_TOOLS)
