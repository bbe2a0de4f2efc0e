"""OpenJarvis's ``AgentRegistry``: ``@AgentRegistry.register("name")`` on a class,
``contains``, ``get``, ``keys`` and ``create(key, engine, model, **kwargs)``.

OpenJarvis's registry is one per process, filled by class decorators as modules are
imported; code written for it relies on that, so this one is too: the agents a decorator
registered, in a dictionary held by the class (the one process-wide table of jarvis, kept
to this compatibility layer). ``get`` and ``create`` give the built-in keys'
OpenJarvis-style classes (:mod:`jarvis.compat.agents`). jarvis's own registry
(:class:`jarvis.application.registry.AgentRegistry`) is per application and typed; the
agents registered here are added to it by the plug-in loader when a plug-in module
registers one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

from jarvis.compat import agents as compat
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.loop.base import BaseAgent as JarvisAgent
from jarvis.domain.ports import InferencePort

A = TypeVar("A", bound=type[JarvisAgent])

BUILTIN: dict[str, type[JarvisAgent]] = {
    "simple": compat.SimpleAgent,
    "orchestrator": compat.OrchestratorAgent,
    "native_react": compat.NativeReActAgent,
    "react": compat.NativeReActAgent,
    "native_openhands": compat.NativeOpenHandsAgent,
    "rlm": compat.RLMAgent,
    "openhands": compat.OpenHandsAgent,
    "claude_code": compat.ClaudeCodeAgent,
    "opencode": compat.OpenCodeAgent,
    "operative": compat.OperativeAgent,
    "monitor_operative": compat.MonitorOperativeAgent,
}
"""The built-in keys (``react`` is ``native_react``'s alias) and their classes."""


class AgentRegistry:
    """The process's agent registry, used through its class methods as OpenJarvis's is."""

    _registered: ClassVar[dict[str, type[JarvisAgent]]] = {}

    @classmethod
    def register(cls, key: str) -> Callable[[A], A]:
        """A class decorator: the class is the agent ``key``. A key already taken is a
        ``ConfigurationError`` (OpenJarvis: ``ValueError``; this one is both)."""

        def add(agent_cls: A) -> A:
            if not key or key in BUILTIN or key in cls._registered:
                raise DuplicateAgentError(f"An agent named {key!r} is registered already.")
            cls._registered[key] = agent_cls
            return agent_cls

        return add

    @classmethod
    def contains(cls, key: str) -> bool:
        return key in BUILTIN or key in cls._registered

    @classmethod
    def get(cls, key: str) -> type[JarvisAgent]:
        found = BUILTIN.get(key) or cls._registered.get(key)
        if found is None:
            raise ConfigurationError(
                f"Unknown agent '{key}'.", hint="Known agents: " + ", ".join(cls.keys())
            )
        return found

    @classmethod
    def keys(cls) -> list[str]:
        """Every key, built-ins first (aliases included), then the registered ones."""
        return [*BUILTIN, *cls._registered]

    @classmethod
    def registered(cls) -> dict[str, type[JarvisAgent]]:
        """The agents decorators registered (not the built-ins)."""
        return dict(cls._registered)

    @classmethod
    def create(
        cls, key: str, engine: InferencePort | None, model: str = "", **kwargs: object
    ) -> JarvisAgent:
        """``get(key)(engine, model, **kwargs)``."""
        agent_cls: Callable[..., JarvisAgent] = cls.get(key)
        return agent_cls(engine, model, **kwargs)

    @classmethod
    def unregister(cls, key: str) -> None:
        """Forget a registered agent (tests)."""
        cls._registered.pop(key, None)


class DuplicateAgentError(ConfigurationError, ValueError):
    """An agent key registered twice."""
