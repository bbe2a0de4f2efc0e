"""Pending approvals: the in-memory fake passes the contract the SQL stores pass on both
drivers (``tests/integration/test_sql_store_contracts.py``)."""

from __future__ import annotations

import pytest

from contracts.approval_store_contract import ApprovalStoreContract
from jarvis.testing import InMemoryApprovalStore


class TestInMemoryApprovalStore(ApprovalStoreContract[InMemoryApprovalStore]):
    @pytest.fixture
    def store(self) -> InMemoryApprovalStore:
        return InMemoryApprovalStore()
