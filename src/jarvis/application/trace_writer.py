"""Saves finished traces (and exports them to a collector, when one is configured) in one
background thread, so that a slow, full, read-only, locked or damaged store, or a collector
that is down, delays nothing and loses no answer.

A failure is told once through ``notice``; the store (or the collector) then rests for
:data:`RETRY_SECONDS`, the traces of that time are dropped, and the next one tries it
again: a ``jarvis serve`` that met a locked file or a full disk once records again when it
is over, and says so. A trace that cannot be encoded (a value JSON cannot hold) is left out
alone, by the store and by the collector, told once. Pruning that fails (the batch was
written) rests nothing: it is told, and the next batch prunes again. What the event loop
pays for a recorded run is handing its steps over (:attr:`TraceWriter.hand_over`, one
append); the thread hands them to the store, which writes one transaction per batch of
runs.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial

from jarvis.domain.ports import TraceExportPort, TraceStorePort
from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.trace_steps import trace_of_log
from jarvis.domain.traces import Trace, TraceRecord

PRUNE_EVERY = 64
"""The writer prunes with its first trace, then every this many (a prune scans the store)."""
BATCH_SECONDS = 0.5
"""Traces handed in within this long are written together (one wake-up of the thread)."""
RETRY_SECONDS = 30.0
"""How long a store or collector that failed rests before the next trace tries it again."""


class _Destination:
    """Whether the store (or the collector) is to be used now: after a failure it rests
    ``retry_seconds``, then is tried again. Its changes are made by the writer's thread."""

    __slots__ = ("retry_at", "retry_seconds")

    def __init__(self, present: bool, retry_seconds: float) -> None:
        self.retry_at = 0.0 if present else math.inf
        """0: in use; else the monotonic time of the next try (``inf``: none configured)."""
        self.retry_seconds = retry_seconds

    def usable(self) -> bool:
        retry_at = self.retry_at
        return retry_at == 0.0 or time.monotonic() >= retry_at

    def failed(self) -> bool:
        """Rest it; whether it was in use until now (a new outage, to be told)."""
        was_in_use = self.retry_at == 0.0
        self.retry_at = time.monotonic() + self.retry_seconds
        return was_in_use

    def worked(self) -> bool:
        """Use it again; whether it had failed (its return, to be told)."""
        had_failed = self.retry_at != 0.0
        self.retry_at = 0.0
        return had_failed


class TraceWriter:
    """Saves traces in one background thread, then prunes by age and size.

    ``hand_over`` (each run the bus records) only appends the run's steps to a buffer: they
    are plain tuples, which the garbage collector soon stops walking, and the thread hands
    them to the store as they are (:meth:`TraceStorePort.save_steps`). ``save`` (a
    :class:`Trace` made elsewhere) encodes the trace as the store keeps it
    (:meth:`TraceStorePort.encode`: a tuple of strings and numbers, which the garbage
    collector does not walk while it waits) and appends it to a buffer: the thread wakes
    at most every :data:`BATCH_SECONDS` and writes what accumulated, so that a busy process
    pays one thread wake-up per batch, not per run. The store is made, and opened, by the
    thread, on its first write: the traces handed in before that (the first run's, for
    ``jarvis ask``) are encoded there.
    ``flush`` writes what is buffered now and waits for it; the process's exit flushes too
    (the thread is a daemon, so a store that hangs cannot keep the process alive past
    ``flush``'s timeout).
    """

    def __init__(
        self,
        store: Callable[[], TraceStorePort] | None,
        *,
        notice: Callable[[str], None],
        max_days: float | None = None,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
        exporter: Callable[[], TraceExportPort] | None = None,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self._store_factory = store
        self._store: TraceStorePort | None = None
        self._exporter_factory = exporter
        self._exporter: TraceExportPort | None = None
        self._notice = notice
        self._max_days = max_days
        self._max_bytes = max_bytes
        self._clock = clock
        self._records: list[TraceRecord] = []
        self._unencoded: list[Trace] = []
        """Handed in before the thread made the store: the thread encodes them."""
        self._runs: deque[TraceSteps | threading.Event] = deque()
        """Recorded runs' steps (:meth:`save_steps`), for the thread to save, and the
        marks :meth:`flush` leaves among them. A deque: appending to it from any thread
        needs no lock (the event loop pays one append a run)."""
        self._traces: list[Trace | TraceSteps] = []
        """Kept for the exporter only (it needs the spans, not the store's record)."""
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._flushing = False
        self._storing = _Destination(store is not None, retry_seconds)
        self._exporting = _Destination(exporter is not None, retry_seconds)
        self._refusal_told = False
        self._prune_failed = False
        """Written by the thread only: the last prune failed (retried with the next batch)."""
        self._written = 0
        self.hand_over: Callable[[TraceSteps], None] = self._runs.append
        """Hands the thread a run recorded as steps, to save (its spans are made when it is
        read) and to write or export if the store or the collector is in use then: the
        buffer's own append, so that the event loop pays no Python call for it as each run
        ends (the bus's recording hands each finished run to it). The thread writes what
        it is handed once :meth:`start` was called (:meth:`save_steps` does both)."""

    def start(self) -> None:
        """Start the thread (once; any thread may call it): the first trace does, so that a
        process that records nothing starts none."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._start()

    def save_steps(self, trace: TraceSteps) -> None:
        """Save the trace of a run recorded as steps (:attr:`hand_over`, and :meth:`start`
        if it was not called)."""
        self.hand_over(trace)
        self.start()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="jarvis-traces", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def save(self, trace: Trace) -> None:
        # on the event loop, as each run ends: the destinations' states are read inline (in
        # use: 0.0) and the lock is taken bare, not through the condition's Python methods
        storing = self._storing.retry_at == 0.0 or self._storing.usable()
        exporting = self._exporting.retry_at == 0.0 or self._exporting.usable()
        if not (storing or exporting):
            return
        store = self._store
        record = None
        if storing and store is not None:
            try:
                record = store.encode(trace)
            except Exception as exc:  # a trace is never worth a run: tell once, keep going
                self._refused(str(exc))
                storing = False
        with self._lock:
            if record is not None:
                self._records.append(record)
            elif storing and store is None:
                self._unencoded.append(trace)
            if exporting:
                self._traces.append(trace)
            if self._thread is None:
                self._start()

    def _refused(self, reason: str) -> None:
        with self._wake:
            told, self._refusal_told = self._refusal_told, True
        if not told:
            self._notice(f"a trace could not be recorded (it was left out): {reason}")

    def _run(self) -> None:
        while True:
            with self._wake:
                if not self._flushing:
                    self._wake.wait(BATCH_SECONDS)
                records, self._records = self._records, []
                unencoded, self._unencoded = self._unencoded, []
                traces, self._traces = self._traces, []
                steps, marks = self._taken_runs()  # under the lock: a flush's mark comes
                # after everything handed in before it, into the lists and into the deque
            kept = steps if steps and self._storing.usable() else []
            if records or unencoded or kept:
                save = partial(self._save, records, unencoded, kept)
                self._attempt(self._storing, "recorded", save)
            if steps and self._exporting.usable():
                traces.extend(steps)
            if traces:
                self._attempt(self._exporting, "exported", partial(self._export, traces))
            with self._wake:
                self._flushing = False
                for mark in marks:
                    mark.set()
                self._wake.notify_all()

    def _taken_runs(self) -> tuple[list[TraceSteps], list[threading.Event]]:
        """The runs handed in so far, and the marks of the flushes waiting for them."""
        runs = self._runs
        steps: list[TraceSteps] = []
        marks: list[threading.Event] = []
        for _ in range(len(runs)):
            taken = runs.popleft()
            if isinstance(taken, threading.Event):
                marks.append(taken)
            else:
                steps.append(taken)
        return steps, marks

    def _attempt(self, destination: _Destination, verb: str, work: Callable[[], None]) -> None:
        """Run ``work``; a failure rests ``destination``, told when it starts and ends."""
        try:
            work()
        except Exception as exc:
            if destination.failed():
                self._notice(f"traces are not being {verb}: {exc}")
        else:
            if destination.worked():
                self._notice(f"traces are being {verb} again")

    def _export(self, batch: list[Trace | TraceSteps]) -> None:
        if self._exporter is None and self._exporter_factory is not None:
            self._exporter = self._exporter_factory()
        if self._exporter is None:
            return
        traces: list[Trace] = []
        for trace in batch:
            try:
                traces.append(trace_of_log(trace) if isinstance(trace, tuple) else trace)
            except ValueError as exc:
                self._refused(str(exc))
        for reason in self._exporter.export(traces):
            self._refused(reason)

    def _save(
        self, records: list[TraceRecord], unencoded: list[Trace], steps: list[TraceSteps]
    ) -> None:
        store = self._store
        if store is None and self._store_factory is not None:
            store = self._store_factory()
        if store is None:
            return
        batch = records
        for trace in unencoded:
            try:
                batch.append(store.encode(trace))
            except Exception as exc:
                self._refused(str(exc))
        self._store = store  # from now on, ``save`` encodes
        if batch:
            store.save_records(batch)
        for reason in store.save_steps(steps) if steps else ():
            self._refused(reason)
        before, self._written = self._written, self._written + len(batch) + len(steps)
        if (
            before == 0
            or before // PRUNE_EVERY != self._written // PRUNE_EVERY
            or self._prune_failed
        ):
            self._prune(store)

    def _prune(self, store: TraceStorePort) -> None:
        """Drop what retention says; a failure leaves the traces kept (they were written),
        is told once, and the next batch prunes again."""
        older = None if self._max_days is None else self._clock() - self._max_days * 86_400
        try:
            store.prune(older_than=older, max_bytes=self._max_bytes)
        except Exception as exc:
            if not self._prune_failed:
                self._notice(f"old traces could not be pruned (the next batch tries again): {exc}")
            self._prune_failed = True
        else:
            if self._prune_failed:
                self._notice("old traces are being pruned again")
            self._prune_failed = False

    def flush(self, timeout: float | None = 10.0) -> None:
        """Write what was handed in so far and wait for it (at most ``timeout`` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        mark = threading.Event()
        with self._wake:
            if self._thread is None:
                return
            self._runs.append(mark)
            while not mark.is_set():
                self._flushing = True
                self._wake.notify_all()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                self._wake.wait(left)

    def close(self) -> None:
        self.flush()
        atexit.unregister(self.flush)
        for closing in (self._store, self._exporter):
            if closing is not None:
                with contextlib.suppress(Exception):
                    closing.close()
