"""The streaming skeleton every SSE route shares (:func:`.streaming.encoded`).

Driven directly with a scripted run and an encoder that names its frames: what the
skeleton owns (the active-run count, the deadline, a failure before the first item raised
for a status, one after it as the encoder's frames, the run closed however the stream ends)
holds whatever the wire format.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import pytest

from jarvis.application.managed_agents import ManagedAgentService
from jarvis.domain.errors import EngineUnavailableError
from jarvis.entrypoints.composition import bootstrap
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.state import ServeLimits, ServerState
from jarvis.entrypoints.http.streaming import BeforeStream, encoded
from jarvis.entrypoints.settings import load_config
from jarvis.testing import InMemorySessionStore, ScriptedInference
from jarvis.testing.managed_agents import InMemoryManagedAgentStore


def make_state(limits: ServeLimits | None = None) -> ServerState:
    runtime = bootstrap(load_config(), inference=ScriptedInference([]))
    agents = InMemoryManagedAgentStore()
    managed = ManagedAgentService(
        agents=agents, sessions=InMemorySessionStore(owners=agents.holds), ask=runtime.service
    )
    return ServerState(service=runtime.service, managed=managed, limits=limits or ServeLimits())


class Names:
    """Each frame says what made it; ``stop_after`` ends the stream after that item."""

    def __init__(self, stop_after: str | None = None) -> None:
        self.stop_after = stop_after
        self.seen: list[str] = []
        self.finished = False

    def opening(self) -> Iterable[bytes]:
        return (b"open",)

    def frames(self, item: str) -> Iterable[bytes]:
        self.seen.append(item)
        self.finished = item == self.stop_after
        return (item.encode(), item.encode() + b"!")

    def failure(self, error: ApiError) -> Iterable[bytes]:
        return (f"failed {error.status}".encode(),)

    def closing(self) -> Iterable[bytes]:
        return (b"close",)


class Run:
    """A scripted run: its items, then ``error`` raised (if any); whether it was closed."""

    def __init__(self, items: list[str], error: BaseException | None = None) -> None:
        self.items = items
        self.error = error
        self.closed = False
        self.active_seen: list[int] = []

    async def updates(self, state: ServerState) -> AsyncIterator[str]:
        try:
            for item in self.items:
                self.active_seen.append(state.active_runs)
                yield item
            if self.error is not None:
                raise self.error
        finally:
            self.closed = True


async def collect(frames: AsyncIterator[bytes]) -> list[bytes]:
    return [frame async for frame in frames]


async def test_a_run_is_opened_encoded_item_by_item_and_closed() -> None:
    state = make_state()
    run = Run(["a", "b"])
    frames = await collect(encoded(state, run.updates(state), Names()))
    assert frames == [b"open", b"a", b"a!", b"b", b"b!", b"close"]
    assert run.active_seen == [1, 1]
    assert state.active_runs == 0
    assert run.closed


async def test_a_failure_before_the_first_item_is_raised_for_a_status() -> None:
    state = make_state()
    run = Run([], EngineUnavailableError("the engine is down"))
    with pytest.raises(BeforeStream) as raised:
        await collect(encoded(state, run.updates(state), Names()))
    assert isinstance(raised.value.cause, EngineUnavailableError)
    assert state.active_runs == 0
    assert run.closed


async def test_a_failure_after_the_first_item_is_the_encoders_frames_then_its_end() -> None:
    state = make_state()
    run = Run(["a"], EngineUnavailableError("the engine is down"))
    frames = await collect(encoded(state, run.updates(state), Names()))
    assert frames == [b"open", b"a", b"a!", b"failed 503", b"close"]
    assert state.active_runs == 0
    assert run.closed


async def test_an_empty_run_sends_only_the_end() -> None:
    state = make_state()
    run = Run([])
    assert await collect(encoded(state, run.updates(state), Names())) == [b"close"]
    assert state.active_runs == 0


async def test_a_finished_stream_reads_no_further_item() -> None:
    state = make_state()
    run = Run(["a", "b", "c"])
    encoder = Names(stop_after="b")
    frames = await collect(encoded(state, run.updates(state), encoder))
    assert frames == [b"open", b"a", b"a!", b"b", b"b!", b"close"]
    assert encoder.seen == ["a", "b"]
    assert run.closed


async def test_a_client_that_leaves_closes_the_run_and_its_count() -> None:
    state = make_state()
    run = Run(["a", "b", "c"])
    frames = encoded(state, run.updates(state), Names())
    assert await anext(frames) == b"open"
    assert state.active_runs == 1
    await frames.aclose()
    assert state.active_runs == 0
    assert run.closed


async def test_a_run_past_its_deadline_ends_with_the_encoders_failure() -> None:
    state = make_state(ServeLimits(stream_timeout=0.001))
    never = asyncio.Event()

    async def stalled() -> AsyncIterator[str]:
        yield "a"
        await never.wait()  # never set: only the deadline ends this run
        yield "b"

    frames = await collect(encoded(state, stalled(), Names()))
    assert frames == [b"open", b"a", b"a!", b"failed 504", b"close"]
    assert state.active_runs == 0


async def test_a_deadline_before_the_first_item_still_answers_with_a_stream() -> None:
    """The deadline is the stream's own failure (an error frame), not a refusal to start."""
    state = make_state(ServeLimits(stream_timeout=0.001))
    never = asyncio.Event()

    async def stalled() -> AsyncIterator[str]:
        await never.wait()  # never set: only the deadline ends this run
        yield "a"

    frames = await collect(encoded(state, stalled(), Names()))
    assert frames == [b"failed 504", b"close"]
    assert state.active_runs == 0
