"""The trace recorder on real agents and a real bus (scripted engine): the span tree of a
run, runs told apart when concurrent, a sub-agent nested under its tool call, loop-guard
verdicts, content only when asked; and the writer that never lets a store fail a run."""

from __future__ import annotations

import asyncio

import pytest

from jarvis.application.trace_writer import TraceWriter
from jarvis.application.traces import TraceRecorder
from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.errors import EngineUnavailableError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Completion, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.guard import LoopGuardConfig
from jarvis.domain.loop.tool_loop import ToolUsingAgent
from jarvis.domain.run.events import EventBus
from jarvis.domain.tools.specs import ToolSpec
from jarvis.domain.traces import Trace, TraceQuery
from jarvis.testing import InMemoryTool, ScriptedInference
from jarvis.testing.traces import InMemoryTraceStore


def calls(*specs: tuple[str, str, JSONObject]) -> Completion:
    return Completion(
        content="",
        tool_calls=tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in specs),
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=10, completion_tokens=5),
    )


def text(content: str) -> Completion:
    return Completion(content=content, usage=Usage(prompt_tokens=7, completion_tokens=2))


def adder() -> InMemoryTool:
    def run(arguments: JSONObject) -> str:
        left, right = str(arguments["expression"]).split("+")
        return str(int(left) + int(right))

    return InMemoryTool(ToolSpec(name="calculator", description="a+b"), run)


def recorded(*, content: bool = False) -> tuple[EventBus, list[Trace]]:
    traces: list[Trace] = []
    bus = EventBus()
    TraceRecorder(traces.append, content=content, mask=lambda t: t.upper()).attach(bus)
    return bus, traces


async def test_a_run_with_two_tool_calls_is_one_tree() -> None:
    bus, traces = recorded()
    engine = ScriptedInference(
        [
            calls(
                ("a", "calculator", {"expression": "1+1"}),
                ("b", "calculator", {"expression": "2+2"}),
            ),
            text("2 and 4"),
        ]
    )
    result = await ToolUsingAgent(engine, "m", tools=[adder()], bus=bus).arun("q")
    assert result.content == "2 and 4"
    (trace,) = traces
    run = trace.spans[0]
    assert (run.kind, run.parent_id, trace.status, trace.agent) == ("run", None, "ok", "tool_loop")
    assert [(s.kind, s.name, s.parent_id) for s in trace.spans[1:]] == [
        ("inference", "m", run.span_id),
        ("tool", "calculator", run.span_id),
        ("tool", "calculator", run.span_id),
        ("inference", "m", run.span_id),
    ]
    assert trace.spans[1].attributes["tokens_in"] == 10
    assert trace.spans[4].attributes["tokens_out"] == 2
    assert trace.spans[2].attributes["result_chars"] == 1
    assert all(not s.content for s in trace.spans)


async def test_concurrent_runs_on_one_bus_are_separate_traces() -> None:
    bus, traces = recorded()
    inside = 0
    both_inside = asyncio.Event()

    async def meet(arguments: JSONObject) -> str:
        nonlocal inside
        inside += 1
        if inside == 2:
            both_inside.set()
        await asyncio.wait_for(both_inside.wait(), 60)  # both runs are in their tool at once
        return str(arguments["n"])

    async def one(n: int) -> None:
        tool = InMemoryTool(ToolSpec(name=f"meet{n}", description="meet"), meet)
        engine = ScriptedInference([calls((f"c{n}", f"meet{n}", {"n": n})), text(f"done {n}")])
        agent = ToolUsingAgent(engine, "m", tools=[tool], bus=bus)
        await agent.arun(f"q{n}")

    await asyncio.gather(one(1), one(2))
    assert len(traces) == 2
    for trace in traces:
        tools = [s.name for s in trace.spans if s.kind == "tool"]
        assert len(tools) == 1
        assert len(trace.spans) == 4  # run, inference, its own tool, inference
    assert traces[0].trace_id != traces[1].trace_id
    assert all(not s.attributes.get("unfinished") for t in traces for s in t.spans)
    assert all(s.ok for t in traces for s in t.spans)
    assert sorted(s.name for t in traces for s in t.spans if s.kind == "tool") == [
        "meet1",
        "meet2",
    ]


async def test_a_sub_agent_run_inside_a_tool_call_is_its_child() -> None:
    bus, traces = recorded()
    sub_engine = ScriptedInference([text("sub answer")])

    async def delegate(arguments: JSONObject) -> str:
        result = await SimpleAgent(sub_engine, "sub-model", bus=bus).arun("sub question")
        return result.content

    tool = InMemoryTool(ToolSpec(name="delegate", description="ask a sub-agent"), delegate)
    engine = ScriptedInference([calls(("d", "delegate", {})), text("done")])
    await ToolUsingAgent(engine, "m", tools=[tool], bus=bus).arun("q")
    (trace,) = traces
    by_id = {s.span_id: s for s in trace.spans}
    sub_run = next(s for s in trace.spans if s.kind == "run" and s.name == "simple")
    assert by_id[str(sub_run.parent_id)].name == "delegate"
    sub_inference = next(s for s in trace.spans if s.name == "sub-model")
    assert sub_inference.parent_id == sub_run.span_id


async def test_concurrent_inferences_in_one_tool_call_end_in_their_own_spans() -> None:
    """``llm_batch``-like: two inferences of one model overlap and the first started ends
    first; each span gets its own end (the tokens of its own prompt)."""
    bus, traces = recorded()
    b_started = asyncio.Event()
    a_done = asyncio.Event()

    class Crossing(ScriptedInference):
        async def generate(self, request: InferenceRequest) -> Completion:
            if request.messages[-1].content == "a":
                await asyncio.wait_for(b_started.wait(), 60)
                a_done.set()  # A's end is published before B resumes
            else:
                b_started.set()
                await asyncio.wait_for(a_done.wait(), 60)
            prompt = str(request.messages[-1].content)
            return Completion(content="x", usage=Usage(prompt_tokens=len(prompt)))

    sub_engine = Crossing()

    async def batch(arguments: JSONObject) -> str:
        async def one(prompt: str) -> str:
            return (await SimpleAgent(sub_engine, "sub", bus=bus).arun(prompt)).content

        return ",".join(await asyncio.gather(one("a"), one("b" * 400)))

    tool = InMemoryTool(ToolSpec(name="llm_batch", description="batch"), batch)
    engine = ScriptedInference([calls(("t", "llm_batch", {})), text("done")])
    await ToolUsingAgent(engine, "m", tools=[tool], bus=bus).arun("q")
    (trace,) = traces
    runs = [s for s in trace.spans if s.kind == "run" and s.name == "simple"]
    assert len(runs) == 2
    for run in runs:
        (inference,) = [s for s in trace.spans if s.parent_id == run.span_id]
        assert not inference.attributes.get("unfinished")
    by_run = {
        run.span_id: next(s for s in trace.spans if s.parent_id == run.span_id) for run in runs
    }
    first, second = (by_run[r.span_id] for r in runs)  # runs in start order: a, then b
    assert (first.attributes["tokens_in"], second.attributes["tokens_in"]) == (1, 400)
    assert first.start + first.duration <= second.start + second.duration


async def test_loop_guard_verdicts_are_spans() -> None:
    bus, traces = recorded()
    engine = ScriptedInference([calls(("x", "calculator", {"expression": "1+1"}))])
    await ToolUsingAgent(
        engine,
        "m",
        tools=[adder()],
        loop_guard=LoopGuardConfig(max_identical_calls=2, max_blocked_turns=2),
        bus=bus,
    ).arun("q")
    (trace,) = traces
    verdicts = [s.attributes.get("loop_guard") for s in trace.spans if s.kind == "tool"]
    assert verdicts == [None, None, "warn", "block", "block"]
    assert trace.spans[0].attributes["stop_reason"] == "loop_detected"


async def test_a_run_that_raises_is_a_failed_trace_with_its_kind() -> None:
    bus, traces = recorded()
    engine = ScriptedInference([EngineUnavailableError("down", engine="x", url="u")])
    with pytest.raises(EngineUnavailableError):
        await SimpleAgent(engine, "m", bus=bus).arun("q")
    (trace,) = traces
    assert (trace.status, trace.error) == ("error", "EngineUnavailableError")
    assert trace.spans[1].attributes["unfinished"] is True
    assert trace.spans[1].ok is False


@pytest.mark.parametrize("subscribed", [False, True])
async def test_an_inference_that_raised_is_left_unfinished_with_its_start(
    subscribed: bool,
) -> None:
    """Recorded as it ends, or as it raises: with the run's events published or not."""
    bus, traces = recorded()
    if subscribed:
        bus.subscribe(lambda event: None)
    engine = ScriptedInference([text("first"), EngineUnavailableError("down", engine="x", url="u")])
    agent = SimpleAgent(engine, "m", bus=bus)
    await agent.arun("q")
    with pytest.raises(EngineUnavailableError):
        await agent.arun("again")
    done, failed = traces
    assert not done.spans[1].attributes.get("unfinished")
    assert done.spans[1].attributes["tokens_in"] == 7
    run, inference = failed.spans
    assert inference.attributes["unfinished"] is True
    assert inference.parent_id == run.span_id
    assert run.start <= inference.start <= run.start + run.duration


async def test_content_is_recorded_only_when_asked_and_masked() -> None:
    bus, traces = recorded(content=True)
    engine = ScriptedInference([calls(("a", "calculator", {"expression": "1+1"})), text("2")])
    await ToolUsingAgent(engine, "m", tools=[adder()], bus=bus).arun("secret question")
    (trace,) = traces
    assert trace.spans[0].content == {"input": "SECRET QUESTION"}
    tool = trace.spans[2]
    assert tool.content["result"] == "2"
    assert "1+1" in str(tool.content["arguments"])


def test_the_writer_reports_a_broken_store_once() -> None:
    store = InMemoryTraceStore()
    store.broken = True
    notices: list[str] = []
    writer = TraceWriter(lambda: store, notice=notices.append)
    trace = Trace(trace_id="t", agent="a", start=1.0, duration=0.1, status="ok")
    for _ in range(3):
        writer.save(trace)
        writer.flush()
    assert len(notices) == 1
    assert "traces are not being recorded" in notices[0]
    writer.close()


def test_the_writer_saves_and_prunes_by_age() -> None:
    store = InMemoryTraceStore()
    writer = TraceWriter(lambda: store, notice=print, max_days=1, clock=lambda: 10 * 86_400.0)
    store.save(Trace(trace_id="old", agent="a", start=1.0, duration=0.1, status="ok"))
    writer.save(Trace(trace_id="new", agent="a", start=10 * 86_400.0, duration=0.1, status="ok"))
    writer.flush()
    assert [t.trace_id for t in store.list(TraceQuery())] == ["new"]
    writer.close()
