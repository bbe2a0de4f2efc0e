"""Pending approvals: the in-memory fake and the SQLite store pass one contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.approval_store_contract import ApprovalStoreContract, pending
from jarvis.adapters.sqlite_sessions import SqliteSessionStore
from jarvis.adapters.sqlite_sessions.approvals import SqliteApprovalStore
from jarvis.testing import InMemoryApprovalStore


class TestInMemoryApprovalStore(ApprovalStoreContract[InMemoryApprovalStore]):
    @pytest.fixture
    def store(self) -> InMemoryApprovalStore:
        return InMemoryApprovalStore()


class TestSqliteApprovalStore(ApprovalStoreContract[SqliteApprovalStore]):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteApprovalStore]:
        sessions = SqliteSessionStore(tmp_path / "sessions.db")
        yield SqliteApprovalStore(sessions)
        sessions.close()


async def test_two_connections_to_one_file_take_a_decision_once(tmp_path: Path) -> None:
    first = SqliteSessionStore(tmp_path / "sessions.db")
    second = SqliteSessionStore(tmp_path / "sessions.db")
    try:
        await SqliteApprovalStore(first).add(pending())
        await SqliteApprovalStore(second).decide("a1", "call_1", allow=True, reason="", now_us=1)
        assert await SqliteApprovalStore(first).use("a1", "call_1") is not None
        assert await SqliteApprovalStore(second).use("a1", "call_1") is None
    finally:
        first.close()
        second.close()
