"""The managed agents' runs under way in this process, so that deleting an agent stops them.

Why: a deleted agent's run went on to its end (its engine request, its tools, its wait for
an approval) while nobody could use what it produced: the store refuses its writes (see
:mod:`jarvis.domain.owners`), and its stream read on as if nothing had happened. Deleting
an agent now cancels its runs in this process at once, wherever they wait, as a client that
goes away cancels its own: the run is closed (what it completed is offered to the store,
which refuses it) and its reader gets :class:`RunCancelledError`. Runs in other processes
(other servers on the same database) are not reached; the store refuses their writes.

A run is stopped the way ``asyncio.timeout`` stops its block: the task reading the run is
cancelled while it waits inside the run, and that cancellation becomes
:class:`RunCancelledError` where it comes out (a cancellation of the task by anyone else
goes on as it is). A reader that holds an update (it is sending it to a client) is not
cancelled there: its next read raises the error instead. Only the runs of the very
definition deleted are stopped, not those of one created again under the same id since.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import TypeVar

from jarvis.domain.errors import RunCancelledError

T = TypeVar("T")


class ManagedRun:
    """One run of a managed agent: the definition it runs (its incarnation, once read) and,
    while it waits inside the run, the task reading it."""

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.incarnation: str | None = None
        """The definition's incarnation, set once the run has read it (:meth:`runs`)."""
        self._deleted: set[str] = set()
        """The incarnations deleted while the run was under way."""
        self._reader: asyncio.Task[object] | None = None
        self._cancelled: asyncio.Task[object] | None = None
        """The reader this run cancelled, until the cancellation has come out."""

    def runs(self, incarnation: str) -> None:
        """The run goes on with the definition of ``incarnation`` (just read)."""
        self.incarnation = incarnation

    @property
    def stopped(self) -> bool:
        return self.incarnation is not None and self.incarnation in self._deleted

    def stop(self, incarnation: str) -> None:
        """The definition of ``incarnation`` was deleted: stop the run if it is its own (at
        once when its reader waits inside it; else at its next read)."""
        self._deleted.add(incarnation)
        reader = self._reader
        if reader is None or reader is asyncio.current_task() or self._cancelled is not None:
            return  # nobody waits inside the run (or the stop is the reader's own doing)
        if self.stopped:
            self._cancelled = reader
            reader.cancel()

    async def next(self, updates: AsyncIterator[T]) -> T | None:
        """The run's next update (``None`` at its end); ``RunCancelledError`` once the
        run was stopped."""
        if self.stopped:
            raise self._error()
        reader = asyncio.current_task()
        assert reader is not None  # called from a coroutine
        cancelling = reader.cancelling()
        self._reader = reader
        try:
            return await anext(updates, None)
        except (asyncio.CancelledError, Exception):
            if self._taken_back(reader, cancelling):
                raise self._error() from None
            raise
        finally:
            self._reader = None
            self._taken_back(reader, cancelling)  # a cancellation the run swallowed

    def _taken_back(self, reader: asyncio.Task[object], cancelling: int) -> bool:
        """Whether this run cancelled ``reader`` and nobody else did since ``reader`` had
        ``cancelling`` cancellations pending (the one of this run is withdrawn)."""
        if self._cancelled is not reader:
            return False
        self._cancelled = None
        return reader.uncancel() <= cancelling

    def _error(self) -> RunCancelledError:
        return RunCancelledError(
            f"Managed agent {self.agent_id!r} was deleted while it ran: the run was "
            "cancelled, and nothing it produced was stored."
        )


class ManagedRuns:
    """The runs under way in this process, by agent id."""

    def __init__(self) -> None:
        self._runs: dict[str, set[ManagedRun]] = {}

    @contextmanager
    def run(self, agent_id: str) -> Iterator[ManagedRun]:
        """One run of ``agent_id``, known here until the block ends (enter it before the
        run reads its definition, so that no deletion can land unseen in between)."""
        run = ManagedRun(agent_id)
        self._runs.setdefault(agent_id, set()).add(run)
        try:
            yield run
        finally:
            runs = self._runs.get(agent_id, set())
            runs.discard(run)
            if not runs:
                self._runs.pop(agent_id, None)

    def stop(self, agent_id: str, incarnation: str) -> None:
        """The definition of ``agent_id`` with ``incarnation`` was deleted: stop its runs."""
        for run in list(self._runs.get(agent_id, ())):
            run.stop(incarnation)
