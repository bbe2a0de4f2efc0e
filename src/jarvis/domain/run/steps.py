"""A run's steps, recorded for its trace as they happen, without events.

Publishing an event costs the run its object (eight a two-call run) whether or not anyone
reads it; recording a trace from them, on the event loop, cost an eighth of the run. A
:class:`RunRecording` set on the bus (:meth:`~.events.EventBus.record_with`) is told each
step directly by the agent loop, and keeps it as one tuple of plain values in the trace's
:class:`StepLog`; nothing is made of them until the trace is written or read
(:mod:`jarvis.domain.trace_steps`), in the trace writer's thread or by ``jarvis traces``.

Where a step hangs is the task's *cursor*, a context variable: the trace, the run the task
is in and the span its new steps hang under (a tool call while one runs in the task, else
the run). A run started inside a tool call (``llm_query``, a sub-agent) is that call's
child; concurrent runs, and inferences in tasks of their own (``llm_batch``), each follow
their own task.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from time import monotonic
from typing import TYPE_CHECKING, TypeAlias

from jarvis.domain.json_types import JSONObject

if TYPE_CHECKING:  # every process that runs an agent imports this module: these are heavier
    import random

    from jarvis.domain.traces import TraceParent

MAX_SPANS = 10_000
"""The most spans one trace keeps (a runaway run's later spans are counted, not kept)."""

RUN, RUN_END, INFERENCE, INFERENCE_END, TOOL, TOOL_END, GUARD = range(7)
"""What a step is, its first field. After it, every step holds its monotonic time, then:

* ``RUN``: the span it hangs under (the index of its step, -1 for the trace's own run),
  the agent, the input (``None`` unless content is kept);
* ``RUN_END``: the index of its ``RUN``, turns, stop reason, error kind;
* ``INFERENCE``: parent, engine, model (recorded with its end, when it ends, its time
  that of its start);
* ``INFERENCE_END``: its ``INFERENCE``, tokens in, tokens out, finish reason, tool calls
  asked for, seconds to the first streamed text (``None``: not streamed);
* ``TOOL``: parent, tool, call id, arguments (``None`` unless content is kept);
* ``TOOL_END``: its ``TOOL``, result length, success, result (``None`` unless kept);
* ``GUARD`` (a loop-guard verdict, a span of no duration): parent, tool, action, pattern.
"""
STARTS = frozenset((RUN, INFERENCE, TOOL, GUARD))
"""The steps that start a span (numbered 1, 2, ... in the order they were recorded)."""

Step: TypeAlias = tuple[object, ...]


class StepLog:
    """One trace being recorded: its steps, in the order they happened. Its first step is
    its top-level run's; when that run ends, the recording's sinks get its
    :data:`TraceSteps`."""

    __slots__ = ("dropped", "recording", "remote", "spans", "steps", "trace_id", "wall")

    def __init__(
        self,
        recording: RunRecording,
        trace_id: str,
        remote: TraceParent | None,
        wall: float,
        first: Step,
    ) -> None:
        self.recording: RunRecording | None = recording
        """``None`` once its run has ended: a task the run started that starts a run of its
        own (an agent it runs in the background) then records a trace of its own."""
        self.trace_id = trace_id
        self.remote = remote
        """The caller's span the trace continues (a ``traceparent``), if any."""
        self.wall = wall
        """Epoch seconds when its run started (the time of its first step)."""
        self.steps: list[Step] = [first]
        """Where steps are recorded (once the run has ended, none are)."""
        self.spans = 1
        self.dropped = 0
        """Spans past :data:`MAX_SPANS`: counted, not kept."""


TraceSteps: TypeAlias = (
    "tuple[str, float, TraceParent | None, int, tuple[Step, ...], Callable[[str], str] | None]"
)
"""A finished trace, as recorded: ``(trace_id, wall, remote, dropped, steps, mask)``, where
``mask`` is ``None`` unless content is kept (each content field is then cut and masked by
it when the trace is written). Tuples of plain values, which Python's garbage collector
stops walking once it has looked at them (each step at its first collection): the trace
writer holds each finished run's until its thread writes the batch, and a collector that
kept walking every run's objects meanwhile, promoting them to its oldest generation, would
cost each run more than recording it."""


Cursor: TypeAlias = tuple[StepLog, int, int, "Cursor | None", int]
"""A task's place: its trace, the index of its run's step (-1: a run past the cap), the
index of the span its new steps hang under, the cursor its run restores when it ends, and
the number of the span its new steps hang under (its id, the one a ``traceparent`` names)."""

ToolStarted: TypeAlias = tuple[Token[Cursor | None], StepLog, int]
"""What :meth:`RunRecording.tool_started` hands :meth:`RunRecording.tool_ended`."""

CURSOR: ContextVar[Cursor | None] = ContextVar("jarvis-run-steps", default=None)
"""The task's cursor (``None``: no run being recorded). A context variable follows the task
and the tasks it starts, and no other: concurrent requests each have their own."""

IDS_AT_ONCE = 64
"""Trace ids drawn from the generator at once (one call per this many traces)."""
WINDOW_SECONDS = 4
"""The width of the time windows a trace id's first four digits count."""


def _trace_ids(source: random.Random, now: float) -> list[str]:
    """Fresh trace ids, to be taken from the end: 32 hex digits, never all zero. The first
    four count the :data:`WINDOW_SECONDS` window they were drawn in (modulo 65536, about
    three days), the other 28 are random.

    Why not all random: a trace store indexes its traces by id (SQLite's b-tree), and
    random ids land each on a page of its own. With 100,000 traces kept, a busy batch's
    inserts then took four times the CPU (16 us a trace, not 4) and wrote most of a page to
    the WAL for each; ids drawn in the same window are inserted next to each other. A short
    prefix still finds one trace: the 12 digits ``jarvis traces list`` shows hold 32
    random bits."""
    window = int(now) // WINDOW_SECONDS % 0x10000 if 0.0 <= now < 1e15 else 0
    drawn = bytearray(source.randbytes(16 * IDS_AT_ONCE))
    drawn[0::16] = bytes((window >> 8,)) * IDS_AT_ONCE
    drawn[1::16] = bytes((window & 0xFF,)) * IDS_AT_ONCE
    ids = drawn.hex(" ", -16).split()  # split in C (sliced in Python: 0.1 us a run)
    if _ZERO_ID in ids:
        ids = [trace_id if trace_id != _ZERO_ID else f"{1:032x}" for trace_id in ids]
    return ids


_ZERO_ID = "0" * 32


def _id_source() -> random.Random:
    """A generator seeded from the OS (ids need to be unique, not secret). ``random`` is
    imported here, by the first recording: every process that runs an agent imports this
    module, and most record nothing."""
    import random

    return random.Random()


class RunRecording:
    """Records the runs on one bus: ``sink`` gets each finished trace (:data:`TraceSteps`).
    ``content``: keep run inputs, tool arguments and results (cut and masked when the trace
    is written, by ``mask``). ``remote`` says which caller's span a new trace continues.
    ``on_first`` is called once, before the first trace is handed to ``sink``: the trace
    writer starts its thread then (a process that records nothing starts none), and its
    sink is then a plain append, which costs the run no Python call.

    Its methods are called by the agent loop, on the event loop, at every step of every run:
    each reads the cursor once and appends one tuple."""

    __slots__ = ("_ids", "_random", "clock", "content", "mask", "on_first", "remote", "sinks")

    def __init__(
        self,
        sink: Callable[[TraceSteps], None],
        *,
        content: bool = False,
        mask: Callable[[str], str] = lambda text: text,
        remote: Callable[[], TraceParent | None] = lambda: None,
        clock: Callable[[], float] = time.time,
        on_first: Callable[[], None] | None = None,
    ) -> None:
        self.sinks: tuple[Callable[[TraceSteps], None], ...] = (sink,)
        self.on_first = on_first
        self.content = content
        self.mask = mask
        self.remote = remote
        self.clock = clock
        self._random: random.Random | None = None
        self._ids: list[str] = []

    def also(self, sink: Callable[[TraceSteps], None]) -> None:
        """Hand each finished trace to ``sink`` too (``jarvis ask --profile``)."""
        self.sinks = (*self.sinks, sink)

    def run_started(self, agent: str, input: str) -> None:
        cursor = CURSOR.get()
        kept = input if self.content else None
        if cursor is None or cursor[0].recording is not self:  # a trace of its own
            ids = self._ids
            trace_id = ids.pop() if ids else self._fresh_id()
            first = (RUN, monotonic(), -1, agent, kept)
            log = StepLog(self, trace_id, self.remote(), self.clock(), first)
            CURSOR.set((log, 0, 0, cursor, 1))
            return
        log, parent = cursor[0], cursor[2]
        steps = log.steps
        index = len(steps)
        if log.spans < MAX_SPANS:
            log.spans += 1
            steps.append((RUN, monotonic(), parent, agent, kept))
        else:
            log.dropped += 1
            index = -1
        if index < 0:
            CURSOR.set((log, -1, parent, cursor, cursor[4]))
        else:
            CURSOR.set((log, index, index, cursor, log.spans))

    def _fresh_id(self) -> str:
        if self._random is None:
            self._random = _id_source()
        self._ids = _trace_ids(self._random, self.clock())
        return self._ids.pop()

    def run_ended(self, turns: int, stop_reason: str, error: str = "") -> None:
        cursor = CURSOR.get()
        if cursor is None or cursor[0].recording is not self:
            return
        log, run, _, outer, _ = cursor
        if run >= 0:
            log.steps.append((RUN_END, monotonic(), run, turns, stop_reason, error))
        CURSOR.set(outer)
        if run == 0:
            log.recording = None
            steps, log.steps = log.steps, []
            ended = (
                log.trace_id,
                log.wall,
                log.remote,
                log.dropped,
                tuple(steps),
                self.mask if self.content else None,
            )
            if self.on_first is not None:
                self._first_ended()
            for sink in self.sinks:
                sink(ended)

    def _first_ended(self) -> None:
        on_first, self.on_first = self.on_first, None
        if on_first is not None:  # another thread's run may have been first
            on_first()

    def inference(
        self,
        engine: str,
        model: str,
        started: float,
        tokens_in: int,
        tokens_out: int,
        finish_reason: str,
        tool_calls: int,
        first_token: float | None = None,
    ) -> None:
        """An inference that ended: ``started`` is its start's monotonic time. Recorded as
        it ends, in one call (its start and end steps, in that order): nothing runs under
        an inference that a step would hang under. Its start is written out here, not
        through :meth:`inference_started`: a call costs the run about 0.3 us, cold."""
        cursor = CURSOR.get()
        if cursor is None or cursor[0].recording is not self:
            return
        log = cursor[0]
        if log.spans >= MAX_SPANS:
            log.dropped += 1
            return
        log.spans += 1
        steps = log.steps
        index = len(steps)
        steps.append((INFERENCE, started, cursor[2], engine, model))
        steps.append(
            (
                INFERENCE_END,
                monotonic(),
                index,
                tokens_in,
                tokens_out,
                finish_reason,
                tool_calls,
                first_token,
            )
        )

    def inference_started(self, engine: str, model: str, at: float | None = None) -> int:
        """The index of its step, for :meth:`inference_ended` (-1: not recorded); ``at``:
        its start's monotonic time, if not now. An inference that failed is one that
        started and never ended (its span is left unfinished)."""
        cursor = CURSOR.get()
        if cursor is None or cursor[0].recording is not self:
            return -1
        log = cursor[0]
        if log.spans >= MAX_SPANS:
            log.dropped += 1
            return -1
        log.spans += 1
        steps = log.steps
        steps.append((INFERENCE, monotonic() if at is None else at, cursor[2], engine, model))
        return len(steps) - 1

    def inference_ended(
        self,
        started: int,
        tokens_in: int,
        tokens_out: int,
        finish_reason: str,
        tool_calls: int,
        first_token: float | None = None,
    ) -> None:
        cursor = CURSOR.get()
        if started < 0 or cursor is None or cursor[0].recording is not self:
            return
        cursor[0].steps.append(
            (
                INFERENCE_END,
                monotonic(),
                started,
                tokens_in,
                tokens_out,
                finish_reason,
                tool_calls,
                first_token,
            )
        )

    def tool_started(self, tool: str, call_id: str, arguments: JSONObject) -> ToolStarted | None:
        """What :meth:`tool_ended` takes (``None``: not recorded). Until then, the runs and
        inferences started in this task, and in the tasks it starts, hang under the call."""
        cursor = CURSOR.get()
        if cursor is None or cursor[0].recording is not self:
            return None
        log, run, parent, outer, _ = cursor
        if log.spans >= MAX_SPANS:
            log.dropped += 1
            return None
        log.spans += 1
        steps = log.steps
        steps.append(
            (
                TOOL,
                monotonic(),
                parent if run < 0 else run,  # parallel calls are siblings
                tool,
                call_id,
                str(arguments) if self.content else None,
            )
        )
        index = len(steps) - 1
        return CURSOR.set((log, run, index, outer, log.spans)), log, index

    def tool_ended(self, started: ToolStarted | None, result: str, success: bool) -> None:
        if started is None:
            return
        token, log, index = started
        log.steps.append(
            (
                TOOL_END,
                monotonic(),
                index,
                len(result),
                success,
                result if self.content else None,
            )
        )
        try:  # not contextlib.suppress: its object costs a microsecond a call, cold
            CURSOR.reset(token)
        except ValueError:  # ended in another context than it started in: nothing to undo
            return

    def loop_guard(self, tool: str, action: str, pattern: str) -> None:
        cursor = CURSOR.get()
        if cursor is None or cursor[0].recording is not self:
            return
        log, run, parent, _, _ = cursor
        if log.spans >= MAX_SPANS:
            log.dropped += 1
            return
        log.spans += 1
        log.steps.append((GUARD, monotonic(), parent if run < 0 else run, tool, action, pattern))


def running_step() -> tuple[StepLog, int] | None:
    """The trace being recorded in this task and the number of the span it runs (a tool
    call, else a run), if any: what an adapter passes on to the process it calls."""
    cursor = CURSOR.get()
    if cursor is None:
        return None
    return cursor[0], cursor[4]
