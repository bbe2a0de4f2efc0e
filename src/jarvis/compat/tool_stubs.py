"""OpenJarvis's ``BaseTool`` and ``ToolExecutor`` (``openjarvis.tools._stubs``).

A ``BaseTool`` subclass implements a synchronous ``execute(**params)``; :meth:`BaseTool.as_tool`
(applied by the OpenJarvis-style agents to every tool they are given) makes it a jarvis tool,
run in a worker thread and checked against its spec's schema like any other. The
``ToolExecutor`` is jarvis's executor (lookup, argument validation, timeouts, bounded output,
events) behind OpenJarvis's synchronous ``execute(tool_call)``, whose ``arguments`` may be
OpenJarvis's JSON text (``'{"expression": "2+2"}'``) or an object. :class:`WrappedTool` is
the ``BaseTool`` face of one of jarvis's own tools (``CalculatorTool()``...).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar, Final, TypeVar

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.tool_executor import ToolExecutor as JarvisToolExecutor
from jarvis.domain.ports import ToolPort
from jarvis.domain.run.events import EventBus
from jarvis.domain.tools.specs import ToolResult, ToolSpec, openai_function

T = TypeVar("T")

MAX_ARGUMENTS_CHARS: Final = 1_000_000
"""The longest JSON argument text :meth:`ToolExecutor.execute` parses (a model's tool call
is a few hundred characters; anything near this is a mistake, refused before parsing)."""


def run_sync(coro: Coroutine[object, object, T]) -> T:
    """``coro``'s result for a synchronous caller: on a new event loop, in a worker thread
    when this thread already runs one (a notebook, an ``async def``), where ``asyncio.run``
    would refuse."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="jarvis-tool") as pool:
        return pool.submit(asyncio.run, coro).result()


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


class WrappedTool(BaseTool):
    """One of jarvis's tools as an OpenJarvis ``BaseTool``: ``execute(**params)`` runs it
    through jarvis's executor (the parameters checked against its schema, its timeout and
    output bound applied); given to an agent or the SDK, it is jarvis's tool itself."""

    def __init__(self, inner: ToolPort) -> None:
        self.inner = inner

    @property
    def spec(self) -> ToolSpec:
        return self.inner.spec

    def execute(self, **params: JSONValue) -> ToolResult:
        call = ToolCall(id=f"{self.spec.name}-call", name=self.spec.name, arguments=dict(params))
        return run_sync(JarvisToolExecutor([self.inner]).execute(call))

    def as_tool(self) -> ToolPort:
        return self.inner


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
        """Parse the arguments (OpenJarvis's JSON text, or an object), look the tool up,
        validate the arguments, run it, bound its output. Never raises for a bad call or a
        tool's failure: that is a failed result saying what was wrong."""
        call = _parsed(tool_call)
        if isinstance(call, ToolResult):
            return call
        return run_sync(self._executor.execute(call))

    def available_tools(self) -> list[ToolSpec]:
        return list(self._executor.specs)

    def get_openai_tools(self) -> list[JSONObject]:
        """The tools in OpenAI's function-calling format."""
        return [openai_function(spec) for spec in self._executor.specs]


def _parsed(tool_call: ToolCall) -> ToolCall | ToolResult:
    """``tool_call`` with its arguments as an object: OpenJarvis gives them as JSON text
    (``""`` or ``None``: none). Text that is not a JSON object is kept raw, so jarvis's
    executor reports it (what was received, and the schema to follow); text longer than
    :data:`MAX_ARGUMENTS_CHARS` is refused unparsed."""
    name: object = tool_call.name
    if not isinstance(name, str):  # OpenJarvis code may build one from anything
        return ToolResult(
            tool_name=str(name)[:80],
            content=f"Invalid tool call: its name is {type(name).__name__}, not a string.",
            success=False,
            call_id=tool_call.id,
            metadata={"error": "invalid_name"},
        )
    arguments: object = tool_call.arguments
    if arguments is None:
        return ToolCall(id=tool_call.id, name=tool_call.name)
    if not isinstance(arguments, str):
        return tool_call
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        return ToolResult(
            tool_name=tool_call.name,
            content=(
                f"Invalid arguments for tool '{tool_call.name}': {len(arguments):,} characters "
                f"of JSON, more than the {MAX_ARGUMENTS_CHARS:,} accepted."
            ),
            success=False,
            call_id=tool_call.id,
            metadata={"error": "invalid_json"},
        )
    return ToolCall.from_json_text(id=tool_call.id, name=tool_call.name, text=arguments)
