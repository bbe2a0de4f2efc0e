"""``native_react``: the text protocol end to end over a scripted engine."""

from __future__ import annotations

from jarvis.application.registry import builtin_agents
from jarvis.domain.agents.react import NativeReActAgent
from jarvis.domain.llm.messages import Role
from jarvis.domain.loop.budget import RunBudget
from jarvis.domain.run.updates import RunFinished, TextDelta
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryTool, ScriptedInference

SEARCH = ToolSpec(
    name="Search",
    description="Search the notes.",
    category="memory",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)


def search() -> InMemoryTool:
    return InMemoryTool(SEARCH, lambda a: f"notes about {a['query']}")


def test_registered_under_its_key_and_alias() -> None:
    registry = builtin_agents()
    assert registry.get("native_react") is NativeReActAgent
    assert registry.get("react") is NativeReActAgent
    assert NativeReActAgent.accepts_tools


async def test_a_full_react_run() -> None:
    tool = search()
    engine = ScriptedInference(
        [
            'Thought: look it up\nAction: search\nAction Input: {"query": "llamas"}\n'
            "Observation: made up",
            "Thought: I know now\nFinal Answer: Llamas hum.",
        ]
    )
    result = await NativeReActAgent(engine, "m", tools=[tool]).arun("What do llamas do?")
    assert result.content == "Llamas hum."
    assert result.stop_reason == "final_answer"
    assert tool.calls == [{"query": "llamas"}]
    assert result.tool_results[0].call_id == "react_1"
    system = engine.requests[0].messages[0].content
    assert "### Search" in system
    assert "query (string, required)" in system
    assert "Category: memory" in system
    assert "Final Answer:" in system
    assert engine.requests[0].tools == ()
    history = engine.requests[1].messages
    assert history[-2].role is Role.ASSISTANT
    assert "made up" not in history[-2].content
    assert history[-1].content == "Observation: notes about llamas"


async def test_plain_text_input_goes_to_a_single_parameter_tool() -> None:
    tool = search()
    engine = ScriptedInference(["Action: Search\nAction Input: red pandas", "Final Answer: ok"])
    await NativeReActAgent(engine, "m", tools=[tool]).arun("q")
    assert tool.calls == [{"query": "red pandas"}]


async def test_failures_are_marked_in_the_observation() -> None:
    engine = ScriptedInference(["Action: delete\nAction Input: {}", "Final Answer: cannot"])
    result = await NativeReActAgent(engine, "m", tools=[search()]).arun("q")
    assert result.content == "cannot"
    assert engine.requests[1].messages[-1].content == (
        "Observation: Error: Unknown tool 'delete'. Available tools: Search."
    )


async def test_a_json_envelope_reply_does_not_end_the_run() -> None:
    tool = search()
    engine = ScriptedInference(
        [
            '```json\n{"action": "Search", "action_input": {"query": "owls"}}\n```',
            '{"final_answer": "Owls hoot."}',
        ]
    )
    result = await NativeReActAgent(engine, "m", tools=[tool]).arun("q")
    assert tool.calls == [{"query": "owls"}]
    assert result.content == "Owls hoot."


async def test_unreadable_replies_are_fed_back_then_the_run_stops_with_parse_error() -> None:
    engine = ScriptedInference(["Thought: hmm, let me think"])
    result = await NativeReActAgent(
        engine, "m", tools=[search()], budget=RunBudget(max_parse_errors=3)
    ).arun("q")
    assert result.stop_reason == "parse_error"
    assert result.turns == 3
    assert "neither an 'Action:' line nor a 'Final Answer:' line" in str(
        result.metadata["parse_error"]
    )
    feedback = engine.requests[1].messages[-1].content
    assert feedback.startswith("Observation: Your reply could not be parsed")


async def test_a_parse_error_then_recovery() -> None:
    engine = ScriptedInference(["Action:\nAction Input: {}", "Final Answer: fine"])
    result = await NativeReActAgent(engine, "m", tools=[search()]).arun("q")
    assert result.content == "fine"
    assert result.metadata["parse_errors"] == 1


async def test_plain_text_is_taken_as_the_final_answer() -> None:
    result = await NativeReActAgent(ScriptedInference(["Just 42."]), "m").arun("q")
    assert (result.content, result.stop_reason) == ("Just 42.", "final_answer")


async def test_streaming_shows_only_the_final_answer() -> None:
    engine = ScriptedInference(
        [
            'Thought: look\nAction: Search\nAction Input: {"query": "x"}',
            "Thought: got it\nFinal Answer: The notes say x.",
        ]
    )
    updates = [u async for u in NativeReActAgent(engine, "m", tools=[search()]).astream("q")]
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == "The notes say x."
    final = updates[-1]
    assert isinstance(final, RunFinished)
    assert final.result.content == "The notes say x."


async def test_wrap_up_extracts_the_final_answer() -> None:
    engine = ScriptedInference(
        ['Action: Search\nAction Input: {"query": "x"}'] * 2 + ["Final Answer: best effort"]
    )
    result = await NativeReActAgent(
        engine, "m", tools=[search()], budget=RunBudget(max_turns=2)
    ).arun("q")
    assert (result.content, result.stop_reason) == ("best effort", "max_turns")
    assert "Final Answer: <your answer>" in engine.requests[-1].messages[-1].content
