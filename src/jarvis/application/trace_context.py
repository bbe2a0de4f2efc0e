"""The caller's trace a run continues, carried by context from where the request arrived
(``jarvis serve`` reads a ``traceparent`` header) to the :class:`~.traces.TraceRecorder`
that starts the run's trace, without passing through the agent loop or the domain.

A :class:`contextvars.ContextVar` follows the request's task and every task it starts
(streamed answers, background runs), and no other request: concurrent requests each see
their own caller, or none. The other way, the tool call a task runs is told to that
tool's adapter (:func:`running_span`), which passes it on where its protocol allows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from jarvis.domain.traces import TraceParent

_PARENT: ContextVar[TraceParent | None] = ContextVar("jarvis-trace-parent", default=None)
_SPAN: ContextVar[Callable[[], TraceParent] | None] = ContextVar("jarvis-trace-span", default=None)


def trace_parent() -> TraceParent | None:
    """The caller's span the runs started now continue, if any."""
    return _PARENT.get()


def running_span() -> TraceParent | None:
    """The recorded span this task runs (a tool call, else a run), as its exported trace
    and span ids: what an adapter passes on to the process it calls (an MCP server's
    ``_meta.traceparent``)."""
    span = _SPAN.get()
    return None if span is None else span()


enter_span: Callable[[Callable[[], TraceParent] | None], object] = _SPAN.set
"""The recorder's: the span now running in this task (``None``: none), as what makes its
ids (computed only when an adapter asks). The variable's own ``set``: the recorder calls it
on the event loop, up to four times a run."""


@contextmanager
def continuing(parent: TraceParent | None) -> Iterator[None]:
    """Runs started inside the block continue ``parent``'s trace (``None``: their own)."""
    token = _PARENT.set(parent)
    try:
        yield
    finally:
        _PARENT.reset(token)
