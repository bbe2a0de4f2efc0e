"""The agent registry: keys (and aliases) to agent classes, filled explicitly.

There are no import side effects: :func:`builtin_agents` builds a registry holding the
agents jarvis ships, and embedding applications register their own on their instance.

A built-in agent is a row of :data:`BUILTIN_AGENTS`: its key, the module and the name of
its class. The class is imported on first use, through :func:`load_agent_class`, which
checks that it is an agent class (a unit test loads every row). Loading on first use keeps
start-up cheap (importing every agent costs about 45 ms): a question to one agent never
imports the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from jarvis.application.agent_options import OptionReader
from jarvis.application.plugins import PluginError, PluginSource
from jarvis.application.workspace_host import LocalWorkspaceHost
from jarvis.domain.errors import ConfigurationError, UnknownAgentError, shown
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
                hint="Options given: " + shown(", ".join(sorted(options))),
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


@dataclass(frozen=True, slots=True)
class BuiltinAgent:
    """A built-in agent: its key, the module and class that define it, and its aliases.

    The class is named, not imported: :meth:`load` imports the module when the agent is
    first used (see the module docstring)."""

    key: str
    module: str
    name: str
    aliases: tuple[str, ...] = ()

    def load(self) -> type[BaseAgent]:
        """The agent class (:func:`load_agent_class`)."""
        return load_agent_class(self.module, self.name)


BUILTIN_AGENTS: tuple[BuiltinAgent, ...] = (
    BuiltinAgent("simple", "jarvis.domain.agents.simple", "SimpleAgent"),
    BuiltinAgent("orchestrator", "jarvis.domain.agents.orchestrator", "OrchestratorAgent"),
    BuiltinAgent(
        "native_react", "jarvis.domain.agents.react", "NativeReActAgent", aliases=("react",)
    ),
    BuiltinAgent(
        "native_openhands", "jarvis.domain.agents.native_openhands", "NativeOpenHandsAgent"
    ),
    BuiltinAgent("rlm", "jarvis.domain.agents.rlm", "RecursiveLMAgent"),
    BuiltinAgent("sandboxed", "jarvis.domain.agents.sandboxed", "SandboxedAgent"),
    BuiltinAgent("operative", "jarvis.domain.agents.operative", "OperativeAgent"),
    BuiltinAgent(
        "monitor_operative", "jarvis.domain.agents.monitor_operative", "MonitorOperativeAgent"
    ),
    BuiltinAgent("opencode", "jarvis.domain.agents.external", "OpenCodeAgent"),
    BuiltinAgent("claude_code", "jarvis.domain.agents.external", "ClaudeCodeAgent"),
    BuiltinAgent("openhands", "jarvis.domain.agents.external", "OpenHandsAgent"),
)
"""Every agent jarvis ships, in the order they are registered."""


def load_agent_class(module: str, name: str) -> type[BaseAgent]:
    """Class ``name`` of ``module`` (imported now), checked to be an agent class: a
    ``ConfigurationError`` naming both when the module, the name or the class is wrong."""
    where = f"{module}.{name}"
    try:
        value: object = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"The agent class {where} cannot be loaded: {exc}") from exc
    if not (isinstance(value, type) and issubclass(value, BaseAgent)):
        raise ConfigurationError(f"{where} is not an agent class (a BaseAgent subclass).")
    return value


def builtin_agents() -> AgentRegistry:
    """A registry with every agent jarvis ships (each imported when first used)."""
    registry = AgentRegistry()
    for agent in BUILTIN_AGENTS:
        registry.register_lazy(agent.key, agent.load, aliases=agent.aliases)
    return registry
