"""Managed agent definitions in a real PostgreSQL these tests start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contracts.managed_agent_store_contract import ManagedAgentStoreContract
from jarvis.adapters.postgres_sessions import PostgresSessionStore
from jarvis.adapters.postgres_sessions.managed_agents import PostgresManagedAgentStore
from jarvis.domain.managed_agents import ManagedAgent
from tests.support.postgres_server import PostgresServer, running_postgres

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with running_postgres() as running:
        yield running


class TestPostgresManagedAgentStore(ManagedAgentStoreContract[PostgresManagedAgentStore]):
    @pytest.fixture
    def store(self, server: PostgresServer) -> Iterator[PostgresManagedAgentStore]:
        sessions = PostgresSessionStore(server.create_database())
        yield PostgresManagedAgentStore(sessions)
        sessions.close()


async def test_two_connections_see_the_same_definitions(server: PostgresServer) -> None:
    url = server.create_database()
    first, second = PostgresSessionStore(url), PostgresSessionStore(url)
    try:
        await PostgresManagedAgentStore(first).put(ManagedAgent(id="shared", tools=("think",)))
        assert await PostgresManagedAgentStore(second).get("shared") == ManagedAgent(
            id="shared", tools=("think",)
        )
    finally:
        first.close()
        second.close()
