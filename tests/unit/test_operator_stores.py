"""The operator-store contract on the in-memory fake and on SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.operator_store_contract import OperatorStoreContract
from jarvis.adapters.sqlite_sessions import SqliteSessionStore
from jarvis.adapters.sqlite_sessions.operators import SqliteOperatorStore
from jarvis.testing.operators import InMemoryOperatorStore


class TestInMemoryOperatorStore(OperatorStoreContract[InMemoryOperatorStore]):
    @pytest.fixture
    def store(self) -> InMemoryOperatorStore:
        return InMemoryOperatorStore()


class TestSqliteOperatorStore(OperatorStoreContract[SqliteOperatorStore]):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteOperatorStore]:
        sessions = SqliteSessionStore(tmp_path / "sessions.db")
        yield SqliteOperatorStore(sessions)
        sessions.close()


async def test_sqlite_state_is_shared_by_two_stores_on_one_file(tmp_path: Path) -> None:
    first = SqliteOperatorStore(SqliteSessionStore(tmp_path / "s.db"))
    second = SqliteOperatorStore(SqliteSessionStore(tmp_path / "s.db"))
    await first.put_state("operator:a:state", {"seen": 1})
    assert await second.get_state("operator:a:state") == {"seen": 1}
    assert await first.acquire_lease("run:a", "p1", 60) is True
    assert await second.acquire_lease("run:a", "p2", 60) is False
