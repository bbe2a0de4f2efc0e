"""The agent registry: keys (and aliases) to agent classes, filled explicitly.

There are no import side effects: :func:`builtin_agents` builds a registry holding the
agents jarvis ships, and embedding applications register their own on their instance.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jarvis.domain.agents.base import BaseAgent
from jarvis.domain.errors import ConfigurationError, UnknownAgentError
from jarvis.domain.ports import InferencePort


class AgentRegistry:
    """Maps agent keys and aliases to agent classes."""

    def __init__(self) -> None:
        self._entries: dict[str, type[BaseAgent]] = {}
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

    def resolve(self, key: str) -> str:
        """The canonical key for ``key`` or one of its aliases."""
        canonical = self._aliases.get(key, key)
        if canonical not in self._entries:
            raise UnknownAgentError(key, self.keys())
        return canonical

    def contains(self, key: str) -> bool:
        return key in self._entries or key in self._aliases

    def get(self, key: str) -> type[BaseAgent]:
        return self._entries[self.resolve(key)]

    def keys(self) -> list[str]:
        return sorted(self._entries)

    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def create(self, key: str, inference: InferencePort, model: str, **kwargs: Any) -> BaseAgent:
        """Instantiate the agent registered under ``key``."""
        return self.get(key)(inference, model, **kwargs)

    def __iter__(self) -> Iterator[tuple[str, type[BaseAgent]]]:
        return iter(sorted(self._entries.items()))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.contains(key)


def builtin_agents() -> AgentRegistry:
    """A registry with every agent jarvis ships."""
    from jarvis.domain.agents.simple import SimpleAgent

    registry = AgentRegistry()
    registry.register("simple", SimpleAgent)
    return registry
