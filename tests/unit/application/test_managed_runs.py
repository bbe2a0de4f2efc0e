"""What a deletion stops: the runs of the very definition deleted, cancelled where their
reader waits, the cancellation turned into ``RunCancelledError`` (and anyone else's left
as it is). Each run waits on an ``asyncio.Event`` the test sets, never on a timer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from jarvis.application.managed_runs import ManagedRun, ManagedRuns
from jarvis.domain.errors import RunCancelledError


class Held:
    """Updates ``1``, then a wait until :attr:`go_on` (:attr:`waiting` says it waits), then
    ``2``; :attr:`swallow`: the wait's cancellation is ignored."""

    def __init__(self, *, swallow: bool = False) -> None:
        self.waiting = asyncio.Event()
        self.go_on = asyncio.Event()
        self.swallow = swallow

    async def updates(self) -> AsyncIterator[int]:
        yield 1
        self.waiting.set()
        try:
            await self.go_on.wait()
        except asyncio.CancelledError:
            if not self.swallow:
                raise
        yield 2


async def read_all(run: ManagedRun, updates: AsyncIterator[int]) -> list[int]:
    seen: list[int] = []
    while (update := await run.next(updates)) is not None:
        seen.append(update)
    return seen


async def test_a_run_waiting_inside_is_cancelled_and_its_reader_goes_on() -> None:
    runs, held = ManagedRuns(), Held()
    with runs.run("a") as run:
        run.runs("i1")
        reader = asyncio.create_task(read_all(run, held.updates()))
        await held.waiting.wait()
        runs.stop("a", "i1")
        with pytest.raises(RunCancelledError, match="'a' was deleted while it ran"):
            await reader
    assert reader.cancelling() == 0  # the cancellation was withdrawn, not left pending


async def test_another_cancellation_of_the_reader_stays_a_cancellation() -> None:
    runs, held = ManagedRuns(), Held()
    with runs.run("a") as run:
        run.runs("i1")
        reader = asyncio.create_task(read_all(run, held.updates()))
        await held.waiting.wait()
        reader.cancel()  # the client went away, say
        runs.stop("a", "i1")
        with pytest.raises(asyncio.CancelledError):
            await reader


async def test_a_swallowed_cancellation_still_ends_the_run_at_its_next_read() -> None:
    runs, held = ManagedRuns(), Held(swallow=True)
    updates = held.updates()
    with runs.run("a") as run:
        run.runs("i1")
        assert await run.next(updates) == 1
        reading = asyncio.create_task(run.next(updates))
        await held.waiting.wait()
        runs.stop("a", "i1")
        assert await reading == 2  # the run ignored it: its update is not lost
        assert reading.cancelling() == 0
        with pytest.raises(RunCancelledError):
            await run.next(updates)


@pytest.mark.parametrize(("read", "stopped"), [("i1", True), ("i2", False)])
async def test_a_deletion_before_the_run_read_its_definition_stops_only_that_one(
    read: str, stopped: bool
) -> None:
    """Deleted while the run was reading the definition: it is stopped if it read the one
    deleted, not if it read one created again since."""
    runs = ManagedRuns()
    with runs.run("a") as run:
        runs.stop("a", "i1")
        run.runs(read)
        assert run.stopped is stopped


async def test_only_that_agent_s_runs_are_stopped_and_ended_runs_are_forgotten() -> None:
    runs = ManagedRuns()
    with runs.run("a") as first, runs.run("b") as other:
        first.runs("i1")
        other.runs("i1")
        runs.stop("a", "i1")
        assert (first.stopped, other.stopped) == (True, False)
    with runs.run("a") as later:
        later.runs("i1")
        runs.stop("a", "i0")  # an earlier incarnation's deletion
        assert not later.stopped
