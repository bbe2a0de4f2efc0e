"""Continues a caller's trace: a request's W3C ``traceparent`` header becomes the parent of
the runs it starts (their traces keep the caller's trace id, and the run span hangs under
the caller's span), for every route, the chat fast path included.

The header is read strictly (:func:`~jarvis.domain.traces.parse_traceparent`): one that is
absent, repeated or malformed is ignored, and the run starts a trace of its own. The
context lasts as long as the request's ASGI call, which includes a streamed answer and a
background run started after the reply.
"""

from __future__ import annotations

from jarvis.application.trace_context import continuing
from jarvis.domain.traces import TraceParent, parse_traceparent
from jarvis.entrypoints.http.security import App, Receive, Scope, Send


def caller_of(scope: Scope) -> TraceParent | None:
    """The caller's span from the one ``traceparent`` header of ``scope``, if valid."""
    found = [value for name, value in scope.get("headers") or () if name == b"traceparent"]
    if len(found) != 1:
        return None
    try:
        text = bytes(found[0]).decode("ascii")
    except UnicodeDecodeError:
        return None
    return parse_traceparent(text.strip(" \t"))


class TraceParentLayer:
    """In front of ``app``: runs each HTTP request in its caller's trace context."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        parent = caller_of(scope) if scope["type"] == "http" else None
        if parent is None:
            await self.app(scope, receive, send)
            return
        with continuing(parent):
            await self.app(scope, receive, send)
