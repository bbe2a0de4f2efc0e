"""The composition root: the one dependency-injector container, the only importer of adapters.

Everything jarvis runs on is built here, from the validated configuration:

* ``config``: the merged configuration (file, environment, options), loaded with
  :func:`configure` after the engine choice has been resolved.
* ``ollama``, ``vllm``, ``openai``, ``llamacpp``: one singleton per engine adapter; an adapter
  module is imported only when its engine is built, so start-up stays small.
* ``inference``: the engine selected by ``config.engine.name``. Tests and embedding apps
  replace it with ``container.inference.override(fake)``.
* ``bus``, ``agents``: the event bus and the agent registry.
* ``memory``, ``user_tools``, ``tools``: the SQLite memory behind ``retrieval``, the tools an
  embedding app registered, and the tool catalogue (built-ins, ``file_read`` confined to
  ``[tools.file_read] roots``, ``web_search`` built on first use, persona and user tools).
* ``persona_store``, ``prompt_builder``, ``persona``: the persona files in the config dir
  and the builder of the SOUL / MEMORY / USER sections every agent gets.
* ``repl``: the isolated Python REPL (``[repl]``) of ``code_interpreter``,
  ``native_openhands`` and ``rlm``, built on first use.
* ``ask_service``: the use case the CLI and the SDK call.
* ``sessions``: the conversation store (``[sessions]``: SQLite, PostgreSQL or JSON lines),
  its adapter imported when a conversation first needs it.

Engine choice ``auto`` is resolved before anything is built (:func:`choose_engine`): the
configured engine, else a local Ollama that answers, else the embedded model. An engine
chosen explicitly is never replaced by another one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from jarvis.application.ask import AskService, PersonaPrompt, ToolProvider
from jarvis.application.registry import AgentRegistry, builtin_agents
from jarvis.domain.errors import ConfigurationError, EngineUnavailableError
from jarvis.domain.events import EventBus
from jarvis.entrypoints._lean_imports import import_dependency_injector, import_httpx

import_dependency_injector()  # without the integrations it probes for (see _lean_imports)

from dependency_injector import containers, providers  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from jarvis.application.ask import AskQuestion
    from jarvis.application.config import JarvisConfig
    from jarvis.application.sandboxed_ask import SandboxedAgents
    from jarvis.application.system_prompt import SystemPromptBuilder
    from jarvis.application.tools.catalogue import ToolContext
    from jarvis.domain.agents.base import BaseAgent
    from jarvis.domain.ports import (
        ContainerPort,
        InferencePort,
        MemoryPort,
        PersonaStorePort,
        ReplPort,
        ReplSession,
        SessionStorePort,
        ToolPort,
    )
    from jarvis.domain.repl import ReplCallbacks, ReplIsolation, ReplLimits

OLLAMA_PROBE_TIMEOUT = 0.3
"""Seconds ``auto`` waits for a local Ollama before using the embedded model."""


class OpenedEngines:
    """The engines one container has built, so that they can all be closed at the end."""

    def __init__(self) -> None:
        self.engines: list[InferencePort] = []

    def add(self, engine: InferencePort) -> InferencePort:
        self.engines.append(engine)
        return engine

    async def aclose(self) -> None:
        engines, self.engines = self.engines, []
        for engine in reversed(engines):
            await engine.aclose()


def _ollama_engine(
    *, opened: OpenedEngines, host: str, timeout: float, max_retries: int, num_ctx: int | None
) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.ollama import OllamaEngine

    return opened.add(OllamaEngine(host, timeout=timeout, max_retries=max_retries, num_ctx=num_ctx))


def _vllm_engine(
    *, opened: OpenedEngines, base_url: str, api_key: str | None, timeout: float, max_retries: int
) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.vllm import VllmEngine

    return opened.add(
        VllmEngine(base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)
    )


def _openai_engine(
    *, opened: OpenedEngines, base_url: str, api_key: str | None, timeout: float, max_retries: int
) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine

    return opened.add(
        OpenAICompatibleEngine(
            base_url, api_key=api_key, engine_id="openai", timeout=timeout, max_retries=max_retries
        )
    )


def _llamacpp_engine(
    *,
    opened: OpenedEngines,
    model_path: str,
    n_ctx: int,
    n_threads: int | None,
    timeout: float,
) -> InferencePort:
    from jarvis.adapters.inference.llamacpp import LlamaCppEngine

    return opened.add(
        LlamaCppEngine(model_path or None, n_ctx=n_ctx, n_threads=n_threads, timeout=timeout)
    )


def _persona_store(
    *, memory_files: dict[str, object], system_prompt: dict[str, object]
) -> PersonaStorePort:
    from jarvis.adapters.persona_files.store import FilesystemPersonaStore
    from jarvis.application.config import MemoryFilesSettings, SystemPromptSettings, from_data
    from jarvis.application.system_prompt import read_limit_bytes
    from jarvis.entrypoints.settings import config_dir

    files = from_data(MemoryFilesSettings, memory_files)
    return FilesystemPersonaStore(
        config_dir(),
        soul_path=files.soul_path or None,
        memory_path=files.memory_path or None,
        user_path=files.user_path or None,
        max_read_bytes=read_limit_bytes(from_data(SystemPromptSettings, system_prompt)),
    )


def _prompt_builder(
    *, store: PersonaStorePort, memory_files: dict[str, object], system_prompt: dict[str, object]
) -> SystemPromptBuilder:
    from jarvis.application.config import MemoryFilesSettings, SystemPromptSettings, from_data
    from jarvis.application.system_prompt import SystemPromptBuilder

    return SystemPromptBuilder(
        store,
        from_data(SystemPromptSettings, system_prompt),
        from_data(MemoryFilesSettings, memory_files),
    )


def _persona_prompt(builder: SystemPromptBuilder) -> PersonaPrompt:
    return builder


def _persona_tools(*, store: PersonaStorePort, system_prompt: dict[str, object]) -> list[ToolPort]:
    """``memory_manage`` and ``user_profile_manage`` over the default MEMORY.md / USER.md."""
    from jarvis.application.config import SystemPromptSettings, from_data
    from jarvis.application.tools.persona_tools import persona_tools

    budgets = from_data(SystemPromptSettings, system_prompt)
    return [
        *persona_tools(
            store,
            memory_max_chars=budgets.memory_max_chars,
            user_max_chars=budgets.user_max_chars,
        )
    ]


def _memory(*, retrieval: dict[str, object]) -> MemoryPort:
    """The SQLite FTS5 memory behind ``retrieval`` (opened on first use, not here)."""
    from pathlib import Path

    from jarvis.adapters.sqlite_memory.store import SqliteMemory
    from jarvis.application.config import RetrievalSettings, from_data
    from jarvis.entrypoints.settings import config_dir

    configured = from_data(RetrievalSettings, retrieval).db_path
    path = config_dir() / (Path(configured).expanduser() if configured else Path("memory.db"))
    return SqliteMemory(str(path))


def _web_search_tool(provider_url: str, _context: ToolContext) -> ToolPort:
    """Built when a run asks for ``web_search``, so httpx is imported only then."""
    import_httpx()
    from jarvis.adapters.httpx_web.web_search import WebSearchTool

    return WebSearchTool.from_settings(provider_url)


def _repl_limits(settings: dict[str, object]) -> ReplLimits:
    from jarvis.application.config import ReplSettings, from_data
    from jarvis.domain.repl import ReplLimits

    repl = from_data(ReplSettings, settings)
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

    def __init__(self, settings: dict[str, object]) -> None:
        self._settings = settings
        self._repl: ReplPort | None = None

    def _get(self) -> ReplPort:
        if self._repl is None:
            from jarvis.adapters.subprocess_repl import SubprocessRepl
            from jarvis.application.config import ReplSettings, from_data

            network = from_data(ReplSettings, self._settings).network
            self._repl = SubprocessRepl(limits=_repl_limits(self._settings), network=network)
        return self._repl

    def isolation(self) -> ReplIsolation:
        return self._get().isolation()

    async def start(
        self, *, callbacks: ReplCallbacks | None = None, limits: ReplLimits | None = None
    ) -> ReplSession:
        return await self._get().start(callbacks=callbacks, limits=limits)


def _tool_catalogue(
    *,
    persona_tools: list[ToolPort],
    user_tools: list[ToolPort],
    memory: MemoryPort,
    settings: dict[str, object],
    repl: ReplPort,
    repl_settings: dict[str, object],
) -> ToolProvider:
    """calculator, think, llm, retrieval, file_read, web_search, code_interpreter, the
    persona tools and the tools an embedding app registered."""
    from functools import partial

    from jarvis.adapters.filesystem_tools.file_read import FileReadTool
    from jarvis.adapters.httpx_web.tool_spec import WEB_SEARCH_SPEC
    from jarvis.application.config import ToolSettings, from_data
    from jarvis.application.tools.catalogue import ToolCatalogue
    from jarvis.application.tools.code_interpreter import CodeInterpreterTool

    tools = from_data(ToolSettings, settings)
    catalogue = ToolCatalogue.with_builtins(
        memory=memory,
        file_read=FileReadTool(tools.file_read.roots),
        llm_model=tools.llm.model or None,
    )
    catalogue.register_factory(
        WEB_SEARCH_SPEC, partial(_web_search_tool, tools.web_search.provider_url)
    )
    catalogue.register(CodeInterpreterTool(repl, limits=_repl_limits(repl_settings)))
    for tool in [*persona_tools, *user_tools]:
        catalogue.register(tool)
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


def _image_progress(line: str) -> None:
    """Image build progress, on stderr (stdout carries the answer)."""
    import sys

    if sys.stderr is not None:
        sys.stderr.write(f"jarvis: {line}\n")
        sys.stderr.flush()


def _container_runtime(*, settings: dict[str, object], opened: list[object]) -> ContainerPort:
    """Docker or Podman through its API socket (``[sandbox]``); contacted on first use."""
    from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
    from jarvis.application.config import SandboxSettings, from_data

    sandbox = from_data(SandboxSettings, settings)
    runtime = DockerContainerRuntime(
        ContainerSettings(
            runtime=sandbox.runtime,
            socket=sandbox.socket,
            image=sandbox.image,
            max_concurrent=sandbox.max_concurrent,
            default_timeout=sandbox.timeout,
        )
    )
    opened.append(runtime)
    return runtime


def _sandboxed_agents(
    *, containers: Callable[[], ContainerPort], settings: dict[str, object]
) -> SandboxedAgents:
    """The ``sandboxed`` agent's runner, built when a question first asks for it."""
    from jarvis.application.config import SandboxSettings, from_data
    from jarvis.application.sandbox_runner import ContainerRunner
    from jarvis.application.sandboxed_ask import SandboxedAgents
    from jarvis.domain.sandbox import SandboxLimits
    from jarvis.entrypoints.settings import config_dir

    sandbox = from_data(SandboxSettings, settings)
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


def _session_store(*, settings: dict[str, object], opened: list[object]) -> SessionStorePort:
    """The ``[sessions]`` store; its adapter (and sqlite3 or psycopg) is imported only here,
    so a question asked without a conversation loads none of it."""
    from pathlib import Path

    from jarvis.application.config import SessionSettings, from_data
    from jarvis.entrypoints.settings import config_dir

    chosen = from_data(SessionSettings, settings)
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
    opened.append(store)
    return store


class Container(containers.DeclarativeContainer):
    """The object graph of jarvis. Load it with :func:`configure` before resolving engines."""

    config = providers.Configuration(strict=True)

    bus: providers.Provider[EventBus] = providers.Singleton(EventBus)
    agents: providers.Provider[AgentRegistry] = providers.Singleton(builtin_agents)

    opened: providers.Singleton[OpenedEngines] = providers.Singleton(OpenedEngines)
    ollama: providers.Singleton[InferencePort] = providers.Singleton(
        _ollama_engine,
        opened=opened,
        host=config.engine.ollama.host,
        timeout=config.engine.timeout,
        max_retries=config.engine.max_retries,
        num_ctx=config.engine.ollama.num_ctx,
    )
    vllm: providers.Singleton[InferencePort] = providers.Singleton(
        _vllm_engine,
        opened=opened,
        base_url=config.engine.vllm.base_url,
        api_key=config.engine.vllm.api_key,
        timeout=config.engine.timeout,
        max_retries=config.engine.max_retries,
    )
    openai: providers.Singleton[InferencePort] = providers.Singleton(
        _openai_engine,
        opened=opened,
        base_url=config.engine.openai.base_url,
        api_key=config.engine.openai.api_key,
        timeout=config.engine.timeout,
        max_retries=config.engine.max_retries,
    )
    llamacpp: providers.Singleton[InferencePort] = providers.Singleton(
        _llamacpp_engine,
        opened=opened,
        model_path=config.engine.llamacpp.model_path,
        n_ctx=config.engine.llamacpp.n_ctx,
        n_threads=config.engine.llamacpp.n_threads,
        timeout=config.engine.timeout,
    )
    inference: providers.Provider[InferencePort] = providers.Selector(
        config.engine.name,
        ollama=ollama,
        vllm=vllm,
        openai=openai,
        llamacpp=llamacpp,
    )

    persona_store: providers.Provider[PersonaStorePort] = providers.Singleton(
        _persona_store, memory_files=config.memory_files, system_prompt=config.system_prompt
    )
    """SOUL.md, MEMORY.md, USER.md and ``personas/`` in the config dir (read per call)."""
    persona_tools: providers.Provider[list[ToolPort]] = providers.Singleton(
        _persona_tools, store=persona_store, system_prompt=config.system_prompt
    )
    """``memory_manage`` and ``user_profile_manage`` (always the default files)."""
    memory: providers.Provider[MemoryPort] = providers.Singleton(
        _memory, retrieval=config.tools.retrieval
    )
    """The searchable memory of the ``retrieval`` tool (``[tools.retrieval] db_path``)."""
    user_tools: providers.Provider[list[ToolPort]] = providers.Singleton(list)
    """Tools an embedding app registered (``Jarvis(tools=...)``) before the first question."""
    repl: providers.Provider[ReplPort] = providers.Singleton(_ReplOnDemand, settings=config.repl)
    """The isolated Python REPL factory (``[repl]``); tests may override it with
    ``jarvis.testing.InMemoryRepl``."""
    tools: providers.Provider[ToolProvider | None] = providers.Singleton(
        _tool_catalogue,
        persona_tools=persona_tools,
        user_tools=user_tools,
        memory=memory,
        settings=config.tools,
        repl=repl,
        repl_settings=config.repl,
    )
    """The tool catalogue (``ToolProvider``); override with ``providers.Object(None)`` for no
    tools at all."""
    prompt_builder: providers.Provider[SystemPromptBuilder] = providers.Singleton(
        _prompt_builder,
        store=persona_store,
        memory_files=config.memory_files,
        system_prompt=config.system_prompt,
    )
    persona: providers.Provider[PersonaPrompt | None] = providers.Singleton(
        _persona_prompt, prompt_builder
    )
    """The persona sections for a selection (``PersonaPrompt``); override with
    ``providers.Object(None)`` for no persona at all."""

    opened_containers: providers.Singleton[list[object]] = providers.Singleton(list)
    container_runtime: providers.Singleton[ContainerPort] = providers.Singleton(
        _container_runtime, settings=config.sandbox, opened=opened_containers
    )
    """Docker or Podman (``[sandbox]``); tests override it with a fake or a private Podman."""
    sandbox: providers.Provider[SandboxedAgents] = providers.Singleton(
        _sandboxed_agents, containers=container_runtime.provider, settings=config.sandbox
    )

    opened_stores: providers.Singleton[list[object]] = providers.Singleton(list)
    sessions: providers.Provider[SessionStorePort] = providers.Singleton(
        _session_store, settings=config.sessions, opened=opened_stores
    )
    """The conversation store (``[sessions]``); tests override it with
    ``jarvis.testing.InMemorySessionStore``."""

    ask_service: providers.Provider[AskService] = providers.Factory(
        AskService,
        registry=agents,
        inference=inference,
        default_agent=config.agent.default,
        default_model=config.engine.model,
        tools=providers.Factory(_ToolsOnDemand, tools.provider),
        default_tools=config.tools.enabled,
        persona=persona,
        bus=bus,
        repl=repl,
        default_max_turns=config.agent.max_turns,
        sandbox=providers.Factory(_SandboxOnDemand, sandbox.provider),
    )


def container_or_new(candidate: object) -> Container:
    """``candidate`` if it is a :class:`Container` (e.g. a test's, with overrides), else a new one.

    ``Container()`` builds a dependency-injector *dynamic* container whose
    ``declarative_parent`` is :class:`Container`, so ``isinstance`` cannot tell.
    """
    if getattr(candidate, "declarative_parent", None) is Container:
        return candidate  # type: ignore[return-value]  # checked just above
    return Container()


# --- engine choice ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineChoice:
    """Which engine a run uses, where it is, and why it was chosen."""

    name: str
    url: str
    reason: str


def engine_location(config: JarvisConfig, name: str) -> str:
    """The URL of engine ``name`` (the model file for the embedded engine)."""
    engine = config.engine
    if name == "ollama":
        return engine.ollama.host
    if name == "vllm":
        return engine.vllm.base_url
    if name == "openai":
        return engine.openai.base_url
    if name == "llamacpp":
        if engine.llamacpp.model_path:
            return engine.llamacpp.model_path
        from jarvis.adapters.inference.llamacpp import default_model_path

        return default_model_path()
    return ""


async def choose_engine(config: JarvisConfig) -> EngineChoice:
    """Resolve ``auto``: the configured engine, else a reachable Ollama, else the embedded one."""
    name = config.engine.name
    if name != "auto":
        return EngineChoice(
            name=name,
            url=engine_location(config, name),
            reason="chosen by --engine or [engine] name",
        )
    import_httpx()
    from jarvis.adapters.inference.probe import ollama_reachable

    host = config.engine.ollama.host
    if await ollama_reachable(host, timeout=OLLAMA_PROBE_TIMEOUT):
        return EngineChoice(
            name="ollama", url=host, reason=f"auto: a local Ollama answered at {host}"
        )
    try:
        model_file = engine_location(config, "llamacpp")
    except ConfigurationError as exc:
        raise EngineUnavailableError(
            f"No engine available: no Ollama answers at {host} and the embedded model "
            "is not installed.",
            engine="auto",
            url=host,
            hint="Start Ollama (`ollama serve`), choose an engine with --engine and "
            "--base-url, or install the embedded model: " + exc.hint,
        ) from exc
    return EngineChoice(
        name="llamacpp",
        url=model_file,
        reason=f"auto: no engine configured and no Ollama answering at {host}; "
        "using the embedded model",
    )


def configure(container: Container, config: JarvisConfig, *, engine: str | None = None) -> None:
    """Load ``config`` into the container, with ``engine`` as the (resolved) engine name."""
    data = asdict(config)
    if engine is not None:
        data["engine"]["name"] = engine
    container.config.from_dict(data)


async def aclose_engines(container: Container) -> None:
    """Close every engine this container built and forget them (idempotent)."""
    await container.opened().aclose()
    forget_engines(container)
    opened = container.opened_containers()
    while opened:  # the container runtime's API client (its containers are gone already)
        close = getattr(opened.pop(), "close", None)
        if callable(close):
            close()
    container.container_runtime.reset()
    stores = container.opened_stores()
    while stores:  # the session store's connection (reopened by a later call)
        close = getattr(stores.pop(), "close", None)
        if callable(close):
            close()


def forget_engines(container: Container) -> None:
    """Forget the engines built, without closing them (their event loop is gone)."""
    container.opened().engines.clear()
    for engine in (container.ollama, container.vllm, container.openai, container.llamacpp):
        engine.reset()


_LOOP_BOUND_ENGINES = ("ollama", "vllm", "openai")
"""Engines whose pooled HTTP client belongs to the event loop it was first used on."""


def loop_engine(container: Container, name: str, *, opened: OpenedEngines) -> InferencePort | None:
    """A new instance of engine ``name``, as the container builds its own, for one more event
    loop (added to ``opened``, which the caller closes on that loop); ``None`` when the
    container's engine serves every loop: the embedded engine (it runs in threads, and a
    second instance would load the model twice) or an engine a test or an app provided."""
    if name not in _LOOP_BOUND_ENGINES:
        return None
    provider: providers.Singleton[InferencePort] = getattr(container, name)
    if provider.last_overriding is not None:
        return None
    build = providers.Factory(provider.provides, *provider.args, **provider.kwargs)
    engine: InferencePort = build(opened=opened)
    return engine
