"""A tool an agent may call."""

from __future__ import annotations

from typing import Protocol

from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolResult, ToolSpec


class ToolPort(Protocol):
    """A tool the model may call."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description, JSON-Schema parameters, category, timeout, side effects."""
        ...

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Run the tool with arguments already validated against ``spec.parameters``.

        Expected failures are returned as ``ToolResult(success=False)``; an exception is
        turned into one by the executor.
        """
        ...
