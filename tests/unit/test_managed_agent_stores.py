"""Managed agent definitions: the in-memory fake and the SQLite store pass one contract."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.managed_agent_store_contract import ManagedAgentStoreContract
from jarvis.adapters.sqlite_sessions import SqliteSessionStore
from jarvis.adapters.sqlite_sessions.managed_agents import SqliteManagedAgentStore
from jarvis.domain.managed_agents import ManagedAgent, session_id_of
from jarvis.domain.messages import Message
from jarvis.domain.sessions import SessionStoreCorruptError
from jarvis.testing.managed_agents import InMemoryManagedAgentStore


class TestInMemoryManagedAgentStore(ManagedAgentStoreContract[InMemoryManagedAgentStore]):
    @pytest.fixture
    def store(self) -> InMemoryManagedAgentStore:
        return InMemoryManagedAgentStore()


class TestSqliteManagedAgentStore(ManagedAgentStoreContract[SqliteManagedAgentStore]):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteManagedAgentStore]:
        sessions = SqliteSessionStore(tmp_path / "sessions.db")
        yield SqliteManagedAgentStore(sessions)
        sessions.close()


async def test_definitions_share_the_session_database_and_survive_a_reopen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    sessions = SqliteSessionStore(path)
    await SqliteManagedAgentStore(sessions).put(ManagedAgent(id="a", agent="orchestrator"))
    await sessions.append(session_id_of("a"), [Message.user("hi")])
    sessions.close()
    again = SqliteSessionStore(path)
    try:
        assert (await SqliteManagedAgentStore(again).get("a")) == ManagedAgent(
            id="a", agent="orchestrator"
        )
        assert await again.load(session_id_of("a")) == (Message.user("hi"),)
        assert await again.sessions() == ["managed-agent:a"]  # definitions are not sessions
    finally:
        again.close()


async def test_a_damaged_definition_is_a_store_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    sessions = SqliteSessionStore(path)
    store = SqliteManagedAgentStore(sessions)
    await store.list()  # creates the schema
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO operator_state VALUES ('managed_agent:bad', '{\"id\": 3', 0)")
    with pytest.raises(SessionStoreCorruptError):
        await store.list()
    with pytest.raises(SessionStoreCorruptError):
        await store.get("bad")
    sessions.close()
