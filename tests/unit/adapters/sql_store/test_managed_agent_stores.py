"""Managed agent definitions: the in-memory fake passes the contract (the SQL stores run it on
both drivers in ``tests/integration/test_sql_store_contracts.py``); SQLite specifics."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from contracts.managed_agent_store_contract import ManagedAgentStoreContract
from jarvis.domain.llm.messages import Message
from jarvis.domain.managed_agents import ManagedAgent, session_id_of
from jarvis.domain.sessions.records import SessionStoreCorruptError
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from tests.support.sql_stores import sqlite_backend


class TestInMemoryManagedAgentStore(ManagedAgentStoreContract[InMemoryManagedAgentStore]):
    @pytest.fixture
    def store(self) -> InMemoryManagedAgentStore:
        return InMemoryManagedAgentStore()


async def test_definitions_share_the_session_database_and_survive_a_reopen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    backend = sqlite_backend(path)
    sessions = backend.sessions
    await backend.managed_agents.put(ManagedAgent(id="a", agent="orchestrator"))
    await sessions.append(session_id_of("a"), [Message.user("hi")])
    sessions.close()
    reopened = sqlite_backend(path)
    again = reopened.sessions
    try:
        assert (await reopened.managed_agents.get("a")) == ManagedAgent(
            id="a", agent="orchestrator"
        )
        assert await again.load(session_id_of("a")) == (Message.user("hi"),)
        assert await again.sessions() == ["managed-agent:a"]  # definitions are not sessions
    finally:
        again.close()


async def test_a_damaged_definition_is_a_store_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    backend = sqlite_backend(path)
    store = backend.managed_agents
    await store.list()  # creates the schema
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO operator_state VALUES ('managed_agent:bad', '{\"id\": 3', 0)")
    with pytest.raises(SessionStoreCorruptError):
        await store.list()
    with pytest.raises(SessionStoreCorruptError):
        await store.get("bad")
    backend.close()
