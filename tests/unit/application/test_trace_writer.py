"""The trace writer hands its thread each run's record, encoded once (when the run ends,
once the thread has made the store), and never lets a trace that cannot be encoded cost
the run."""

from __future__ import annotations

import threading
import types
from collections.abc import Sequence

import pytest

from contracts.trace_store_contract import recorded_steps
from jarvis.application.trace_writer import TraceWriter
from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.trace_steps import trace_of_log
from jarvis.domain.traces import Trace, TraceQuery, TraceRecord
from jarvis.testing.traces import InMemoryTraceStore


class _CountingStore(InMemoryTraceStore):
    def __init__(self) -> None:
        super().__init__()
        self.encoded: list[str] = []
        self.batches: list[list[str]] = []

    def encode(self, trace: Trace) -> TraceRecord:
        self.encoded.append(trace.trace_id)
        return super().encode(trace)

    def save_records(self, records: Sequence[TraceRecord]) -> None:
        self.batches.append([r[0] for r in records])
        super().save_records(records)


def _trace(trace_id: str, start: float = 1.0) -> Trace:
    return Trace(trace_id=trace_id, agent="a", start=start, duration=0.1, status="ok")


def test_each_trace_is_encoded_once_and_written_in_batches() -> None:
    store = _CountingStore()
    made: list[str] = []

    def factory() -> InMemoryTraceStore:
        made.append(threading.current_thread().name)
        return store

    writer = TraceWriter(factory, notice=print)
    writer.save(_trace("a"))
    writer.flush()
    assert made == ["jarvis-traces"]  # the thread makes the store, on its first write
    assert store.encoded == ["a"]
    writer.save(_trace("b", start=2.0))
    assert store.encoded == ["a", "b"]  # on the caller's side, before the thread writes
    writer.save(_trace("c", start=3.0))
    writer.flush()
    assert store.encoded == ["a", "b", "c"]
    assert store.batches[0] == ["a"]
    assert [trace_id for batch in store.batches[1:] for trace_id in batch] == ["b", "c"]
    assert [t.trace_id for t in store.list(TraceQuery())] == ["c", "b", "a"]
    assert made == ["jarvis-traces"]
    writer.close()


@pytest.mark.parametrize("first", [False, True])
def test_a_trace_that_cannot_be_encoded_is_left_out_alone_and_told_once(first: bool) -> None:
    """Encoded by the thread (the first trace) or on the caller's side (a later one)."""
    notices: list[str] = []
    store = InMemoryTraceStore()
    writer = TraceWriter(lambda: store, notice=notices.append)
    if not first:
        writer.save(_trace("fine"))
        writer.flush()
    broken = Trace(trace_id="nan", agent="a", start=float("nan"), duration=1.0, status="ok")
    for _ in range(3):
        writer.save(broken)  # never raises into the run
        writer.flush()
    assert len(notices) == 1
    assert "a trace could not be recorded (it was left out)" in notices[0]
    writer.save(_trace("later", start=2.0))  # the next ones are recorded
    writer.flush()
    expected = ["later"] if first else ["later", "fine"]
    assert [t.trace_id for t in store.list(TraceQuery())] == expected
    assert len(notices) == 1
    writer.close()


def test_a_store_that_cannot_be_made_is_told_once() -> None:
    notices: list[str] = []

    def factory() -> InMemoryTraceStore:
        raise OSError("no such folder")

    writer = TraceWriter(factory, notice=notices.append)
    for _ in range(2):
        writer.save(_trace("t"))
        writer.flush()
    assert notices == ["traces are not being recorded: no such folder"]
    writer.close()


def test_a_store_that_failed_rests_then_records_again_and_says_so() -> None:
    """``jarvis serve`` met a locked or full store once: the traces of the outage are lost,
    told once, and the store is tried again after its rest (none here, so the next batch)."""
    notices: list[str] = []
    store = InMemoryTraceStore()
    store.broken = True
    writer = TraceWriter(lambda: store, notice=notices.append, retry_seconds=0.0)
    for name in ("lost", "also lost"):
        writer.save(_trace(name))
        writer.flush()
    assert notices == ["traces are not being recorded: the in-memory trace store is broken"]
    store.broken = False
    writer.save(_trace("kept", start=2.0))
    writer.flush()
    assert notices[1:] == ["traces are being recorded again"]
    assert [t.trace_id for t in store.list(TraceQuery())] == ["kept"]
    writer.close()


def test_a_store_that_failed_is_not_tried_while_it_rests() -> None:
    notices: list[str] = []
    store = _CountingStore()
    store.broken = True
    writer = TraceWriter(lambda: store, notice=notices.append, retry_seconds=3600.0)
    writer.save(_trace("first"))
    writer.flush()
    store.broken = False
    for name in ("a", "b"):
        writer.save(_trace(name))
        writer.flush()
    assert store.batches == [["first"]]  # the one try, which failed
    assert store.list(TraceQuery()) == []
    assert len(notices) == 1
    writer.close()


def test_a_collector_that_was_down_gets_the_traces_after_it() -> None:
    from jarvis.testing.traces import InMemoryTraceExporter

    notices: list[str] = []
    exporter = InMemoryTraceExporter()
    exporter.broken = True
    writer = TraceWriter(None, notice=notices.append, exporter=lambda: exporter, retry_seconds=0.0)
    writer.save(_trace("lost"))
    writer.flush()
    exporter.broken = False
    writer.save(_trace("sent"))
    writer.flush()
    assert [t.trace_id for t in exporter.exported] == ["sent"]
    assert notices == [
        "traces are not being exported: the in-memory exporter is broken",
        "traces are being exported again",
    ]
    writer.close()


def test_a_trace_that_cannot_be_sent_costs_the_collector_nothing_else() -> None:
    """Refused by the store and by the collector alike: the rest of its batch is exported,
    one notice is given, and the collector is not rested."""
    from jarvis.testing.traces import InMemoryTraceExporter

    notices: list[str] = []
    exporter = InMemoryTraceExporter()
    store = InMemoryTraceStore()
    writer = TraceWriter(lambda: store, notice=notices.append, exporter=lambda: exporter)
    writer.save(_trace("first"))
    writer.flush()  # the thread has made the store: later traces are encoded on save
    writer.save(_trace("before", start=2.0))
    writer.save(Trace(trace_id="nan", agent="a", start=float("nan"), duration=1.0, status="ok"))
    writer.save(_trace("after", start=3.0))
    writer.flush()
    writer.save(_trace("later", start=4.0))
    writer.flush()
    assert [t.trace_id for t in exporter.exported] == ["first", "before", "after", "later"]
    assert [t.trace_id for t in store.list(TraceQuery())] == ["later", "after", "before", "first"]
    assert len(notices) == 1
    assert notices[0].startswith("a trace could not be recorded (it was left out): trace nan")
    writer.close()


class _PruneFailingStore(_CountingStore):
    def __init__(self) -> None:
        super().__init__()
        self.prunes = 0
        self.prune_broken = True

    def prune(self, *, older_than: float | None, max_bytes: int | None) -> int:
        self.prunes += 1
        if self.prune_broken:
            raise OSError("database is locked")
        return super().prune(older_than=older_than, max_bytes=max_bytes)


def test_a_prune_that_fails_keeps_the_traces_and_tries_again_with_the_next_batch() -> None:
    """The batch was written: recording goes on (no rest), the failure is told once and
    the next batch prunes again, until it works (told too)."""
    notices: list[str] = []
    store = _PruneFailingStore()
    writer = TraceWriter(lambda: store, notice=notices.append)
    for index, name in enumerate(("a", "b", "c")):
        writer.save(_trace(name, start=float(index)))
        writer.flush()
    assert store.prunes == 3  # the first batch's prune failed, so each next batch tries
    assert [t.trace_id for t in store.list(TraceQuery())] == ["c", "b", "a"]
    assert notices == [
        "old traces could not be pruned (the next batch tries again): database is locked"
    ]
    store.prune_broken = False
    writer.save(_trace("d", start=3.0))
    writer.flush()
    writer.save(_trace("e", start=4.0))
    writer.flush()
    assert store.prunes == 4  # worked once, then back to every PRUNE_EVERY traces
    assert notices[1:] == ["old traces are being pruned again"]
    assert len(store.list(TraceQuery())) == 5
    writer.close()


class _StepsStore(InMemoryTraceStore):
    def __init__(self) -> None:
        super().__init__()
        self.encoded_by: list[str] = []

    def encode_steps(self, trace: TraceSteps) -> TraceRecord:
        self.encoded_by.append(threading.current_thread().name)
        return super().encode_steps(trace)


def test_a_run_recorded_as_steps_is_encoded_by_the_thread_and_read_as_its_spans() -> None:
    store = _StepsStore()
    exported: list[Trace] = []

    class Exporter:
        def export(self, traces: Sequence[Trace]) -> list[str]:
            exported.extend(traces)
            return []

        def close(self) -> None:
            pass

    writer = TraceWriter(lambda: store, notice=print, exporter=Exporter)
    trace = recorded_steps()
    writer.save_steps(trace)
    writer.flush()
    assert store.encoded_by == ["jarvis-traces"]  # the event loop only handed it over
    made = trace_of_log(trace)
    assert store.get(trace[0]) == made
    assert exported == [made]
    writer.close()


def test_steps_a_store_cannot_keep_are_left_out_and_told_once() -> None:
    notices: list[str] = []
    store = InMemoryTraceStore()
    writer = TraceWriter(lambda: store, notice=notices.append)
    trace = recorded_steps()
    far = (trace[0], float("inf"), *trace[2:])  # a clock gone wrong
    for _ in range(3):
        writer.save_steps(far)
        writer.flush()
    writer.save_steps(trace)
    writer.flush()
    assert len(notices) == 1
    assert "outside 1970-2554" in notices[0]
    assert [t.trace_id for t in store.list(TraceQuery())] == [trace[0]]
    writer.close()


def test_runs_handed_in_from_many_threads_are_all_written_and_flush_waits_for_them() -> None:
    """The event loop hands a run over without a lock (one append): runs of loops in
    several threads are all written, and a flush returns once those before it are."""
    store = InMemoryTraceStore()
    writer = TraceWriter(lambda: store, notice=print)
    trace = recorded_steps()
    start = threading.Barrier(4)

    def hand_in(thread: int) -> None:
        start.wait()
        for n in range(250):
            writer.save_steps((f"{thread:04x}{n:028x}", *trace[1:]))

    threads = [threading.Thread(target=hand_in, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.flush()
    assert len(store.list(TraceQuery(limit=10_000))) == 1000
    writer.close()


def test_runs_handed_over_are_written_once_the_thread_is_started() -> None:
    """The recording hands each run to ``hand_over`` on the event loop: the buffer's own
    append (no Python frame a run); the first trace calls ``start`` before it."""
    store = InMemoryTraceStore()
    writer = TraceWriter(lambda: store, notice=print)
    assert isinstance(writer.hand_over, types.BuiltinMethodType)
    trace = recorded_steps()
    writer.hand_over(trace)
    writer.flush(timeout=None)  # no thread yet: nothing is written, nothing waited for
    assert store.list(TraceQuery()) == []
    writer.start()
    writer.start()  # once
    writer.flush()
    assert [t.trace_id for t in store.list(TraceQuery())] == [trace[0]]
    writer.close()


def test_a_flush_before_any_run_returns_at_once() -> None:
    writer = TraceWriter(InMemoryTraceStore, notice=print)
    writer.flush(timeout=None)  # no thread: nothing to wait for
    writer.close()
