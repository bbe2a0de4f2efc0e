"""The agent registry: keys (and aliases) to agent classes, filled explicitly.

There are no import side effects: :func:`builtin_agents` builds a registry holding the
agents jarvis ships, and embedding applications register their own on their instance.

A built-in agent is registered by a loader: a function that imports its module and returns
its class, checked by mypy like any other code. Loading on first use keeps start-up cheap
(importing every agent costs about 45 ms): a question to one agent never imports the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from jarvis.application.agent_options import OptionReader
from jarvis.application.plugins import PluginError, PluginSource
from jarvis.application.workspace_host import LocalWorkspaceHost
from jarvis.domain.errors import ConfigurationError, UnknownAgentError
from jarvis.domain.json_types import JSONValue
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.options import AgentParts

AgentLoader = Callable[[], type[BaseAgent]]
"""Imports an agent's module and returns its class."""


class AgentRegistry:
    """Maps agent keys and aliases to agent classes."""

    def __init__(self) -> None:
        self._entries: dict[str, type[BaseAgent] | AgentLoader] = {}
        """Agent classes, or loaders called on first use."""
        self._aliases: dict[str, str] = {}
        self._plugins: PluginSource | None = None

    def use_plugins(self, plugins: PluginSource) -> None:
        """Consult ``plugins`` for a key this registry does not have, and when listing."""
        self._plugins = plugins

    def _from_plugins(self, key: str) -> bool:
        """Register plug-in agent ``key`` (loaded on first use) if a plug-in has it."""
        plugins = self._plugins
        if plugins is None or key not in plugins.agent_names():
            return False
        self._entries[key] = lambda: plugins.load_agent(key)
        return True

    def register(
        self, key: str, agent: type[BaseAgent], *, aliases: tuple[str, ...] = ()
    ) -> type[BaseAgent]:
        """Add ``agent`` under ``key`` (and its aliases). A taken name is an error."""
        self._add(key, agent, aliases)
        return agent

    def register_lazy(
        self, key: str, loader: AgentLoader, *, aliases: tuple[str, ...] = ()
    ) -> None:
        """Add the agent class ``loader`` returns, loaded when the agent is first used."""
        self._add(key, loader, aliases)

    def _add(
        self, key: str, entry: type[BaseAgent] | AgentLoader, aliases: tuple[str, ...]
    ) -> None:
        for name in (key, *aliases):
            if name in self._entries or name in self._aliases:
                raise ConfigurationError(f"Agent registry already has an entry for '{name}'.")
        self._entries[key] = entry
        for alias in aliases:
            self._aliases[alias] = key

    def resolve(self, key: str) -> str:
        """The canonical key for ``key`` or one of its aliases (a plug-in's, when no
        registered agent has it). An unknown key lists the known ones; when a plug-in
        module could not be imported, that failure is the error instead."""
        canonical = self._aliases.get(key, key)
        if canonical not in self._entries and not self._from_plugins(canonical):
            failures = self._plugins.failures() if self._plugins is not None else []
            if failures:
                raise failures[0]
            raise UnknownAgentError(key, self.keys())
        return canonical

    def contains(self, key: str) -> bool:
        return key in self._entries or key in self._aliases or self._from_plugins(key)

    def get(self, key: str) -> type[BaseAgent]:
        canonical = self.resolve(key)
        entry = self._entries[canonical]
        if isinstance(entry, type):
            return entry
        agent = entry()
        if not (isinstance(agent, type) and issubclass(agent, BaseAgent)):
            raise ConfigurationError(f"The loader of agent '{canonical}' returned no agent class.")
        self._entries[canonical] = agent
        return agent

    def keys(self) -> list[str]:
        """Every key, the plug-ins' included (their names only: nothing is loaded)."""
        plugins = self._plugins.agent_names() if self._plugins is not None else []
        return sorted({*self._entries, *plugins})

    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def create(
        self,
        key: str,
        parts: AgentParts,
        options: Mapping[str, JSONValue] | None = None,
        *,
        defaults: Mapping[str, JSONValue] | None = None,
    ) -> BaseAgent:
        """The agent registered under ``key``, built from ``parts`` and its named
        ``options``, each checked (see :mod:`jarvis.application.agent_options`);
        ``defaults`` fill the options not given, for the agents that take them. A wrong
        option is a ``ConfigurationError`` naming the agent, the option and the options
        the agent takes."""
        canonical = self.resolve(key)
        agent_cls = self.get(canonical)
        reader = OptionReader(canonical, options or {}, defaults=defaults)
        sampling = parts.sampling if parts.sampling is not None else agent_cls.default_sampling
        engine_options = reader.engine_options()
        if engine_options:
            sampling = replace(sampling, engine_options=engine_options)
        try:
            host = parts.host if parts.host is not None else LocalWorkspaceHost()
            agent = agent_cls.from_options(replace(parts, sampling=sampling, host=host), reader)
        except ValueError as exc:
            if not options:
                raise
            raise ConfigurationError(
                f"Agent '{canonical}' cannot be built with these options: {exc}",
                hint="Options given: " + ", ".join(sorted(options)),
            ) from exc
        reader.finish()
        return agent

    def __iter__(self) -> Iterator[tuple[str, type[BaseAgent]]]:
        """Every (key, class), sorted by key; loads the lazily registered ones (a plug-in
        that fails to load raises its ``PluginError``: see :meth:`loadable`)."""
        return iter([(key, self.get(key)) for key in self.keys()])

    def loadable(self) -> tuple[list[tuple[str, type[BaseAgent]]], list[PluginError]]:
        """Every (key, class) that loads, and the plug-ins that did not (for listings)."""
        loaded: list[tuple[str, type[BaseAgent]]] = []
        failed: list[PluginError] = list(self._plugins.failures()) if self._plugins else []
        for key in self.keys():
            try:
                loaded.append((key, self.get(key)))
            except PluginError as exc:
                failed.append(exc)
        return loaded, failed

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.contains(key)


# The loaders import their agent's module inside: a question to one agent never imports the
# others (importing every agent costs about 45 ms of start-up; see the module docstring).


def _simple() -> type[BaseAgent]:
    from jarvis.domain.agents.simple import SimpleAgent

    return SimpleAgent


def _orchestrator() -> type[BaseAgent]:
    from jarvis.domain.agents.orchestrator import OrchestratorAgent

    return OrchestratorAgent


def _native_react() -> type[BaseAgent]:
    from jarvis.domain.agents.react import NativeReActAgent

    return NativeReActAgent


def _native_openhands() -> type[BaseAgent]:
    from jarvis.domain.agents.native_openhands import NativeOpenHandsAgent

    return NativeOpenHandsAgent


def _rlm() -> type[BaseAgent]:
    from jarvis.domain.agents.rlm import RecursiveLMAgent

    return RecursiveLMAgent


def _sandboxed() -> type[BaseAgent]:
    from jarvis.domain.agents.sandboxed import SandboxedAgent

    return SandboxedAgent


def _opencode() -> type[BaseAgent]:
    from jarvis.domain.agents.external import OpenCodeAgent

    return OpenCodeAgent


def _openhands() -> type[BaseAgent]:
    from jarvis.domain.agents.external import OpenHandsAgent

    return OpenHandsAgent


def _claude_code() -> type[BaseAgent]:
    from jarvis.domain.agents.external import ClaudeCodeAgent

    return ClaudeCodeAgent


def _operative() -> type[BaseAgent]:
    from jarvis.domain.agents.operative import OperativeAgent

    return OperativeAgent


def _monitor_operative() -> type[BaseAgent]:
    from jarvis.domain.agents.monitor_operative import MonitorOperativeAgent

    return MonitorOperativeAgent


def builtin_agents() -> AgentRegistry:
    """A registry with every agent jarvis ships (each imported when first used)."""
    registry = AgentRegistry()
    registry.register_lazy("simple", _simple)
    registry.register_lazy("orchestrator", _orchestrator)
    registry.register_lazy("native_react", _native_react, aliases=("react",))
    registry.register_lazy("native_openhands", _native_openhands)
    registry.register_lazy("rlm", _rlm)
    registry.register_lazy("sandboxed", _sandboxed)
    registry.register_lazy("operative", _operative)
    registry.register_lazy("monitor_operative", _monitor_operative)
    registry.register_lazy("opencode", _opencode)
    registry.register_lazy("claude_code", _claude_code)
    registry.register_lazy("openhands", _openhands)
    return registry
