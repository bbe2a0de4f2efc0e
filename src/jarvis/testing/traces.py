"""An in-memory trace store (the fake of ``TraceStorePort``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.trace_steps import encoded_runs, read_trace, steps_to_row
from jarvis.domain.traces import (
    Trace,
    TraceQuery,
    TraceRecord,
    TraceStoreError,
    times_problem,
    trace_to_row,
)


def matches(trace: Trace, query: TraceQuery) -> bool:
    if query.since is not None and trace.start < query.since:
        return False
    if query.agent is not None and trace.agent != query.agent:
        return False
    return not (query.failed_only and not trace.failed)


class InMemoryTraceStore:
    """Traces in a dict; ``broken`` makes every call fail as a damaged database would."""

    def __init__(self) -> None:
        self._traces: dict[str, tuple[Trace, int]] = {}
        self._lock = threading.Lock()
        self.broken = False
        self.closed = False

    def _check(self) -> None:
        if self.broken:
            raise TraceStoreError("the in-memory trace store is broken")

    def save(self, trace: Trace) -> None:
        self._check()
        size = trace_to_row(trace)[4]
        with self._lock:
            self._traces[trace.trace_id] = (trace, size)

    def save_many(self, traces: Sequence[Trace]) -> None:
        for trace in traces:
            self.save(trace)

    def encode(self, trace: Trace) -> TraceRecord:
        problem = times_problem(trace)
        if problem:  # refused as the SQLite store refuses it
            raise ValueError(problem)
        return trace_to_row(trace)

    def encode_steps(self, trace: TraceSteps) -> TraceRecord:
        return steps_to_row(trace)

    def save_steps(self, runs: Sequence[TraceSteps]) -> list[str]:
        self._check()
        records, refused = encoded_runs(runs, self.encode_steps)
        self.save_records(records)
        return refused

    def save_records(self, records: Sequence[TraceRecord]) -> None:
        self._check()
        with self._lock:
            for trace_id, _, _, _, size, record in records:
                self._traces[trace_id] = (read_trace(record), size)

    def get(self, trace_id: str) -> Trace | None:
        self._check()
        with self._lock:
            if trace_id in self._traces:
                return self._traces[trace_id][0]
            found = [t for key, (t, _) in self._traces.items() if key.startswith(trace_id)]
        return found[0] if len(found) == 1 and trace_id else None

    def list(self, query: TraceQuery) -> Sequence[Trace]:
        self._check()
        with self._lock:
            traces = [t for t, _ in self._traces.values() if matches(t, query)]
        traces.sort(key=lambda t: (t.start, t.trace_id), reverse=True)
        return traces[: query.limit]

    def prune(self, *, older_than: float | None, max_bytes: int | None) -> int:
        self._check()
        with self._lock:
            oldest_first = sorted(self._traces.values(), key=lambda e: (e[0].start, e[0].trace_id))
            dropped = 0
            total = sum(size for _, size in oldest_first)
            for trace, size in oldest_first:
                too_old = older_than is not None and trace.start < older_than
                too_big = max_bytes is not None and total > max_bytes
                if not (too_old or too_big):
                    continue
                del self._traces[trace.trace_id]
                total -= size
                dropped += 1
        return dropped

    def close(self) -> None:
        self.closed = True


class InMemoryTraceExporter:
    """Keeps what it is given in ``exported``; ``broken`` makes it fail as a receiver that
    is down would."""

    def __init__(self) -> None:
        self.exported: list[Trace] = []
        self.calls = 0
        self.broken = False

    def export(self, traces: Sequence[Trace]) -> list[str]:
        if self.broken:
            raise TraceStoreError("the in-memory exporter is broken")
        left_out: list[str] = []
        sent: list[Trace] = []
        for trace in traces:
            problem = times_problem(trace)
            if problem:
                left_out.append(problem)
            else:
                sent.append(trace)
        if sent:
            self.calls += 1
            self.exported.extend(sent)
        return left_out

    def close(self) -> None:
        return
