"""The tools: the catalogue every tool-using agent draws from, and what it is built on.

The catalogue (``calculator``, ``think``, ``llm``, ``retrieval``, ``file_read``,
``web_search``, ``code_interpreter``, the persona tools, the tools an embedding app
registered, the plug-ins' and the MCP servers') is built when a question first needs tools;
the REPL, the plug-ins and ``web_search`` later still, on their first use, so that a
question to an agent without tools imports none of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from jarvis.application.ask import ToolProvider
from jarvis.application.config import JarvisConfig, ReplSettings
from jarvis.application.plugins import PluginError, PluginSource
from jarvis.application.registry import AgentRegistry, builtin_agents
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.ports import (
    InferencePort,
    MemoryPort,
    PersonaStorePort,
    ReplPort,
    ReplSession,
    ToolPort,
)
from jarvis.domain.repl import ReplCallbacks, ReplIsolation, ReplLimits
from jarvis.entrypoints.composition.skip_optional_imports import import_httpx
from jarvis.entrypoints.settings import check_url, config_dir

if TYPE_CHECKING:
    from collections.abc import Callable

    from jarvis.application.tools.catalogue import ToolContext
    from jarvis.application.tools.mcp_tools import McpToolSource
    from jarvis.application.tools.retrieval import MemorySearch
    from jarvis.domain.loop.base import BaseAgent
    from jarvis.domain.mcp import McpClientPort, McpServerSpec


def persona_tools(*, store: PersonaStorePort, config: JarvisConfig) -> list[ToolPort]:
    """``memory_manage`` and ``user_profile_manage`` over the default MEMORY.md / USER.md."""
    from jarvis.application.tools.persona_tools import persona_tools as tools_over

    budgets = config.system_prompt
    return [
        *tools_over(
            store,
            memory_max_chars=budgets.memory_max_chars,
            user_max_chars=budgets.user_max_chars,
        )
    ]


def memory(config: JarvisConfig) -> MemoryPort:
    """The SQLite FTS5 memory behind ``retrieval`` (opened on first use, not here)."""
    from jarvis.adapters.sqlite_memory.store import SqliteMemory
    from jarvis.entrypoints.composition.stores import file_notice

    configured = config.tools.retrieval.db_path
    path = config_dir() / (Path(configured).expanduser() if configured else Path("memory.db"))
    return SqliteMemory(str(path), notice=file_notice)


def web_search_tool(config: JarvisConfig) -> ToolPort:
    """The ``web_search`` tool on ``[tools.web_search] provider_url``."""
    return _web_search_tool(config.tools.web_search.provider_url, None)


def _web_search_tool(provider_url: str, _context: ToolContext | None) -> ToolPort:
    """Built when a run asks for ``web_search``, so httpx is imported only then."""
    import_httpx()
    from jarvis.adapters.httpx_web.web_search import WebSearchTool

    return WebSearchTool.from_settings(provider_url)


def repl_limits(repl: ReplSettings) -> ReplLimits:
    return ReplLimits(
        timeout_seconds=repl.timeout_seconds,
        cpu_seconds=repl.cpu_seconds,
        memory_mb=repl.memory_mb,
        max_processes=repl.max_processes,
        file_size_mb=repl.file_size_mb,
    )


class ReplOnDemand:
    """The isolated REPL (a ``ReplPort``), built on first use: a question that runs no code
    never imports the REPL adapter nor probes the OS for namespaces."""

    def __init__(self, config: JarvisConfig) -> None:
        self._settings = config.repl
        self._repl: ReplPort | None = None

    def _get(self) -> ReplPort:
        if self._repl is None:
            from jarvis.adapters.subprocess_repl import SubprocessRepl

            settings = self._settings
            self._repl = SubprocessRepl(limits=repl_limits(settings), network=settings.network)
        return self._repl

    def isolation(self) -> ReplIsolation:
        return self._get().isolation()

    async def start(
        self, *, callbacks: ReplCallbacks | None = None, limits: ReplLimits | None = None
    ) -> ReplSession:
        return await self._get().start(callbacks=callbacks, limits=limits)


class PluginsOnDemand:
    """The plug-ins, whose module is imported only when a plug-in is first looked for (a
    question to built-in agents and tools never imports it)."""

    def __init__(self, modules: tuple[str, ...]) -> None:
        self._modules = modules
        self._source: PluginSource | None = None

    def _get(self) -> PluginSource:
        if self._source is None:
            from jarvis.entrypoints.plugins import InstalledPlugins

            self._source = InstalledPlugins(self._modules)
        return self._source

    def agent_names(self) -> list[str]:
        return self._get().agent_names()

    def load_agent(self, name: str) -> type[BaseAgent]:
        return self._get().load_agent(name)

    def tool_names(self) -> list[str]:
        return self._get().tool_names()

    def load_tool(self, name: str) -> ToolPort:
        return self._get().load_tool(name)

    def failures(self) -> list[PluginError]:
        return self._get().failures()


def plugins(config: JarvisConfig) -> PluginSource:
    return PluginsOnDemand(config.plugins.modules)


def agents(plugins: PluginSource) -> AgentRegistry:
    """The built-in agents, and the plug-ins' for a key none of them has."""
    registry = builtin_agents()
    registry.use_plugins(plugins)
    return registry


def _report_line(line: str) -> None:
    """One line on stderr for a fault that a run survives (an MCP server's: its message,
    its stderr's tail and its tool names are the server's text, filtered on a terminal)."""
    from jarvis.entrypoints.terminal_text import write_stderr

    write_stderr(f"jarvis: {line}\n")


def _mcp_client(spec: McpServerSpec) -> McpClientPort:
    """A connection to one MCP server through the ``mcp`` SDK (imported only now)."""
    try:
        from jarvis.adapters.mcp_sdk import McpSdkClient
    except ImportError as exc:
        raise ConfigurationError(
            f"MCP server '{spec.name}' needs the mcp package ({exc}).",
            hint="pip install 'jarvis[mcp]'",
        ) from None
    return McpSdkClient(spec)


def mcp_tools(config: JarvisConfig) -> McpToolSource | None:
    """The configured MCP servers (``[mcp.servers]``, ``[tools.mcp]``), none started yet;
    an HTTP server's URL obeys the same rules as an engine's."""
    from jarvis.application.mcp_config import mcp_servers
    from jarvis.application.tools.mcp_tools import McpToolSource

    entries = mcp_servers(config.mcp, config.tools.mcp)
    if not entries:
        return None
    for entry in entries:
        if entry.spec.url:
            check_url(entry.spec.url, f"[mcp.servers.{entry.name}] url")
    return McpToolSource(entries, _mcp_client, report=_report_line)


def tool_catalogue(
    *,
    persona_tools: list[ToolPort],
    user_tools: list[ToolPort],
    memory: MemorySearch,
    repl: ReplPort,
    config: JarvisConfig,
    plugins: PluginSource | None = None,
    mcp: McpToolSource | None = None,
) -> ToolProvider:
    """calculator, think, llm, retrieval, file_read, web_search, code_interpreter, the
    persona tools and the tools an embedding app registered."""
    from jarvis.adapters.filesystem_tools.file_read import FileReadTool
    from jarvis.adapters.httpx_web.tool_spec import WEB_SEARCH_SPEC
    from jarvis.application.tools.catalogue import ToolCatalogue
    from jarvis.application.tools.code_interpreter import CodeInterpreterTool

    tools = config.tools
    catalogue = ToolCatalogue.with_builtins(
        memory=memory,
        file_read=FileReadTool(tools.file_read.roots),
        llm_model=tools.llm.model or None,
    )
    catalogue.register_factory(
        WEB_SEARCH_SPEC, partial(_web_search_tool, tools.web_search.provider_url)
    )
    catalogue.register(CodeInterpreterTool(repl, limits=repl_limits(config.repl)))
    for tool in [*persona_tools, *user_tools]:
        catalogue.register(tool)
    if plugins is not None:
        catalogue.use_plugins(plugins)
    if mcp is not None:
        catalogue.attach_mcp(mcp)
    return catalogue


class ToolsOnDemand:
    """The tool catalogue, resolved when a question needs tools (and only then).

    Asking an agent that takes no tools never builds the catalogue nor imports any tool.
    """

    def __init__(self, provide: Callable[[], ToolProvider | None]) -> None:
        self._provide = provide

    def build(
        self, names: Sequence[str], *, inference: InferencePort, model: str
    ) -> list[ToolPort]:
        catalogue = self._provide()
        if catalogue is None:
            raise ConfigurationError("No tool catalogue is configured.")
        return catalogue.build(names, inference=inference, model=model)

    async def prepare(self, names: Sequence[str]) -> None:
        catalogue = self._provide()
        if catalogue is not None:
            await catalogue.prepare(names)
