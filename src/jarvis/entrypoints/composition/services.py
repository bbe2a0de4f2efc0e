"""The use cases, built from what the container provides.

The ask use case is the container's ``ask_service`` provider; the others are built on it
(one per event loop, because an HTTP engine's connections belong to its loop) by the
:class:`~jarvis.entrypoints.composition.runtime.Runtime`, which is where every entry point
takes them from. The use cases' modules are imported when first built, so a plain question
loads only the ask use case (an ephemeral one not even the conversation use case).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from jarvis.application.ask import Answer, AskQuestion, AskService, PersonaPrompt, PromptContext
from jarvis.application.config import JarvisConfig
from jarvis.application.registry import AgentRegistry
from jarvis.domain.ports import (
    EmbeddingPort,
    InferencePort,
    MemoryPort,
    OperatorStorePort,
    ReplPort,
    SessionStorePort,
)
from jarvis.domain.run.events import EventBus
from jarvis.entrypoints.composition.stores import approval_store

if TYPE_CHECKING:
    from jarvis.application.ask import SandboxBuilder, ToolProvider
    from jarvis.application.conversation import ConversationService, HistoryLimits
    from jarvis.application.managed_agents import ManagedAgentService
    from jarvis.application.operators import OperatorService
    from jarvis.domain.approvals import ApprovalPolicy
    from jarvis.domain.external_runtime import ExternalRuntimesPort
    from jarvis.domain.managed_agents import ManagedAgentStorePort
    from jarvis.entrypoints.http.state import ServeLimits


def ask_service(
    *,
    config: JarvisConfig,
    registry: AgentRegistry,
    inference: InferencePort,
    tools: ToolProvider | None,
    persona: PersonaPrompt | None,
    bus: EventBus,
    repl: ReplPort,
    sandbox: SandboxBuilder,
    runtimes: ExternalRuntimesPort | None = None,
    context: PromptContext | None = None,
) -> AskService:
    """The ask use case with the ``[agent]`` and ``[engine]`` defaults."""
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
        approval_policy=approval_policy(config),
    )


def approval_policy(config: JarvisConfig) -> ApprovalPolicy:
    """``[tools.approval]`` (what each question's approvals apply)."""
    from jarvis.application.approvals import policy_from_settings

    settings = config.tools.approval
    return policy_from_settings(settings.default, settings.tools)


def history_limits(config: JarvisConfig) -> HistoryLimits:
    """``[sessions] history_messages`` and ``history_tokens``."""
    from jarvis.application.conversation import HistoryLimits

    settings = config.sessions
    return HistoryLimits(max_messages=settings.history_messages, max_tokens=settings.history_tokens)


def conversation_service(
    *, ask: AskService, sessions: SessionStorePort, config: JarvisConfig
) -> ConversationService:
    """The conversation use case on one event loop's ask service."""
    from jarvis.application.conversation import ConversationService

    return ConversationService(ask, sessions, limits=history_limits(config))


class LoopAsker:
    """What an operator's tick runs on: the ask use case of the running event loop, built
    (and its engine started) on the first tick, not before."""

    def __init__(
        self, registry: AgentRegistry, service: Callable[[], Awaitable[AskService]]
    ) -> None:
        self.registry = registry
        self._service = service

    async def ask(self, command: AskQuestion) -> Answer:
        return await (await self._service()).ask(command)


def operator_service(
    *,
    store: OperatorStorePort,
    sessions: SessionStorePort,
    registry: AgentRegistry,
    keyword_index: Callable[[], MemoryPort],
    embeddings: Callable[[], EmbeddingPort | None],
    asker: LoopAsker | None = None,
) -> OperatorService:
    """The operators use case; its ticks run on ``asker`` (none: it only reads and writes
    the operators' definitions)."""
    from jarvis.application.operators import OperatorService

    return OperatorService(
        store=store,
        sessions=sessions,
        registry=registry,
        keyword_index=keyword_index,
        embeddings=embeddings,
        asker=(lambda: asker) if asker is not None else None,
    )


def managed_agent_service(
    *,
    agents: ManagedAgentStorePort,
    sessions: SessionStorePort,
    ask: Callable[[], Awaitable[AskService]],
    config: JarvisConfig,
    limits: ServeLimits,
) -> ManagedAgentService:
    """The managed-agents use case of ``jarvis serve`` (definitions, queued messages, runs)."""
    from jarvis.application.managed_agents import ManagedAgentService
    from jarvis.application.managed_approvals import ManagedApprovals

    approvals = ManagedApprovals(
        approval_store(sessions, agents), timeout=config.tools.approval.approval_timeout
    )
    return ManagedAgentService(
        approvals=approvals,
        agents=agents,
        sessions=sessions,
        ask=ask,
        limits=history_limits(config),
        max_agents=limits.max_agents,
        max_queued_messages=limits.max_queued_messages,
    )
