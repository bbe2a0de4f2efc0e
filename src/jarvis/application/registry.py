"""The agent registry: keys (and aliases) to agent classes, filled explicitly.

There are no import side effects: :func:`builtin_agents` builds a registry holding the
agents jarvis ships, and embedding applications register their own on their instance.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from typing import Any

from jarvis.domain.agents.base import BaseAgent
from jarvis.domain.errors import ConfigurationError, UnknownAgentError
from jarvis.domain.ports import InferencePort


class AgentRegistry:
    """Maps agent keys and aliases to agent classes."""

    def __init__(self) -> None:
        self._entries: dict[str, type[BaseAgent] | str] = {}
        """Agent classes, or ``"module:Class"`` paths imported on first use."""
        self._aliases: dict[str, str] = {}

    def register(
        self, key: str, agent: type[BaseAgent], *, aliases: tuple[str, ...] = ()
    ) -> type[BaseAgent]:
        """Add ``agent`` under ``key`` (and its aliases). A taken name is an error."""
        for name in (key, *aliases):
            if name in self._entries or name in self._aliases:
                raise ConfigurationError(f"Agent registry already has an entry for '{name}'.")
        self._entries[key] = agent
        for alias in aliases:
            self._aliases[alias] = key
        return agent

    def register_lazy(self, key: str, target: str, *, aliases: tuple[str, ...] = ()) -> None:
        """Add the agent class at ``target`` (``"package.module:Class"``), imported on first use.

        Keeps start-up cheap: a question to one agent never imports the others.
        """
        if ":" not in target:
            raise ConfigurationError(f"Agent target '{target}' is not 'module:Class'.")
        for name in (key, *aliases):
            if name in self._entries or name in self._aliases:
                raise ConfigurationError(f"Agent registry already has an entry for '{name}'.")
        self._entries[key] = target
        for alias in aliases:
            self._aliases[alias] = key

    def resolve(self, key: str) -> str:
        """The canonical key for ``key`` or one of its aliases."""
        canonical = self._aliases.get(key, key)
        if canonical not in self._entries:
            raise UnknownAgentError(key, self.keys())
        return canonical

    def contains(self, key: str) -> bool:
        return key in self._entries or key in self._aliases

    def get(self, key: str) -> type[BaseAgent]:
        canonical = self.resolve(key)
        entry = self._entries[canonical]
        if isinstance(entry, str):
            entry = self._entries[canonical] = _load(entry)
        return entry

    def keys(self) -> list[str]:
        return sorted(self._entries)

    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def create(self, key: str, inference: InferencePort, model: str, **kwargs: Any) -> BaseAgent:
        """Instantiate the agent registered under ``key``."""
        return self.get(key)(inference, model, **kwargs)

    def __iter__(self) -> Iterator[tuple[str, type[BaseAgent]]]:
        """Every (key, class), sorted by key; imports the lazily registered ones."""
        return iter([(key, self.get(key)) for key in self.keys()])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.contains(key)


def _load(target: str) -> type[BaseAgent]:
    module, _, name = target.partition(":")
    agent = getattr(import_module(module), name, None)
    if not (isinstance(agent, type) and issubclass(agent, BaseAgent)):
        raise ConfigurationError(f"'{target}' is not an agent class.")
    return agent


def builtin_agents() -> AgentRegistry:
    """A registry with every agent jarvis ships (each imported when first used)."""
    registry = AgentRegistry()
    registry.register_lazy("simple", "jarvis.domain.agents.simple:SimpleAgent")
    registry.register_lazy("orchestrator", "jarvis.domain.agents.orchestrator:OrchestratorAgent")
    registry.register_lazy(
        "native_react", "jarvis.domain.agents.react:NativeReActAgent", aliases=("react",)
    )
    registry.register_lazy("native_openhands", "jarvis.domain.agents.codeact:NativeOpenHandsAgent")
    registry.register_lazy("rlm", "jarvis.domain.agents.rlm:RecursiveLMAgent")
    return registry
