"""The in-memory session, operator and managed-agent stores, linked as one database, pass
the owned-writes contract (the SQL stores run it on both drivers in
``tests/integration/test_sql_store_contracts.py``); a session store that shares no
definitions refuses an owned write rather than guess."""

from __future__ import annotations

import pytest

from contracts.owned_writes_contract import OwnedWritesContract, SharedStores, said
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.managed_agents import ManagedAgent, owner_of
from jarvis.domain.owners import Owner
from jarvis.testing import InMemorySessionStore
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from jarvis.testing.operators import InMemoryOperatorStore


class TestInMemoryOwnedWrites(OwnedWritesContract):
    @pytest.fixture
    def stores(self) -> SharedStores:
        agents, operators = InMemoryManagedAgentStore(), InMemoryOperatorStore()

        def owners(owner: Owner) -> bool:
            return agents.holds(owner) or operators.holds(owner)

        return SharedStores(InMemorySessionStore(owners=owners), operators, agents)


async def test_a_store_that_shares_no_definitions_refuses_an_owned_write() -> None:
    sessions = InMemorySessionStore()
    owner = owner_of(ManagedAgent(id="a", incarnation="x"))
    with pytest.raises(ConfigurationError, match="shares no definitions"):
        await sessions.append_records("managed-agent:a", said("x"), owner=owner)
    assert await sessions.sessions() == []
