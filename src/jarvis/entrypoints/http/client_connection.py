"""What ``jarvis serve``'s protocol knows of a request's connection, told to the layers
that would otherwise find it out through ASGI at a cost.

Why: against an engine that answers at once, the server's own work per request is what
bounds its throughput, and two of its ASGI idioms cost more than routing a request does:

* a non-streamed run must end when its client goes away (:mod:`.watched`). Through ASGI
  that means a second task waiting on ``receive()`` for ``http.disconnect`` beside the
  run's own, and ``asyncio.wait`` on the two. The protocol knows first when a connection
  is lost: it cancels the run's task itself (:meth:`ClientConnection.left`);
* the request body is read under a deadline (:class:`~.security.Guard`), a timer armed
  and cancelled for every request, though the whole body has nearly always arrived with
  the headers. The protocol says when it has (:attr:`ClientConnection.body_arrived`),
  and then ``receive()`` cannot wait: no timer is needed.

:class:`~.protocol.JarvisHttpProtocol` keeps one :class:`ClientConnection` per connection,
in the ASGI scope's ``state`` under :data:`CLIENT_CONNECTION`. An application served by
another server has none, and its layers fall back on ASGI's idioms.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

CLIENT_CONNECTION = "jarvis.connection"
"""The key of a connection's :class:`ClientConnection` in the ASGI scope's ``state``."""


class ClientConnection:
    """One client connection as its protocol sees it."""

    __slots__ = ("body_arrived", "expired", "gone", "task")

    def __init__(self) -> None:
        self.gone = False
        """True once the connection is lost (:meth:`left`)."""
        self.task: asyncio.Future[Any] | None = None
        """The task of a run this connection's request waits for, if one is."""
        self.expired = False
        """True once :meth:`expire` cancelled :attr:`task`."""
        self.body_arrived = False
        """True from the end of a request's body until the next request begins: the
        request being served has all its body in the server's hands."""

    def watch(self, task: asyncio.Future[Any]) -> None:
        """Cancel ``task`` (a run this connection's request waits for) if the client
        leaves or :meth:`expire` is called before it ends."""
        self.task, self.expired = task, False

    def expire(self) -> None:
        """The request's deadline has passed: cancel the run waiting for it, if one is."""
        task = self.task
        if task is not None and not task.done():
            self.expired = True
            task.cancel()

    def left(self) -> None:
        """The connection is lost: cancel the run waiting for it, if one is."""
        self.gone = True
        if self.task is not None:
            self.task.cancel()


def connection_of(scope: MutableMapping[str, Any]) -> ClientConnection | None:
    """The :class:`ClientConnection` ``scope`` came on, if its server keeps one."""
    state = scope.get("state")
    found = state.get(CLIENT_CONNECTION) if isinstance(state, dict) else None
    return found if isinstance(found, ClientConnection) else None
