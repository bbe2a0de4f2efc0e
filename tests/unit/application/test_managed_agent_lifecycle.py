"""A managed agent deleted while one of its runs is under way: what the run produces, whole
or cut short, never reaches the conversation of an agent created again under the same id.

The engine streams its first word, then waits for the test (an ``asyncio.Event``), so the
deletion always lands mid-run. Run on the SQLite stores and on the in-memory fakes linked as
one database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from pathlib import Path

import pytest

from jarvis.application.ask import AskService
from jarvis.application.managed_agents import ManagedAgentService, ManagedAgentSpec
from jarvis.application.registry import builtin_agents
from jarvis.application.run_updates import answer_of
from jarvis.domain.llm.completion import StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.owners import OwnerGoneError
from jarvis.domain.run.updates import TextDelta
from jarvis.testing import InMemorySessionStore, ScriptedInference
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from tests.support.sql_stores import sqlite_backend


class HeldEngine(ScriptedInference):
    """Streams the first word of its answer, then waits until :attr:`go_on` is set."""

    def __init__(self) -> None:
        super().__init__(["Old secret answer."])
        self.streaming = asyncio.Event()
        self.go_on = asyncio.Event()

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        first = True
        async for chunk in super().stream(request):
            yield chunk
            if first:
                first = False
                self.streaming.set()
                await self.go_on.wait()


Running = tuple[ManagedAgentService, HeldEngine]


@pytest.fixture(params=["memory", "sqlite"])
def running(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Running]:
    """A managed-agent service on the held engine, over one database's stores."""
    engine = HeldEngine()
    asker = AskService(registry=builtin_agents(), inference=engine)

    async def ask() -> AskService:
        return asker

    if request.param == "memory":
        agents = InMemoryManagedAgentStore()
        sessions = InMemorySessionStore(owners=agents.holds)
        yield ManagedAgentService(agents=agents, sessions=sessions, ask=ask), engine
        return
    backend = sqlite_backend(tmp_path / "sessions.db")
    sql = ManagedAgentService(agents=backend.managed_agents, sessions=backend.sessions, ask=ask)
    yield sql, engine
    backend.close()


async def replace_victim(service: ManagedAgentService) -> None:
    await service.delete("victim")
    await service.create(ManagedAgentSpec(id="victim", system_prompt="New task."))


async def test_an_answer_finished_after_the_deletion_is_refused_not_stored(
    running: Running,
) -> None:
    service, engine = running
    await service.create(ManagedAgentSpec(id="victim", system_prompt="Old secrets."))
    await service.post("victim", "What is the secret?")
    seen: list[str] = []

    async def run() -> None:
        async with aclosing(service.stream("victim")) as updates:
            async for update in updates:
                if isinstance(update, TextDelta):
                    seen.append(update.text)
                assert answer_of(update) is None  # no answer is ever announced as stored

    task = asyncio.create_task(run())
    await engine.streaming.wait()
    await replace_victim(service)
    engine.go_on.set()
    with pytest.raises(OwnerGoneError, match="managed agent 'victim' was deleted"):
        await task
    assert "".join(seen) == "Old secret answer."  # streamed whole, then refused
    assert await service.messages("victim") == []


async def test_a_run_cut_short_after_the_deletion_keeps_nothing_and_raises_nothing(
    running: Running,
) -> None:
    service, engine = running
    await service.create(ManagedAgentSpec(id="victim", system_prompt="Old secrets."))
    await service.post("victim", "What is the secret?")
    updates = service.stream("victim")
    async for update in updates:
        if isinstance(update, TextDelta):
            break  # the first word: the run is under way (the rest is held: no go_on)
    assert not engine.go_on.is_set()
    await replace_victim(service)
    await updates.aclose()  # the client goes away: the run is cancelled, its part refused
    assert await service.messages("victim") == []
