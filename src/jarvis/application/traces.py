"""Records runs as traces: a :class:`~jarvis.domain.run.steps.RunRecording` on the bus of
every run, told each step by the agent loop (no event is made for it), which hands each
finished run's steps to the trace writer (:attr:`~.trace_writer.TraceWriter.hand_over`).
The writer's thread encodes and stores them; the spans are made only when a trace is read,
exported or profiled.

:class:`TraceRecorder` is the same recording for code that wants each run's
:class:`~jarvis.domain.traces.Trace` as it ends (``jarvis ask --profile``, tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jarvis.application.trace_context import trace_parent_getter
from jarvis.domain.run.events import EventBus
from jarvis.domain.run.steps import RunRecording, TraceSteps
from jarvis.domain.trace_steps import trace_of_log
from jarvis.domain.traces import Trace


def run_recording(
    sink: Callable[[TraceSteps], None],
    *,
    content: bool = False,
    mask: Callable[[str], str] = lambda text: text,
    clock: Callable[[], float] = time.time,
    on_first: Callable[[], None] | None = None,
) -> RunRecording:
    """A recording whose traces continue the caller's (``traceparent``, see
    :mod:`.trace_context`); ``sink`` gets each finished run's steps (``on_first`` is called
    before the first)."""
    return RunRecording(
        sink,
        content=content,
        mask=mask,
        remote=trace_parent_getter(),
        clock=clock,
        on_first=on_first,
    )


class TraceRecorder:
    """``sink`` gets each finished run's :class:`~jarvis.domain.traces.Trace`, made as the
    run ends. ``content``: keep run inputs, tool arguments and results (masked by
    ``mask``). ``attach`` it to a bus; on a bus that records already (traces are kept), it
    is told the same traces."""

    def __init__(
        self,
        sink: Callable[[Trace], None],
        *,
        content: bool = False,
        mask: Callable[[str], str] = lambda text: text,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sink = sink
        self._content = content
        self._mask = mask
        self._clock = clock

    def _made(self, trace: TraceSteps) -> None:
        self._sink(trace_of_log(trace))

    def attach(self, bus: EventBus) -> None:
        if bus.recording is not None:
            bus.recording.also(self._made)
        else:
            bus.record_with(
                run_recording(self._made, content=self._content, mask=self._mask, clock=self._clock)
            )
