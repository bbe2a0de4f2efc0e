"""Lazily registered agents: nothing is imported until an agent is used."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jarvis.application.registry import (
    BUILTIN_AGENTS,
    AgentRegistry,
    BuiltinAgent,
    builtin_agents,
    load_agent_class,
)
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


@pytest.mark.parametrize("entry", BUILTIN_AGENTS, ids=lambda entry: entry.key)
def test_every_row_of_the_table_names_its_agent_class(entry: BuiltinAgent) -> None:
    agent = entry.load()
    assert issubclass(agent, BaseAgent)
    assert (agent.__module__, agent.__name__) == (entry.module, entry.name)
    assert builtin_agents().get(entry.key) is agent
    for alias in entry.aliases:
        assert builtin_agents().resolve(alias) == entry.key


def test_the_table_has_one_row_a_key_and_registers_them_all() -> None:
    keys = [entry.key for entry in BUILTIN_AGENTS]
    assert len(keys) == len(set(keys))
    assert builtin_agents().keys() == sorted(keys)
    assert builtin_agents().aliases() == {"react": "native_react"}


@pytest.mark.parametrize(
    ("module", "name", "message"),
    [
        ("jarvis.domain.agents.no_such_agent", "SimpleAgent", "cannot be loaded"),
        ("jarvis.domain.agents.simple", "NoSuchAgent", "cannot be loaded"),
        ("jarvis.domain.errors", "ConfigurationError", "is not an agent class"),
        ("jarvis.domain.loop.base", "DEFAULT_SYSTEM_PROMPT", "is not an agent class"),
    ],
)
def test_a_wrong_row_is_a_clear_configuration_error(module: str, name: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        load_agent_class(module, name)
    assert f"{module}.{name}" in str(raised.value)
    registry = AgentRegistry()
    registry.register_lazy("broken", BuiltinAgent("broken", module, name).load)
    with pytest.raises(ConfigurationError, match=message):
        registry.get("broken")


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
