"""The caller's trace a run continues, carried by context from where the request arrived
(``jarvis serve`` reads a ``traceparent`` header) to the :class:`~.traces.TraceRecorder`
that starts the run's trace, without passing through the agent loop or the domain.

A :class:`contextvars.ContextVar` follows the request's task and every task it starts
(streamed answers, background runs), and no other request: concurrent requests each see
their own caller, or none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from jarvis.domain.traces import TraceParent

_PARENT: ContextVar[TraceParent | None] = ContextVar("jarvis-trace-parent", default=None)


def trace_parent() -> TraceParent | None:
    """The caller's span the runs started now continue, if any."""
    return _PARENT.get()


@contextmanager
def continuing(parent: TraceParent | None) -> Iterator[None]:
    """Runs started inside the block continue ``parent``'s trace (``None``: their own)."""
    token = _PARENT.set(parent)
    try:
        yield
    finally:
        _PARENT.reset(token)
