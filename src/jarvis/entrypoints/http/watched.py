"""A non-streamed run that ends when its client goes away, counted while it runs.

Why: a request answered in one JSON body used to run to its end (or to
``--request-timeout``) after its client had left, holding an engine connection all along,
and ``/health`` did not count it. :func:`while_connected` runs the work as a task and
watches the client's connection beside it (the server's ``receive`` says
``http.disconnect``), as :class:`~.streaming.EventStream` does for a stream: the first to
finish wins, and a client that left cancels the work at once, wherever it waits (the
engine's answer, a tool), so its engine request is closed too.

Under ``jarvis serve``'s own protocol no watcher is needed: the protocol cancels the run's
task itself when the connection is lost (:mod:`.client_connection`); the watcher's task and the
``asyncio.wait`` cost more than the rest of a request's routing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from jarvis.entrypoints.http.client_connection import ClientConnection, connection_of
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.security import Receive, Scope
from jarvis.entrypoints.http.state import ServerState

T = TypeVar("T")

CLIENT_CLOSED = 499
"""The status logged for a request whose client left before its answer (nobody reads it)."""


def client_gone() -> ApiError:
    return ApiError(
        CLIENT_CLOSED, "The client closed the connection; the run was cancelled.", code="cancelled"
    )


async def while_connected(
    state: ServerState, scope: Scope, receive: Receive, work: Awaitable[T]
) -> T:
    """``work``'s result, within the server's ``request_timeout`` (``TimeoutError`` after
    it); cancelled with :func:`client_gone` raised when the client leaves. The run counts
    in ``state.active_runs`` until it has ended (cancelled runs included)."""
    connection = connection_of(scope)
    if connection is not None:
        return await _run_watched(state, connection, work)
    async with asyncio.timeout(state.limits.request_timeout):
        return await _run_beside_watcher(state, receive, work)


async def _run_beside_watcher(state: ServerState, receive: Receive, work: Awaitable[T]) -> T:
    """``work`` as a task, and the client watched through ``receive()`` by another."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    state.active_runs += 1
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watcher):
            pending.cancel()
        for pending in (task, watcher):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending
        state.active_runs -= 1
    if task.cancelled():
        raise client_gone()
    return task.result()


async def _run_watched(state: ServerState, connection: ClientConnection, work: Awaitable[T]) -> T:
    """``work`` run as a task of its own, which ``connection`` cancels if the client leaves
    meanwhile (answered as :func:`client_gone`) or when the request's deadline passes (a
    ``TimeoutError``, as ``asyncio.timeout`` raises: one timer, no context manager). A task
    of its own, not awaited in the request's: every time the run resumes, Python resumes
    each coroutine between it and its task, and the request's task holds a dozen (the
    server's layers and routes) that would each be passed through on every engine read
    (20 us a request, measured)."""
    if connection.gone:
        if asyncio.iscoroutine(work):
            work.close()  # never started: nothing to wait for
        raise client_gone()
    task = asyncio.ensure_future(work)
    connection.watch(task)
    deadline = asyncio.get_running_loop().call_later(
        state.limits.request_timeout, connection.expire
    )
    state.active_runs += 1
    try:
        return await task
    except asyncio.CancelledError:
        if task.cancelled() and connection.gone:
            raise client_gone() from None
        if task.cancelled() and connection.expired:
            raise TimeoutError from None
        raise
    finally:  # the run has ended: a cancelled request's task waits for its run's end
        deadline.cancel()
        connection.task = None
        state.active_runs -= 1


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away (the body was read before: nothing else
    arrives on this request but the disconnect)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
