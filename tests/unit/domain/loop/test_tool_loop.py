"""The one agent loop: every branch, driven by a scripted engine and in-memory tools."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from jarvis.domain.agents.orchestrator import OrchestratorAgent
from jarvis.domain.errors import EngineProtocolError, EngineUnavailableError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Completion, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.domain.loop.budget import RunBudget
from jarvis.domain.loop.guard import LoopGuardConfig
from jarvis.domain.loop.settings import PromptSettings
from jarvis.domain.loop.tool_loop import ToolUsingAgent
from jarvis.domain.run.events import AgentRunEnded, Event, EventBus, EventType, LoopGuardTriggered
from jarvis.domain.run.updates import (
    RunFinished,
    RunUpdate,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryTool, ScriptedInference
from tests.support.barrier_tool import barrier_sleeper

CALC_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"expression": {"type": "string"}},
    "required": ["expression"],
    "additionalProperties": False,
}


def calculator() -> InMemoryTool:
    def evaluate(arguments: JSONObject) -> str:
        expression = arguments["expression"]
        assert isinstance(expression, str)
        left, right = expression.split("+")
        return str(int(left) + int(right))

    return InMemoryTool(
        ToolSpec(name="calculator", description="Add two numbers: 'a+b'.", parameters=CALC_SCHEMA),
        evaluate,
    )


def calls(*specs: tuple[str, str, JSONObject], usage: Usage | None = None) -> Completion:
    return Completion(
        content="",
        tool_calls=tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in specs),
        finish_reason="tool_calls",
        usage=usage or Usage(prompt_tokens=10, completion_tokens=5),
    )


def calc(call_id: str, expression: str) -> Completion:
    return calls((call_id, "calculator", {"expression": expression}))


def text(content: str) -> Completion:
    return Completion(content=content, usage=Usage(prompt_tokens=10, completion_tokens=5))


async def collect(agent: ToolUsingAgent, question: str = "q") -> list[RunUpdate]:
    return [u async for u in agent.astream(question)]


# --- the basic loop ------------------------------------------------------------------------


async def test_parallel_calls_run_and_results_come_back_in_call_order() -> None:
    sleepy = barrier_sleeper(3, "done")

    sleep = InMemoryTool(ToolSpec(name="sleep", description="Sleep."), sleepy)
    engine = ScriptedInference(
        [
            calls(
                ("a", "sleep", {"delay": 0.25}),
                ("b", "sleep", {"delay": 0.15}),
                ("c", "sleep", {"delay": 0.2}),
            ),
            text("all done"),
        ]
    )
    result = await ToolUsingAgent(engine, "m", tools=[sleep]).arun("q")
    assert result.content == "all done"
    assert result.turns == 2
    assert [r.call_id for r in result.tool_results] == ["a", "b", "c"]
    second = engine.requests[1].messages
    assert [m.role for m in second] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.TOOL,
    ]
    assert [c.id for c in second[2].tool_calls] == ["a", "b", "c"]
    assert [(m.tool_call_id, m.content) for m in second[3:]] == [
        ("a", "done 0.25"),
        ("b", "done 0.15"),
        ("c", "done 0.2"),
    ]


async def test_tools_are_offered_natively_and_usage_is_summed() -> None:
    engine = ScriptedInference([calc("c1", "2+2"), text("4")])
    result = await ToolUsingAgent(engine, "m", tools=[calculator()]).arun("2+2?")
    assert [s.name for s in engine.requests[0].tools] == ["calculator"]
    assert result.usage == Usage(prompt_tokens=20, completion_tokens=10)
    assert result.stop_reason == "final_answer"
    assert result.metadata["mode"] == "function_calling"


async def test_calls_without_ids_get_unique_ones() -> None:
    engine = ScriptedInference(
        [
            calls(
                ("", "calculator", {"expression": "1+1"}), ("", "calculator", {"expression": "2+2"})
            ),
            text("ok"),
        ]
    )
    result = await ToolUsingAgent(engine, "m", tools=[calculator()]).arun("q")
    ids = [r.call_id for r in result.tool_results]
    assert len(set(ids)) == 2
    assert all(ids)
    tool_messages = [m for m in engine.requests[1].messages if m.role is Role.TOOL]
    assert [m.tool_call_id for m in tool_messages] == ids


async def test_think_blocks_are_stripped_from_the_answer() -> None:
    engine = ScriptedInference([text("<think>let me see</think>\n\nThe answer is 4.")])
    result = await ToolUsingAgent(engine, "m").arun("q")
    assert result.content == "The answer is 4."


async def test_an_empty_reply_is_fed_back_instead_of_ending_the_run() -> None:
    engine = ScriptedInference([text("<think>hmm</think>"), text("Paris")])
    result = await ToolUsingAgent(engine, "m").arun("q")
    assert result.content == "Paris"
    assert result.metadata["parse_errors"] == 1
    assert "empty" in engine.requests[1].messages[-1].content


# --- bad calls ------------------------------------------------------------------------------


async def test_unknown_tool_is_reported_and_the_model_recovers() -> None:
    engine = ScriptedInference([calls(("c1", "multiply", {})), calc("c2", "3+4"), text("7")])
    tool = calculator()
    result = await ToolUsingAgent(engine, "m", tools=[tool]).arun("q")
    first = result.tool_results[0]
    assert not first.success
    assert "Unknown tool 'multiply'. Available tools: calculator." in first.content
    assert result.content == "7"
    assert tool.calls == [{"expression": "3+4"}]


async def test_malformed_json_arguments_are_reported_to_the_model() -> None:
    broken = ToolCall.from_json_text(id="c1", name="calculator", text='{"expression": "1+')
    engine = ScriptedInference([Completion(content="", tool_calls=(broken,)), text("gave up")])
    result = await ToolUsingAgent(engine, "m", tools=[calculator()]).arun("q")
    tool_message = engine.requests[1].messages[-1]
    assert tool_message.role is Role.TOOL
    assert tool_message.content.startswith("Error: Invalid arguments for tool 'calculator'")
    assert result.tool_results[0].metadata == {"error": "invalid_json"}


async def test_wrong_argument_types_are_fed_back_and_the_model_corrects_itself() -> None:
    tool = calculator()
    engine = ScriptedInference(
        [calls(("c1", "calculator", {"expression": 4})), calc("c2", "2+2"), text("4")]
    )
    result = await ToolUsingAgent(engine, "m", tools=[tool]).arun("q")
    feedback = engine.requests[1].messages[-1].content
    assert "expression: expected string, got integer" in feedback
    assert tool.calls == [{"expression": "2+2"}]
    assert [r.success for r in result.tool_results] == [False, True]
    assert result.content == "4"


async def test_a_raising_tool_and_a_hanging_tool_become_failed_results() -> None:
    def boom(arguments: JSONObject) -> str:
        raise RuntimeError("disk on fire")

    async def hang(arguments: JSONObject) -> str:
        await asyncio.Event().wait()  # never ends on its own: only the timeout stops it
        return "never"

    tools = [
        InMemoryTool(ToolSpec(name="boom", description="."), boom),
        InMemoryTool(ToolSpec(name="hang", description=".", timeout_seconds=0.1), hang),
    ]
    engine = ScriptedInference([calls(("a", "boom", {}), ("b", "hang", {})), text("sorry")])
    result = await asyncio.wait_for(ToolUsingAgent(engine, "m", tools=tools).arun("q"), 60)
    assert [r.content for r in result.tool_results] == [
        "Tool 'boom' failed: RuntimeError: disk on fire",
        "Tool 'hang' timed out after 0.1s.",
    ]
    assert result.stop_reason == "final_answer"


# --- budgets --------------------------------------------------------------------------------


async def test_turn_budget_ends_with_one_tool_less_call() -> None:
    engine = ScriptedInference([calc("a", "1+1"), calc("b", "2+2"), text("best guess: 4")])
    result = await ToolUsingAgent(
        engine, "m", tools=[calculator()], budget=RunBudget(max_turns=2)
    ).arun("q")
    assert result.stop_reason == "max_turns"
    assert result.metadata["max_turns_exceeded"] is True
    assert result.metadata["budget_exhausted"] == "turns"
    assert result.content == "best guess: 4"
    assert result.turns == 3
    assert len(engine.requests) == 3
    last = engine.requests[-1]
    assert last.tools == ()
    assert "maximum number of steps" in last.messages[-1].content
    assert last.messages[-2].role is Role.TOOL  # every call of the last turn was answered


async def test_token_budget() -> None:
    engine = ScriptedInference(
        [
            calls(
                ("a", "calculator", {"expression": "1+1"}),
                usage=Usage(prompt_tokens=900, completion_tokens=200),
            ),
            text("2"),
        ]
    )
    result = await ToolUsingAgent(
        engine, "m", tools=[calculator()], budget=RunBudget(max_total_tokens=1000)
    ).arun("q")
    assert result.metadata["budget_exhausted"] == "tokens"
    assert result.stop_reason == "max_total_tokens"
    assert engine.requests[-1].tools == ()
    assert result.usage.total_tokens == 1115


async def test_time_budget_interrupts_a_slow_tool() -> None:
    async def slow(arguments: JSONObject) -> str:
        await asyncio.Event().wait()  # never ends on its own (its own timeout is 30 s)
        return "late"

    tool = InMemoryTool(ToolSpec(name="slow", description="."), slow)
    engine = ScriptedInference([calls(("a", "slow", {})), text("partial answer")])
    started = time.perf_counter()
    agent = ToolUsingAgent(engine, "m", tools=[tool], budget=RunBudget(max_seconds=0.2))
    result = await asyncio.wait_for(agent.arun("q"), 60)
    assert time.perf_counter() - started < 30  # the run's limit, not the tool's own timeout
    assert result.metadata["budget_exhausted"] == "time"
    assert result.content == "partial answer"
    assert result.tool_results[0].metadata == {"error": "run_time_limit"}


class StallsAfterTheFirstReply(ScriptedInference):
    """Answers the first request, then never answers again: only a time limit ends a run."""

    async def _stall(self, request: InferenceRequest) -> None:
        if self.requests:
            self.requests.append(request)
            await asyncio.Event().wait()

    async def generate(self, request: InferenceRequest) -> Completion:
        await self._stall(request)
        return await super().generate(request)

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        await self._stall(request)
        async for chunk in super().stream(request):
            yield chunk


async def test_time_budget_interrupts_a_slow_engine() -> None:
    engine = StallsAfterTheFirstReply([calc("a", "1+1")])
    agent = ToolUsingAgent(engine, "m", tools=[calculator()], budget=RunBudget(max_seconds=0.45))
    result = await asyncio.wait_for(agent.arun("q"), 60)
    assert result.metadata["budget_exhausted"] == "time"
    assert result.stop_reason == "max_seconds"
    # turn 1 runs, turn 2 never answers and is cut at 0.45 s, and the final call without
    # tools, which never answers either, is cut in its turn: the run still ends
    assert len(engine.requests) == 3
    assert engine.requests[1].tools
    assert engine.requests[2].tools == ()
    assert result.content  # the last content or the fixed notice, never empty


async def test_a_model_that_repeats_itself_is_warned_then_blocked_then_stopped() -> None:
    tool = calculator()
    engine = ScriptedInference([calc("x", "1+1")])  # the same call, forever
    result = await ToolUsingAgent(
        engine,
        "m",
        tools=[tool],
        loop_guard=LoopGuardConfig(max_identical_calls=2, max_blocked_turns=2),
    ).arun("q")
    assert len(tool.calls) == 2
    assert [r.metadata.get("loop_guard") for r in result.tool_results] == [
        None,
        None,
        "warn",
        "block",
        "block",
    ]
    warning = result.tool_results[2].content
    assert "already called 'calculator'" in warning
    assert "2" in warning
    assert result.stop_reason == "loop_detected"
    assert result.metadata["budget_exhausted"] == "loop"
    assert result.turns == 6  # 5 tool turns + the final tool-less call
    assert engine.requests[-1].tools == ()
    assert result.metadata["loop_guard"] == [
        {"tool": "calculator", "action": "warn", "pattern": "identical_call"},
        {"tool": "calculator", "action": "block", "pattern": "identical_call"},
        {"tool": "calculator", "action": "block", "pattern": "identical_call"},
    ]


async def test_every_warned_or_blocked_call_is_published_as_loop_guard_triggered() -> None:
    events: list[Event] = []
    bus = EventBus()
    bus.subscribe(events.append, EventType.LOOP_GUARD_TRIGGERED)
    engine = ScriptedInference([calc("x", "1+1")])  # the same call, forever
    agent = ToolUsingAgent(
        engine,
        "m",
        tools=[calculator()],
        loop_guard=LoopGuardConfig(max_identical_calls=2, max_blocked_turns=2),
        bus=bus,
    )
    result = await agent.arun("q")
    triggered = [e for e in events if isinstance(e, LoopGuardTriggered)]
    assert len(triggered) == len(events) == 3
    assert [(e.action, e.pattern, e.turn) for e in triggered] == [
        ("warn", "identical_call", 3),
        ("block", "identical_call", 4),
        ("block", "identical_call", 5),
    ]
    first = triggered[0]
    assert (first.agent, first.tool, first.call_id) == ("tool_loop", "calculator", "x")
    assert first.arguments == {"expression": "1+1"}
    assert first.type is EventType.LOOP_GUARD_TRIGGERED
    assert first.message == result.tool_results[2].content  # what the model was told


async def test_no_loop_guard_event_while_calls_are_allowed() -> None:
    events: list[Event] = []
    bus = EventBus()
    bus.subscribe(events.append)
    engine = ScriptedInference([calc("a", "1+1"), calc("b", "2+2"), text("done")])
    await ToolUsingAgent(engine, "m", tools=[calculator()], bus=bus).arun("q")
    assert events
    assert not [e for e in events if e.type is EventType.LOOP_GUARD_TRIGGERED]


async def test_each_run_gets_a_fresh_loop_guard() -> None:
    engine = ScriptedInference([calc("x", "1+1"), text("2"), calc("x", "1+1"), text("2")])
    agent = ToolUsingAgent(
        engine, "m", tools=[calculator()], loop_guard=LoopGuardConfig(max_identical_calls=1)
    )
    assert (await agent.arun("q")).tool_results[0].success
    assert (await agent.arun("q")).tool_results[0].success


# --- prompts ---------------------------------------------------------------------------------


async def test_system_prompt_and_persona_never_erase_the_protocol_instructions() -> None:
    engine = ScriptedInference(["ok"])
    agent = OrchestratorAgent(
        engine,
        "m",
        tools=[calculator()],
        mode="structured",
        prompts=PromptSettings(system_prompt="Be terse.", persona_prompt="SOUL: kind"),
    )
    await agent.arun("q")
    system = engine.requests[0].messages[0].content
    assert system.startswith("Be terse.")
    assert system.index("Be terse.") < system.index("### calculator") < system.index("SOUL: kind")
    assert '"final_answer"' in system


# --- events, streaming, errors, cancellation ------------------------------------------------


async def test_events_of_a_tool_run() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    engine = ScriptedInference([calc("a", "1+1"), text("2")])
    await ToolUsingAgent(engine, "m", tools=[calculator()], bus=bus).arun("q")
    assert [e.type for e in seen] == [
        EventType.AGENT_RUN_START,
        EventType.INFERENCE_START,
        EventType.INFERENCE_END,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_END,
        EventType.INFERENCE_START,
        EventType.INFERENCE_END,
        EventType.AGENT_RUN_END,
    ]
    end = seen[-1]
    assert isinstance(end, AgentRunEnded)
    assert (end.turns, end.stop_reason) == (2, "final_answer")


async def test_streaming_reports_calls_results_and_text_from_the_same_loop() -> None:
    engine = ScriptedInference([calc("a", "2+2"), text("The sum is 4.")])
    updates = await collect(ToolUsingAgent(engine, "m", tools=[calculator()]))
    kinds = [type(u).__name__ for u in updates]
    assert kinds[:2] == ["ToolCallsRequested", "ToolResultReady"]
    assert kinds[-1] == "RunFinished"
    requested, ready = updates[0], updates[1]
    assert isinstance(requested, ToolCallsRequested)
    assert requested.calls[0].arguments == {"expression": "2+2"}
    assert isinstance(ready, ToolResultReady)
    assert ready.result.content == "4"
    streamed = "".join(u.text for u in updates if isinstance(u, TextDelta))
    assert streamed == "The sum is 4."
    final = updates[-1]
    assert isinstance(final, RunFinished)
    assert final.result.content == "The sum is 4."


async def test_streaming_hides_think_blocks_split_across_chunks() -> None:
    chunks = [StreamChunk(content=c) for c in ["<thi", "nk>secret</th", "ink>\n\nPar", "is"]]
    engine = ScriptedInference(
        [[*chunks, StreamChunk(finish_reason="stop", usage=Usage(completion_tokens=4))]]
    )
    updates = await collect(ToolUsingAgent(engine, "m"))
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == "Paris"
    final = updates[-1]
    assert isinstance(final, RunFinished)
    assert final.result.content == "Paris"
    assert final.result.usage.completion_tokens == 4


async def test_streaming_and_non_streaming_agree() -> None:
    script = [calc("a", "1+2"), text("3")]
    plain = await ToolUsingAgent(ScriptedInference(script), "m", tools=[calculator()]).arun("q")
    updates = await collect(ToolUsingAgent(ScriptedInference(script), "m", tools=[calculator()]))
    final = updates[-1]
    assert isinstance(final, RunFinished)
    assert (final.result.content, final.result.turns, final.result.stop_reason) == (
        plain.content,
        plain.turns,
        plain.stop_reason,
    )


async def test_engine_errors_propagate_typed_and_end_the_turn() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    engine = ScriptedInference([calc("a", "1+1"), EngineUnavailableError("down", engine="x")])
    with pytest.raises(EngineUnavailableError):
        await ToolUsingAgent(engine, "m", tools=[calculator()], bus=bus).arun("q")
    end = seen[-1]
    assert isinstance(end, AgentRunEnded)
    assert end.stop_reason == "error"


async def test_cancellation_stops_the_tools_and_is_re_raised() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    cancelled = asyncio.Event()
    entered = asyncio.Event()

    async def slow(arguments: JSONObject) -> str:
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    tool = InMemoryTool(ToolSpec(name="slow", description="."), slow)
    agent = ToolUsingAgent(
        ScriptedInference([calls(("a", "slow", {}))]), "m", tools=[tool], bus=bus
    )
    task = asyncio.ensure_future(agent.arun("q"))
    await asyncio.wait_for(entered.wait(), 60)  # the tool is running: cancel the run mid-call
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert cancelled.is_set()
    end = seen[-1]
    assert isinstance(end, AgentRunEnded)
    assert end.stop_reason == "cancelled"


async def test_closing_a_stream_early_counts_as_cancelled() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    agent = ToolUsingAgent(
        ScriptedInference([calc("a", "1+1"), text("2")]), "m", tools=[calculator()], bus=bus
    )
    stream = agent.astream("q")
    first = await anext(stream)
    assert isinstance(first, ToolCallsRequested)
    await stream.aclose()  # type: ignore[attr-defined]
    end = seen[-1]
    assert isinstance(end, AgentRunEnded)
    assert end.stop_reason == "cancelled"


def test_budget_values_are_checked() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        ToolUsingAgent(ScriptedInference(), "m", budget=RunBudget(max_turns=0))
    with pytest.raises(ValueError, match="max_seconds"):
        ToolUsingAgent(ScriptedInference(), "m", budget=RunBudget(max_seconds=0))


async def test_the_metadata_of_a_bounded_run_is_json_serialisable() -> None:
    engine = ScriptedInference([calc("x", "1+1")])
    result = await ToolUsingAgent(
        engine, "m", tools=[calculator()], budget=RunBudget(max_turns=3)
    ).arun("q")
    json.dumps(result.metadata)


@pytest.mark.parametrize("before", [[], [StreamChunk(content="par")]], ids=["at once", "later"])
async def test_a_stream_cut_is_an_error_the_loop_never_replays(before: list[StreamChunk]) -> None:
    # replaying a request is the adapter's call (it knows whether anything was delivered)
    chunks: list[StreamChunk | Exception] = [*before, EngineProtocolError("cut", engine="x")]

    class Cut(ScriptedInference):
        async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
            self.requests.append(request)
            for item in chunks:
                if isinstance(item, Exception):
                    raise item
                yield item

    engine = Cut()
    ended: list[Event] = []
    bus = EventBus()
    bus.subscribe(ended.append, EventType.AGENT_RUN_END)
    with pytest.raises(EngineProtocolError):
        await collect(ToolUsingAgent(engine, "m", bus=bus))
    assert len(engine.requests) == 1
    assert [e.stop_reason for e in ended if isinstance(e, AgentRunEnded)] == ["error"]
