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
from dataclasses import dataclass
from itertools import repeat
from typing import Any, TypeAlias

from jarvis.application.trace_context import enter_span, trace_parent
from jarvis.application.trace_export import exported_span_id
from jarvis.domain.cut_text import cut_masked
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
from jarvis.domain.well_formed import well_formed

_Opening = AgentRunStarted | InferenceStarted | ToolCallStarted | LoopGuardTriggered
"""The event a span starts with (a loop-guard verdict starts and ends its span)."""


@dataclass(slots=True, eq=False)  # compared by identity
class _OpenSpan:
    """A span being recorded: the events that open and close it, and where it hangs.
    Called, it is its W3C parent (the ids it is exported under): what
    :func:`~.trace_context.enter_span` keeps for the task that runs it, computed only when
    an adapter asks. Its name, attributes and times are read from its events once, when the
    trace is made (:func:`_span`)."""

    trace_id: str
    remote: TraceParent | None
    """The caller's span the trace continues (its ids, not the trace: no reference cycle)."""
    number: int
    """Its place in the trace, from 1 (its span id, in hex)."""
    parent: _OpenSpan | None
    opened: _Opening
    closed: Event | None = None
    content: JSONObject | None = None
    """Made when content is kept (``[traces] content = true``) and there is some."""
    outer: _OpenSpan | None = None
    """For a run: the run that was current in its task when it started."""

    def __call__(self) -> TraceParent:
        parent = self.remote
        return TraceParent(
            trace_id=self.trace_id if parent is None else parent.trace_id,
            span_id=exported_span_id(self.trace_id, f"{self.number:04x}"),
            flags="01" if parent is None else parent.flags,
        )


class _OpenTrace:
    """A trace being recorded: its spans in the order they started, and the open ones. A
    plain class: it is made as each run starts, on the event loop, where a dataclass's
    default factories cost more than the rest of its making."""

    __slots__ = (
        "dropped",
        "inferences",
        "mono",
        "next_id",
        "parent",
        "runs",
        "spans",
        "tools",
        "trace_id",
        "wall",
    )

    def __init__(self, trace_id: str, parent: TraceParent | None, wall: float, mono: float) -> None:
        self.trace_id = trace_id
        self.parent = parent
        self.wall = wall
        """Epoch seconds at ``mono``."""
        self.mono = mono
        self.spans: list[_OpenSpan] = []
        self.runs: list[_OpenSpan] = []
        self.tools: dict[tuple[_OpenSpan, str], _OpenSpan] = {}
        """Running tool calls by (their run, call id)."""
        self.inferences: list[_OpenSpan] = []
        self.next_id = 1
        self.dropped = 0

    def add(self, opened: _Opening, parent: _OpenSpan | None) -> _OpenSpan:
        span = _OpenSpan(self.trace_id, self.parent, self.next_id, parent, opened)
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
        running = [t for t in self.tools.values() if t.parent is run]
        return running[0] if len(running) == 1 else run


IDS_AT_ONCE = 64
"""Trace ids drawn from the generator at once: one call per this many runs (drawn one at a
time, as each run started, the id took a third of what recording the start cost)."""


def _trace_ids(source: random.Random) -> list[str]:
    """Fresh random trace ids (32 hex digits, never all zero), to be taken from the end."""
    digits = f"{source.getrandbits(128 * IDS_AT_ONCE):0{32 * IDS_AT_ONCE}x}"
    ids = [digits[at : at + 32] for at in range(0, 32 * IDS_AT_ONCE, 32)]
    return [trace_id if trace_id.strip("0") else f"{1:032x}" for trace_id in ids]


def _clip(text: str, mask: Callable[[str], str]) -> str:
    """What a span keeps of a content field: its start, masked, an authority the cut falls
    in masked whole (:func:`~jarvis.domain.cut_text.cut_masked`), a lone surrogate as
    U+FFFD (:func:`~jarvis.domain.well_formed.well_formed`: a store or a collector would refuse
    the whole trace for it)."""
    return well_formed(cut_masked(text, MAX_CONTENT_CHARS, mask))


def _span(span: _OpenSpan, offset: float, end: float) -> Span:
    """``span``'s record, read from its events: one still open at ``end`` is cut there,
    unfinished. One function, the kinds inline: it runs on the event loop, cold."""
    opened, closed = span.opened, span.closed
    ok = False
    attributes: JSONObject
    if type(opened) is InferenceStarted:
        kind: SpanKind = "inference"
        name = opened.model
        attributes = {"engine": opened.engine, "model": name}
        if type(closed) is InferenceEnded:
            attributes["tokens_in"] = closed.usage.prompt_tokens
            attributes["tokens_out"] = closed.usage.completion_tokens
            attributes["finish_reason"] = closed.finish_reason
            attributes["tool_calls"] = len(closed.tool_calls)
            if closed.first_token_seconds is not None:
                attributes["first_token_seconds"] = round(closed.first_token_seconds, 6)
            ok = closed.finish_reason != "error"
    elif type(opened) is ToolCallStarted:
        kind, name, attributes = "tool", opened.tool, {}
        if type(closed) is ToolCallEnded:
            attributes = {"result_chars": len(closed.result), "success": closed.success}
            ok = closed.success
    elif type(opened) is AgentRunStarted:
        kind, name, attributes = "run", opened.agent, {"agent": opened.agent}
        if type(closed) is AgentRunEnded:
            attributes["turns"] = closed.turns
            attributes["stop_reason"] = closed.stop_reason
            if closed.error:
                attributes["error"] = closed.error
            ok = closed.stop_reason not in ("error", "cancelled")
    else:  # a loop-guard verdict, closed by itself
        assert isinstance(opened, LoopGuardTriggered)
        kind, name = "tool", opened.tool
        attributes = {"loop_guard": opened.action, "loop_guard_pattern": opened.pattern}
    at = opened.at
    if closed is None:
        duration = end - at
        attributes["unfinished"] = True
    else:
        duration = closed.at - at
    parent = span.parent
    return Span(
        span_id=f"{span.number:04x}",
        parent_id=None if parent is None else f"{parent.number:04x}",
        kind=kind,
        name=name,
        start=offset + at,
        duration=duration if duration > 0.0 else 0.0,
        ok=ok,
        attributes=attributes,
        content={} if span.content is None else span.content,
    )


def _trace(trace: _OpenTrace, event: AgentRunEnded) -> Trace:
    """The record of ``trace``, whose top-level run ended with ``event``."""
    end = event.at
    offset = trace.wall - trace.mono
    spans = list(map(_span, trace.spans, repeat(offset), repeat(end)))
    if trace.dropped:
        spans[0].attributes["dropped_spans"] = trace.dropped
    stop = event.stop_reason
    status: TraceStatus = (
        "cancelled" if stop == "cancelled" else "error" if stop == "error" else "ok"
    )
    parent = trace.parent
    return Trace(
        trace_id=trace.trace_id,
        agent=spans[0].name,
        start=spans[0].start,
        duration=spans[0].duration,
        status=status,
        error=(event.error or "error") if status == "error" else "",
        spans=tuple(spans),
        remote_trace_id="" if parent is None else parent.trace_id,
        remote_parent_id="" if parent is None else parent.span_id,
    )


_Place: TypeAlias = tuple["_OpenTrace | None", "_OpenSpan | None", "_OpenSpan | None"]
"""Where a task is in the recording: its trace, its innermost run, the inference it started
last (a hint: one that has ended since is ignored)."""
_NOWHERE: _Place = (None, None, None)


class TraceRecorder:
    """Subscribe it to a bus (``bus.subscribe(recorder)``); ``sink`` gets each finished
    trace. ``content``: keep run inputs, tool arguments and results (masked by ``mask``).

    It runs inside every publish, on the event loop, where a few operations cost many times
    what they cost in a tight loop (caches are cold between two requests): a span keeps the
    events that open and close it, and its record (:class:`~jarvis.domain.traces.Span`) is
    made from them once, when the run ends; a task's place (its trace, run and inference) is
    one context variable, read once per event and set only when it changes."""

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
        self._random = random.Random()  # seeded from the OS; ids need to be unique, not secret
        self._ids: list[str] = []
        self._place: ContextVar[_Place] = ContextVar(f"jarvis-trace-{id(self)}", default=_NOWHERE)
        self._handlers: dict[type, Callable[[_OpenTrace, _OpenSpan, Any, _Place], None]] = {
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
        place = self._place.get()
        trace, run, _ = place
        if trace is None or not trace.runs:
            return
        # the innermost run of the calling task (concurrent sub-runs each have theirs)
        if run is None or run not in trace.runs:  # open spans compare by identity
            run = trace.runs[-1]
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(trace, run, event, place)

    def _inference_started(
        self, trace: _OpenTrace, run: _OpenSpan, event: InferenceStarted, place: _Place
    ) -> None:
        span = trace.add(event, trace.under(run))
        trace.inferences.append(span)
        self._place.set((place[0], place[1], span))  # the task that made it ends it
        # (``llm_batch`` runs inferences in tasks of their own)

    def _tool_started(
        self, trace: _OpenTrace, run: _OpenSpan, event: ToolCallStarted, place: _Place
    ) -> None:
        span = trace.add(event, run)  # parallel calls are siblings
        trace.tools[(run, event.call_id)] = span
        enter_span(span)  # the task that runs the call sees it
        if self._content:
            span.content = {"arguments": _clip(str(event.arguments), self._mask)}

    def _loop_guard(
        self, trace: _OpenTrace, run: _OpenSpan, event: LoopGuardTriggered, place: _Place
    ) -> None:
        span = trace.add(event, run)
        span.closed = event  # a verdict takes no time

    def _run_started(self, event: AgentRunStarted) -> None:
        trace, outer, inference = self._place.get()
        if trace is None or not trace.runs:
            ids = self._ids or _trace_ids(self._random)
            self._ids = ids
            trace = _OpenTrace(ids.pop(), trace_parent(), self._clock(), event.at)
            outer = None
        elif outer is None or outer not in trace.runs:
            outer = trace.runs[-1]
        span = trace.add(event, trace.under(outer))
        span.outer = outer
        if self._content:
            span.content = {"input": _clip(event.input, self._mask)}
        trace.runs.append(span)
        self._place.set((trace, span, inference))
        enter_span(span)

    def _run_ended(
        self, trace: _OpenTrace, span: _OpenSpan, event: AgentRunEnded, place: _Place
    ) -> None:
        trace.runs.remove(span)  # by identity: open spans have no __eq__
        span.closed = event
        enter_span(span.outer)
        if trace.runs:
            self._place.set((trace, span.outer, place[2]))
            return
        self._place.set((None, span.outer, place[2]))
        self._sink(_trace(trace, event))

    def _inference_ended(
        self, trace: _OpenTrace, run: _OpenSpan, event: InferenceEnded, place: _Place
    ) -> None:
        span = place[2]  # once ended it is no longer open: the place keeps it as a hint
        inferences = trace.inferences
        if span is None or span not in inferences:
            if not inferences:
                return
            span = inferences[-1]
        inferences.remove(span)  # by identity: open spans have no __eq__
        span.closed = event

    def _tool_ended(
        self, trace: _OpenTrace, run: _OpenSpan, event: ToolCallEnded, place: _Place
    ) -> None:
        enter_span(run)
        span = trace.tools.pop((run, event.call_id), None)
        if span is None:
            return
        span.closed = event
        if self._content:
            content = span.content = span.content or {}
            content["result"] = _clip(event.result, self._mask)
