"""Records runs as traces, from the events they publish, and keeps them off the event loop.

:class:`TraceRecorder` is an event-bus subscriber: it turns the events of one top-level run
(``AgentRunStarted`` ... ``AgentRunEnded``) into a :class:`~jarvis.domain.traces.Trace`.
Runs nested in a tool call (``llm_query``, a sub-agent) and inferences made while a tool
runs become children of that tool's span. Concurrent runs on one bus (``jarvis serve``)
are told apart by context: each asyncio task that starts a run records its own trace.

:class:`~.trace_writer.TraceWriter` saves the finished traces, off the event loop.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from jarvis.application.trace_context import enter_span, trace_parent
from jarvis.application.trace_export import exported_span_id
from jarvis.domain.json_types import JSONObject
from jarvis.domain.run.events import (
    AgentRunEnded,
    AgentRunStarted,
    Event,
    InferenceEnded,
    InferenceStarted,
    LoopGuardTriggered,
    ToolCallEnded,
    ToolCallStarted,
)
from jarvis.domain.traces import (
    MAX_CONTENT_CHARS,
    MAX_SPANS,
    Span,
    SpanKind,
    Trace,
    TraceParent,
    TraceStatus,
)


@dataclass(slots=True, eq=False)  # compared by identity
class _OpenSpan:
    """A span being recorded. Called, it is its W3C parent (the ids it is exported under):
    what :func:`~.trace_context.enter_span` keeps for the task that runs it, computed only
    when an adapter asks."""

    trace_id: str
    remote: TraceParent | None
    """The caller's span the trace continues (its ids, not the trace: no reference cycle)."""
    span_id: str
    parent_id: str | None
    kind: SpanKind
    name: str
    at: float
    """Monotonic start (the events' clock)."""
    attributes: JSONObject
    duration: float | None = None
    ok: bool = True
    content: JSONObject | None = None
    """Made when content is kept (``[traces] content = true``) and there is some."""
    outer: _OpenSpan | None = None
    """For a run: the run that was current in its task when it started."""

    def __call__(self) -> TraceParent:
        parent = self.remote
        return TraceParent(
            trace_id=self.trace_id if parent is None else parent.trace_id,
            span_id=exported_span_id(self.trace_id, self.span_id),
            flags="01" if parent is None else parent.flags,
        )


@dataclass(slots=True)
class _OpenTrace:
    trace_id: str
    parent: TraceParent | None
    wall: float
    """Epoch seconds at ``mono``."""
    mono: float
    spans: list[_OpenSpan] = field(default_factory=list)
    runs: list[_OpenSpan] = field(default_factory=list)
    tools: dict[tuple[str, str], _OpenSpan] = field(default_factory=dict)
    """Running tool calls by (their run's span id, call id)."""
    inferences: list[_OpenSpan] = field(default_factory=list)
    next_id: int = 1
    dropped: int = 0

    def add(
        self, kind: SpanKind, name: str, at: float, parent: _OpenSpan | None, attributes: JSONObject
    ) -> _OpenSpan:
        span = _OpenSpan(
            self.trace_id,
            self.parent,
            f"{self.next_id:04x}",
            None if parent is None else parent.span_id,
            kind,
            name,
            at,
            attributes,
        )
        self.next_id += 1
        if len(self.spans) < MAX_SPANS:
            self.spans.append(span)
        else:
            self.dropped += 1
        return span

    def under(self, run: _OpenSpan | None) -> _OpenSpan | None:
        """Where a new run or inference hangs: ``run``'s one running tool, else ``run``."""
        if run is None or not self.tools:
            return run
        running = [t for t in self.tools.values() if t.parent_id == run.span_id]
        return running[0] if len(running) == 1 else run


def _clip(text: str, mask: Callable[[str], str]) -> str:
    return mask(text[:MAX_CONTENT_CHARS])


class TraceRecorder:
    """Subscribe it to a bus (``bus.subscribe(recorder)``); ``sink`` gets each finished
    trace. ``content``: keep run inputs, tool arguments and results (masked by ``mask``).

    It runs inside every publish, on the event loop, so each event costs a few dict and
    attribute operations: the spans' records (:class:`~jarvis.domain.traces.Span`) are
    made once, when the run ends."""

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
        self._ids = random.Random()  # seeded from the OS; ids need to be unique, not secret
        self._current: ContextVar[_OpenTrace | None] = ContextVar(
            f"jarvis-trace-{id(self)}", default=None
        )
        self._inference: ContextVar[_OpenSpan | None] = ContextVar(
            f"jarvis-trace-inference-{id(self)}", default=None
        )
        self._run: ContextVar[_OpenSpan | None] = ContextVar(
            f"jarvis-trace-run-{id(self)}", default=None
        )
        self._handlers: dict[type, Callable[[_OpenTrace, _OpenSpan, Event], None]] = {
            InferenceStarted: self._inference_started,
            InferenceEnded: self._inference_ended,
            ToolCallStarted: self._tool_started,
            ToolCallEnded: self._tool_ended,
            AgentRunEnded: self._run_ended,
            LoopGuardTriggered: self._loop_guard,
        }
        """Each event's handler, by its exact type (one lookup, not a chain of checks)."""

    def __call__(self, event: Event) -> None:
        kind = type(event)
        if kind is AgentRunStarted:
            self._run_started(event)  # type: ignore[arg-type]  # checked by its exact type
            return
        trace = self._current.get()
        if trace is None or not trace.runs:
            return
        # the innermost run of the calling task (concurrent sub-runs each have theirs)
        run = self._run.get()
        if run is None or run not in trace.runs:  # open spans compare by identity
            run = trace.runs[-1]
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(trace, run, event)

    def _inference_started(self, trace: _OpenTrace, run: _OpenSpan, event: Event) -> None:
        assert isinstance(event, InferenceStarted)
        span = trace.add(
            "inference",
            event.model,
            event.at,
            trace.under(run),
            {"engine": event.engine, "model": event.model},
        )
        trace.inferences.append(span)
        self._inference.set(span)  # the task that made it ends it (``llm_batch``)

    def _tool_started(self, trace: _OpenTrace, run: _OpenSpan, event: Event) -> None:
        assert isinstance(event, ToolCallStarted)
        span = trace.add("tool", event.tool, event.at, run, {})  # parallel calls are siblings
        trace.tools[(run.span_id, event.call_id)] = span
        enter_span(span)  # the task that runs the call sees it
        if self._content:
            span.content = {"arguments": _clip(str(event.arguments), self._mask)}

    def _loop_guard(self, trace: _OpenTrace, run: _OpenSpan, event: Event) -> None:
        assert isinstance(event, LoopGuardTriggered)
        span = trace.add(
            "tool",
            event.tool,
            event.at,
            run,
            {"loop_guard": event.action, "loop_guard_pattern": event.pattern},
        )
        span.duration = 0.0
        span.ok = False

    def _run_started(self, event: AgentRunStarted) -> None:
        trace = self._current.get()
        outer: _OpenSpan | None = None
        if trace is None or not trace.runs:
            trace = _OpenTrace(
                trace_id=f"{self._ids.getrandbits(128) or 1:032x}",
                parent=trace_parent(),
                wall=self._clock(),
                mono=event.at,
            )
            self._current.set(trace)
        else:
            outer = self._run.get()
            if outer is None or outer not in trace.runs:
                outer = trace.runs[-1]
        span = trace.add("run", event.agent, event.at, trace.under(outer), {"agent": event.agent})
        span.outer = outer
        if self._content:
            span.content = {"input": _clip(event.input, self._mask)}
        trace.runs.append(span)
        self._run.set(span)
        enter_span(span)

    def _run_ended(self, trace: _OpenTrace, span: _OpenSpan, event: Event) -> None:
        assert isinstance(event, AgentRunEnded)
        trace.runs = [run for run in trace.runs if run is not span]
        self._run.set(span.outer)
        enter_span(span.outer)
        span.duration = event.at - span.at
        span.ok = event.stop_reason not in ("error", "cancelled")
        attributes = span.attributes
        attributes["turns"] = event.turns
        attributes["stop_reason"] = event.stop_reason
        if event.error:
            attributes["error"] = event.error
        if trace.runs:
            return
        self._current.set(None)
        self._finish(trace, trace.spans[0], event)

    def _inference_ended(self, trace: _OpenTrace, run: _OpenSpan, event: Event) -> None:
        assert isinstance(event, InferenceEnded)
        span = self._inference.get()
        inferences = trace.inferences
        if span is None or span not in inferences:
            if not inferences:
                return
            span = inferences[-1]
        inferences.remove(span)  # by identity: open spans have no __eq__
        self._inference.set(None)
        span.duration = event.at - span.at
        attributes = span.attributes
        attributes["tokens_in"] = event.usage.prompt_tokens
        attributes["tokens_out"] = event.usage.completion_tokens
        attributes["finish_reason"] = event.finish_reason
        attributes["tool_calls"] = len(event.tool_calls)
        if event.first_token_seconds is not None:
            attributes["first_token_seconds"] = round(event.first_token_seconds, 6)
        span.ok = event.finish_reason != "error"

    def _tool_ended(self, trace: _OpenTrace, run: _OpenSpan, event: Event) -> None:
        assert isinstance(event, ToolCallEnded)
        enter_span(run)
        span = trace.tools.pop((run.span_id, event.call_id), None)
        if span is None:
            return
        span.duration = event.at - span.at
        span.ok = event.success
        span.attributes["result_chars"] = len(event.result)
        span.attributes["success"] = event.success
        if self._content:
            content = span.content = span.content or {}
            content["result"] = _clip(event.result, self._mask)

    def _finish(self, trace: _OpenTrace, root: _OpenSpan, event: AgentRunEnded) -> None:
        end = event.at
        offset = trace.wall - trace.mono
        spans: list[Span] = []
        for open_span in trace.spans:  # the open trace is dropped after: its dicts are handed on
            duration = open_span.duration
            if duration is None:
                duration = end - open_span.at
                open_span.ok = False
                open_span.attributes["unfinished"] = True
            spans.append(
                Span(
                    span_id=open_span.span_id,
                    parent_id=open_span.parent_id,
                    kind=open_span.kind,
                    name=open_span.name,
                    start=offset + open_span.at,
                    duration=duration if duration > 0.0 else 0.0,
                    ok=open_span.ok,
                    attributes=open_span.attributes,
                    content={} if open_span.content is None else open_span.content,
                )
            )
        if trace.dropped:
            spans[0].attributes["dropped_spans"] = trace.dropped
        stop = event.stop_reason
        status: TraceStatus = (
            "cancelled" if stop == "cancelled" else "error" if stop == "error" else "ok"
        )
        parent = trace.parent
        self._sink(
            Trace(
                trace_id=trace.trace_id,
                agent=root.name,
                start=spans[0].start,
                duration=spans[0].duration,
                status=status,
                error=(event.error or "error") if status == "error" else "",
                spans=tuple(spans),
                remote_trace_id="" if parent is None else parent.trace_id,
                remote_parent_id="" if parent is None else parent.span_id,
            )
        )
