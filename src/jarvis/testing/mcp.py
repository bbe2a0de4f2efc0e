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
