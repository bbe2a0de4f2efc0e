"""The operator-store contract against a real PostgreSQL server these tests start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contracts.operator_store_contract import OperatorStoreContract
from jarvis.adapters.postgres_sessions import PostgresSessionStore
from jarvis.adapters.postgres_sessions.operators import PostgresOperatorStore
from tests.support.postgres_server import PostgresServer, running_postgres

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with running_postgres() as running:
        yield running


class TestPostgresOperatorStore(OperatorStoreContract[PostgresOperatorStore]):
    @pytest.fixture
    def store(self, server: PostgresServer) -> Iterator[PostgresOperatorStore]:
        sessions = PostgresSessionStore(server.create_database())
        yield PostgresOperatorStore(sessions)
        sessions.close()


async def test_two_connections_share_state_and_leases(server: PostgresServer) -> None:
    url = server.create_database()
    first, second = PostgresSessionStore(url), PostgresSessionStore(url)
    try:
        a, b = PostgresOperatorStore(first), PostgresOperatorStore(second)
        await a.put_state("operator:x:state", {"n": 1})
        assert await b.get_state("operator:x:state") == {"n": 1}
        assert await a.claim_tick("x", 10, "machine-a", 60) is True
        assert await b.claim_tick("x", 10, "machine-b", 60) is False
    finally:
        first.close()
        second.close()
