"""What a tick writes through (its binding's stores) is refused once its operator is
removed, even when an operator of the same name was added since: a note ``memory_store``
keeps, the state, the history. A removal removes the operator it read and only it: one
removed and added again meanwhile (by another process on the same database) keeps its
definition, state and history; the removal is held between its steps (:func:`hold_next`),
on the in-memory fakes linked as one database and on SQLite. An addition that found the
name free loses to one made meanwhile by another process (held the same way): it fails as
for a name that exists already, clearing nothing of the winner's. The scheduler's progress is
tested in ``test_operator_schedules.py``, a whole tick through the CLI in
``tests/integration/test_operators_cli.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from jarvis.adapters.sql_store import SqlBackend
from jarvis.application.ask import Answer, AskQuestion
from jarvis.application.operators import OperatorService, UnknownOperatorError
from jarvis.application.registry import builtin_agents
from jarvis.domain.agents.memory_store import MemoryStoreTool
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.messages import Message
from jarvis.domain.operators import Operator, session_id_of, state_key
from jarvis.domain.owners import OwnerGoneError
from jarvis.testing import InMemorySessionStore
from jarvis.testing.operators import InMemoryOperatorStore
from tests.support.holds import Held, hold_next
from tests.support.sql_stores import sqlite_backend


async def test_a_tick_s_stores_refuse_its_writes_once_its_operator_is_replaced() -> None:
    store = InMemoryOperatorStore()
    sessions = InMemorySessionStore(owners=store.holds)
    service = OperatorService(store=store, sessions=sessions, registry=builtin_agents())
    old = await service.add(Operator(id="op1", prompt="Old task."))
    binding = service.binding(old, "")
    notes = MemoryStoreTool(binding.store, "op1")
    assert (await notes.execute({"key": "seen", "value": "kept while it exists"})).success
    await service.remove("op1")
    await service.add(Operator(id="op1", prompt="New task."))
    with pytest.raises(OwnerGoneError, match="operator 'op1' was deleted while it ran"):
        await notes.execute({"key": "seen", "value": "old"})
    with pytest.raises(OwnerGoneError):
        await binding.store.put_state(state_key("op1"), "old answer")
    with pytest.raises(OwnerGoneError):
        await binding.sessions.append(session_id_of("op1"), [Message.user("Old task.")])
    assert await store.state_keys("operator:op1:") == []
    assert await service.history("op1") == ()
    fresh = MemoryStoreTool(service.binding(await service.get("op1"), "").store, "op1")
    assert (await fresh.execute({"key": "seen", "value": "new"})).success


@pytest.fixture(params=["memory", "sqlite"])
def services(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[OperatorService, OperatorService]]:
    """The operator services of two processes on one database (each SQLite one on a
    connection of its own)."""
    store = InMemoryOperatorStore()
    sessions = InMemorySessionStore(owners=store.holds)
    opened: list[SqlBackend] = []

    def process() -> OperatorService:
        if request.param == "memory":
            return OperatorService(store=store, sessions=sessions, registry=builtin_agents())
        opened.append(sqlite_backend(tmp_path / "sessions.db"))
        backend = opened[-1]
        return OperatorService(
            store=backend.operators, sessions=backend.sessions, registry=builtin_agents()
        )

    yield process(), process()
    for backend in opened:
        backend.close()


async def ticked(service: OperatorService, name: str, what: str) -> None:
    """What a tick of the stored operator ``name`` keeps: its state and its history."""
    binding = service.binding(await service.get(name), "")
    await binding.store.put_state(state_key(name), what)
    await binding.sessions.append(session_id_of(name), [Message.assistant(what)])


async def kept(service: OperatorService, name: str) -> tuple[object, list[str]]:
    """The state and the history of ``name``."""
    history = await service.history(name)
    return await service.store.get_state(state_key(name)), [m.message.content for m in history]


HOLD_POINTS = {
    "read": ("store", "get_state"),
    "state-deleted": ("store", "delete_state"),
    "history-deleted": ("sessions", "delete"),
    "definition-deleted": ("store", "delete_key"),
}
"""Where a removal is held: once it read the definition; once it deleted the state; once
it deleted the history, before it deletes the definition; once it deleted the definition."""


async def held_remove(
    monkeypatch: pytest.MonkeyPatch, service: OperatorService, point: str
) -> tuple[asyncio.Task[None], Held]:
    """``op1`` added, with state and history, then a removal of it, held at ``point``."""
    await service.add(Operator(id="op1", prompt="Old task."))
    await ticked(service, "op1", "old")
    store, method = HOLD_POINTS[point]
    held = hold_next(monkeypatch, getattr(service, store), method)
    removal = asyncio.create_task(service.remove("op1"))
    await held.waits.wait()
    return removal, held


@pytest.mark.parametrize("point", ["read", "state-deleted", "history-deleted"])
async def test_a_removal_that_read_an_operator_removed_and_added_again_leaves_the_new_one(
    monkeypatch: pytest.MonkeyPatch,
    services: tuple[OperatorService, OperatorService],
    point: str,
) -> None:
    """Another process removes the operator the removal read and adds it again, whose tick
    keeps state and history: the removal deletes none of them, and answers as for an
    unknown operator."""
    service, other = services
    removal, held = await held_remove(monkeypatch, service, point)
    await other.remove("op1")
    successor = await other.add(Operator(id="op1", prompt="New task."))
    await ticked(other, "op1", "new")
    held.go_on.set()
    with pytest.raises(UnknownOperatorError, match=r"No operator named 'op1' .*removed meanwhile"):
        await removal
    assert await service.get("op1") == successor
    assert await kept(service, "op1") == ("new", ["new"])
    await service.remove("op1")  # the new one, removed as read
    assert await service.names() == []
    assert await service.store.state_keys("operator") == []
    assert await service.sessions.load(session_id_of("op1")) == ()


async def test_an_operator_added_again_before_its_removal_returns_keeps_what_it_keeps(
    monkeypatch: pytest.MonkeyPatch, services: tuple[OperatorService, OperatorService]
) -> None:
    """Added again by another process, and ticked, once the removal deleted the definition
    and before it returns: nothing the removal still does touches the new operator's
    state or history."""
    service, other = services
    removal, held = await held_remove(monkeypatch, service, "definition-deleted")
    successor = await other.add(Operator(id="op1", prompt="New task."))
    await ticked(other, "op1", "new")
    held.go_on.set()
    await removal
    assert await service.get("op1") == successor
    assert await kept(service, "op1") == ("new", ["new"])


async def test_what_a_tick_keeps_while_its_operator_is_removed_is_not_kept(
    monkeypatch: pytest.MonkeyPatch, services: tuple[OperatorService, OperatorService]
) -> None:
    """State and history a tick stored between their deletion and the definition's (the
    definition is stored still, so the store takes them) are gone once the removal
    returns, and never reach the operator added again under the same name."""
    service, other = services
    removal, held = await held_remove(monkeypatch, service, "history-deleted")
    await ticked(other, "op1", "late")
    held.go_on.set()
    await removal
    assert await service.store.state_keys("operator:op1:") == []
    assert await service.sessions.load(session_id_of("op1")) == ()
    await other.add(Operator(id="op1", prompt="New task."))
    assert await kept(service, "op1") == (None, [])
    assert await service.store.state_keys("operator:op1:") == []


ADD_HOLD_POINTS = {
    "read": ("store", "get_state"),
    "state-cleared": ("store", "delete_state"),
    "history-cleared": ("sessions", "delete"),
}
"""Where an addition is held: once it found the name free; once it cleared the state an
earlier operator of the name left; once it cleared its history, before it stores the
definition."""


@pytest.mark.parametrize("point", list(ADD_HOLD_POINTS))
async def test_an_addition_that_found_the_name_free_loses_to_one_made_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
    services: tuple[OperatorService, OperatorService],
    point: str,
) -> None:
    """Another process adds the operator once this addition found the name free, and ticks
    it: this addition fails as for a name that exists already (exit code 2), and neither
    replaces the winner's definition nor clears its state or history."""
    service, other = services
    store, method = ADD_HOLD_POINTS[point]
    held = hold_next(monkeypatch, getattr(service, store), method)
    addition = asyncio.create_task(service.add(Operator(id="op1", prompt="Loser's task.")))
    await held.waits.wait()
    winner = await other.add(Operator(id="op1", prompt="Winner's task."))
    await ticked(other, "op1", "new")
    held.go_on.set()
    with pytest.raises(ConfigurationError, match="operator named 'op1' exists already"):
        await addition
    assert await service.get("op1") == winner
    assert await kept(service, "op1") == ("new", ["new"])


class Ran(Exception):
    """The tick a test let start, stopped there: which operator it ran."""

    def __init__(self, operator: Operator) -> None:
        super().__init__(operator.id)
        self.operator = operator


async def test_a_first_ask_that_lost_the_addition_runs_the_winner_s_operator(
    monkeypatch: pytest.MonkeyPatch, services: tuple[OperatorService, OperatorService]
) -> None:
    """Two first ``jarvis ask -a operative`` of one name at once: the one whose addition
    lost runs the operator the other added, rather than failing or replacing it."""
    service, other = services
    held = hold_next(monkeypatch, service.store, "get_state")  # the addition's read

    async def tick(name: str, *, operator: Operator | None = None) -> Answer:
        assert operator is not None
        raise Ran(operator)

    monkeypatch.setattr(service, "tick", tick)
    asking = asyncio.create_task(service.ask("op1", AskQuestion(question="Task.")))
    await held.waits.wait()
    winner = await other.add(Operator(id="op1", prompt="Winner's task."))
    held.go_on.set()
    with pytest.raises(Ran) as ran:
        await asking
    assert ran.value.operator.incarnation == winner.incarnation
    assert await service.get("op1") == winner
