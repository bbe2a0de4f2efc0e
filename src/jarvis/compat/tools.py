"""OpenJarvis's tool classes: ``CalculatorTool()``, ``ThinkTool()``, ``WebSearchTool()``.

Each is a :class:`~jarvis.compat.tool_stubs.BaseTool`, as OpenJarvis's are: a synchronous
``execute(**params)`` returning a ``ToolResult`` and ``to_openai_function()``, so code that
calls a tool directly runs unchanged. Each wraps jarvis's own tool of that name (no second
implementation): ``execute`` checks the parameters against the tool's schema and runs
jarvis's tool; an agent, the SDK or the catalogue given one of these classes uses jarvis's
tool itself (:meth:`~jarvis.compat.tool_stubs.BaseTool.as_tool`), with no thread between.
``WebSearchTool`` is built from ``[tools.web_search]`` (a SearXNG-compatible
``provider_url``, or ``$JARVIS_SEARCH_URL``; without one it only fetches URLs).
"""

from __future__ import annotations

from jarvis.application.tools.calculator import CalculatorTool as JarvisCalculator
from jarvis.application.tools.think import ThinkTool as JarvisThink
from jarvis.compat.tool_stubs import WrappedTool
from jarvis.domain.ports import ToolPort


class CalculatorTool(WrappedTool):
    """OpenJarvis's ``calculator``: ``CalculatorTool().execute(expression="2+2")``."""

    tool_id = "calculator"

    def __init__(self) -> None:
        super().__init__(JarvisCalculator())


class ThinkTool(WrappedTool):
    """OpenJarvis's ``think``: ``ThinkTool().execute(thought="...")`` echoes the thought."""

    tool_id = "think"

    def __init__(self) -> None:
        super().__init__(JarvisThink())


class WebSearchTool(WrappedTool):
    """jarvis's ``web_search`` tool, configured as ``[tools.web_search]`` says."""

    tool_id = "web_search"

    def __init__(self) -> None:
        from jarvis.entrypoints.composition.tools import web_search_tool
        from jarvis.entrypoints.settings import load_config

        inner: ToolPort = web_search_tool(load_config())
        super().__init__(inner)


__all__ = ["CalculatorTool", "ThinkTool", "WebSearchTool"]
