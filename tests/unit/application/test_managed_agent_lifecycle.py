"""A managed agent deleted while one of its runs, updates or deletions is under way: its
runs in this process are cancelled where they wait; what a run produces, whole or cut short
(here, or in another server on the same database), never reaches the conversation or the
approvals of an agent created again under the same id; an update never brings a deleted
definition back; and a deletion never removes an agent created again since, nor its
conversation.

The engine streams its first word, then waits for the test (an ``asyncio.Event``), so the
deletion always lands mid-run; an update is held the same way between its read and its
write (its check of the definition asks for the ask use case, which waits for the test),
and a deletion once a call of its stores returned (:func:`hold_next`). A creation that
found the id free, held the same way, loses to one made meanwhile by another server: it
fails as for an id that exists already, clearing nothing of the winner's.
Run on the SQLite stores and on the in-memory fakes linked as one database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from contracts.approval_store_contract import pending
from jarvis.adapters.sql_store import SqlBackend
from jarvis.application.ask import AskService
from jarvis.application.managed_agents import (
    ManagedAgentNotFoundError,
    ManagedAgentService,
    ManagedAgentSpec,
)
from jarvis.application.managed_approvals import ManagedApprovals
from jarvis.application.registry import builtin_agents
from jarvis.application.run_updates import AnswerUpdate, answer_of
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.application.tools.function_tool import tool
from jarvis.domain.approval_store import ApprovalStorePort
from jarvis.domain.errors import ConfigurationError, RunCancelledError
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.managed_agents import (
    ManagedAgent,
    ManagedAgentStorePort,
    owner_of,
    session_id_of,
)
from jarvis.domain.owners import OwnerGoneError
from jarvis.domain.ports import SessionStorePort
from jarvis.domain.run.updates import ApprovalRequired, TextDelta
from jarvis.testing import InMemoryApprovalStore, InMemorySessionStore, ScriptedInference
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from tests.support.holds import Held, hold_next
from tests.support.sql_stores import sqlite_backend

T = TypeVar("T")

WAIT = 60.0
"""How long a run waits for an approval: longer than any test (none is ever answered)."""


class HeldEngine(ScriptedInference):
    """Streams the first word of each answer (what a test :meth:`add`-ed), then waits until
    :attr:`go_on` is set; :attr:`streaming` says a stream waits."""

    def __init__(self) -> None:
        super().__init__(())
        self.streaming = asyncio.Event()
        self.go_on = asyncio.Event()
        self.cancelled = 0
        """Streams cancelled while they were held."""

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        first = True
        async for chunk in super().stream(request):
            yield chunk
            if first:
                first = False
                self.streaming.set()
                try:
                    await self.go_on.wait()
                except asyncio.CancelledError:
                    self.cancelled += 1
                    raise


class HeldAsk:
    """The service's ``ask``: once :attr:`holding` is set, its next call waits until
    :attr:`go_on` is set (an update checks the changed definition through it: the update
    has read the definition then, and not yet stored it)."""

    def __init__(self, asker: AskService) -> None:
        self.asker = asker
        self.holding = False
        self.waiting = asyncio.Event()
        self.go_on = asyncio.Event()

    async def __call__(self) -> AskService:
        if self.holding:
            self.holding = False
            self.waiting.set()
            await self.go_on.wait()
        return self.asker


@tool(destructive=True)
def delete_file(path: str) -> str:
    """Delete a file (a tool whose calls wait for an approval).

    Args:
        path: The file.
    """
    return f"deleted {path}"


@dataclass(frozen=True, slots=True)
class Running:
    """A managed-agent service on the held engine and the held ``ask``, and ``other``: the
    service of another server on the same database (a deletion there stops no run here)."""

    service: ManagedAgentService
    engine: HeldEngine
    ask: HeldAsk
    other: ManagedAgentService


Stores = tuple[ManagedAgentStorePort, SessionStorePort, ApprovalStorePort]
"""The definitions, conversations and approvals of one database."""


@pytest.fixture(params=["memory", "sqlite"])
def running(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Running]:
    """Two servers' managed-agent services on the held engine, over one database's stores
    (each SQLite one on a connection of its own)."""
    engine = HeldEngine()
    tools = ToolCatalogue([delete_file])
    ask = HeldAsk(AskService(registry=builtin_agents(), inference=engine, tools=tools))
    agents = InMemoryManagedAgentStore()
    in_memory = (
        agents,
        InMemorySessionStore(owners=agents.holds),
        InMemoryApprovalStore(owners=agents.holds),
    )
    opened: list[SqlBackend] = []

    def on(stores: Stores) -> ManagedAgentService:
        waiting = ManagedApprovals(stores[2], timeout=WAIT)
        return ManagedAgentService(agents=stores[0], sessions=stores[1], ask=ask, approvals=waiting)

    def server() -> ManagedAgentService:
        if request.param == "memory":
            return on(in_memory)
        opened.append(sqlite_backend(tmp_path / "sessions.db"))
        backend = opened[-1]
        return on((backend.managed_agents, backend.sessions, backend.approvals))

    yield Running(server(), engine, ask, server())
    for backend in opened:
        backend.close()


async def replace_victim(service: ManagedAgentService) -> None:
    await service.delete("victim")
    await service.create(ManagedAgentSpec(id="victim", system_prompt="New task."))


async def test_an_answer_finished_after_a_deletion_elsewhere_is_refused_not_stored(
    running: Running,
) -> None:
    """Deleted through another server: this server's run is not stopped, it streams its
    answer to the end, and the store refuses it."""
    service, engine = running.service, running.engine
    engine.add("Old secret answer.")
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
    await replace_victim(running.other)
    engine.go_on.set()
    with pytest.raises(OwnerGoneError, match="managed agent 'victim' was deleted"):
        await task
    assert "".join(seen) == "Old secret answer."  # streamed whole, then refused
    assert await service.messages("victim") == []


async def test_a_run_cut_short_after_the_deletion_keeps_nothing_and_raises_nothing(
    running: Running,
) -> None:
    service, engine = running.service, running.engine
    engine.add("Old secret answer.")
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


async def ended(step: Awaitable[T]) -> T:
    """``step``'s end, which the test awaits now (a backstop only bounds a failure: a run
    that is never stopped fails the test instead of hanging it)."""
    async with asyncio.timeout(WAIT / 2):
        return await step


async def read_stream(service: ManagedAgentService, agent_id: str) -> None:
    """A streamed run of ``agent_id``, read to its end."""
    async with aclosing(service.stream(agent_id)) as updates:
        async for _ in updates:
            pass


async def run_whole(service: ManagedAgentService, agent_id: str) -> None:
    """A run of ``agent_id`` not streamed: its answer at the end."""
    await service.run(agent_id)


Reader = Callable[[ManagedAgentService, str], Coroutine[None, None, None]]


@pytest.mark.parametrize("read", [read_stream, run_whole], ids=["streamed", "whole"])
async def test_deleting_an_agent_cancels_its_runs_here_where_they_wait(
    running: Running, read: Reader
) -> None:
    service, engine = running.service, running.engine
    engine.add("Old secret answer.", "Bystander answer.")
    for agent_id in ("victim", "bystander"):
        await service.create(ManagedAgentSpec(id=agent_id))
        await service.post(agent_id, "What is the secret?")
    victim = asyncio.create_task(read(service, "victim"))
    await engine.streaming.wait()  # the victim's run waits for the engine
    engine.streaming.clear()
    bystander = asyncio.create_task(read(service, "bystander"))
    await engine.streaming.wait()
    await replace_victim(service)
    with pytest.raises(RunCancelledError, match="'victim' was deleted while it ran"):
        await ended(victim)
    assert engine.cancelled == 1  # its engine request was let go of at once
    assert not bystander.done()  # another agent's run goes on
    engine.go_on.set()
    await bystander
    [*_, answered] = await service.messages("bystander")
    assert answered.message.content == "Bystander answer."
    assert await service.messages("victim") == []
    await service.post("victim", "Hello?")  # the new agent's runs are not stopped
    await read(service, "victim")
    assert len(await service.messages("victim")) == 2


async def test_a_run_read_between_its_updates_ends_at_its_next_read(running: Running) -> None:
    """Its reader holds an update (a server sends it to its client) when the agent is
    deleted: the reader is not cancelled there, its next read ends the run."""
    service, engine = running.service, running.engine
    engine.add("Old secret answer.")
    await service.create(ManagedAgentSpec(id="victim"))
    await service.post("victim", "What is the secret?")
    updates = service.stream("victim")
    async with aclosing(updates):
        assert isinstance(await anext(updates), TextDelta)
        await service.delete("victim")
        with pytest.raises(RunCancelledError):
            await ended(anext(updates))
    assert not engine.go_on.is_set()
    assert engine.cancelled == 0  # it was never left waiting


async def held_update(running: Running) -> asyncio.Task[ManagedAgent]:
    """``victim`` created, then an update of its prompt, held once it has read the
    definition."""
    await running.service.create(ManagedAgentSpec(id="victim", system_prompt="Old secrets."))
    running.ask.holding = True
    spec = ManagedAgentSpec(system_prompt="Patched.")
    update = asyncio.create_task(running.service.update("victim", spec, ["system_prompt"]))
    await running.ask.waiting.wait()
    return update


async def test_an_update_that_read_a_deleted_agent_never_brings_it_back(
    running: Running,
) -> None:
    service = running.service
    update = await held_update(running)
    await service.delete("victim")
    running.ask.go_on.set()
    with pytest.raises(ManagedAgentNotFoundError, match="No managed agent with id 'victim'"):
        await update
    assert await service.agents.get("victim") is None
    assert await service.all() == []


async def test_an_update_that_read_a_deleted_agent_leaves_its_successor_alone(
    running: Running,
) -> None:
    service = running.service
    update = await held_update(running)
    await replace_victim(service)
    successor = await service.get("victim")
    running.ask.go_on.set()
    with pytest.raises(ManagedAgentNotFoundError):
        await update
    assert await service.get("victim") == successor  # its prompt is its own


HOLD_POINTS = {
    "read": ("agents", "get"),
    "conversation-deleted": ("sessions", "delete"),
    "definition-deleted": ("agents", "delete"),
}
"""Where a deletion is held: once it read the definition; once it deleted the
conversation, before it deletes the definition; once it deleted the definition."""


async def held_delete(
    monkeypatch: pytest.MonkeyPatch, running: Running, point: str
) -> tuple[asyncio.Task[None], Held]:
    """``victim`` created, with a message, then a deletion of it, held at ``point``."""
    service = running.service
    await service.create(ManagedAgentSpec(id="victim", system_prompt="Old secrets."))
    await service.post("victim", "Old question.")
    store, method = HOLD_POINTS[point]
    held = hold_next(monkeypatch, getattr(service, store), method)
    deletion = asyncio.create_task(service.delete("victim"))
    await held.waits.wait()
    return deletion, held


@pytest.mark.parametrize("point", ["read", "conversation-deleted"])
async def test_a_deletion_that_read_an_agent_deleted_and_created_again_leaves_the_new_one(
    monkeypatch: pytest.MonkeyPatch, running: Running, point: str
) -> None:
    """Another server deletes the agent the deletion read and creates it again, which is
    sent a message: the deletion removes neither the new definition nor its conversation,
    and answers as for an unknown agent (HTTP 404)."""
    service, other = running.service, running.other
    deletion, held = await held_delete(monkeypatch, running, point)
    await replace_victim(other)
    await other.post("victim", "New question.")
    successor = await other.get("victim")
    held.go_on.set()
    with pytest.raises(ManagedAgentNotFoundError, match="No managed agent with id 'victim'"):
        await deletion
    assert await service.get("victim") == successor
    assert [m.message.content for m in await service.messages("victim")] == ["New question."]
    await service.delete("victim")  # the new one, deleted as read
    assert await service.all() == []
    assert await service.sessions.load(session_id_of("victim")) == ()


async def test_an_agent_created_again_before_its_deletion_returns_keeps_what_it_keeps(
    monkeypatch: pytest.MonkeyPatch, running: Running
) -> None:
    """Created again by another server, sent a message, with a call waiting for its
    approval, once the deletion deleted the definition and before it returns: nothing the
    deletion still does touches the new agent's conversation or approvals."""
    service, other = running.service, running.other
    deletion, held = await held_delete(monkeypatch, running, "definition-deleted")
    await other.create(ManagedAgentSpec(id="victim", system_prompt="New task."))
    await other.post("victim", "New question.")
    assert other.approvals is not None
    successor = await other.get("victim")
    await other.approvals.store.add(pending("c0", agent="victim"), owner=owner_of(successor))
    held.go_on.set()
    await deletion
    assert [m.message.content for m in await service.messages("victim")] == ["New question."]
    assert [row.id for row in await other.approvals.pending("victim")] == ["c0"]


async def test_what_a_run_appends_while_its_agent_is_deleted_is_not_kept(
    monkeypatch: pytest.MonkeyPatch, running: Running
) -> None:
    """A message and an approval stored between the deletion of the conversation and of
    the definition (the definition is stored still, so the store takes them) are gone
    once the deletion returns (no conversation left without its agent, listed by
    ``jarvis sessions list``), and never reach the agent created again under the id."""
    service, other = running.service, running.other
    deletion, held = await held_delete(monkeypatch, running, "conversation-deleted")
    await other.post("victim", "Late question.")
    read = await other.get("victim")
    assert other.approvals is not None
    await other.approvals.store.add(pending("c0", agent="victim"), owner=owner_of(read))
    held.go_on.set()
    await deletion
    assert await service.sessions.load(session_id_of("victim")) == ()
    assert await other.approvals.store.pending("victim", limit=10) == []
    await other.create(ManagedAgentSpec(id="victim", system_prompt="New task."))
    assert await service.messages("victim") == []
    assert await other.approvals.pending("victim") == []


def _approval_store(service: ManagedAgentService) -> ApprovalStorePort:
    assert service.approvals is not None
    return service.approvals.store


CREATION_HOLD_POINTS: dict[str, tuple[Callable[[ManagedAgentService], object], str, int]] = {
    "read": (lambda service: service.agents, "get", 1),
    "conversation-cleared": (lambda service: service.sessions, "delete", 0),
    "approvals-cleared": (_approval_store, "forget", 0),
}
"""Where a creation is held: once it found the id free (its second read, in its one step
in this process); once it cleared the conversation an earlier agent of the id left; once
it cleared its approvals, before it stores the definition."""


@pytest.mark.parametrize("point", list(CREATION_HOLD_POINTS))
async def test_a_creation_that_found_the_id_free_loses_to_one_made_meanwhile(
    monkeypatch: pytest.MonkeyPatch, running: Running, point: str
) -> None:
    """Another server creates the agent once this creation found the id free, and sends
    it a message, with a call waiting for its approval: this creation fails as for an id
    that exists already (HTTP 400, not the 404 of a deleted agent), and neither replaces
    the winner's definition nor clears its conversation or approvals."""
    service, other = running.service, running.other
    target, method, skip = CREATION_HOLD_POINTS[point]
    held = hold_next(monkeypatch, target(service), method, skip=skip)
    spec = ManagedAgentSpec(id="victim", system_prompt="Loser's task.")
    creation = asyncio.create_task(service.create(spec))
    await held.waits.wait()
    winner = await other.create(ManagedAgentSpec(id="victim", system_prompt="Winner's task."))
    await other.post("victim", "Winner's question.")
    await _approval_store(other).add(pending("c0", agent="victim"), owner=owner_of(winner))
    held.go_on.set()
    with pytest.raises(ConfigurationError, match="'victim' exists already") as refused:
        await creation
    assert refused.type is ConfigurationError
    assert await service.get("victim") == winner
    assert [m.message.content for m in await service.messages("victim")] == ["Winner's question."]
    assert [row.id for row in await _approval_store(service).pending("victim", limit=10)] == ["c0"]


async def no_approval_required(updates: AsyncIterator[AnswerUpdate]) -> None:
    """Read ``updates`` to their end: none announces a call waiting for an approval."""
    async for update in updates:
        assert not isinstance(update, ApprovalRequired)


async def test_a_run_of_an_agent_deleted_elsewhere_records_no_approval_for_its_successor(
    running: Running,
) -> None:
    """Deleted through another server (this one's run goes on), created again: the old
    run's tool call, met after the deletion, is never recorded for the new agent to list."""
    service, engine = running.service, running.engine
    call = ToolCall(id="call_0", name="delete_file", arguments={"path": "a.txt"})
    engine.add(Completion(content="Deleting.", tool_calls=(call,), finish_reason="tool_calls"))
    spec = ManagedAgentSpec(id="ops", agent="orchestrator", tools=("delete_file",))
    await service.create(spec)
    await service.post("ops", "Clean up.")
    updates = service.stream("ops")
    async with aclosing(updates):
        assert isinstance(await anext(updates), TextDelta)  # held after its first word
        await running.other.delete("ops")
        await running.other.create(spec)
        engine.go_on.set()
        with pytest.raises(OwnerGoneError, match="managed agent 'ops' was deleted"):
            await no_approval_required(updates)
    assert running.other.approvals is not None
    assert await running.other.approvals.pending("ops") == []
