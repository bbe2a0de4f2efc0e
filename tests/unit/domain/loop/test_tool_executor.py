"""The tool executor: every way a call can go wrong ends as a result the model can read."""

from __future__ import annotations

import asyncio
import time

import pytest
from typer.testing import CliRunner

from jarvis.domain.agents.orchestrator import OrchestratorAgent
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.domain.loop.budget import RunBudget
from jarvis.domain.loop.settings import ToolExecution
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.run.events import Event, EventBus, EventType, ToolCallEnded
from jarvis.domain.tools.specs import ToolResult, ToolSpec
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.cli.errors import EXIT_USAGE
from jarvis.entrypoints.composition import Container
from jarvis.testing import InMemoryTool, ScriptedInference
from tests.support.barrier_tool import barrier_sleeper

ADD_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def adder() -> InMemoryTool:
    def add(arguments: JSONObject) -> str:
        a, b = arguments["a"], arguments["b"]
        assert isinstance(a, int)
        assert isinstance(b, int)
        return str(a + b)

    return InMemoryTool(
        ToolSpec(name="Add", description="Add two integers.", parameters=ADD_SCHEMA), add
    )


def tool(name: str, handler: object, *, timeout: float = 30.0) -> InMemoryTool:
    spec = ToolSpec(name=name, description=name, timeout_seconds=timeout)
    return InMemoryTool(spec, handler)  # type: ignore[arg-type]


async def test_runs_a_valid_call_and_sets_id_latency_and_name() -> None:
    add = adder()
    result = await ToolExecutor([add]).execute(
        ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
    )
    assert result == ToolResult(
        tool_name="Add", content="5", call_id="c1", latency_seconds=result.latency_seconds
    )
    assert result.latency_seconds > 0
    assert add.calls == [{"a": 2, "b": 3}]


async def test_unknown_tool_lists_the_available_ones() -> None:
    executor = ToolExecutor([adder(), tool("think", lambda a: "ok")])
    result = await executor.execute(ToolCall(id="c", name="multiply"))
    assert not result.success
    assert result.content == "Unknown tool 'multiply'. Available tools: Add, think."
    assert result.metadata == {"error": "unknown_tool"}
    assert result.call_id == "c"


async def test_unparsed_arguments_report_the_json_error_and_the_schema() -> None:
    add = adder()
    call = ToolCall.from_json_text(id="c", name="add", text='{"a": 1, "b": ')
    result = await ToolExecutor([add]).execute(call)
    assert not result.success
    assert result.metadata == {"error": "invalid_json"}
    assert "not valid JSON" in result.content
    assert '"required": ["a", "b"]' in result.content
    assert add.calls == []
    not_object = await ToolExecutor([add]).execute(
        ToolCall.from_json_text(id="c", name="add", text="[1, 2]")
    )
    assert "not a JSON object" in not_object.content


async def test_schema_violations_are_returned_and_the_tool_does_not_run() -> None:
    add = adder()
    result = await ToolExecutor([add]).execute(
        ToolCall(id="c", name="add", arguments={"a": "2", "c": 1})
    )
    assert not result.success
    assert result.metadata == {"error": "invalid_arguments"}
    assert "- a: expected integer, got string" in result.content
    assert "- $: missing required property 'b'" in result.content
    assert "- c: unexpected property" in result.content
    assert add.calls == []


async def test_exceptions_become_failed_results() -> None:
    def boom(arguments: JSONObject) -> str:
        raise ValueError("bad input")

    result = await ToolExecutor([tool("x", boom)]).execute(ToolCall(id="c", name="x"))
    assert not result.success
    assert result.content == "Tool 'x' failed: ValueError: bad input"
    assert result.metadata == {"error": "exception"}


async def test_a_hanging_tool_times_out_and_the_executor_stops_waiting() -> None:
    stubborn_started = asyncio.Event()
    let_go = asyncio.Event()
    finished = asyncio.Event()

    async def stubborn(arguments: JSONObject) -> str:
        stubborn_started.set()
        try:
            await let_go.wait()
        except asyncio.CancelledError:
            # swallows the cancellation, like a badly written tool: it goes on until the
            # test lets it go, which is only after the executor has answered
            await let_go.wait()
        finally:
            finished.set()
        return "too late"

    executor = ToolExecutor([tool("hang", stubborn, timeout=0.2)])
    started = time.perf_counter()
    result = await asyncio.wait_for(executor.execute(ToolCall(id="c", name="hang")), 60)
    elapsed = time.perf_counter() - started
    assert stubborn_started.is_set()
    assert not finished.is_set()  # the executor did not wait for the tool to give up
    assert elapsed >= 0.2
    assert not result.success
    assert result.content == "Tool 'hang' timed out after 0.2s."
    assert result.metadata == {"error": "timeout"}
    let_go.set()  # let the abandoned tool finish before the loop closes
    await asyncio.wait_for(finished.wait(), 60)


async def test_output_is_bounded_with_a_visible_marker() -> None:
    executor = ToolExecutor([tool("big", lambda a: "x" * 500)], max_output_chars=100)
    result = await executor.execute(ToolCall(id="c", name="big"))
    assert result.truncated
    assert result.content.startswith("x" * 100)
    assert result.content.endswith("[output truncated: 100 of 500 characters shown]")
    small = await ToolExecutor([tool("s", lambda a: "short")], max_output_chars=100).execute(
        ToolCall(id="c", name="s")
    )
    assert not small.truncated


async def test_parallel_calls_run_concurrently_and_keep_call_order() -> None:
    sleepy = barrier_sleeper(3, "slept")

    executor = ToolExecutor([tool("sleep", sleepy)])
    calls = [
        ToolCall(id=f"c{i}", name="sleep", arguments={"delay": d})
        for i, d in enumerate([0.03, 0.01, 0.02])
    ]
    results = await executor.execute_all(calls)
    assert all(r.success for r in results), [r.content for r in results]
    assert [r.call_id for r in results] == ["c0", "c1", "c2"]
    assert [r.content for r in results] == ["slept 0.03", "slept 0.01", "slept 0.02"]


async def test_events_bracket_every_call_including_failures() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    executor = ToolExecutor([adder()], bus=bus, agent="orchestrator")
    await executor.execute(ToolCall(id="ok", name="add", arguments={"a": 1, "b": 1}))
    await executor.execute(ToolCall(id="bad", name="nope"))
    assert [e.type for e in seen] == [
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_END,
    ]
    ended = [e for e in seen if isinstance(e, ToolCallEnded)]
    assert [(e.call_id, e.success, e.agent) for e in ended] == [
        ("ok", True, "orchestrator"),
        ("bad", False, "orchestrator"),
    ]
    assert ended[0].latency_seconds > 0


async def test_cancelling_the_caller_cancels_the_tool() -> None:
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

    executor = ToolExecutor([tool("slow", slow)])
    task = asyncio.ensure_future(executor.execute(ToolCall(id="c", name="slow")))
    await asyncio.wait_for(entered.wait(), 60)  # the tool is running: cancel it mid-call
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert cancelled.is_set()


def test_specs_names_and_duplicate_names() -> None:
    executor = ToolExecutor([adder(), tool("think", lambda a: "")])
    assert executor.names == ("Add", "think")
    assert [s.name for s in executor.specs] == ["Add", "think"]
    assert executor.spec_for("ADD") is executor.specs[0]
    with pytest.raises(ValueError, match="share the name"):
        ToolExecutor([tool("x", lambda a: ""), tool("X", lambda a: "")])


class PeakTool:
    """A tool that records how many of its calls run at the same moment. Each call yields
    to the event loop a few times while it runs, so calls allowed to overlap do."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.ran = 0

    async def __call__(self, arguments: JSONObject) -> str:
        self.running += 1
        self.peak = max(self.peak, self.running)
        for _ in range(5):
            await asyncio.sleep(0)
        self.running -= 1
        self.ran += 1
        return f"done {arguments.get('n')}"


def peak_calls(count: int) -> list[ToolCall]:
    return [ToolCall(id=f"c{n}", name="peak", arguments={"n": n}) for n in range(count)]


async def test_at_most_eight_calls_of_a_turn_run_at_once_by_default() -> None:
    peak = PeakTool()
    executor = ToolExecutor([tool("peak", peak)], max_tool_calls_per_turn=1_000)
    results = await executor.execute_all(peak_calls(1_000))
    assert peak.peak == 8  # the rest queued (1,000 ran together before)
    assert peak.ran == 1_000
    assert all(r.success for r in results)
    assert [r.content for r in results] == [f"done {n}" for n in range(1_000)]


async def test_the_number_of_parallel_calls_is_configurable() -> None:
    for limit in (1, 3):
        peak = PeakTool()
        executor = ToolExecutor([tool("peak", peak)], max_parallel_tools=limit)
        await executor.execute_all(peak_calls(20))
        assert (peak.peak, peak.ran) == (limit, 20)


async def test_calls_beyond_the_per_turn_limit_are_refused_with_a_message() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    peak = PeakTool()
    executor = ToolExecutor([tool("peak", peak)], bus=bus)
    results = await executor.execute_all(peak_calls(1_000))
    assert peak.ran == 64
    assert all(r.success for r in results[:64])
    refused = results[64:]
    assert len(refused) == 936
    assert not any(r.success for r in refused)
    assert {r.metadata["error"] for r in refused} == {"too_many_calls"}
    assert refused[0].content == (
        "Tool call not run: this turn asked for 1000 tool calls and at most 64 run per turn. "
        "Make at most 64 calls in one turn."
    )
    assert [r.call_id for r in results] == [f"c{n}" for n in range(1_000)]
    ended = [e for e in seen if isinstance(e, ToolCallEnded)]
    assert len(ended) == 1_000  # refused calls are reported like every other failure


@pytest.mark.parametrize("value", [0, -1, True, 2.5])
def test_limits_must_be_positive_whole_numbers(value: object) -> None:
    for name in ("max_parallel_tools", "max_tool_calls_per_turn"):
        with pytest.raises(ValueError, match=name):
            ToolExecutor([], **{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("max_seconds", [None, 60.0], ids=["no-deadline", "deadline"])
async def test_a_turn_of_a_thousand_calls_through_the_agent(max_seconds: float | None) -> None:
    """The limits hold in the agent loop, with or without a run deadline, and the model
    reads why the extra calls did not run."""
    peak = PeakTool()
    spec = ToolSpec(
        name="peak",
        description="peak",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    engine = ScriptedInference(
        [Completion(content="", tool_calls=tuple(peak_calls(1_000))), "All done."]
    )
    agent = OrchestratorAgent(
        engine, "m", tools=[InMemoryTool(spec, peak)], budget=RunBudget(max_seconds=max_seconds)
    )
    result = await agent.arun("go")
    assert result.content == "All done."
    assert (peak.peak, peak.ran) == (8, 64)
    observed = [m for m in engine.requests[1].messages if m.role is Role.TOOL]
    assert len(observed) == 1_000
    assert "at most 64 run per turn" in observed[-1].content
    assert observed[0].content == "done 0"


async def test_the_agent_option_sets_the_limits() -> None:
    peak = PeakTool()
    spec = ToolSpec(name="peak", description="peak")
    engine = ScriptedInference([Completion(content="", tool_calls=tuple(peak_calls(30))), "ok"])
    agent = OrchestratorAgent(
        engine,
        "m",
        tools=[InMemoryTool(spec, peak)],
        execution=ToolExecution(max_parallel_tools=2, max_tool_calls_per_turn=10),
    )
    await agent.arun("go")
    assert (peak.peak, peak.ran) == (2, 10)


@pytest.mark.parametrize("option", ["max_parallel_tools=0", "max_tool_calls_per_turn=many"])
def test_a_bad_limit_on_the_command_line_is_a_usage_error(option: str) -> None:
    container = Container()
    engine = ScriptedInference(["unused"])
    container.inference.override(engine)
    result = CliRunner().invoke(
        app, ["ask", "-a", "orchestrator", "-O", option, "q"], obj=container
    )
    assert result.exit_code == EXIT_USAGE, result.output
    assert option.split("=")[0] in result.output
    assert "at least 1" in result.output
    assert "Traceback" not in result.output
    assert engine.requests == []
