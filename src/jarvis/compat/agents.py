"""OpenJarvis's agent classes: ``SimpleAgent(engine, model=..., temperature=0.7)``,
``OrchestratorAgent(..., tools=[...], max_turns=10)``, ``RLMAgent(..., sub_model=...)``...,
and a ``BaseAgent`` whose subclasses implement only a synchronous ``run()``.

Each built-in class builds the jarvis agent of its registry key from OpenJarvis's
constructor arguments (sampling, system prompt, tools, the agent's named options, checked
by jarvis's registry exactly as ``-O key=value`` is) and delegates every run to it, so
streaming, events and budgets are jarvis's. What a built agent needs besides the engine
(the isolated REPL of code-running agents, the external runtimes, the operator stores) comes
from jarvis's configuration, built when first needed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Self

from jarvis.application.no_engine import NoInference
from jarvis.compat.tool_stubs import BaseTool, as_tools
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.loop.base import BaseAgent as JarvisAgent
from jarvis.domain.loop.options import AgentOptions, AgentParts
from jarvis.domain.loop.settings import PromptSettings, SamplingSettings
from jarvis.domain.operators import OperatorBinding, check_operator_id
from jarvis.domain.ports import InferencePort, ToolPort
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.run.events import EventBus
from jarvis.domain.run.updates import RunUpdate
from jarvis.domain.run.well_formed import well_formed_result, well_formed_update

if TYPE_CHECKING:
    from jarvis.domain.external_runtime import ExternalRuntimePort
    from jarvis.domain.ports import MemoryPort, SessionStorePort
    from jarvis.entrypoints.composition import Runtime


class NoEngine(NoInference):
    """The engine of an agent given ``engine=None`` (external runtimes bring their own)."""

    def refusal(self) -> Exception:
        return ConfigurationError("This agent was built without an engine (engine=None).")


class BaseAgent(JarvisAgent):
    """OpenJarvis's ``BaseAgent``: a subclass implements a synchronous
    ``run(input, context=None, **kwargs)`` (or jarvis's ``async arun``), and is a jarvis
    agent as well: it can be registered and asked through the registry, the CLI and the
    server (a synchronous ``run`` runs in a worker thread there)."""

    agent_id: ClassVar[str] = "custom"

    def __init__(
        self,
        engine: InferencePort | None,
        model: str,
        *,
        bus: EventBus | None = None,
        temperature: float = 0.7,
        max_tokens: int = 1024,
    ) -> None:
        super().__init__(
            engine if engine is not None else NoEngine(),
            model,
            sampling=SamplingSettings(temperature=temperature, max_tokens=max_tokens),
            bus=bus,
        )
        self.engine = self.inference

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        sampling = parts.sampling or cls.default_sampling
        agent = cls(
            parts.inference,
            parts.model,
            bus=parts.bus,
            temperature=sampling.temperature,
            max_tokens=sampling.max_tokens,
        )
        agent.prompts = parts.prompts
        return agent

    def run(self, input: str, context: AgentContext | None = None, **kwargs: object) -> AgentResult:
        if type(self).arun is BaseAgent.arun:
            raise NotImplementedError(f"{type(self).__name__} implements neither run() nor arun().")
        return asyncio.run(self.arun(input, context))

    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        if type(self).run is BaseAgent.run:
            raise NotImplementedError(f"{type(self).__name__} implements neither run() nor arun().")
        return await asyncio.to_thread(self.run, input, context)


class ToolUsingAgent(BaseAgent):
    """OpenJarvis's ``ToolUsingAgent``: a :class:`BaseAgent` that takes tools and a turn
    limit (``self.tools``, ``self.max_turns``) for a subclass's own loop."""

    accepts_tools: ClassVar[bool] = True

    def __init__(
        self,
        engine: InferencePort | None,
        model: str,
        *,
        tools: Sequence[ToolPort | BaseTool] | None = None,
        bus: EventBus | None = None,
        max_turns: int = 10,
        temperature: float = 0.7,
        max_tokens: int = 1024,
    ) -> None:
        super().__init__(engine, model, bus=bus, temperature=temperature, max_tokens=max_tokens)
        if max_turns < 1:
            raise ConfigurationError("max_turns must be at least 1.")
        self.tools = list(_real_tools(tools))
        self.max_turns = max_turns


class _Services:
    """jarvis's runtime for what built agents need besides the engine, made on first use."""

    def __init__(self) -> None:
        self._runtime: Runtime | None = None

    def runtime(self) -> Runtime:
        if self._runtime is None:
            from jarvis.entrypoints.composition import bootstrap
            from jarvis.entrypoints.settings import load_config

            self._runtime = bootstrap(load_config())
        return self._runtime


class _LazyRuntimes:
    """The external runtimes (opencode, openhands, claude_code), built on the first run."""

    def __init__(self, services: _Services) -> None:
        self._services = services

    def get(self, runtime_id: str) -> ExternalRuntimePort:
        return self._services.runtime().external_runtimes().get(runtime_id)


_RENAMED_OPTIONS = {"session_id": "session"}
"""OpenJarvis's constructor arguments that jarvis's options name otherwise."""


def _options(given: dict[str, JSONValue]) -> JSONObject:
    """OpenJarvis's keyword arguments as jarvis's named options: a list of tool names is
    jarvis's comma list; ``None`` means "the default" and is left out."""
    options: JSONObject = {}
    for key, value in given.items():
        if value is None:
            continue
        if isinstance(value, list):
            value = ",".join(str(item) for item in value)
        options[_RENAMED_OPTIONS.get(key, key)] = value
    return options


def _real_tools(tools: Sequence[object] | None) -> tuple[ToolPort, ...]:
    """The tools given (``BaseTool`` ones made jarvis tools); the documentation's
    ``tools=[...]`` placeholder stands for none."""
    return as_tools(tools)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Given:
    """The constructor arguments every built agent takes (``None``: the agent's default)."""

    tools: Sequence[ToolPort | BaseTool] | None = None
    bus: EventBus | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    system_prompt: str | None = None


class BuiltAgent(JarvisAgent):
    """An OpenJarvis-style constructor over jarvis's agent ``key`` of the registry."""

    key: ClassVar[str] = "simple"

    def __init__(
        self,
        engine: InferencePort | None,
        model: str = "",
        *,
        tools: Sequence[ToolPort | BaseTool] | None = None,
        bus: EventBus | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        system_prompt: str | None = None,
        **options: JSONValue,
    ) -> None:
        given = _Given(
            tools=tools,
            bus=bus,
            temperature=temperature,
            max_tokens=max_tokens,
            system_prompt=system_prompt,
        )
        self._setup(engine, model, given, options)

    def _setup(
        self, engine: InferencePort | None, model: str, given: _Given, options: dict[str, JSONValue]
    ) -> None:
        self._services = _Services()
        self.inner = self._build(
            engine if engine is not None else NoEngine(), model, given, _options(options)
        )
        JarvisAgent.__init__(
            self,
            self.inner.inference,
            self.inner.model,
            sampling=self.inner.sampling,
            prompts=self.inner.prompts,
            bus=given.bus,
        )
        self.engine = self.inference

    def operator_binding(self) -> OperatorBinding | None:
        """The operator a tick runs for (the operative agents only)."""
        return None

    def _build(
        self, engine: InferencePort, model: str, given: _Given, options: JSONObject
    ) -> JarvisAgent:
        from jarvis.application.registry import builtin_agents

        registry = builtin_agents()
        agent_cls = registry.get(self.key)
        sampling = agent_cls.default_sampling
        if given.temperature is not None:
            sampling = replace(sampling, temperature=given.temperature)
        if given.max_tokens is not None:
            sampling = replace(sampling, max_tokens=given.max_tokens)
        tools = _real_tools(given.tools)
        if tools and not agent_cls.accepts_tools:
            raise ConfigurationError(f"The {self.key} agent takes no tools.")
        parts = AgentParts(
            inference=engine,
            model=model,
            bus=given.bus,
            sampling=sampling,
            prompts=PromptSettings(system_prompt=given.system_prompt),
            tools=tools,
            repl=self._services.runtime().repl() if agent_cls.uses_repl else None,
            operator=self.operator_binding(),
            runtimes=_LazyRuntimes(self._services),
        )
        return registry.create(self.key, parts, options)

    def run(self, input: str, context: AgentContext | None = None, **kwargs: object) -> AgentResult:
        """Synchronous, as OpenJarvis's (not for use inside a running event loop)."""
        return asyncio.run(self.arun(input, context))

    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        """The run's result, its text well-formed (a lone surrogate from an application's
        engine or tool as U+FFFD), as the SDK and the CLI give it."""
        return well_formed_result(await self.inner.arun(input, context))

    async def astream(
        self, input: str, context: AgentContext | None = None
    ) -> AsyncIterator[RunUpdate]:
        async for update in self.inner.astream(input, context):
            yield well_formed_update(update)


class SimpleAgent(BuiltAgent):
    agent_id: ClassVar[str] = "simple"
    key: ClassVar[str] = "simple"


class OrchestratorAgent(BuiltAgent):
    agent_id: ClassVar[str] = "orchestrator"
    key: ClassVar[str] = "orchestrator"
    accepts_tools: ClassVar[bool] = True


class NativeReActAgent(BuiltAgent):
    agent_id: ClassVar[str] = "native_react"
    key: ClassVar[str] = "native_react"
    accepts_tools: ClassVar[bool] = True


ReActAgent = NativeReActAgent
"""OpenJarvis's older name (``from jarvis.agents.react import ReActAgent``)."""


class NativeOpenHandsAgent(BuiltAgent):
    agent_id: ClassVar[str] = "native_openhands"
    key: ClassVar[str] = "native_openhands"
    accepts_tools: ClassVar[bool] = True


class RLMAgent(BuiltAgent):
    agent_id: ClassVar[str] = "rlm"
    key: ClassVar[str] = "rlm"
    accepts_tools: ClassVar[bool] = True


class OpenHandsAgent(BuiltAgent):
    agent_id: ClassVar[str] = "openhands"
    key: ClassVar[str] = "openhands"


class ClaudeCodeAgent(BuiltAgent):
    agent_id: ClassVar[str] = "claude_code"
    key: ClassVar[str] = "claude_code"

    def __init__(
        self,
        engine: InferencePort | None = None,
        model: str = "",
        *,
        system_prompt: str | None = None,
        **options: JSONValue,
    ) -> None:
        self._setup(engine, model, _Given(system_prompt=system_prompt), options)


class OpenCodeAgent(BuiltAgent):
    agent_id: ClassVar[str] = "opencode"
    key: ClassVar[str] = "opencode"

    def close(self) -> None:
        """Stop the opencode server this agent started (OpenJarvis's ``close()``)."""
        runtime = self._services._runtime
        if runtime is not None:
            close = getattr(runtime.external_runtimes(), "close_now", None)
            if callable(close):
                close()


class OperativeAgent(BuiltAgent):
    """OpenJarvis's ``OperativeAgent(engine, model, operator_id=..., session_store=...,
    memory_backend=..., system_prompt=...)``: each ``run`` is one tick of operator
    ``operator_id``, its history and state kept in ``session_store`` (default: jarvis's
    configured session store, where ``jarvis operators`` keeps them too)."""

    agent_id: ClassVar[str] = "operative"
    key: ClassVar[str] = "operative"
    accepts_tools: ClassVar[bool] = True

    def __init__(
        self,
        engine: InferencePort | None,
        model: str = "",
        *,
        operator_id: str | None = None,
        session_store: SessionStorePort | None = None,
        memory_backend: MemoryPort | None = None,
        system_prompt: str | None = None,
        tools: Sequence[ToolPort | BaseTool] | None = None,
        bus: EventBus | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        **options: JSONValue,
    ) -> None:
        # its own arguments first, in the order OpenJarvis documents them
        self.operator_id = operator_id or "adhoc"
        self.session_store = session_store
        self.memory_backend = memory_backend
        super().__init__(
            engine,
            model,
            system_prompt=system_prompt,
            tools=tools,
            bus=bus,
            temperature=temperature,
            max_tokens=max_tokens,
            **options,
        )

    def operator_binding(self) -> OperatorBinding | None:
        runtime = self._services.runtime()
        sessions = self.session_store or runtime.sessions()
        memory = self.memory_backend
        return OperatorBinding(
            operator_id=check_operator_id(self.operator_id),
            sessions=sessions,
            store=runtime.operator_store(sessions),
            keyword_index=(lambda: memory) if memory is not None else runtime.keyword_index(),
        )


class MonitorOperativeAgent(OperativeAgent):
    agent_id: ClassVar[str] = "monitor_operative"
    key: ClassVar[str] = "monitor_operative"
