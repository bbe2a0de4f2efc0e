"""The caller's trace a run continues, carried by context from where the request arrived
(``jarvis serve`` reads a ``traceparent`` header) to the run recording that starts the
run's trace (:mod:`jarvis.domain.run.steps`), without passing through the agent loop.

A :class:`contextvars.ContextVar` follows the request's task and every task it starts
(streamed answers, background runs), and no other request: concurrent requests each see
their own caller, or none. The other way, the tool call a task runs is told to that
tool's adapter (:func:`running_span`), which passes it on where its protocol allows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from jarvis.application.trace_export import exported_span_id
from jarvis.domain.run.steps import running_step
from jarvis.domain.traces import TraceParent

_PARENT: ContextVar[TraceParent | None] = ContextVar("jarvis-trace-parent", default=None)


def trace_parent() -> TraceParent | None:
    """The caller's span the runs started now continue, if any."""
    return _PARENT.get()


def trace_parent_getter() -> Callable[[], TraceParent | None]:
    """:func:`trace_parent` as the context variable's own ``get``: the run recording calls
    it as each run starts, on the event loop."""
    return _PARENT.get


def running_span() -> TraceParent | None:
    """The recorded span this task runs (a tool call, else a run), as its exported trace
    and span ids: what an adapter passes on to the process it calls (an MCP server's
    ``_meta.traceparent``)."""
    running = running_step()
    if running is None:
        return None
    log, number = running
    trace_id = log.trace_id
    remote = log.remote
    return TraceParent(
        trace_id=trace_id if remote is None else remote.trace_id,
        span_id=exported_span_id(trace_id, f"{number:04x}"),
        flags="01" if remote is None else remote.flags,
    )


@contextmanager
def continuing(parent: TraceParent | None) -> Iterator[None]:
    """Runs started inside the block continue ``parent``'s trace (``None``: their own)."""
    token = _PARENT.set(parent)
    try:
        yield
    finally:
        _PARENT.reset(token)
