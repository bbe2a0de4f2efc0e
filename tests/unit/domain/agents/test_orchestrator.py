"""``orchestrator``: function calling, structured output, and the fallback between them."""

from __future__ import annotations

import pytest

from jarvis.application.registry import builtin_agents
from jarvis.domain.agents.orchestrator import OrchestratorAgent
from jarvis.domain.errors import ConfigurationError, ToolsNotSupportedError
from jarvis.domain.llm.completion import Completion, ResponseFormat, Usage
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.domain.loop.budget import RunBudget
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.loop.settings import PromptSettings
from jarvis.domain.protocols.structured import step_schema
from jarvis.domain.run.updates import RunFinished, TextDelta
from jarvis.domain.tools.json_schema import validate
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryTool, ScriptedInference

CALC = ToolSpec(
    name="calculator",
    description="Evaluate an arithmetic expression.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)


def calculator() -> InMemoryTool:
    return InMemoryTool(CALC, lambda a: str(eval(str(a["expression"]), {"__builtins__": {}})))


def test_registered_with_its_defaults() -> None:
    registry = builtin_agents()
    assert registry.get("orchestrator") is OrchestratorAgent
    parts = AgentParts(inference=ScriptedInference(), model="m", tools=(calculator(),))
    agent = registry.create("orchestrator", parts)
    assert isinstance(agent, OrchestratorAgent)
    assert agent.accepts_tools
    assert agent.max_turns == 10
    assert agent.mode == "function_calling"


def test_unknown_modes_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="mode"):
        OrchestratorAgent(ScriptedInference(), "m", mode="magic")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="structured output"):
        OrchestratorAgent(ScriptedInference(), "m", structured_output="xml")  # type: ignore[arg-type]


async def test_function_calling_mode() -> None:
    engine = ScriptedInference(
        [
            Completion(
                content="",
                tool_calls=(
                    ToolCall(id="call_9", name="calculator", arguments={"expression": "6*7"}),
                ),
                finish_reason="tool_calls",
            ),
            "It is 42.",
        ]
    )
    result = await OrchestratorAgent(engine, "m", tools=[calculator()]).arun("6*7?")
    assert result.content == "It is 42."
    assert engine.requests[0].tools == (CALC,)
    assert engine.requests[0].response_format is None
    tool_message = engine.requests[1].messages[-1]
    assert (tool_message.role, tool_message.tool_call_id, tool_message.content) == (
        Role.TOOL,
        "call_9",
        "42",
    )


async def test_structured_mode_forces_one_json_step_per_reply() -> None:
    engine = ScriptedInference(
        [
            '{"thought": "compute", "tool": "calculator", "arguments": {"expression": "2**10"}}',
            '{"thought": "done", "final_answer": "1024"}',
        ]
    )
    tool = calculator()
    result = await OrchestratorAgent(engine, "m", tools=[tool], mode="structured").arun("2^10?")
    assert result.content == "1024"
    assert result.metadata["mode"] == "structured"
    first = engine.requests[0]
    assert first.tools == ()
    assert isinstance(first.response_format, ResponseFormat)
    assert first.response_format.type == "json_schema"
    assert tool.calls == [{"expression": "2**10"}]
    observation = engine.requests[1].messages[-1]
    assert (observation.role, observation.content) == (Role.USER, "Observation: 1024")


def test_the_step_schema_accepts_both_step_kinds_and_nothing_else() -> None:
    schema = step_schema([CALC])
    assert (
        validate({"thought": "t", "tool": "calculator", "arguments": {"expression": "1"}}, schema)
        == []
    )
    assert validate({"thought": "t", "final_answer": "x"}, schema) == []
    assert validate({"thought": "t", "tool": "rm", "arguments": {}}, schema) != []
    assert validate({"thought": "t"}, schema) != []


async def test_structured_text_mode_for_engines_without_schema_support() -> None:
    engine = ScriptedInference(
        [
            'THOUGHT: add\nTOOL: calculator\nARGUMENTS: {"expression": "1+1"}',
            "THOUGHT: ok\nFINAL_ANSWER: 2",
        ]
    )
    agent = OrchestratorAgent(
        engine, "m", tools=[calculator()], mode="structured", structured_output="text"
    )
    result = await agent.arun("q")
    assert result.content == "2"
    assert engine.requests[0].response_format is None
    assert "FINAL_ANSWER:" in engine.requests[0].messages[0].content


async def test_structured_parse_errors_are_fed_back() -> None:
    engine = ScriptedInference(['{"thought": "hmm"}', '{"thought": "ok", "final_answer": "done"}'])
    result = await OrchestratorAgent(engine, "m", tools=[calculator()], mode="structured").arun("q")
    assert result.content == "done"
    feedback = engine.requests[1].messages[-1].content
    assert feedback.startswith("Observation: Your reply could not be parsed")


async def test_tools_not_supported_switches_to_structured_mode_for_the_run() -> None:
    engine = ScriptedInference(
        [
            ToolsNotSupportedError("model m does not support tools", engine="ollama"),
            '{"thought": "use it", "tool": "calculator", "arguments": {"expression": "3*3"}}',
            '{"thought": "done", "final_answer": "9"}',
        ]
    )
    tool = calculator()
    agent = OrchestratorAgent(
        engine, "m", tools=[tool], prompts=PromptSettings(persona_prompt="SOUL")
    )
    result = await agent.arun("3*3?")
    assert result.content == "9"
    assert result.metadata["mode"] == "structured"
    assert result.metadata["fallback"] == "tools_not_supported"
    assert tool.calls == [{"expression": "3*3"}]
    assert result.turns == 2
    retry = engine.requests[1]
    assert retry.tools == ()
    assert retry.response_format is not None
    system = retry.messages[0].content
    assert "### calculator" in system
    assert system.endswith("SOUL")
    assert [m.role for m in retry.messages] == [Role.SYSTEM, Role.USER]


async def test_tools_not_supported_in_structured_mode_is_raised() -> None:
    engine = ScriptedInference([ToolsNotSupportedError("no", engine="x")])
    with pytest.raises(ToolsNotSupportedError):
        await OrchestratorAgent(engine, "m", tools=[calculator()], mode="structured").arun("q")


async def test_structured_wrap_up_asks_for_a_final_step() -> None:
    step = '{"thought": "again", "tool": "calculator", "arguments": {"expression": "1"}}'
    engine = ScriptedInference([step, step, '{"thought": "out of steps", "final_answer": "1"}'])
    result = await OrchestratorAgent(
        engine, "m", tools=[calculator()], mode="structured", budget=RunBudget(max_turns=2)
    ).arun("q")
    assert result.content == "1"
    assert result.stop_reason == "max_turns"
    last = engine.requests[-1]
    assert last.response_format is not None
    assert last.response_format.schema is not None
    assert "tool" not in str(last.response_format.schema.get("properties"))


async def test_structured_streaming_shows_only_the_answer() -> None:
    engine = ScriptedInference(['{"thought": "easy", "final_answer": "Paris"}'])
    agent = OrchestratorAgent(engine, "m", tools=[calculator()], mode="structured")
    updates = [u async for u in agent.astream("q")]
    assert [u.text for u in updates if isinstance(u, TextDelta)] == ["Paris"]
    assert isinstance(updates[-1], RunFinished)


async def test_max_turns_keeps_the_last_content_when_the_wrap_up_is_empty() -> None:
    engine = ScriptedInference(
        [
            Completion(
                content="Still checking.",
                tool_calls=(ToolCall(id="a", name="calculator", arguments={"expression": "1"}),),
                usage=Usage(prompt_tokens=1, completion_tokens=1),
            ),
            Completion(content=""),
        ]
    )
    result = await OrchestratorAgent(
        engine, "m", tools=[calculator()], budget=RunBudget(max_turns=1)
    ).arun("q")
    assert result.content == "Still checking."
    assert result.metadata["max_turns_exceeded"] is True


async def test_a_forced_tool_choice_holds_for_the_first_turn_only() -> None:
    engine = ScriptedInference(
        [
            Completion(
                content="",
                tool_calls=(ToolCall(id="a", name="calculator", arguments={"expression": "1"}),),
            ),
            "1",
        ]
    )
    agent = OrchestratorAgent(engine, "m", tools=[calculator()], tool_choice="required")
    await agent.arun("q")
    assert [r.tool_choice for r in engine.requests] == ["required", "auto"]
    with pytest.raises(ConfigurationError, match="tool choice"):
        OrchestratorAgent(engine, "m", tool_choice="always")  # type: ignore[arg-type]


async def test_a_truncated_json_step_still_yields_readable_text() -> None:
    step = '{"thought": "again", "tool": "calculator", "arguments": {"expression": "1"}}'
    engine = ScriptedInference([step, '{"thought": "I think the answer is \\"one\\" and'])
    agent = OrchestratorAgent(
        engine, "m", tools=[calculator()], mode="structured", budget=RunBudget(max_turns=1)
    )
    result = await agent.arun("q")
    assert result.content == 'I think the answer is "one" and'
    assert result.stop_reason == "max_turns"
