"""What every entry point takes its services from: a configured container, its engine,
the ask use case per event loop, and the use cases and parts built on them.

A :class:`Runtime` wraps one container, put together by
:func:`~jarvis.entrypoints.composition.bootstrap`. On first use it resolves the engine choice
(unless a test or an embedding app has overridden ``container.inference``), hands it to the
container and resolves the :class:`~jarvis.application.ask.AskService`, so that every
question of a CLI command or of a ``Jarvis`` instance reuses the same engine and its
connection pool.

A runtime serves any number of event loops (a ``Jarvis`` instance is awaited on its
callers' loops and runs its synchronous API on a private one), because a pooled HTTP client
belongs to the loop it was first used on: each loop gets its own ask service. The first
loop uses the container's own engine; another loop, while that one lives, gets its own
instance of the same engine (an HTTP engine: one connection pool per loop; the embedded
engine runs in threads and serves every loop). A loop's engines are closed on that loop:
by :meth:`Runtime.aclose`, or when the loop shuts down (``asyncio.run`` closes the
asynchronous generators of a loop before closing it, and one such generator per loop
closes what the loop used).

The CLI, the SDK, ``jarvis serve``, the MCP server and the sandbox's inner process call its
methods (``conversations()``, ``operators()``, ``managed_agents()``, ``sessions()``,
``tools()``...) and never a provider of its container.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Unpack

from jarvis.application.ask import AskQuestion, AskService
from jarvis.application.config import JarvisConfig
from jarvis.domain.ports import InferencePort
from jarvis.entrypoints.composition.ask_options import AskOptions, ask_question
from jarvis.entrypoints.composition.container import Container, inference_provided
from jarvis.entrypoints.composition.knowledge import knowledge_base
from jarvis.entrypoints.composition.lifecycle import (
    EngineResource,
    aclose_engines,
    choose,
    forget_engines,
    loop_engine,
    resolved,
)
from jarvis.entrypoints.composition.services import LoopAsker
from jarvis.entrypoints.composition.stores import managed_agent_store, operator_store
from jarvis.entrypoints.engine_choice import EngineChoice, choose_engine

if TYPE_CHECKING:
    from jarvis.application.ask import PromptContext, ToolProvider
    from jarvis.application.conversation import ConversationService, Sessions
    from jarvis.application.knowledge import KnowledgeBase
    from jarvis.application.managed_agents import ManagedAgentService
    from jarvis.application.operators import OperatorService
    from jarvis.application.registry import AgentRegistry
    from jarvis.application.system_prompt import SystemPromptBuilder
    from jarvis.application.tools.mcp_tools import McpToolSource
    from jarvis.application.trace_writer import TraceWriter
    from jarvis.domain.external_runtime import ExternalRuntimesPort
    from jarvis.domain.managed_agents import ManagedAgentStorePort
    from jarvis.domain.ports import (
        ContainerPort,
        MemoryPort,
        OperatorStorePort,
        PersonaStorePort,
        ReplPort,
        SessionStorePort,
        ToolPort,
        TraceStorePort,
    )
    from jarvis.domain.run.events import EventBus
    from jarvis.entrypoints.http.state import ServeLimits


@dataclass(eq=False, slots=True)
class _LoopState:
    """What one event loop uses: its ask service and what was built for it alone."""

    loop: asyncio.AbstractEventLoop
    building: asyncio.Lock
    service: AskService | None = None
    primary: bool = False
    """It runs on the container's own engines (closed with ``aclose_engines``)."""
    opened: EngineResource | None = None
    """The engine built for this loop only (a resource of its own, shut down on the loop)."""
    guard: AsyncGenerator[None, None] | None = None
    """Suspended until the loop shuts down (or :meth:`Runtime.aclose`), then closes it all."""
    closed: bool = False


class Runtime:
    """One container, configured once, for one CLI command or one ``Jarvis`` instance."""

    def __init__(
        self,
        container: Container,
        config: JarvisConfig,
        *,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.container = container
        self.config = config
        self.notice = notice
        self.choice: EngineChoice | None = None
        self._loops: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._primary: _LoopState | None = None
        self._mutex = threading.Lock()
        """Guards the loop table and the one-time configuration (loops may run in threads)."""

    async def service(self) -> AskService:
        """The ask use case of the running event loop, built on first use there."""
        state = self._loops.get(asyncio.get_running_loop())
        if state is not None and state.service is not None:
            return state.service
        return await self._service_for(asyncio.get_running_loop())

    async def inference(self) -> InferencePort:
        """The engine the use case runs on (on the running event loop)."""
        return (await self.service()).inference

    async def _service_for(self, loop: asyncio.AbstractEventLoop) -> AskService:
        while True:
            with self._mutex:
                state = self._loops.get(loop)
                if state is None:
                    self._forget_closed_loops()
                    state = self._loops[loop] = _LoopState(loop, asyncio.Lock())
            async with state.building:
                if state.closed:  # closed while this call waited: start again
                    continue
                if state.service is None:
                    state.service = await self._build(state)
                    state.guard = self._closes_with_loop(state)
                    await anext(state.guard)
                return state.service

    async def _build(self, state: _LoopState) -> AskService:
        container = self.container
        provided = inference_provided(container)
        if self.choice is None:
            if provided:
                engine = container.inference()
                choice = EngineChoice(
                    name=engine.engine_id, url=engine.base_url, reason="provided by the caller"
                )
            else:
                choice = await choose_engine(
                    self.config,
                    probe=container.ollama_probe(),
                    locate_model=container.model_locator(),
                )
            with self._mutex:
                if self.choice is None:  # another loop may have got here first
                    choose(container, choice)
                    self.choice = choice
                    if self.notice is not None:
                        where = f" at {choice.url}" if choice.url else ""
                        self.notice(f"engine: {choice.name}{where} ({choice.reason})")
        with self._mutex:
            if self._primary is None:
                self._primary = state
                state.primary = True
        if provided or state.primary:
            return await resolved(container.ask_service)
        own = loop_engine(container, self.choice.name)
        if own is None:  # the container's engine serves every loop
            return await resolved(container.ask_service)
        state.opened = own
        loops_engine: InferencePort = await resolved(own)
        return await resolved(container.ask_service, inference=loops_engine)

    async def _closes_with_loop(self, state: _LoopState) -> AsyncGenerator[None, None]:
        """Waits at ``yield`` until closed: by :meth:`aclose`, or by the loop shutting down
        (``loop.shutdown_asyncgens()``, which ``asyncio.run`` calls before closing it)."""
        try:
            yield
        finally:
            await self._close(state)

    async def _close(self, state: _LoopState) -> None:
        """Close what ``state``'s loop built (on that loop). Idempotent."""
        if state.closed:
            return
        state.closed = True
        with self._mutex:
            if self._loops.get(state.loop) is state:
                del self._loops[state.loop]
        state.service = None
        try:
            if state.opened is not None:
                pending = state.opened.shutdown()
                if pending is not None:
                    await pending
            if state.primary:
                await aclose_engines(self.container)
        finally:
            if state.primary:
                with self._mutex:
                    self._primary = None

    async def _shut(self, state: _LoopState) -> None:
        """Close ``state`` (on its loop) and finish its guard."""
        await self._close(state)
        guard, state.guard = state.guard, None
        if guard is not None:
            with contextlib.suppress(RuntimeError):  # being closed by the loop's shutdown
                await guard.aclose()

    def _forget_closed_loops(self) -> None:
        """Drop the states of loops closed without shutting their generators down (their
        connections went with them). Called with the mutex held."""
        for loop in [loop for loop in self._loops if loop.is_closed()]:
            state = self._loops.pop(loop)
            state.closed = True
            state.service = None
            guard, state.guard = state.guard, None
            if guard is not None:
                # finish it here (its ``finally`` sees ``closed`` and returns at once): left
                # to the garbage collector, it would be handed to its closed loop
                with contextlib.suppress(StopIteration, RuntimeError):
                    guard.aclose().send(None)
            if self._primary is state:
                forget_engines(self.container)  # their pools belong to the closed loop
                self._primary = None

    async def aclose(self) -> None:
        """Close the engines this runtime built: the running loop's at once, other loops'
        on their own loops (scheduled there; a closed loop took its connections with it).
        Idempotent; a later question builds them again."""
        self.close_soon(skip=self._loops.get(asyncio.get_running_loop()))
        await self.aclose_loop()

    async def aclose_loop(self) -> None:
        """Close the engines of the running loop only."""
        state = self._loops.get(asyncio.get_running_loop())
        if state is not None:
            await self._shut(state)

    def close_soon(self, *, skip: _LoopState | None = None) -> None:
        """Schedule the closing of every loop's engines on that loop, without waiting."""
        with self._mutex:
            self._forget_closed_loops()
            states = [s for s in self._loops.values() if s is not skip]
        for state in states:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                asyncio.run_coroutine_threadsafe(self._shut(state), state.loop)

    # -- the use cases and the parts entry points use, each built on first use ------------

    async def conversations(self) -> ConversationService:
        """The conversation use case on the running event loop's ask service."""
        return self.container.conversation_service(ask=await self.service())

    def sessions(self) -> SessionStorePort:
        """The session store (``[sessions]``), without choosing or starting an engine:
        ``jarvis sessions`` needs none."""
        return self.container.sessions()

    def session_list(self) -> Sessions:
        """Listing, reading and deleting the sessions (no engine)."""
        from jarvis.application.conversation import Sessions

        return Sessions(self.sessions())

    def operators(self) -> OperatorService:
        """The operators use case; its ticks run on the running event loop's ask service,
        whose engine starts on the first tick (reading and writing definitions needs none)."""
        asker = LoopAsker(self.agents(), self.service)
        return self.container.operator_service(asker=asker)

    def operator_store(self, sessions: SessionStorePort | None = None) -> OperatorStorePort:
        """Operator state and leases in ``sessions``' own database (default: the runtime's
        session store)."""
        if sessions is None:
            return self.container.operator_store()
        return operator_store(sessions)

    def managed_agents(
        self,
        limits: ServeLimits,
        *,
        sessions: SessionStorePort | None = None,
        agents: ManagedAgentStorePort | None = None,
    ) -> ManagedAgentService:
        """The managed-agents use case of ``jarvis serve``, on the given stores or the
        runtime's (the sessions store, and the definitions kept in its database)."""
        given: dict[str, object] = {"ask": self.service, "limits": limits}
        if sessions is not None:
            given["sessions"] = sessions
            given["agents"] = agents if agents is not None else managed_agent_store(sessions)
        elif agents is not None:
            given["agents"] = agents
        return self.container.managed_agent_service(**given)

    def agents(self) -> AgentRegistry:
        """The agent registry (built-ins and plug-ins)."""
        return self.container.agents()

    def tools(self) -> ToolProvider | None:
        """The tool catalogue (``None``: a test or an application took all tools away)."""
        return self.container.tools()

    def user_tools(self) -> list[ToolPort]:
        """The tools an embedding application registered (appended to before the first
        question, they join the catalogue)."""
        return self.container.user_tools()

    def persona_tools(self) -> list[ToolPort]:
        """``memory_manage`` and ``user_profile_manage``."""
        return self.container.persona_tools()

    def mcp_tools(self) -> McpToolSource | None:
        """The configured MCP servers (none started until used)."""
        return self.container.mcp_tools()

    def prompt_context(self) -> PromptContext | None:
        """``AGENTS.md`` and the Agent Skills (``jarvis skills``)."""
        return self.container.prompt_context()

    def persona_store(self) -> PersonaStorePort:
        return self.container.persona_store()

    def prompt_builder(self) -> SystemPromptBuilder:
        return self.container.prompt_builder()

    def trace_store(self) -> TraceStorePort:
        """Where ``jarvis traces`` and ``jarvis stats`` read."""
        return self.container.trace_store()

    def trace_writer(self) -> TraceWriter | None:
        """Saves this runtime's traces (``None``: traces and telemetry are off)."""
        return self.container.trace_writer()

    def bus(self) -> EventBus:
        """The event bus of every run (a caller may subscribe before asking)."""
        return self.container.bus()

    def repl(self) -> ReplPort:
        return self.container.repl()

    def knowledge_base(self, *, allow_private_hosts: bool = False) -> KnowledgeBase:
        """The knowledge base of ``jarvis memory`` (and ``Jarvis().memory``), in the memory
        database; ``allow_private_hosts``: ``--url`` may fetch loopback (tests)."""
        return knowledge_base(
            self.container.config(),
            self.container.memory(),
            allow_private_hosts=allow_private_hosts,
        )

    def keyword_index(self) -> Callable[[], MemoryPort]:
        return self.container.keyword_index()

    def container_runtime(self) -> ContainerPort:
        """Docker or Podman (``jarvis sandbox``)."""
        return self.container.container_runtime()

    def external_runtimes(self) -> ExternalRuntimesPort:
        """The external agents' runtimes (started on first use)."""
        return self.container.external_runtimes()

    def question(self, question: str, **options: Unpack[AskOptions]) -> AskQuestion:
        """The command for one question and its :class:`AskOptions` (``None`` is left for the
        ask use case to fill from the ``[agent]`` settings). An option that is not one of
        them is a ``TypeError``."""
        return ask_question(question, **options)
