"""The typed seam for replacing parts of the composition: :class:`Overrides`.

An application or a test that brings its own engine, persona, stores or tools hands them
to :func:`~jarvis.entrypoints.composition.bootstrap` as one ``Overrides`` value; the
composition root puts them in place of what it would build. (A test may still override a
provider of ``runtime.container`` with dependency-injector's ``override`` before the first
question; an entry point never does.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jarvis.application.ask import PersonaPrompt, ToolProvider
from jarvis.domain.ports import (
    ContainerPort,
    EmbeddingPort,
    InferencePort,
    OperatorStorePort,
    ReplPort,
    SessionStorePort,
)
from jarvis.entrypoints.composition.container import Container
from jarvis.entrypoints.composition.di import providers

if TYPE_CHECKING:
    from jarvis.domain.managed_agents import ManagedAgentStorePort


@dataclass(frozen=True, slots=True, kw_only=True)
class Overrides:
    """What to use instead of what the configuration would build; ``None``: the
    configured part. jarvis never closes a part it was given."""

    inference: InferencePort | None = None
    """The engine (an in-memory fake, or an engine the application built itself)."""
    persona: PersonaPrompt | None = None
    """The persona sections for a selection, instead of the persona files'."""
    sessions: SessionStorePort | None = None
    operator_store: OperatorStorePort | None = None
    managed_agent_store: ManagedAgentStorePort | None = None
    container_runtime: ContainerPort | None = None
    embeddings: EmbeddingPort | None = None
    wrap_repl: Callable[[ReplPort], ReplPort] | None = None
    """Wraps the configured REPL (the sandbox's inner process runs it in its container)."""
    wrap_tools: Callable[[ToolProvider | None], ToolProvider | None] | None = None
    """Wraps the configured tool catalogue (the sandbox's inner process adds the host's
    tools to it)."""

    def apply(self, container: Container) -> None:
        """Put the given parts in ``container`` (called once, by ``bootstrap``)."""
        values: dict[str, object | None] = {
            "inference": self.inference,
            "persona": self.persona,
            "sessions": self.sessions,
            "operator_store": self.operator_store,
            "managed_agent_store": self.managed_agent_store,
            "container_runtime": self.container_runtime,
            "embeddings": self.embeddings,
        }
        for name, value in values.items():
            if value is not None:
                provider: providers.Provider[object] = getattr(container, name)
                provider.override(providers.Object(value))
        if self.wrap_repl is not None:
            container.repl.override(providers.Object(self.wrap_repl(container.repl())))
        if self.wrap_tools is not None:
            container.tools.override(providers.Object(self.wrap_tools(container.tools())))
