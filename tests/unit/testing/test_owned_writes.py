"""The in-memory session, operator, managed-agent and approval stores, linked as one
database, pass the owned-writes contract (the SQL stores run it on both drivers in
``tests/integration/test_sql_store_contracts.py``); a session or approval store that
shares no definitions refuses an owned write rather than guess."""

from __future__ import annotations

import pytest

from contracts.approval_store_contract import pending as call
from contracts.owned_writes_contract import OwnedWritesContract, SharedStores, said
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.managed_agents import ManagedAgent, owner_of
from jarvis.domain.owners import Owner
from jarvis.testing import InMemoryApprovalStore, InMemorySessionStore
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from jarvis.testing.operators import InMemoryOperatorStore


class TestInMemoryOwnedWrites(OwnedWritesContract):
    @pytest.fixture
    def stores(self) -> SharedStores:
        agents, operators = InMemoryManagedAgentStore(), InMemoryOperatorStore()

        def owners(owner: Owner) -> bool:
            return agents.holds(owner) or operators.holds(owner)

        sessions = InMemorySessionStore(owners=owners)
        return SharedStores(sessions, operators, agents, InMemoryApprovalStore(owners=owners))


async def test_a_store_that_shares_no_definitions_refuses_an_owned_write() -> None:
    sessions, approvals = InMemorySessionStore(), InMemoryApprovalStore()
    owner = owner_of(ManagedAgent(id="a", incarnation="x"))
    with pytest.raises(ConfigurationError, match="session store shares no definitions"):
        await sessions.append_records("managed-agent:a", said("x"), owner=owner)
    await sessions.append_records("managed-agent:a", said("x"))
    with pytest.raises(ConfigurationError, match="session store shares no definitions"):
        await sessions.delete("managed-agent:a", owner=owner)
    assert len(await sessions.load("managed-agent:a")) == 1
    await sessions.delete("managed-agent:a")
    with pytest.raises(ConfigurationError, match="approval store shares no definitions"):
        await approvals.add(call("c0", agent="a"), owner=owner)
    await approvals.add(call("c0", agent="a"))
    with pytest.raises(ConfigurationError, match="approval store shares no definitions"):
        await approvals.forget("a", owner=owner)
    assert len(await approvals.pending("a", limit=10)) == 1
    await approvals.forget("a")
    assert await sessions.sessions() == []
    assert await approvals.pending("a", limit=10) == []
