"""The one dependency-injector container: every provider jarvis runs on.

Each provider reads the typed :class:`~jarvis.application.config.JarvisConfig` (mypy checks
every key) and is built from the functions of this package's modules: :mod:`.engines`,
:mod:`.tools`, :mod:`.prompting`, :mod:`.traces`, :mod:`.stores`, :mod:`.runtimes` and the
use cases of :mod:`.services`. Nothing is built before it is used.

* ``config``: the merged configuration (file, environment, options), a ``Dependency``
  that :func:`~jarvis.entrypoints.composition.bootstrap` provides.
* ``engine_choice``: which engine runs (:class:`~jarvis.entrypoints.engine_choice.EngineChoice`),
  provided when the runtime has chosen (on the first question); ``ollama_probe`` and
  ``model_locator`` are what the choice asks the machine (tests override them).
* ``ollama``, ``vllm``, ``openai``, ``llamacpp``: one ``Resource`` per engine adapter, closed
  by ``shutdown_resources()``; ``inference``: the engine selected by ``engine_choice``.
* ``bus``, ``agents``, ``plugins``: the event bus, the agent registry and the plug-ins.
* ``memory``, ``user_tools``, ``mcp_tools``, ``tools``: the tool catalogue and its parts.
* ``file_watch``, ``persona_store``, ``prompt_builder``, ``persona``, ``prompt_context``: the
  persona files, ``AGENTS.md`` and the Agent Skills every agent's prompt gets.
* ``repl``: the isolated Python REPL (``[repl]``), built on first use.
* ``trace_writer``, ``trace_store``: saving and reading traces.
* ``sessions``, ``operator_store``, ``managed_agent_store``, ``keyword_index``,
  ``embeddings``: the stores (:mod:`.stores`).
* ``container_runtime``, ``sandbox``, ``external_runtimes``: what runs outside the process.
* ``ask_service``, ``conversation_service``, ``operator_service``, ``managed_agent_service``:
  the use cases (what is per event loop, the ask service, given by the
  :class:`~jarvis.entrypoints.composition.runtime.Runtime`).

To add a provider: a function in the module of its kind that takes what it builds from
(``config: JarvisConfig``, other providers) and imports a heavy adapter inside, so that
nothing is imported before it is needed; a ``providers.Resource`` over a generator when
what it builds must be closed. Callers reach it through a method of the ``Runtime``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jarvis.application.config import JarvisConfig
from jarvis.domain.ports import InferencePort
from jarvis.entrypoints.composition import (
    engines,
    knowledge,
    prompting,
    runtimes,
    services,
    stores,
)
from jarvis.entrypoints.composition import tools as tooling
from jarvis.entrypoints.composition import traces as tracing
from jarvis.entrypoints.composition.di import containers, providers
from jarvis.entrypoints.engine_choice import EngineChoice, ModelLocator, OllamaProbe

if TYPE_CHECKING:
    from collections.abc import Callable

    from jarvis.adapters.claude_agent_sdk import LoopbackEndpoint
    from jarvis.adapters.inotify_watch import InotifyWatch
    from jarvis.application.ask import AskService, PersonaPrompt, PromptContext, ToolProvider
    from jarvis.application.conversation import ConversationService
    from jarvis.application.managed_agents import ManagedAgentService
    from jarvis.application.operators import OperatorService
    from jarvis.application.plugins import PluginSource
    from jarvis.application.registry import AgentRegistry
    from jarvis.application.sandboxed_ask import SandboxedAgents
    from jarvis.application.system_prompt import SystemPromptBuilder
    from jarvis.application.tools.mcp_tools import McpToolSource
    from jarvis.application.tools.retrieval import MemorySearch
    from jarvis.application.trace_writer import TraceWriter
    from jarvis.domain.external_runtime import ExternalRuntimesPort
    from jarvis.domain.managed_agents import ManagedAgentStorePort
    from jarvis.domain.ports import (
        ContainerPort,
        EmbeddingPort,
        MemoryPort,
        OperatorStorePort,
        PersonaStorePort,
        ReplPort,
        SessionStorePort,
        ToolPort,
        TraceStorePort,
    )
    from jarvis.domain.run.events import EventBus


def _chosen_engine(choice: EngineChoice) -> str:
    return choice.name


class Container(containers.DeclarativeContainer):
    """The object graph of jarvis, built by :func:`~jarvis.entrypoints.composition.bootstrap`."""

    config: providers.Dependency[JarvisConfig] = providers.Dependency(instance_of=JarvisConfig)
    """The whole configuration, typed; every provider reads the attributes it needs."""
    engine_choice: providers.Dependency[EngineChoice] = providers.Dependency(
        instance_of=EngineChoice
    )
    """The engine the runtime chose (or was given) on the first question."""
    ollama_probe: providers.Provider[OllamaProbe] = providers.Object(engines.probe_ollama)
    model_locator: providers.Provider[ModelLocator] = providers.Object(engines.embedded_model_file)

    trace_writer: providers.Provider[TraceWriter | None] = providers.Singleton(
        tracing.trace_writer, config
    )
    """Saves the traces of this container's runs (``None``: traces and telemetry are off)."""
    trace_store: providers.Provider[TraceStorePort] = providers.Singleton(
        tracing.trace_store, config
    )
    """Where ``jarvis traces`` and ``jarvis stats`` read (``[traces] db_path``)."""
    bus: providers.Provider[EventBus] = providers.Singleton(tracing.event_bus, config, trace_writer)
    plugins: providers.Provider[PluginSource] = providers.Singleton(tooling.plugins, config)
    """Installed packages' entry points and ``[plugins] modules``, read when first needed."""
    agents: providers.Provider[AgentRegistry] = providers.Singleton(tooling.agents, plugins)

    ollama: providers.Resource[InferencePort] = providers.Resource(
        engines.OpenedEngine, engines.ollama_engine, config
    )
    vllm: providers.Resource[InferencePort] = providers.Resource(
        engines.OpenedEngine, engines.vllm_engine, config
    )
    openai: providers.Resource[InferencePort] = providers.Resource(
        engines.OpenedEngine, engines.openai_engine, config
    )
    llamacpp: providers.Resource[InferencePort] = providers.Resource(
        engines.OpenedEngine, engines.llamacpp_engine, config
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

    file_watch: providers.Provider[InotifyWatch] = providers.Singleton(prompting.file_watch)
    """The one watch over the files every prompt is read from (persona, ``AGENTS.md``,
    skills): what they read is kept until one of them changes."""
    persona_store: providers.Provider[PersonaStorePort] = providers.Singleton(
        prompting.persona_store, config, file_watch
    )
    """SOUL.md, MEMORY.md, USER.md and ``personas/`` in the config dir (read per call)."""
    persona_tools: providers.Provider[list[ToolPort]] = providers.Singleton(
        tooling.persona_tools, store=persona_store, config=config
    )
    """``memory_manage`` and ``user_profile_manage`` (always the default files)."""
    memory: providers.Provider[MemoryPort] = providers.Singleton(tooling.memory, config)
    """The searchable memory of the ``retrieval`` tool (``[tools.retrieval] db_path``)."""
    searchable_memory: providers.Provider[MemorySearch] = providers.Singleton(
        knowledge.searchable, config, memory
    )
    """What ``retrieval`` searches: the knowledge base of ``jarvis memory`` in that file."""
    user_tools: providers.Provider[list[ToolPort]] = providers.Singleton(list)
    """Tools an embedding app registered (``Jarvis(tools=...)``) before the first question."""
    repl: providers.Provider[ReplPort] = providers.Singleton(tooling.ReplOnDemand, config)
    """The isolated Python REPL factory (``[repl]``); tests may override it with
    ``jarvis.testing.InMemoryRepl``."""
    mcp_tools: providers.Provider[McpToolSource | None] = providers.Singleton(
        tooling.mcp_tools, config
    )
    """The MCP servers whose tools the catalogue offers (each started on first use, all
    stopped when the runtime closes); tests override it with fakes."""
    tools: providers.Provider[ToolProvider | None] = providers.Singleton(
        tooling.tool_catalogue,
        persona_tools=persona_tools,
        user_tools=user_tools,
        memory=searchable_memory,
        repl=repl,
        config=config,
        plugins=plugins,
        mcp=mcp_tools,
    )
    """The tool catalogue (``ToolProvider``); override with ``providers.Object(None)`` for no
    tools at all."""
    prompt_builder: providers.Provider[SystemPromptBuilder] = providers.Singleton(
        prompting.prompt_builder, store=persona_store, config=config
    )
    persona: providers.Provider[PersonaPrompt | None] = providers.Singleton(
        prompting.persona_prompt, prompt_builder
    )
    """The persona sections for a selection (``PersonaPrompt``); override with
    ``providers.Object(None)`` for no persona at all."""
    prompt_context: providers.Provider[PromptContext | None] = providers.Singleton(
        prompting.prompt_context, config, searchable_memory.provider, file_watch
    )
    """The ``AGENTS.md`` files and Agent Skills every agent's prompt gets after the persona;
    override with ``providers.Object(None)`` for neither."""

    container_runtime: providers.Resource[ContainerPort] = providers.Resource(
        runtimes.container_runtime, config
    )
    """Docker or Podman (``[sandbox]``); tests override it with a fake or a private Podman."""
    sandbox: providers.Provider[SandboxedAgents] = providers.Singleton(
        runtimes.sandboxed_agents, containers=container_runtime.provider, config=config
    )
    loopback_endpoint: providers.Provider[Callable[[], LoopbackEndpoint | None]] = providers.Object(
        runtimes.loopback_endpoint
    )
    """Makes jarvis's Anthropic-compatible endpoint on loopback for ``claude_code``."""
    external_runtimes: providers.Provider[ExternalRuntimesPort] = providers.Resource(
        runtimes.external_runtimes, config, loopback_endpoint
    )
    """The external agents' runtimes; ``shutdown_resources()`` stops their processes."""

    sessions: providers.Provider[SessionStorePort] = providers.Resource(
        stores.session_store, config
    )
    """The conversation store (``[sessions]``); tests override it with
    ``jarvis.testing.InMemorySessionStore``."""
    operator_store: providers.Provider[OperatorStorePort] = providers.Singleton(
        stores.operator_store, sessions
    )
    """Operator state and leases (``jarvis operators``), in the ``sessions`` database; tests
    override it with ``jarvis.testing.operators.InMemoryOperatorStore``."""
    managed_agent_store: providers.Provider[ManagedAgentStorePort] = providers.Singleton(
        stores.managed_agent_store, sessions
    )
    """Managed agent definitions (``jarvis serve``), in the ``sessions`` database."""
    keyword_index: providers.Provider[Callable[[], MemoryPort]] = providers.Object(
        stores.keyword_index
    )
    embeddings: providers.Provider[EmbeddingPort | None] = providers.Singleton(stores.embeddings)
    """The sentence-embedding model (``MiniLMEmbeddings``, loaded on first use, once per
    process, on one BLAS thread); tests override it with
    ``jarvis.testing.embeddings.WordHashEmbeddings``."""

    ask_service: providers.Provider[AskService] = providers.Factory(
        services.ask_service,
        config=config,
        registry=agents,
        inference=inference,
        tools=providers.Factory(tooling.ToolsOnDemand, tools.provider),
        persona=persona,
        bus=bus,
        repl=repl,
        sandbox=providers.Factory(runtimes.SandboxOnDemand, sandbox.provider),
        runtimes=external_runtimes,
        context=prompt_context,
    )
    """The ask use case; asynchronous (``await container.ask_service.async_()``) while its
    engine is one of the container's resources."""
    operator_service: providers.Provider[OperatorService] = providers.Factory(
        services.operator_service,
        store=operator_store,
        sessions=sessions,
        registry=agents,
        keyword_index=keyword_index,
        embeddings=embeddings.provider,
    )
    """The operators use case (its ``asker`` given by the runtime, per event loop)."""
    conversation_service: providers.Provider[ConversationService] = providers.Factory(
        services.conversation_service, sessions=sessions, config=config
    )
    """The conversation use case (its ``ask`` service given by the runtime, per loop)."""
    managed_agent_service: providers.Provider[ManagedAgentService] = providers.Factory(
        services.managed_agent_service, agents=managed_agent_store, sessions=sessions, config=config
    )
    """The managed-agents use case of ``jarvis serve`` (its ``ask`` and ``limits`` given by
    the runtime)."""


def container_or_new(candidate: object) -> Container:
    """``candidate`` if it is a :class:`Container` (e.g. a test's, with overrides), else a new one.

    ``Container()`` builds a dependency-injector *dynamic* container whose
    ``declarative_parent`` is :class:`Container`, so ``isinstance`` cannot tell.
    """
    if getattr(candidate, "declarative_parent", None) is Container:
        return candidate  # type: ignore[return-value]  # checked just above
    return Container()


def inference_provided(container: Container) -> bool:
    """Whether a test or an application provided the engine (``inference`` overridden)."""
    return container.inference.last_overriding is not None
