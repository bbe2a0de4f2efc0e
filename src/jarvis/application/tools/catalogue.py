"""The tool catalogue: tool names to tools, for the CLI's ``--tools`` and the SDK's ``tools=``.

It implements the ``ToolProvider`` that ``AskService`` builds a run's tools with. Tools
are registered explicitly (no import side effects): ready instances (most tools, shared by
every run) or factories that need the run's engine and model (``llm``). Tools that do I/O
are adapters, so the container builds them and passes them to :meth:`with_builtins`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jarvis.application.openjarvis_keys import OPENJARVIS_TOOL_NAMES
from jarvis.application.plugins import PluginError, PluginSource
from jarvis.application.tools.calculator import CalculatorTool
from jarvis.application.tools.function_tool import as_tool
from jarvis.application.tools.llm import LLM_SPEC, LlmTool
from jarvis.application.tools.retrieval import MemorySearch, RetrievalTool
from jarvis.application.tools.think import ThinkTool
from jarvis.domain.errors import ConfigurationError, shown
from jarvis.domain.ports import InferencePort, ToolPort
from jarvis.domain.tools.specs import ToolSpec

if TYPE_CHECKING:  # a question that names no MCP tool never imports the MCP layer
    from jarvis.application.tools.mcp_tools import McpToolSource


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a tool factory may use: the run's engine and model."""

    inference: InferencePort
    model: str


ToolFactory = Callable[[ToolContext], ToolPort]


@dataclass(frozen=True, slots=True)
class _Entry:
    spec: ToolSpec
    factory: ToolFactory


class ToolCatalogue:
    """Known tools by name; builds the ones a run asks for."""

    def __init__(self, tools: Iterable[ToolPort] = ()) -> None:
        self._entries: dict[str, _Entry] = {}
        self._plugins: PluginSource | None = None
        self._mcp: McpToolSource | None = None
        for item in tools:
            self.register(item)

    def use_plugins(self, plugins: PluginSource) -> None:
        """Consult ``plugins`` for a tool name this catalogue does not have."""
        self._plugins = plugins
        if self._mcp is not None:
            self._mcp.reserve_later(plugins.tool_names)

    def _from_plugins(self, name: str) -> bool:
        """Register plug-in tool ``name`` if a plug-in has it (``PluginError`` when it
        cannot be loaded)."""
        plugins = self._plugins
        if plugins is None or name not in plugins.tool_names():
            return False
        tool = plugins.load_tool(name)
        if tool.spec.name != name:
            raise PluginError(
                f"tool '{name}'", f"it loads a tool named {tool.spec.name!r}, not {name!r}."
            )
        self.register(tool)
        return True

    def load_plugins(self) -> list[PluginError]:
        """Load every plug-in tool (for ``jarvis tools``); the ones that fail are returned."""
        if self._plugins is None:
            return []
        failed = list(self._plugins.failures())
        for name in self._plugins.tool_names():
            if name in self._entries:
                continue
            try:
                self._from_plugins(name)
            except PluginError as exc:
                failed.append(exc)
        return failed

    def attach_mcp(self, source: McpToolSource) -> None:
        """Offer the tools of ``source``'s MCP servers too: ``--tools fs`` (all of server
        ``fs``'s tools) and ``--tools fs.read_file`` (one). A catalogue name wins over a
        server's of the same name, and no MCP tool is given a catalogue tool's name (nor a
        plug-in's)."""
        self._mcp = source
        source.reserve(self._entries)
        if self._plugins is not None:
            source.reserve_later(self._plugins.tool_names)

    @property
    def mcp(self) -> McpToolSource | None:
        """The MCP servers whose tools this catalogue offers, if any."""
        return self._mcp

    def _own_name(self, name: str) -> str:
        """``name``, or the catalogue tool OpenJarvis's name ``name`` means
        (``memory_search``: ``retrieval``) when no tool is registered as ``name`` itself."""
        target = OPENJARVIS_TOOL_NAMES.get(name)
        if target is None or name in self._entries or target not in self._entries:
            return name
        return target

    def _is_mcp(self, name: str) -> bool:
        return name not in self._entries and self._mcp is not None and self._mcp.owns(name)

    async def prepare(self, names: Sequence[str]) -> None:
        """Start the MCP servers ``names`` need (concurrently) before :meth:`build`: those
        named, and those that could offer a bare tool name of ``names``."""
        if self._mcp is not None:
            own = [self._own_name(name.strip()) for name in names]
            wanted = [name for name in own if self._is_mcp(name)]
            bare = self._bare(names)
            if wanted or bare:
                await self._mcp.prepare(wanted, bare=bare)

    async def resolve(self, names: Sequence[str]) -> tuple[str, ...]:
        """:meth:`validate`, after starting only the MCP servers that could offer a bare
        tool name of ``names`` (to store the names a later run uses; the caller stops the
        servers)."""
        bare = self._bare(names)
        if self._mcp is not None and bare:
            await self._mcp.prepare([], bare=bare)
        return self.validate(names, guess=False)

    def _bare(self, names: Sequence[str]) -> list[str]:
        """The names of ``names`` that no catalogue tool, MCP server nor plug-in has: a
        tool's bare name, as OpenJarvis's tool lists name MCP tools."""
        if self._mcp is None:
            return []
        left = [
            name
            for name in (self._own_name(raw.strip()) for raw in names)
            if name and name not in self._entries and not self._mcp.owns(name)
        ]
        if left and self._plugins is not None:
            plugin_tools = set(self._plugins.tool_names())
            left = [name for name in left if name not in plugin_tools]
        return left

    def _mcp_tool(self, name: str, *, guess: bool) -> list[str]:
        """The MCP tool a bare ``name`` means: ``SERVER.TOOL`` of the one server that offers
        it (two: a ``ConfigurationError`` naming both). When none does and the one server
        that could did not start, a stand-in for it, which fails with why when called
        (``guess``: for a run; a name stored for later runs is not guessed); two or more
        that could are as ambiguous as two that do (a mistyped name would otherwise be a
        stand-in of each)."""
        if self._mcp is None:
            return []
        offered, down = self._mcp.offering(name)
        if len(offered) > 1:
            raise ConfigurationError(
                f"Tool '{shown(name)}' is offered by more than one MCP server: "
                + ", ".join(offered)
                + ".",
                hint="Name the one meant: " + " or ".join(offered) + ".",
            )
        if offered:
            return offered
        if len(down) > 1 or (down and not guess):
            raise ConfigurationError(
                f"Tool '{shown(name)}' is offered by no running MCP server, and "
                + ", ".join(down)
                + " could not start: which one has it cannot be told.",
                hint="Name it as SERVER.TOOL, or fix the server (jarvis mcp list says why).",
            )
        return [f"{server}.{name}" for server in down]

    @classmethod
    def with_builtins(
        cls,
        *,
        memory: MemorySearch | None = None,
        file_read: ToolPort | None = None,
        web_search: ToolPort | None = None,
        llm_model: str | None = None,
    ) -> ToolCatalogue:
        """``calculator``, ``think`` and ``llm`` always; ``retrieval`` over ``memory``,
        ``file_read`` and ``web_search`` when the container provides them.

        ``llm`` queries the run's model unless ``llm_model`` names another one.
        """
        catalogue = cls([CalculatorTool(), ThinkTool()])
        catalogue.register_factory(
            LLM_SPEC, lambda context: LlmTool(context.inference, llm_model or context.model)
        )
        if memory is not None:
            catalogue.register(RetrievalTool(memory))
        for adapter_tool in (file_read, web_search):
            if adapter_tool is not None:
                catalogue.register(adapter_tool)
        return catalogue

    def register(
        self, tool: ToolPort | Callable[..., object], *, replace: bool = False
    ) -> ToolPort:
        """Add a tool, or a typed function turned into one; returns the tool.

        A name that is already taken is an error unless ``replace=True``.
        """
        port = as_tool(tool)
        self._add(port.spec, lambda _context: port, replace=replace)
        return port

    def register_factory(
        self, spec: ToolSpec, factory: ToolFactory, *, replace: bool = False
    ) -> None:
        """Add a tool built for each run from the run's engine and model."""
        self._add(spec, factory, replace=replace)

    def _add(self, spec: ToolSpec, factory: ToolFactory, *, replace: bool) -> None:
        if spec.name in self._entries and not replace:
            raise ConfigurationError(
                f"A tool named '{spec.name}' is already registered.",
                hint="Pick another name, or pass replace=True to override it.",
            )
        self._entries[spec.name] = _Entry(spec, factory)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def specs(self) -> list[ToolSpec]:
        """Every tool's spec, by name: what ``jarvis tools`` lists."""
        return [self._entries[name].spec for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def validate(self, names: Sequence[str], *, guess: bool = True) -> tuple[str, ...]:
        """``names`` trimmed and without repeats; an unknown name raises ConfigurationError.

        A name is a catalogue tool's, an MCP server's (all its tools), ``SERVER.TOOL``, a
        plug-in tool's, or else the bare name of an MCP tool (after :meth:`prepare`), which
        becomes its ``SERVER.TOOL``: a catalogue tool of the same name wins. OpenJarvis's
        name of a catalogue tool (``memory_search``) is that tool (``retrieval``). ``guess``:
        see :meth:`_mcp_tool`."""
        chosen: list[str] = []
        unknown: list[str] = []
        for raw in names:
            name = self._own_name(raw.strip())
            if not name or name in chosen:
                continue
            if name in self._entries or self._is_mcp(name) or self._from_plugins(name):
                chosen.append(name)
            elif found := self._mcp_tool(name, guess=guess):
                chosen.extend(tool for tool in found if tool not in chosen)
            else:
                unknown.append(name)
        if unknown and self._plugins is not None and self._plugins.failures():
            raise self._plugins.failures()[0]
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            raise ConfigurationError(
                f"Unknown tool{plural}: " + ", ".join(f"'{shown(n)}'" for n in unknown) + ".",
                hint="Known tools: "
                + ", ".join(self.names())
                + (
                    "; MCP servers: " + ", ".join(self._mcp.servers())
                    if self._mcp is not None and self._mcp.servers()
                    else ""
                ),
            )
        return tuple(chosen)

    def build(
        self, names: Sequence[str], *, inference: InferencePort, model: str
    ) -> list[ToolPort]:
        """The tools for ``names``, in order; an unknown name raises ConfigurationError.
        An MCP name gives its server's tools as listed by :meth:`prepare`."""
        context = ToolContext(inference=inference, model=model)
        built: list[ToolPort] = []
        for name in self.validate(names):
            if self._is_mcp(name):
                assert self._mcp is not None
                built.extend(self._mcp.build([name]))
            else:
                built.append(self._entries[name].factory(context))
        return built
