"""The behaviour every TraceStorePort implementation shows (fake and real alike)."""

from __future__ import annotations

from typing import Generic, TypeVar

import pytest

from jarvis.domain.ports import TraceStorePort
from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.trace_steps import trace_of_log
from jarvis.domain.traces import Span, Trace, TraceQuery, trace_to_record

StoreT = TypeVar("StoreT", bound=TraceStorePort)


def make_trace(
    trace_id: str, *, start: float = 1000.0, agent: str = "simple", ok: bool = True
) -> Trace:
    run = Span(
        span_id="0001",
        parent_id=None,
        kind="run",
        name=agent,
        start=start,
        duration=1.5,
        ok=ok,
        attributes={"agent": agent, "stop_reason": "final_answer" if ok else "error"},
    )
    inference = Span(
        span_id="0002",
        parent_id="0001",
        kind="inference",
        name="m",
        start=start + 0.1,
        duration=0.5,
        attributes={"engine": "e", "model": "m", "tokens_in": 7, "tokens_out": 3},
        content={"input": "ü 🚀 '; DROP TABLE traces; --"},
    )
    return Trace(
        trace_id=trace_id,
        agent=agent,
        start=start,
        duration=1.5,
        status="ok" if ok else "error",
        error="" if ok else "EngineUnavailableError",
        spans=(run, inference),
    )


class TraceStoreContract(Generic[StoreT]):
    """Subclass with a ``store`` fixture returning a fresh, empty store."""

    @pytest.fixture
    def store(self) -> StoreT:
        raise NotImplementedError("subclass must provide the `store` fixture")

    def test_an_empty_store_lists_nothing(self, store: StoreT) -> None:
        assert list(store.list(TraceQuery())) == []
        assert store.get("abc") is None

    def test_a_trace_round_trips_exactly(self, store: StoreT) -> None:
        trace = make_trace("a" * 32)
        store.save(trace)
        assert store.get("a" * 32) == trace

    def test_a_unique_prefix_finds_the_trace(self, store: StoreT) -> None:
        store.save(make_trace("abc1" + "0" * 28))
        store.save(make_trace("abd2" + "0" * 28))
        found = store.get("abc")
        assert found is not None
        assert found.trace_id.startswith("abc1")
        assert store.get("ab") is None  # two match: none is chosen
        assert store.get("") is None
        assert store.get("%") is None

    def test_save_many_keeps_every_trace(self, store: StoreT) -> None:
        store.save_many([make_trace("m1", start=1.0), make_trace("m2", start=2.0)])
        store.save_many([])
        assert [t.trace_id for t in store.list(TraceQuery())] == ["m2", "m1"]

    def test_saving_again_replaces(self, store: StoreT) -> None:
        store.save(make_trace("t1", ok=True))
        store.save(make_trace("t1", ok=False))
        found = store.get("t1")
        assert found is not None
        assert found.status == "error"
        assert len(store.list(TraceQuery())) == 1

    def test_list_is_newest_first_and_filters(self, store: StoreT) -> None:
        store.save(make_trace("old", start=100.0, agent="simple"))
        store.save(make_trace("new", start=300.0, agent="orchestrator"))
        store.save(make_trace("bad", start=200.0, agent="simple", ok=False))
        assert [t.trace_id for t in store.list(TraceQuery())] == ["new", "bad", "old"]
        assert [t.trace_id for t in store.list(TraceQuery(since=150.0))] == ["new", "bad"]
        assert [t.trace_id for t in store.list(TraceQuery(agent="simple"))] == ["bad", "old"]
        assert [t.trace_id for t in store.list(TraceQuery(failed_only=True))] == ["bad"]
        assert [t.trace_id for t in store.list(TraceQuery(limit=1))] == ["new"]

    def test_prune_drops_old_traces(self, store: StoreT) -> None:
        store.save(make_trace("old", start=100.0))
        store.save(make_trace("new", start=300.0))
        assert store.prune(older_than=200.0, max_bytes=None) == 1
        assert [t.trace_id for t in store.list(TraceQuery())] == ["new"]

    def test_prune_drops_the_oldest_past_the_size(self, store: StoreT) -> None:
        traces = [make_trace(f"t{n}", start=float(n)) for n in range(5)]
        for trace in traces:
            store.save(trace)
        size = len(trace_to_record(traces[0]).encode())
        assert store.prune(older_than=None, max_bytes=2 * size + size // 2) == 3
        assert [t.trace_id for t in store.list(TraceQuery())] == ["t4", "t3"]
        assert store.prune(older_than=None, max_bytes=None) == 0

    def test_encoded_records_are_kept_as_the_traces_were(self, store: StoreT) -> None:
        old, new = make_trace("old", start=100.0), make_trace("new", start=300.0, ok=False)
        records = [store.encode(old), store.encode(new)]
        assert [r[:4] for r in records] == [
            ("old", "simple", 100.0, 0),
            ("new", "simple", 300.0, 1),
        ]
        store.save_records(records)
        assert store.get("old") == old
        assert store.list(TraceQuery()) == [new, old]
        assert store.list(TraceQuery(failed_only=True)) == [new]
        store.save_records([store.encode(make_trace("old", start=400.0))])  # replaced
        assert [t.trace_id for t in store.list(TraceQuery())] == ["old", "new"]

    def test_a_record_is_plain_data_the_garbage_collector_does_not_walk(
        self, store: StoreT
    ) -> None:
        """The writer holds a run's record until its thread writes the batch: a record that
        the collector tracked would be walked, and promoted, while it waits."""
        import gc

        record = store.encode(make_trace("t"))
        gc.collect()
        assert type(record) is tuple
        assert not gc.is_tracked(record)
        assert record[4] == len(record[5].encode())

    def test_a_trace_json_cannot_hold_is_refused_when_encoded(self, store: StoreT) -> None:
        broken = Trace(trace_id="nan", agent="a", start=float("nan"), duration=1.0, status="ok")
        with pytest.raises(ValueError, match=r"finite|not JSON compliant"):
            store.encode(broken)
        assert store.list(TraceQuery()) == []

    def test_a_lone_surrogate_is_kept_as_a_replacement_character(self, store: StoreT) -> None:
        """No UTF-8 file holds a lone surrogate (a name or a text an engine or a client
        sent): the trace is kept all the same, each one as U+FFFD."""
        from dataclasses import replace

        trace = make_trace("s")
        run, inference = trace.spans
        inference = replace(
            inference,
            name="m\ud800",
            attributes={"finish_reason": "stop\udfff"},
            content={"input": "run rm -rf \ud800"},
        )
        store.save_records([store.encode(replace(trace, spans=(run, inference)))])
        found = store.get("s")
        assert found is not None
        kept = found.spans[1]
        assert kept.name == "m\ufffd"
        assert kept.attributes == {"finish_reason": "stop\ufffd"}
        assert kept.content == {"input": "run rm -rf \ufffd"}

    def test_a_run_recorded_as_steps_is_read_as_its_spans(self, store: StoreT) -> None:
        """A recorded run is kept as its steps (:meth:`encode_steps`) and read back as the
        trace those steps make: nesting, loop-guard verdicts, an unfinished span, content
        cut and masked."""
        trace = recorded_steps(content=True)
        record = store.encode_steps(trace)
        assert record[0] == trace[0]
        assert record[1:4] == ("outer", trace[1], 1)  # failed: the run ended in an error
        assert record[4] == len(record[5].encode())
        store.save_records([record])
        found = store.get(trace[0])
        assert found == trace_of_log(trace)
        assert found is not None
        assert [(s.kind, s.name, s.parent_id) for s in found.spans] == [
            ("run", "outer", None),
            ("inference", "model", "0001"),
            ("tool", "delegate", "0001"),
            ("run", "inner", "0003"),
            ("inference", "model", "0004"),
            ("tool", "calc", "0001"),
        ]
        assert found.spans[4].attributes["unfinished"] is True
        assert found.spans[5].attributes["loop_guard"] == "block"
        assert found.spans[0].content == {"input": "ASK WITH HTTPS://***@HOST"}
        assert found.spans[2].content == {"arguments": "{'Q': 'X'}", "result": "DONE"}
        assert (found.status, found.error) == ("error", "EngineUnavailableError")
        assert store.list(TraceQuery(failed_only=True)) == [found]

    def test_steps_with_a_lone_surrogate_are_kept_with_replacement_characters(
        self, store: StoreT
    ) -> None:
        trace = recorded_steps(agent="outer\ud800", tool="calc\udfff")
        store.save_records([store.encode_steps(trace)])
        found = store.get(trace[0])
        assert found is not None
        assert found.agent == "outer\ufffd"
        assert {s.name for s in found.spans if s.kind == "tool"} == {"delegate", "calc\ufffd"}
        assert [t.agent for t in store.list(TraceQuery(agent="outer\ufffd"))] == ["outer\ufffd"]

    def test_runs_saved_as_steps_are_read_as_their_spans(self, store: StoreT) -> None:
        """What the trace writer hands the store (:meth:`save_steps`): each run is read
        back as its steps make it, content cut and masked, the caller's span kept."""
        from jarvis.domain.traces import TraceParent

        caller = TraceParent(trace_id="a" * 32, span_id="b" * 16, flags="01")
        kept, plain = recorded_steps(content=True), recorded_steps()
        runs = [
            ("run-1", *kept[1:]),
            ("run-2", plain[1] + 1.0, caller, *plain[3:]),
            ("run-3", plain[1] + 2.0, *plain[2:]),
        ]
        assert store.save_steps(runs) == []
        for run in runs:
            assert store.get(run[0]) == trace_of_log(run)
        found = store.get("run-2")
        assert found is not None
        assert (found.remote_trace_id, found.remote_parent_id) == ("a" * 32, "b" * 16)
        assert store.get("run-1") is not None
        assert [t.trace_id for t in store.list(TraceQuery())] == ["run-3", "run-2", "run-1"]
        assert store.save_steps([]) == []

    def test_a_run_that_cannot_be_saved_is_left_out_alone(self, store: StoreT) -> None:
        """A start no record has a place for is refused, with its reason; a lone surrogate
        and an integer past 64 bits (from a hostile engine) are kept all the same."""
        trace = recorded_steps(agent="outer\ud800")
        steps = list(trace[4])
        steps[2] = (*steps[2][:3], 2**70, *steps[2][4:])  # the first inference's tokens in
        runs = [
            ("late", 1e300, *trace[2:]),
            ("odd", trace[1], trace[2], trace[3], tuple(steps), trace[5]),
            ("nan", float("nan"), *trace[2:]),
        ]
        refused = store.save_steps(runs)
        assert len(refused) == 2
        assert all("1970-2554" in reason for reason in refused)
        found = store.get("odd")
        assert found is not None
        assert found.agent == "outer\ufffd"
        assert found.spans[1].attributes["tokens_in"] == 2**70
        assert [t.trace_id for t in store.list(TraceQuery())] == ["odd"]


def recorded_steps(
    *, content: bool = False, agent: str = "outer", tool: str = "calc"
) -> TraceSteps:
    """A run recorded as steps: an inference, a tool call running a nested run (whose
    inference never ends), a blocked call, and an error."""
    import contextvars

    from jarvis.domain.run.steps import RunRecording

    traces: list[TraceSteps] = []
    recording = RunRecording(
        traces.append, content=content, mask=lambda text: text.replace("user:pw", "***").upper()
    )

    def run() -> None:
        recording.run_started(agent, "ask with https://user:pw@host")
        step = recording.inference_started("engine", "model")
        recording.inference_ended(step, 10, 2, "tool_calls", 1)
        started = recording.tool_started("delegate", "c1", {"q": "x"})
        recording.run_started("inner", "sub")
        recording.inference_started("engine", "model")
        recording.run_ended(1, "error", "TimeoutError")
        recording.tool_ended(started, "done", True)
        recording.loop_guard(tool, "block", "identical_call")
        recording.run_ended(2, "error", "EngineUnavailableError")

    contextvars.copy_context().run(run)  # the runs' cursor stays out of the caller's context
    (trace,) = traces
    return trace
