"""W3C ``traceparent``: parsed strictly, and a run started in its context continues the
caller's trace (kept in the trace's record, exported under the caller's trace id with the
run span under the caller's span); concurrent runs each keep their own caller."""

from __future__ import annotations

import asyncio
import json

import pytest

from jarvis.application.trace_context import continuing, trace_parent
from jarvis.application.trace_export import to_otlp
from jarvis.application.traces import TraceRecorder
from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.llm.completion import Completion, Usage
from jarvis.domain.run.events import EventBus
from jarvis.domain.traces import (
    Trace,
    TraceParent,
    parse_traceparent,
    trace_from_record,
    trace_to_record,
)
from jarvis.testing import ScriptedInference

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def test_a_valid_header_is_read() -> None:
    parent = parse_traceparent(f"00-{TRACE}-{SPAN}-01")
    assert parent == TraceParent(trace_id=TRACE, span_id=SPAN, flags="01")
    assert parent.header() == f"00-{TRACE}-{SPAN}-01"
    assert parse_traceparent(f"00-{TRACE}-{SPAN}-00") is not None  # not sampled: still ours


@pytest.mark.parametrize(
    "header",
    [
        "",
        f"01-{TRACE}-{SPAN}-01",  # a later version
        f"ff-{TRACE}-{SPAN}-01",
        f"00-{'0' * 32}-{SPAN}-01",
        f"00-{TRACE}-{'0' * 16}-01",
        f"00-{TRACE.upper()}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}-0g",
        f"00-{TRACE}-{SPAN}-1",
        f"00-{TRACE}-{SPAN}-01-",
        f"00-{TRACE}-{SPAN}-01-extra",
        f"00-{TRACE[:-1]}-{SPAN}0-01",
        f"00_{TRACE}_{SPAN}_01",
        f"00-{TRACE}-{SPAN}-01".replace("a", "é", 1),
        "x" * 100_000,
    ],
)
def test_anything_else_is_ignored(header: str) -> None:
    assert parse_traceparent(header) is None


def _agent(bus: EventBus) -> SimpleAgent:
    engine = ScriptedInference(
        [Completion(content="ok", usage=Usage(prompt_tokens=3, completion_tokens=1))] * 3
    )
    return SimpleAgent(engine, "model", bus=bus)


async def test_a_run_in_a_callers_context_continues_its_trace() -> None:
    traces: list[Trace] = []
    bus = EventBus()
    TraceRecorder(traces.append).attach(bus)
    agent = _agent(bus)
    caller = parse_traceparent(f"00-{TRACE}-{SPAN}-01")
    other = TraceParent(trace_id="1" * 32, span_id="2" * 16, flags="01")

    async def run(parent: TraceParent | None) -> None:
        with continuing(parent):
            await asyncio.sleep(0)  # interleave the runs
            await agent.arun("hi")

    await asyncio.gather(run(caller), run(other), run(None))
    assert trace_parent() is None  # nothing leaks out of the blocks
    assert {(t.remote_trace_id, t.remote_parent_id) for t in traces} == {
        (TRACE, SPAN),
        ("1" * 32, "2" * 16),
        ("", ""),
    }
    assert len({t.trace_id for t in traces}) == 3  # each run keeps a key of its own
    mine = next(t for t in traces if t.remote_trace_id == TRACE)
    assert trace_from_record(trace_to_record(mine)) == mine
    spans = _spans(mine)
    assert {s["traceId"] for s in spans} == {TRACE}
    assert spans[0]["parentSpanId"] == SPAN
    assert spans[1]["parentSpanId"] == spans[0]["spanId"]
    own = next(t for t in traces if not t.remote_trace_id)
    assert "parentSpanId" not in _spans(own)[0]


def _spans(trace: Trace) -> list[dict[str, str]]:
    request: dict[str, list[dict[str, list[dict[str, list[dict[str, str]]]]]]] = json.loads(
        json.dumps(to_otlp(trace))
    )
    return request["resourceSpans"][0]["scopeSpans"][0]["spans"]


async def test_a_sandboxed_run_continues_the_callers_trace_on_the_host() -> None:
    """The sandbox's inner agent asks the host for each inference: those are spans of the
    host's trace, under the sandboxed run (a tool the inner agent runs inside the container
    is not a span: nothing inside records or exports)."""
    from jarvis.application.ask import AskQuestion
    from jarvis.application.config import JarvisConfig
    from jarvis.domain.agents.sandboxed import SandboxedAgent
    from jarvis.domain.llm.messages import ToolCall
    from jarvis.entrypoints.composition import bootstrap
    from tests.support.inprocess_sandbox import InProcessContainers

    engine = ScriptedInference(
        [
            Completion(
                content="",
                tool_calls=(ToolCall(id="c1", name="calculator", arguments={"expression": "6*7"}),),
                finish_reason="tool_calls",
            ),
            "It is 42.",
        ]
    )
    container = bootstrap(JarvisConfig(), inference=engine).container
    container.container_runtime.override(InProcessContainers())
    if not container.agents().contains("sandboxed"):
        container.agents().register("sandboxed", SandboxedAgent)
    traces: list[Trace] = []
    TraceRecorder(traces.append).attach(container.bus())
    command = AskQuestion(
        question="What is 6*7?",
        agent="sandboxed",
        model="m",
        tools=("calculator",),
        agent_options={"inner": "orchestrator"},
    )
    with continuing(parse_traceparent(f"00-{TRACE}-{SPAN}-01")):
        answer = await container.ask_service().ask(command)
    assert answer.content == "It is 42."
    [trace] = traces
    assert (trace.remote_trace_id, trace.remote_parent_id) == (TRACE, SPAN)
    assert [(s.kind, s.name) for s in trace.spans] == [
        ("run", "sandboxed"),
        ("inference", "m"),
        ("inference", "m"),
    ]
    assert all(s.parent_id == trace.spans[0].span_id for s in trace.spans[1:])
    spans = _spans(trace)
    assert spans[0]["parentSpanId"] == SPAN
    assert {s["traceId"] for s in spans} == {TRACE}


def test_serve_reads_one_traceparent_header_only() -> None:
    from jarvis.entrypoints.http.trace_parent import caller_of

    header = f"00-{TRACE}-{SPAN}-01".encode()
    assert caller_of({"headers": [(b"traceparent", header)]}) == parse_traceparent(header.decode())
    assert caller_of({"headers": [(b"traceparent", header), (b"traceparent", header)]}) is None
    assert caller_of({"headers": [(b"traceparent", b"\xff" + header[1:])]}) is None
    assert caller_of({"headers": []}) is None
