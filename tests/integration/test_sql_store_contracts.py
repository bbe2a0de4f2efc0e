"""The session, operator, managed-agent and approval store contracts on both SQL drivers.

One ``backend`` fixture, parametrised over SQLite (a file in ``tmp_path``) and PostgreSQL (a
fresh database on a server these tests start), runs the suites in ``contracts/`` unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from contracts.approval_store_contract import ApprovalStoreContract, pending
from contracts.managed_agent_store_contract import ManagedAgentStoreContract
from contracts.operator_store_contract import OperatorStoreContract
from contracts.session_store_contract import SessionStoreContract
from jarvis.adapters.sql_store import (
    SqlApprovalStore,
    SqlBackend,
    SqlManagedAgentStore,
    SqlOperatorStore,
    SqlSessionStore,
)
from jarvis.domain.managed_agents import ManagedAgent
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


class TestSqlManagedAgentStore(ManagedAgentStoreContract[SqlManagedAgentStore]):
    @pytest.fixture
    def store(self, open_backend: Opener) -> SqlManagedAgentStore:
        return open_backend().managed_agents


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
