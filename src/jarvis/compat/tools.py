"""OpenJarvis's tool classes: ``CalculatorTool()``, ``ThinkTool()``, ``WebSearchTool()``.

The first two are jarvis's own; ``WebSearchTool`` is built from ``[tools.web_search]``
(a SearXNG-compatible ``provider_url``, or ``$JARVIS_SEARCH_URL``; without one it only
fetches URLs).
"""

from __future__ import annotations

from jarvis.application.tools.calculator import CalculatorTool
from jarvis.application.tools.think import ThinkTool
from jarvis.domain.json_types import JSONObject
from jarvis.domain.ports import ToolPort
from jarvis.domain.tools.specs import ToolResult, ToolSpec


class WebSearchTool:
    """jarvis's ``web_search`` tool, configured as ``[tools.web_search]`` says."""

    def __init__(self) -> None:
        from jarvis.entrypoints.composition.tools import web_search_tool
        from jarvis.entrypoints.settings import load_config

        self.inner: ToolPort = web_search_tool(load_config())

    @property
    def spec(self) -> ToolSpec:
        return self.inner.spec

    async def execute(self, arguments: JSONObject) -> ToolResult:
        return await self.inner.execute(arguments)


__all__ = ["CalculatorTool", "ThinkTool", "WebSearchTool"]
