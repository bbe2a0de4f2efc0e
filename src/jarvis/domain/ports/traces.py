"""Where traces are kept, and where they are exported."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.traces import Trace, TraceQuery, TraceRecord


class TraceStorePort(Protocol):
    """Where traces are kept. Synchronous: writes happen off the event loop, in a thread."""

    def save(self, trace: Trace) -> None:
        """Keep ``trace`` (replacing one with the same id); raises ``TraceStoreError``."""
        ...

    def save_many(self, traces: Sequence[Trace]) -> None:
        """Keep every trace of ``traces`` (at once, when the store can: one transaction)."""
        ...

    def encode(self, trace: Trace) -> TraceRecord:
        """``trace`` as :meth:`save_records` keeps it. Pure and cheap: no I/O, nothing
        opened, callable from any thread (the trace writer encodes on the event loop, as
        each run ends, and hands its thread only records); raises ``ValueError`` for a
        trace that cannot be encoded (a number JSON has no place for)."""
        ...

    def encode_steps(self, trace: TraceSteps) -> TraceRecord:
        """The trace of a run recorded as steps, as
        :meth:`save_records` keeps it; as pure and cheap as :meth:`encode` (the trace
        writer's thread calls it); raises ``ValueError`` for one that cannot be encoded."""
        ...

    def save_records(self, records: Sequence[TraceRecord]) -> None:
        """Keep every record of ``records`` (made by :meth:`encode`; at once, when the
        store can: one transaction), replacing traces with the same ids."""
        ...

    def save_steps(self, runs: Sequence[TraceSteps]) -> list[str]:
        """Keep the trace of every run of ``runs`` (recorded as steps), as
        :meth:`encode_steps` and :meth:`save_records` would, at once and as cheaply as the
        store can (the trace writer's thread calls it); a run that cannot be encoded is
        left out alone, and the reason of each one left out is returned."""
        ...

    def get(self, trace_id: str) -> Trace | None:
        """The trace with this id, or one whose id starts with it when only one does."""
        ...

    def list(self, query: TraceQuery) -> Sequence[Trace]:
        """Matching traces, newest first."""
        ...

    def prune(self, *, older_than: float | None, max_bytes: int | None) -> int:
        """Drop traces started before ``older_than`` (epoch seconds), then the oldest until
        the kept ones take at most ``max_bytes``; returns how many were dropped."""
        ...

    def close(self) -> None: ...


class TraceExportPort(Protocol):
    """Sends finished traces to an OpenTelemetry collector. Synchronous: the trace writer
    calls it from its own thread, never from the event loop."""

    def export(self, traces: Sequence[Trace]) -> list[str]:
        """Send ``traces`` in one request (nothing for none); raises ``TraceStoreError``
        when the receiver cannot be reached in time or refuses them. A trace that cannot be
        sent (:func:`~jarvis.domain.traces.times_problem`) is left out alone: the rest are
        sent, and the reason of each one left out is returned."""
        ...

    def close(self) -> None: ...
