"""OpenJarvis's ``BaseTool`` and ``ToolExecutor`` (``openjarvis.tools._stubs``).

A ``BaseTool`` subclass implements a synchronous ``execute(**params)``; :meth:`BaseTool.as_tool`
(applied by the OpenJarvis-style agents to every tool they are given) makes it a jarvis tool,
run in a worker thread and checked against its spec's schema like any other. The
``ToolExecutor`` is jarvis's executor (lookup, argument validation, timeouts, bounded output,
events) behind OpenJarvis's synchronous ``execute(tool_call)``.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.tool_executor import ToolExecutor as JarvisToolExecutor
from jarvis.domain.ports import ToolPort
from jarvis.domain.run.events import EventBus
from jarvis.domain.tools.specs import ToolResult, ToolSpec, openai_function


class BaseTool(ABC):
    """OpenJarvis's tool base class: ``spec`` and a synchronous ``execute(**params)``."""

    tool_id: ClassVar[str] = ""

    @property
    @abstractmethod
    def spec(self) -> ToolSpec:
        """The tool specification."""

    @abstractmethod
    def execute(self, **params: JSONValue) -> ToolResult:
        """Run the tool with the given parameters."""

    def to_openai_function(self) -> JSONObject:
        return openai_function(self.spec)

    def as_tool(self) -> ToolPort:
        """This tool as a jarvis tool (``execute`` runs in a worker thread)."""
        return _AsTool(self)


class _AsTool:
    def __init__(self, tool: BaseTool) -> None:
        self.tool = tool

    @property
    def spec(self) -> ToolSpec:
        return self.tool.spec

    async def execute(self, arguments: JSONObject) -> ToolResult:
        return await asyncio.to_thread(lambda: self.tool.execute(**arguments))


def as_tools(tools: Sequence[object] | None) -> tuple[ToolPort, ...]:
    """jarvis tools from what OpenJarvis code passes as ``tools=``: jarvis tools, ``BaseTool``
    subclasses' instances; the documentation's ``[...]`` placeholder stands for none."""
    found: list[ToolPort] = []
    for tool in tools or ():
        if tool is Ellipsis:
            continue
        if isinstance(tool, BaseTool):
            found.append(tool.as_tool())
        elif hasattr(tool, "spec") and hasattr(tool, "execute"):
            found.append(tool)  # a ToolPort, checked structurally
        else:
            raise ConfigurationError(f"{tool!r} is not a tool.")
    return tuple(found)


class ToolExecutor:
    """OpenJarvis's ``ToolExecutor(tools, bus=None)`` over jarvis's executor."""

    def __init__(self, tools: Sequence[ToolPort | BaseTool], bus: EventBus | None = None):
        self._executor = JarvisToolExecutor(list(as_tools(tools)), bus=bus)

    def execute(self, tool_call: ToolCall) -> ToolResult:
        """Look the tool up, validate the arguments, run it, bound its output (never raises
        for a tool's failure: that is a failed result)."""
        return asyncio.run(self._executor.execute(tool_call))

    def available_tools(self) -> list[ToolSpec]:
        return list(self._executor.specs)

    def get_openai_tools(self) -> list[JSONObject]:
        """The tools in OpenAI's function-calling format."""
        return [openai_function(spec) for spec in self._executor.specs]
