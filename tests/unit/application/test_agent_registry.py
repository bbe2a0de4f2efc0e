"""The agent registry: keys, aliases, duplicates and creation."""

from __future__ import annotations

import pytest

from jarvis.application.registry import AgentRegistry, builtin_agents
from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.errors import ConfigurationError, UnknownAgentError
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.loop.settings import SamplingSettings
from jarvis.testing import ScriptedInference


def test_register_get_contains_keys() -> None:
    registry = AgentRegistry()
    registry.register("simple", SimpleAgent, aliases=("plain",))
    assert registry.contains("simple")
    assert registry.contains("plain")
    assert "plain" in registry
    assert registry.get("plain") is SimpleAgent
    assert registry.keys() == ["simple"]
    assert registry.aliases() == {"plain": "simple"}


@pytest.mark.parametrize("name", ["simple", "plain"])
def test_a_taken_key_or_alias_is_an_error(name: str) -> None:
    registry = AgentRegistry()
    registry.register("simple", SimpleAgent, aliases=("plain",))
    with pytest.raises(ConfigurationError, match="already has an entry"):
        registry.register(name, SimpleAgent)


def test_unknown_key_lists_the_known_ones() -> None:
    registry = builtin_agents()
    with pytest.raises(UnknownAgentError) as info:
        registry.get("nope")
    assert "simple" in info.value.known
    assert "simple" in str(info.value)


def test_create_builds_an_agent_on_the_given_engine() -> None:
    engine = ScriptedInference(["hello"])
    parts = AgentParts(inference=engine, model="m", sampling=SamplingSettings(temperature=0.1))
    agent = builtin_agents().create("simple", parts)
    assert isinstance(agent, SimpleAgent)
    assert agent.temperature == 0.1
    assert agent.run("hi").content == "hello"
