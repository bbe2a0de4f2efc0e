"""Pending approvals in a real PostgreSQL these tests start: the contract, and two servers'
connections taking one decision exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from contracts.approval_store_contract import ApprovalStoreContract, pending
from jarvis.adapters.postgres_sessions import PostgresSessionStore
from jarvis.adapters.postgres_sessions.approvals import PostgresApprovalStore
from tests.support.postgres_server import PostgresServer, running_postgres

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with running_postgres() as running:
        yield running


class TestPostgresApprovalStore(ApprovalStoreContract[PostgresApprovalStore]):
    @pytest.fixture
    def store(self, server: PostgresServer) -> Iterator[PostgresApprovalStore]:
        sessions = PostgresSessionStore(server.create_database())
        yield PostgresApprovalStore(sessions)
        sessions.close()


async def test_two_connections_record_one_call_and_take_its_decision_once(
    server: PostgresServer,
) -> None:
    url = server.create_database()
    first, second = PostgresSessionStore(url), PostgresSessionStore(url)
    try:
        one, two = PostgresApprovalStore(first), PostgresApprovalStore(second)
        added = await asyncio.gather(one.add(pending("x")), two.add(pending("y")))
        assert added[0].id == added[1].id  # the same call, recorded once
        await two.decide("a1", added[0].id, allow=True, reason="", now_us=1)
        taken = await asyncio.gather(one.use("a1", added[0].id), two.use("a1", added[0].id))
        assert sum(row is not None for row in taken) == 1
    finally:
        first.close()
        second.close()
