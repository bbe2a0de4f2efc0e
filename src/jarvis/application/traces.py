"""Records runs as traces, from the events they publish, and keeps them off the event loop.

:class:`TraceRecorder` is an event-bus subscriber: it turns the events of one top-level run
(``AgentRunStarted`` ... ``AgentRunEnded``) into a :class:`~jarvis.domain.traces.Trace`.
Runs nested in a tool call (``llm_query``, a sub-agent) and inferences made while a tool
runs become children of that tool's span. Concurrent runs on one bus (``jarvis serve``)
are told apart by context: each asyncio task that starts a run records its own trace.

:class:`TraceWriter` saves finished traces in one background thread, so that a slow, full,
read-only, locked or damaged store delays nothing and loses no answer: the first failure
is reported once through ``notice`` and later ones are dropped silently.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field

from jarvis.domain.events import (
    AgentRunEnded,
    AgentRunStarted,
    Event,
    InferenceEnded,
    InferenceStarted,
    LoopGuardTriggered,
    ToolCallEnded,
    ToolCallStarted,
)
from jarvis.domain.json_types import JSONObject
from jarvis.domain.ports import TraceStorePort
from jarvis.domain.traces import MAX_CONTENT_CHARS, MAX_SPANS, Span, Trace, TraceStatus


@dataclass(slots=True)
class _OpenSpan:
    span_id: str
    parent_id: str | None
    kind: str
    name: str
    at: float
    """Monotonic start (the events' clock)."""
    duration: float | None = None
    ok: bool = True
    attributes: JSONObject = field(default_factory=dict)
    content: JSONObject = field(default_factory=dict)


@dataclass(slots=True)
class _OpenTrace:
    trace_id: str
    wall: float
    """Epoch seconds at ``mono``."""
    mono: float
    spans: list[_OpenSpan] = field(default_factory=list)
    runs: list[_OpenSpan] = field(default_factory=list)
    tools: dict[str, _OpenSpan] = field(default_factory=dict)
    inferences: list[_OpenSpan] = field(default_factory=list)
    next_id: int = 1
    dropped: int = 0

    def add(self, kind: str, name: str, at: float, parent: _OpenSpan | None) -> _OpenSpan:
        span = _OpenSpan(
            span_id=f"{self.next_id:04x}",
            parent_id=None if parent is None else parent.span_id,
            kind=kind,
            name=name,
            at=at,
        )
        self.next_id += 1
        if len(self.spans) < MAX_SPANS:
            self.spans.append(span)
        else:
            self.dropped += 1
        return span

    def parent(self) -> _OpenSpan | None:
        """Where a new span hangs: the one tool running now, else the innermost run."""
        if len(self.tools) == 1:
            return next(iter(self.tools.values()))
        return self.runs[-1] if self.runs else None


def _clip(text: str, mask: Callable[[str], str]) -> str:
    return mask(text[:MAX_CONTENT_CHARS])


class TraceRecorder:
    """Subscribe it to a bus (``bus.subscribe(recorder)``); ``sink`` gets each finished
    trace. ``content``: keep run inputs, tool arguments and results (masked by ``mask``)."""

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
        self._current: ContextVar[_OpenTrace | None] = ContextVar(
            f"jarvis-trace-{id(self)}", default=None
        )

    def __call__(self, event: Event) -> None:
        if isinstance(event, AgentRunStarted):
            self._run_started(event)
            return
        trace = self._current.get()
        if trace is None or not trace.runs:
            return
        if isinstance(event, AgentRunEnded):
            self._run_ended(trace, event)
        elif isinstance(event, InferenceStarted):
            span = trace.add("inference", event.model, event.at, trace.parent())
            span.attributes.update({"engine": event.engine, "model": event.model})
            trace.inferences.append(span)
        elif isinstance(event, InferenceEnded):
            self._inference_ended(trace, event)
        elif isinstance(event, ToolCallStarted):
            span = trace.add("tool", event.tool, event.at, trace.parent())
            trace.tools[event.call_id] = span
            if self._content:
                span.content["arguments"] = _clip(str(event.arguments), self._mask)
        elif isinstance(event, ToolCallEnded):
            self._tool_ended(trace, event)
        elif isinstance(event, LoopGuardTriggered):
            span = trace.add("tool", event.tool, event.at, trace.parent())
            span.duration = 0.0
            span.ok = False
            span.attributes.update(
                {"loop_guard": event.action, "loop_guard_pattern": event.pattern}
            )

    def _run_started(self, event: AgentRunStarted) -> None:
        trace = self._current.get()
        if trace is None or not trace.runs:
            trace = _OpenTrace(trace_id=secrets.token_hex(16), wall=self._clock(), mono=event.at)
            self._current.set(trace)
        span = trace.add("run", event.agent, event.at, trace.parent())
        span.attributes["agent"] = event.agent
        if self._content:
            span.content["input"] = _clip(event.input, self._mask)
        trace.runs.append(span)

    def _run_ended(self, trace: _OpenTrace, event: AgentRunEnded) -> None:
        span = trace.runs.pop()
        span.duration = event.at - span.at
        span.ok = event.stop_reason not in ("error", "cancelled")
        span.attributes.update({"turns": event.turns, "stop_reason": event.stop_reason})
        if event.error:
            span.attributes["error"] = event.error
        if trace.runs:
            return
        self._current.set(None)
        self._finish(trace, span, event)

    def _inference_ended(self, trace: _OpenTrace, event: InferenceEnded) -> None:
        span = trace.inferences.pop() if trace.inferences else None
        if span is None:
            return
        span.duration = event.at - span.at
        span.attributes.update(
            {
                "tokens_in": event.usage.prompt_tokens,
                "tokens_out": event.usage.completion_tokens,
                "finish_reason": event.finish_reason,
                "tool_calls": len(event.tool_calls),
            }
        )
        if event.first_token_seconds is not None:
            span.attributes["first_token_seconds"] = round(event.first_token_seconds, 6)
        span.ok = event.finish_reason != "error"

    def _tool_ended(self, trace: _OpenTrace, event: ToolCallEnded) -> None:
        span = trace.tools.pop(event.call_id, None)
        if span is None:
            return
        span.duration = event.at - span.at
        span.ok = event.success
        span.attributes.update({"result_chars": len(event.result), "success": event.success})
        if self._content:
            span.content["result"] = _clip(event.result, self._mask)

    def _finish(self, trace: _OpenTrace, root: _OpenSpan, event: AgentRunEnded) -> None:
        end = event.at
        spans: list[Span] = []
        for open_span in trace.spans:
            unfinished = open_span.duration is None
            duration = end - open_span.at if open_span.duration is None else open_span.duration
            attributes = dict(open_span.attributes)
            if unfinished:
                attributes["unfinished"] = True
            spans.append(
                Span(
                    span_id=open_span.span_id,
                    parent_id=open_span.parent_id,
                    kind="run"
                    if open_span.kind == "run"
                    else "tool"
                    if open_span.kind == "tool"
                    else "inference",
                    name=open_span.name,
                    start=trace.wall + (open_span.at - trace.mono),
                    duration=max(duration, 0.0),
                    ok=open_span.ok and not unfinished,
                    attributes=attributes,
                    content=dict(open_span.content),
                )
            )
        if trace.dropped:
            spans[0].attributes["dropped_spans"] = trace.dropped
        status: TraceStatus = (
            "cancelled"
            if event.stop_reason == "cancelled"
            else "error"
            if event.stop_reason == "error"
            else "ok"
        )
        error = ""
        if status == "error":
            error = event.error or "error"
        self._sink(
            Trace(
                trace_id=trace.trace_id,
                agent=root.name,
                start=spans[0].start,
                duration=spans[0].duration,
                status=status,
                error=error,
                spans=tuple(spans),
            )
        )


class TraceWriter:
    """Saves traces in one background thread, then prunes by age and size.

    ``save`` returns at once. ``flush`` waits for what was handed in (a command calls it
    before it exits; the interpreter would wait for the thread anyway).
    """

    def __init__(
        self,
        store: Callable[[], TraceStorePort],
        *,
        notice: Callable[[str], None],
        max_days: float | None = None,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store_factory = store
        self._store: TraceStorePort | None = None
        self._notice = notice
        self._max_days = max_days
        self._max_bytes = max_bytes
        self._clock = clock
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()
        self._failed = False
        self.last: Trace | None = None
        """The last trace handed in (``jarvis ask --profile`` prints it)."""

    def save(self, trace: Trace) -> None:
        self.last = trace
        with self._lock:
            if self._failed:
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="jarvis-traces")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._executor.submit(self._write, trace))

    def _write(self, trace: Trace) -> None:
        if self._failed:
            return
        try:
            if self._store is None:
                self._store = self._store_factory()
            self._store.save(trace)
            older = None if self._max_days is None else self._clock() - self._max_days * 86_400
            self._store.prune(older_than=older, max_bytes=self._max_bytes)
        except Exception as exc:  # a trace is never worth a run: tell once, keep going
            self._failed = True
            self._notice(f"traces are not being recorded: {exc}")

    def flush(self, timeout: float | None = 10.0) -> None:
        """Wait (at most ``timeout`` seconds) for the traces handed in so far."""
        with self._lock:
            pending = list(self._pending)
        deadline = None if timeout is None else time.monotonic() + timeout
        for future in pending:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                future.result(timeout=left)
            except Exception:  # timed out: the thread finishes it (or the process ends)
                return

    def close(self) -> None:
        self.flush()
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()
