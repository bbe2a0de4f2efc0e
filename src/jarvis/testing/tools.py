"""``InMemoryTool``: a tool backed by a Python callable, recording its calls."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolResult, ToolSpec


class InMemoryTool:
    """Runs ``handler(arguments)`` (sync or async) and records every call in ``calls``."""

    def __init__(
        self,
        spec: ToolSpec,
        handler: Callable[[JSONObject], str | Awaitable[str]] | None = None,
    ) -> None:
        self._spec = spec
        self._handler = handler
        self.calls: list[JSONObject] = []

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def execute(self, arguments: JSONObject) -> ToolResult:
        self.calls.append(arguments)
        if self._handler is None:
            return ToolResult(tool_name=self._spec.name, content="ok")
        out = self._handler(arguments)
        if asyncio.iscoroutine(out) or isinstance(out, Awaitable):
            out = await out
        return ToolResult(tool_name=self._spec.name, content=str(out))
