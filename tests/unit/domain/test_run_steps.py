"""The run recording the agent loop tells each step: what a finished trace is handed as,
where steps hang when runs nest across buses, the span cap, the running span, and a task a
run left behind."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from jarvis.domain.run import steps
from jarvis.domain.run.steps import RunRecording, TraceSteps, running_step
from jarvis.domain.trace_steps import trace_of_log


def recording() -> tuple[RunRecording, list[TraceSteps]]:
    traces: list[TraceSteps] = []
    return RunRecording(traces.append), traces


async def test_a_finished_trace_is_plain_data_the_garbage_collector_stops_walking() -> None:
    """The writer holds each run's steps until its thread writes the batch: objects the
    collector tracked would be walked, and promoted, while they wait."""
    recorder, traces = recording()
    recorder.run_started("agent", "question")
    started = recorder.tool_started("calculator", "c1", {"expression": "1+1"})
    recorder.tool_ended(started, "2", True)
    recorder.run_ended(1, "final_answer")
    (trace,) = traces
    gc.collect()  # each step is left alone after the first look at it
    assert not any(gc.is_tracked(step) for step in trace[4])
    gc.collect()  # then the tuple of steps, then the trace
    gc.collect()
    assert not gc.is_tracked(trace)


async def test_a_step_a_task_records_after_its_run_ended_changes_nothing() -> None:
    recorder, traces = recording()
    release = asyncio.Event()

    async def left_behind() -> None:
        await release.wait()
        started = recorder.inference_started("engine", "late")
        recorder.inference_ended(started, 1, 1, "stop", 0)

    recorder.run_started("agent", "q")
    task = asyncio.create_task(left_behind())  # it inherits the run's cursor
    await asyncio.sleep(0)
    recorder.run_ended(1, "final_answer")
    (trace,) = traces
    kept = trace[4]
    release.set()
    await task
    assert trace[4] is kept
    assert len(kept) == 2
    assert [s.name for s in trace_of_log(trace).spans] == ["agent"]


async def test_a_run_on_another_bus_inside_a_tool_call_is_a_trace_of_its_own() -> None:
    outer, outer_traces = recording()
    inner, inner_traces = recording()
    outer.run_started("outer", "q")
    started = outer.tool_started("delegate", "c1", {})
    inner.run_started("inner", "sub")
    inner.run_ended(1, "final_answer")
    step = outer.inference_started("engine", "model")  # back in the outer run's tool call
    outer.inference_ended(step, 1, 1, "stop", 0)
    outer.tool_ended(started, "done", True)
    outer.run_ended(1, "final_answer")
    (inner_trace,) = inner_traces
    (outer_trace,) = outer_traces
    assert [s.name for s in trace_of_log(inner_trace).spans] == ["inner"]
    spans = trace_of_log(outer_trace).spans
    assert [(s.name, s.parent_id) for s in spans] == [
        ("outer", None),
        ("delegate", "0001"),
        ("model", "0002"),
    ]
    assert inner_trace[0] != outer_trace[0]


async def test_spans_past_the_cap_are_counted_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps, "MAX_SPANS", 3)
    recorder, traces = recording()
    recorder.run_started("agent", "q")
    for _ in range(5):
        step = recorder.inference_started("engine", "model")
        recorder.inference_ended(step, 1, 1, "stop", 0)
    recorder.run_started("nested", "past the cap")  # its steps hang where it would have
    recorder.inference_started("engine", "model")
    recorder.run_ended(1, "final_answer")
    recorder.run_ended(5, "final_answer")
    (trace,) = traces
    made = trace_of_log(trace)
    assert len(made.spans) == 3
    assert made.spans[0].attributes["dropped_spans"] == 5
    assert made.status == "ok"
    assert made.spans[0].attributes["turns"] == 5


async def test_the_running_span_is_the_tool_call_while_it_runs_then_the_run() -> None:
    recorder, _ = recording()
    assert running_step() is None
    recorder.run_started("agent", "q")
    started = recorder.tool_started("search", "c1", {})
    running = running_step()
    assert running is not None
    assert running[1] == 2  # the tool call's span: the second
    recorder.tool_ended(started, "found", True)
    running = running_step()
    assert running is not None
    assert running[1] == 1  # the run's
    recorder.run_ended(1, "final_answer")
    assert running_step() is None


async def run_in_step(
    recorder: RunRecording, both: asyncio.Barrier, agent: str, model: str
) -> None:
    """A run with one inference, each of its steps made as another task makes its own."""
    recorder.run_started(agent, "q")
    await both.wait()
    step = recorder.inference_started("engine", model)
    await both.wait()
    recorder.inference_ended(step, 1, 1, "stop", 0)
    recorder.run_ended(1, "final_answer")


async def test_concurrent_runs_each_record_into_their_own_trace() -> None:
    recorder, traces = recording()
    both = asyncio.Barrier(2)
    await asyncio.gather(
        run_in_step(recorder, both, "a", "a"), run_in_step(recorder, both, "b", "b")
    )
    made = sorted((trace_of_log(t) for t in traces), key=lambda t: t.agent)
    assert [[s.name for s in t.spans] for t in made] == [["a", "a"], ["b", "b"]]
    assert all(not s.attributes.get("unfinished") for t in made for s in t.spans)


async def test_the_running_span_is_numbered_as_the_trace_numbers_it() -> None:
    """What an adapter passes on (``traceparent``) names the span the trace keeps."""
    recorder, traces = recording()
    seen: list[int] = []

    def running() -> None:
        found = running_step()
        assert found is not None
        seen.append(found[1])

    recorder.run_started("outer", "q")
    step = recorder.inference_started("engine", "model")
    recorder.inference_ended(step, 1, 1, "tool_calls", 1)
    started = recorder.tool_started("delegate", "c1", {})
    running()
    recorder.run_started("inner", "sub")
    running()
    recorder.tool_ended(recorder.tool_started("search", "c2", {}), "found", True)
    recorder.run_ended(1, "final_answer")
    running()
    recorder.tool_ended(started, "done", True)
    recorder.run_ended(1, "final_answer")
    spans = {s.span_id: s.name for s in trace_of_log(traces[0]).spans}
    assert [spans[f"{number:04x}"] for number in seen] == ["delegate", "inner", "delegate"]


async def test_on_first_is_called_once_before_the_first_trace_is_handed_to_the_sink() -> None:
    calls: list[str] = []
    recorder = RunRecording(
        lambda trace: calls.append(trace[0]), on_first=lambda: calls.append("first")
    )
    recorder.run_started("outer", "q")
    started = recorder.tool_started("delegate", "c1", {})
    recorder.run_started("inner", "sub")
    recorder.run_ended(1, "final_answer")  # a nested run's end hands nothing over
    recorder.tool_ended(started, "done", True)
    assert calls == []
    recorder.run_ended(1, "final_answer")
    recorder.run_started("again", "q")
    recorder.run_ended(1, "final_answer")
    assert len(calls) == 3
    assert calls[0] == "first"
    assert calls[1] != calls[2]  # each run's trace, after it


async def test_an_inference_is_recorded_as_it_ends_from_its_start() -> None:
    recorder, traces = recording()
    recorder.run_started("agent", "q")
    started = time.monotonic()
    recorder.inference("engine", "model", started, 12, 3, "stop", 0)
    recorder.run_ended(1, "final_answer")
    (trace,) = traces
    inference_step, end_step = trace[4][1:3]
    assert inference_step[:2] == (steps.INFERENCE, started)
    assert end_step[0] == steps.INFERENCE_END
    assert isinstance(end_step[1], float)
    assert end_step[1] >= started
    run, inference = trace_of_log(trace).spans
    assert inference.parent_id == run.span_id
    assert inference.kind == "inference"
    assert inference.start >= run.start
    assert inference.attributes["tokens_in"] == 12
    assert not inference.attributes.get("unfinished")


async def test_an_inference_that_failed_is_left_unfinished() -> None:
    recorder, traces = recording()
    recorder.run_started("agent", "q")
    recorder.inference_started("engine", "model", time.monotonic())
    recorder.run_ended(0, "error", "EngineError")
    _, inference = trace_of_log(traces[0]).spans
    assert inference.attributes["unfinished"] is True


async def test_concurrent_inferences_are_read_in_the_order_they_started() -> None:
    """Each is recorded as it ends (``llm_batch``): the first to start ends last."""
    recorder, traces = recording()
    recorder.run_started("agent", "q")
    first_ended = asyncio.Event()

    async def infer(name: str, wait: bool) -> None:
        started = time.monotonic()
        if wait:
            await first_ended.wait()
        recorder.inference("engine", name, started, 1, 1, "stop", 0)
        if not wait:
            first_ended.set()

    await asyncio.gather(infer("slow", True), infer("fast", False))
    recorder.run_ended(1, "final_answer")
    spans = trace_of_log(traces[0]).spans
    assert [s.attributes["model"] for s in spans[1:]] == ["slow", "fast"]
    assert [s.span_id for s in spans[1:]] == ["0003", "0002"]  # numbered as recorded


def test_past_the_cap_an_inference_is_counted_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps, "MAX_SPANS", 2)
    recorder, traces = recording()
    recorder.run_started("agent", "q")
    for _ in range(3):
        recorder.inference("engine", "model", time.monotonic(), 1, 1, "stop", 0)
    recorder.inference_started("engine", "model", time.monotonic())
    recorder.run_ended(4, "final_answer")
    made = trace_of_log(traces[0])
    assert len(made.spans) == 2
    assert made.spans[0].attributes["dropped_spans"] == 3


@pytest.mark.parametrize("now", [1_796_306_279.9, 0.0, 262_143.0])
def test_trace_ids_count_the_window_they_were_drawn_in(now: float) -> None:
    """A store inserts the ids of a busy time next to each other; the rest is random."""
    import random

    ids = steps._trace_ids(random.Random(7), now)
    window = f"{int(now) // steps.WINDOW_SECONDS % 0x10000:04x}"
    assert len(ids) == steps.IDS_AT_ONCE == len(set(ids))
    assert all(len(i) == 32 and int(i, 16) > 0 and i.startswith(window) for i in ids)
    assert len({i[4:12] for i in ids}) == len(ids)  # what `traces list` shows tells them apart


@pytest.mark.parametrize("now", [float("nan"), float("inf"), -5.0, 1e300])
def test_a_clock_gone_wrong_still_draws_ids(now: float) -> None:
    import random

    ids = steps._trace_ids(random.Random(7), now)
    assert all(i.startswith("0000") and len(i) == 32 for i in ids)


def test_an_id_of_zeros_is_never_drawn() -> None:
    class Zeros:
        def randbytes(self, n: int) -> bytes:
            return bytes(n)

    ids = steps._trace_ids(Zeros(), 0.0)  # type: ignore[arg-type]
    assert all(int(i, 16) == 1 for i in ids)


async def test_a_trace_takes_its_id_from_the_recording_clock() -> None:
    traces: list[TraceSteps] = []
    recorder = RunRecording(traces.append, clock=lambda: 1_000_000.0)
    recorder.run_started("agent", "q")
    recorder.run_ended(0, "final_answer")
    assert traces[0][0].startswith(f"{1_000_000 // steps.WINDOW_SECONDS % 0x10000:04x}")


async def test_a_task_a_run_started_records_its_own_runs_once_that_run_ended() -> None:
    """A task started inside a run shares its cursor: once the run has ended, a run the
    task starts (an agent it runs in the background) is a trace of its own, not lost in
    the ended one, and the runs that follow in both tasks, concurrent, each keep to their
    own trace."""
    recorder, traces = recording()
    both = asyncio.Barrier(2)

    async def child() -> None:
        await both.wait()  # the parent's run has ended
        await run_in_step(recorder, both, "child", "child-model")

    recorder.run_started("parent", "q")
    task = asyncio.create_task(child())
    await asyncio.sleep(0)
    recorder.run_ended(1, "final_answer")
    await both.wait()
    await run_in_step(recorder, both, "parent again", "parent-model")
    await task
    made = {t.agent: [s.name for s in t.spans] for t in map(trace_of_log, traces)}
    assert made == {
        "parent": ["parent"],
        "child": ["child", "child-model"],
        "parent again": ["parent again", "parent-model"],
    }


async def test_parallel_tool_calls_each_hang_their_runs_under_their_own_call() -> None:
    recorder, traces = recording()
    both = asyncio.Barrier(2)
    recorder.run_started("outer", "q")

    async def call(name: str) -> None:
        started = recorder.tool_started(name, name, {})
        await both.wait()
        recorder.run_started(f"in {name}", "sub")
        await both.wait()
        step = recorder.inference_started("engine", f"model {name}")
        recorder.inference_ended(step, 1, 1, "stop", 0)
        recorder.run_ended(1, "final_answer")
        recorder.tool_ended(started, "done", True)

    await asyncio.gather(asyncio.create_task(call("a")), asyncio.create_task(call("b")))
    step = recorder.inference_started("engine", "last")
    recorder.inference_ended(step, 1, 1, "stop", 0)
    recorder.run_ended(2, "final_answer")
    (trace,) = traces
    spans = trace_of_log(trace).spans
    ids = {s.name: s.span_id for s in spans}
    parents = {s.name: s.parent_id for s in spans}
    assert parents == {
        "outer": None,
        "a": ids["outer"],
        "b": ids["outer"],
        "in a": ids["a"],
        "in b": ids["b"],
        "model a": ids["in a"],
        "model b": ids["in b"],
        "last": ids["outer"],
    }


async def test_a_run_in_a_worker_thread_hangs_under_the_tool_call_that_runs_it() -> None:
    recorder, traces = recording()
    recorder.run_started("outer", "q")
    started = recorder.tool_started("blocking", "c1", {})

    def in_thread() -> None:  # the context copied: the tool call's cursor
        recorder.run_started("inner", "sub")
        step = recorder.inference_started("engine", "model")
        recorder.inference_ended(step, 1, 1, "stop", 0)
        recorder.run_ended(1, "final_answer")

    await asyncio.to_thread(in_thread)
    recorder.tool_ended(started, "done", True)
    step = recorder.inference_started("engine", "after")
    recorder.inference_ended(step, 1, 1, "stop", 0)
    recorder.run_ended(1, "final_answer")
    (trace,) = traces
    spans = trace_of_log(trace).spans
    assert [(s.name, s.parent_id) for s in spans] == [
        ("outer", None),
        ("blocking", "0001"),
        ("inner", "0002"),
        ("model", "0003"),
        ("after", "0001"),
    ]
