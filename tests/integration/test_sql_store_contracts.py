"""The session, operator, managed-agent and approval store contracts on both SQL drivers.

One ``backend`` fixture, parametrised over SQLite (a file in ``tmp_path``) and PostgreSQL (a
fresh database on a server these tests start), runs the suites in ``contracts/`` unchanged.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.approval_store_contract import ApprovalStoreContract, pending
from contracts.managed_agent_store_contract import ManagedAgentStoreContract
from contracts.operator_store_contract import OperatorStoreContract
from contracts.owned_writes_contract import OwnedWritesContract, SharedStores, said
from contracts.session_store_contract import SessionStoreContract
from jarvis.adapters.sql_store import (
    SqlApprovalStore,
    SqlBackend,
    SqlManagedAgentStore,
    SqlOperatorStore,
    SqlSessionStore,
)
from jarvis.adapters.sql_store.driver import Connection, call
from jarvis.adapters.sql_store.owners import owner_holds
from jarvis.domain.managed_agents import ManagedAgent, agent_to_record
from jarvis.domain.managed_agents import owner_of as agent_owner
from jarvis.domain.managed_agents import session_id_of as agent_session_id
from jarvis.domain.operators import (
    DEFINITION_PREFIX,
    Operator,
    encode_state,
    key_prefix,
    operator_to_record,
    state_key,
)
from jarvis.domain.operators import owner_of as operator_owner
from jarvis.domain.operators import session_id_of as operator_session_id
from jarvis.domain.owners import OwnerGoneError, vacancy
from tests.support.postgres_server import PostgresServer, running_postgres
from tests.support.sql_stores import postgres_backend, sqlite_backend

pytestmark = pytest.mark.integration

Opener = Callable[[], SqlBackend]


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as running:
        yield running


@pytest.fixture(params=["sqlite", "postgres"])
def open_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens backends on one fresh database (each call another connection); closes them."""
    if request.param == "sqlite":
        path = tmp_path / "sessions.db"

        def make() -> SqlBackend:
            return sqlite_backend(path)
    else:
        url = request.getfixturevalue("postgres").create_database()

        def make() -> SqlBackend:
            return postgres_backend(url)

    opened: list[SqlBackend] = []

    def opener() -> SqlBackend:
        opened.append(make())
        return opened[-1]

    yield opener
    for backend in opened:
        backend.close()


class TestSqlSessionStore(SessionStoreContract[SqlSessionStore]):
    @pytest.fixture
    def store(self, open_backend: Opener) -> SqlSessionStore:
        return open_backend().sessions


class TestSqlOperatorStore(OperatorStoreContract[SqlOperatorStore]):
    @pytest.fixture
    def store(self, open_backend: Opener) -> SqlOperatorStore:
        return open_backend().operators

    @pytest.fixture
    def second_store(self, open_backend: Opener, store: SqlOperatorStore) -> SqlOperatorStore:
        return open_backend().operators


class TestSqlManagedAgentStore(ManagedAgentStoreContract[SqlManagedAgentStore]):
    @pytest.fixture
    def store(self, open_backend: Opener) -> SqlManagedAgentStore:
        return open_backend().managed_agents

    @pytest.fixture
    def second_store(
        self, open_backend: Opener, store: SqlManagedAgentStore
    ) -> SqlManagedAgentStore:
        return open_backend().managed_agents


class TestSqlOwnedWrites(OwnedWritesContract):
    @pytest.fixture
    def stores(self, open_backend: Opener) -> SharedStores:
        backend = open_backend()
        return SharedStores(
            backend.sessions, backend.operators, backend.managed_agents, backend.approvals
        )


class TestSqlApprovalStore(ApprovalStoreContract[SqlApprovalStore]):
    @pytest.fixture
    def store(self, open_backend: Opener) -> SqlApprovalStore:
        return open_backend().approvals


async def test_two_connections_share_state_leases_and_definitions(open_backend: Opener) -> None:
    first, second = open_backend(), open_backend()
    await first.operators.put_state("operator:x:state", {"n": 1})
    assert await second.operators.get_state("operator:x:state") == {"n": 1}
    assert await first.operators.claim_tick("x", 10, "machine-a", 60) is True
    assert await second.operators.claim_tick("x", 10, "machine-b", 60) is False
    assert await first.operators.acquire_lease("run:a", "p1", 60) is True
    assert await second.operators.acquire_lease("run:a", "p2", 60) is False
    await first.managed_agents.put(ManagedAgent(id="shared", tools=("think",)))
    assert await second.managed_agents.get("shared") == ManagedAgent(id="shared", tools=("think",))


async def test_the_stores_of_a_session_store_are_found_from_it(open_backend: Opener) -> None:
    backend = open_backend()
    joined = SqlBackend.serving(backend.sessions)
    assert joined is not None
    await joined.operators.put_state("operator:y:state", [1])
    assert await backend.operators.get_state("operator:y:state") == [1]
    assert await backend.operators.state_keys("operator:y") == ["operator:y:state"]


async def test_two_connections_record_one_call_and_take_its_decision_once(
    open_backend: Opener,
) -> None:
    one, two = open_backend().approvals, open_backend().approvals
    added = await asyncio.gather(one.add(pending("x")), two.add(pending("y")))
    assert added[0].id == added[1].id  # the same call, recorded once
    await two.decide("a1", added[0].id, allow=True, reason="", now_us=1)
    taken = await asyncio.gather(one.use("a1", added[0].id), two.use("a1", added[0].id))
    assert sum(row is not None for row in taken) == 1


async def test_a_definition_deleted_on_another_connection_refuses_the_run_s_writes(
    open_backend: Opener,
) -> None:
    running, deleting = open_backend(), open_backend()
    agent = ManagedAgent(id="victim", incarnation="old")
    await running.managed_agents.put(agent)
    assert await deleting.managed_agents.delete("victim", agent.incarnation)
    await deleting.managed_agents.put(ManagedAgent(id="victim", incarnation="new"))
    with pytest.raises(OwnerGoneError):
        await running.sessions.append_records(
            agent_session_id("victim"), said("late"), owner=agent_owner(agent)
        )
    assert await deleting.sessions.load(agent_session_id("victim")) == ()


def _waiting_on_a_lock(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as watcher:
        row = watcher.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return 0 if row is None else int(row[0])


async def _append_late(backend: SqlBackend, agent: ManagedAgent) -> bool:
    """Append ``agent``'s run's answer; whether it was stored."""
    try:
        await backend.sessions.append_records(
            agent_session_id(agent.id), said("late"), owner=agent_owner(agent)
        )
    except OwnerGoneError:
        return False
    return True


async def _update_late(backend: SqlBackend, agent: ManagedAgent) -> bool:
    """Change ``agent`` as read before; whether the change was stored."""
    return await backend.managed_agents.update(replace(agent, system_prompt="Late."))


async def _record_late(backend: SqlBackend, agent: ManagedAgent) -> bool:
    """Record a call of ``agent``'s run for approval; whether it was recorded."""
    try:
        await backend.approvals.add(pending("c0", agent=agent.id), owner=agent_owner(agent))
    except OwnerGoneError:
        return False
    return True


async def _delete_late(backend: SqlBackend, agent: ManagedAgent) -> bool:
    """Delete ``agent`` as read before; whether it was deleted."""
    return await backend.managed_agents.delete(agent.id, agent.incarnation)


async def _delete_conversation_late(backend: SqlBackend, agent: ManagedAgent) -> bool:
    """Delete ``agent``'s conversation as read before; whether it was deleted."""
    try:
        await backend.sessions.delete(agent_session_id(agent.id), owner=agent_owner(agent))
    except OwnerGoneError:
        return False
    return True


async def _forget_approvals_late(backend: SqlBackend, agent: ManagedAgent) -> bool:
    """Delete ``agent``'s approvals as read before; whether they were deleted."""
    try:
        await backend.approvals.forget(agent.id, owner=agent_owner(agent))
    except OwnerGoneError:
        return False
    return True


LateWrite = Callable[[SqlBackend, ManagedAgent], Coroutine[None, None, bool]]
LATE_WRITES = [
    _append_late,
    _update_late,
    _record_late,
    _delete_late,
    _delete_conversation_late,
    _forget_approvals_late,
]
LATE_IDS = ["append", "update", "approval", "delete", "delete-conversation", "forget-approvals"]


async def _commit_once_it_waits(
    url: str, commit: Callable[[], None], late: asyncio.Task[bool]
) -> None:
    """``commit`` a transaction in flight on ``url`` once ``late`` waits for one of its
    locks (never before: ``late`` must meet the transaction in flight)."""
    deadline = asyncio.get_running_loop().time() + 60
    while not await asyncio.to_thread(_waiting_on_a_lock, url):
        assert not late.done(), "the write did not wait for the deletion"
        assert asyncio.get_running_loop().time() < deadline, "it never waited"
        await asyncio.sleep(0.01)  # polls for a state the database reaches
    commit()


@pytest.mark.parametrize("write", LATE_WRITES, ids=LATE_IDS)
async def test_on_postgres_an_owned_write_waits_for_a_deletion_in_flight_then_is_refused(
    postgres: PostgresServer, write: LateWrite
) -> None:
    """The definition's row is read FOR SHARE (FOR UPDATE by an update of the definition):
    a write checked while a deletion of it is not yet committed waits for that deletion (a
    plain read would see the row, write, and leave the late answer behind, or the
    definition back, once the deletion commits)."""
    import psycopg

    url = postgres.create_database()
    backend = postgres_backend(url)
    try:
        agent = ManagedAgent(id="victim", incarnation="old")
        await backend.managed_agents.put(agent)
        with psycopg.connect(url) as deleting:  # one transaction, until commit
            deleting.execute(
                "DELETE FROM jarvis_operator_state WHERE key = %s", ("managed_agent:victim",)
            )
            late = asyncio.create_task(write(backend, agent))
            await _commit_once_it_waits(url, deleting.commit, late)
        assert await late is False
        assert await backend.sessions.load(agent_session_id("victim")) == ()
        assert await backend.managed_agents.get("victim") is None
        assert await backend.approvals.pending("victim", limit=10) == []
    finally:
        backend.close()


@pytest.mark.parametrize(
    "write",
    [_delete_late, _delete_conversation_late, _forget_approvals_late],
    ids=["delete", "delete-conversation", "forget-approvals"],
)
async def test_on_postgres_a_stale_deletion_waits_for_a_delete_and_create_then_spares_it(
    postgres: PostgresServer, write: LateWrite
) -> None:
    """Another client deletes the definition read and creates it again in one transaction:
    a deletion of what was read waits for it (the row is locked), then removes neither the
    new definition nor the conversation or approvals there, which are the new one's now."""
    import psycopg

    url = postgres.create_database()
    backend = postgres_backend(url)
    try:
        agent = ManagedAgent(id="victim", incarnation="old")
        await backend.managed_agents.put(agent)
        await backend.sessions.append_records(
            agent_session_id("victim"), said("kept"), owner=agent_owner(agent)
        )
        await backend.approvals.add(pending("c0", agent="victim"), owner=agent_owner(agent))
        successor = ManagedAgent(id="victim", system_prompt="New.", incarnation="new")
        with psycopg.connect(url) as deleting:  # one transaction, until commit
            deleting.execute(
                "DELETE FROM jarvis_operator_state WHERE key = %s", ("managed_agent:victim",)
            )
            deleting.execute(
                "INSERT INTO jarvis_operator_state (key, value, updated_us) VALUES (%s, %s, 0)",
                ("managed_agent:victim", agent_to_record(successor)),
            )
            late = asyncio.create_task(write(backend, agent))
            await _commit_once_it_waits(url, deleting.commit, late)
        assert await late is False
        assert await backend.managed_agents.get("victim") == successor
        loaded = await backend.sessions.load(agent_session_id("victim"))
        assert [m.content for m in loaded] == ["kept"]
        assert [row.id for row in await backend.approvals.pending("victim", limit=10)] == ["c0"]
    finally:
        backend.close()


async def _remove_definition_late(backend: SqlBackend, operator: Operator) -> bool:
    """Delete ``operator``'s definition as read before; whether it was deleted."""
    try:
        key = DEFINITION_PREFIX + operator.id
        return await backend.operators.delete_key(key, owner=operator_owner(operator))
    except OwnerGoneError:
        return False


async def _remove_state_late(backend: SqlBackend, operator: Operator) -> bool:
    """Delete ``operator``'s state as read before; whether it was deleted."""
    try:
        prefix = key_prefix(operator.id)
        await backend.operators.delete_state(prefix, owner=operator_owner(operator))
    except OwnerGoneError:
        return False
    return True


async def _remove_history_late(backend: SqlBackend, operator: Operator) -> bool:
    """Delete ``operator``'s history as read before; whether it was deleted."""
    try:
        session = operator_session_id(operator.id)
        await backend.sessions.delete(session, owner=operator_owner(operator))
    except OwnerGoneError:
        return False
    return True


LateRemoval = Callable[[SqlBackend, Operator], Coroutine[None, None, bool]]


@pytest.mark.parametrize(
    "removal",
    [_remove_definition_late, _remove_state_late, _remove_history_late],
    ids=["definition", "state", "history"],
)
async def test_on_postgres_a_stale_removal_waits_for_a_remove_and_add_then_spares_it(
    postgres: PostgresServer, removal: LateRemoval
) -> None:
    """Another client removes the operator read and adds it again in one transaction: each
    step of a removal of what was read waits for it (the definition's row is locked), then
    deletes neither the new definition nor the state or history there, the new one's now."""
    import psycopg

    url = postgres.create_database()
    backend = postgres_backend(url)
    try:
        operator = Operator(id="op1", prompt="Old task.", incarnation="old")
        key = DEFINITION_PREFIX + "op1"
        await backend.operators.put_state(key, operator_to_record(operator))
        owner = operator_owner(operator)
        await backend.operators.put_state(state_key("op1"), "kept", owner=owner)
        await backend.sessions.append_records(operator_session_id("op1"), said("kept"), owner=owner)
        successor = Operator(id="op1", prompt="New task.", incarnation="new")
        with psycopg.connect(url) as replacing:  # one transaction, until commit
            replacing.execute("DELETE FROM jarvis_operator_state WHERE key = %s", (key,))
            replacing.execute(
                "INSERT INTO jarvis_operator_state (key, value, updated_us) VALUES (%s, %s, 0)",
                (key, encode_state(operator_to_record(successor))),
            )
            late = asyncio.create_task(removal(backend, operator))
            await _commit_once_it_waits(url, replacing.commit, late)
        assert await late is False
        assert await backend.operators.get_state(key) == operator_to_record(successor)
        assert await backend.operators.get_state(state_key("op1")) == "kept"
        loaded = await backend.sessions.load(operator_session_id("op1"))
        assert [m.content for m in loaded] == ["kept"]
    finally:
        backend.close()


async def _clear_conversation_for_vacancy(backend: SqlBackend) -> bool:
    """Clear ``victim``'s conversation as a creation does; whether it was cleared."""
    try:
        free = vacancy(agent_owner(ManagedAgent(id="victim")))
        await backend.sessions.delete(agent_session_id("victim"), owner=free)
    except OwnerGoneError:
        return False
    return True


async def _clear_approvals_for_vacancy(backend: SqlBackend) -> bool:
    """Clear ``victim``'s approvals as a creation does; whether they were cleared."""
    try:
        await backend.approvals.forget(
            "victim", owner=vacancy(agent_owner(ManagedAgent(id="victim")))
        )
    except OwnerGoneError:
        return False
    return True


Clearing = Callable[[SqlBackend], Coroutine[None, None, bool]]


@pytest.mark.parametrize(
    "clearing",
    [_clear_conversation_for_vacancy, _clear_approvals_for_vacancy],
    ids=["conversation", "approvals"],
)
async def test_on_postgres_a_clearing_for_a_vacancy_waits_for_a_creation_then_spares_it(
    postgres: PostgresServer, clearing: Clearing
) -> None:
    """Another client creates the agent in a transaction not yet committed: a creation's
    clearing of the id's leftovers waits for it (its claim of the key meets the new row;
    a plain read would see no definition and clear), then clears nothing."""
    import psycopg

    url = postgres.create_database()
    backend = postgres_backend(url)
    try:
        await backend.sessions.append_records(agent_session_id("victim"), said("kept"))
        await backend.approvals.add(pending("c0", agent="victim"))
        winner = ManagedAgent(id="victim", system_prompt="Winner.", incarnation="won")
        with psycopg.connect(url) as creating:  # one transaction, until commit
            creating.execute(
                "INSERT INTO jarvis_operator_state (key, value, updated_us) VALUES (%s, %s, 0)",
                ("managed_agent:victim", agent_to_record(winner)),
            )
            late = asyncio.create_task(clearing(backend))
            await _commit_once_it_waits(url, creating.commit, late)
        assert await late is False
        assert await backend.managed_agents.get("victim") == winner
        loaded = await backend.sessions.load(agent_session_id("victim"))
        assert [m.content for m in loaded] == ["kept"]
        assert [row.id for row in await backend.approvals.pending("victim", limit=10)] == ["c0"]
    finally:
        backend.close()


async def test_on_postgres_a_creation_waits_for_a_clearing_for_its_vacancy_then_lands(
    postgres: PostgresServer,
) -> None:
    """A clearing for the id's vacancy in flight (claimed, not yet committed): a creation
    of the id by another client waits for it (no winner's data can be cleared), then
    stores its definition: the claim left no row."""
    url = postgres.create_database()
    clearing, creating = postgres_backend(url), postgres_backend(url)
    agent = ManagedAgent(id="victim", incarnation="new")
    claimed, commit = threading.Event(), threading.Event()

    def held(db: Connection) -> bool:
        with db.transaction():
            vacant = owner_holds(db, vacancy(agent_owner(agent)))
            claimed.set()
            commit.wait(timeout=60)
            return vacant

    try:
        clear = asyncio.create_task(call(clearing.driver, held))
        assert await asyncio.to_thread(claimed.wait, 60)
        late = asyncio.create_task(creating.managed_agents.create(agent))
        await _commit_once_it_waits(url, commit.set, late)
        assert await clear is True
        assert await late is True
        assert await clearing.managed_agents.get("victim") == agent
    finally:
        commit.set()
        clearing.close()
        creating.close()
