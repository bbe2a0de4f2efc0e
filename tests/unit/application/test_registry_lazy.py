"""Lazily registered agents: nothing is imported until an agent is used."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jarvis.application.registry import AgentRegistry, builtin_agents
from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.errors import ConfigurationError, UnknownAgentError
from jarvis.domain.loop.base import BaseAgent


def load_simple() -> type[BaseAgent]:
    from jarvis.domain.agents.simple import SimpleAgent

    return SimpleAgent


def test_lazy_entry_resolves_on_get() -> None:
    calls: list[str] = []

    def loader() -> type[BaseAgent]:
        calls.append("loaded")
        return load_simple()

    registry = AgentRegistry()
    registry.register_lazy("plain", loader, aliases=("p",))
    assert registry.keys() == ["plain"]
    assert calls == []  # nothing is loaded until the agent is used
    assert registry.get("p") is SimpleAgent
    assert list(registry) == [("plain", SimpleAgent)]
    assert calls == ["loaded"]  # and only once


def test_lazy_names_collide_like_eager_ones() -> None:
    registry = AgentRegistry()
    registry.register("simple", SimpleAgent)
    with pytest.raises(ConfigurationError, match="already"):
        registry.register_lazy("simple", load_simple)


def test_bad_loaders_are_reported() -> None:
    registry = AgentRegistry()

    def not_an_agent() -> type[BaseAgent]:
        return ConfigurationError  # type: ignore[return-value]

    registry.register_lazy("y", not_an_agent)
    with pytest.raises(ConfigurationError, match="returned no agent class"):
        registry.get("y")
    with pytest.raises(UnknownAgentError):
        registry.get("z")


def test_every_builtin_agent_loads() -> None:
    loaded = dict(list(builtin_agents()))  # a wrong module or class path raises here
    assert {"simple", "orchestrator", "native_react"} <= set(loaded)
    assert all(agent.__module__.startswith("jarvis.domain.agents.") for agent in loaded.values())


def test_asking_simple_imports_no_other_agent() -> None:
    code = (
        "import sys\n"
        "from jarvis.application.registry import builtin_agents\n"
        "registry = builtin_agents()\n"
        "registry.get('simple')\n"
        "folders = ('jarvis.domain.agents.', 'jarvis.domain.loop.', 'jarvis.domain.protocols.')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(folders))\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert set(out.split(",")) == {
        "jarvis.domain.loop.base",
        "jarvis.domain.loop.options",
        "jarvis.domain.protocols.reply_text",
        "jarvis.domain.loop.settings",
        "jarvis.domain.loop.tool_executor",
        "jarvis.domain.agents.simple",
    }
