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


async def test_a_definition_stored_before_the_memory_switch_follows_the_server(
    tmp_path: Path,
) -> None:
    """Definitions are JSON records: one written without ``memory`` reads as ``None``
    (the server's ``[agent] context_from_memory``), with no migration of the table."""
    path = tmp_path / "sessions.db"
    backend = sqlite_backend(path)
    await backend.managed_agents.list()  # creates the schema
    old = '{"id":"old","name":"","agent":"simple","tools":[],"created_us":1,"updated_us":1}'
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO operator_state VALUES ('managed_agent:old', ?, 0)", (old,))
    found = await backend.managed_agents.get("old")
    assert found == ManagedAgent(id="old", created_us=1, updated_us=1)
    assert found.memory is None
    backend.close()


async def test_a_memory_switch_that_is_not_a_boolean_is_a_damaged_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    backend = sqlite_backend(path)
    await backend.managed_agents.list()
    bad = '{"id":"bad","agent":"simple","memory":"yes"}'
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO operator_state VALUES ('managed_agent:bad', ?, 0)", (bad,))
    with pytest.raises(SessionStoreCorruptError, match="true, false or null"):
        await backend.managed_agents.get("bad")
    backend.close()
