"""Agent options given to the application (the SDK's ``agent_options=``, the CLI's ``-O``)
are checked once, the same way for every caller, before any request is made."""

from __future__ import annotations

import math

import pytest

from jarvis.application.ask import AskQuestion, AskService
from jarvis.application.registry import builtin_agents
from jarvis.domain.agents.native_openhands import NativeOpenHandsAgent
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONValue
from jarvis.domain.loop.tool_loop import ToolUsingAgent
from jarvis.testing import InMemoryRepl, ScriptedInference


def service(engine: ScriptedInference) -> AskService:
    return AskService(
        registry=builtin_agents(), inference=engine, default_model="m", repl=InMemoryRepl()
    )


async def build(agent: str, **options: JSONValue) -> object:
    engine = ScriptedInference(["unused"])
    built, _model = await service(engine).build_agent(
        AskQuestion(question="q", agent=agent, agent_options=options)
    )
    assert engine.requests == []
    return built


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("max_seconds", math.nan, "max_seconds takes a number from 0.001 to 86400"),
        ("max_seconds", math.inf, "max_seconds takes a number from 0.001 to 86400"),
        ("max_turns", 0, "max_turns takes an integer from 1 to 10000"),
        ("max_turns", 2.5, "max_turns takes an integer"),
        ("max_turns", True, "max_turns takes an integer"),
        ("max_parallel_tools", 0, "max_parallel_tools takes an integer of at least 1"),
        ("options", {"seed": math.nan}, "options holds a number that is not finite"),
        ("repl", {}, "repl cannot be set as an agent option"),
    ],
)
async def test_the_sdk_gets_the_command_lines_checks(
    option: str, value: JSONValue, said: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        await build("orchestrator", **{option: value})
    assert said in info.value.message
    assert "orchestrator" in info.value.message


async def test_a_wrong_type_is_named() -> None:
    with pytest.raises(ConfigurationError, match="sub_model takes a string, not 5"):
        await build("rlm", sub_model=5)


async def test_an_unknown_key_names_the_agent_the_key_and_the_accepted_keys() -> None:
    with pytest.raises(ConfigurationError) as info:
        await build("native_react", sub_model="small", max_turns=3)
    message = info.value.message
    assert "Agent 'native_react'" in message
    assert "'sub_model'" in message
    assert message.endswith(
        "the native_react agent takes: max_output_chars, max_parallel_tools, max_parse_errors,"
        " max_seconds, max_tool_calls_per_turn, max_total_tokens, max_turns, options."
    )
    assert info.value.hint == "Options given: max_turns, sub_model"


@pytest.mark.parametrize("agent", ["native_openhands", "rlm"])
async def test_the_code_agents_take_the_tool_loops_newer_options(agent: str) -> None:
    built = await build(agent, max_parallel_tools=2, max_tool_calls_per_turn=5, max_seconds=30)
    assert isinstance(built, ToolUsingAgent)
    assert built.executor.max_parallel_tools == 2
    assert built.executor.max_tool_calls_per_turn == 5
    assert built.budget.max_seconds == 30
    assert built.budget.max_turns == {"native_openhands": 3, "rlm": 10}[agent]  # own default


async def test_codeact_reads_its_prefetch_options() -> None:
    built = await build("native_openhands", prefetch_urls=False, max_prefetch_urls=1)
    assert isinstance(built, NativeOpenHandsAgent)
    assert built.prefetch.enabled is False
    assert built.prefetch.max_urls == 1
