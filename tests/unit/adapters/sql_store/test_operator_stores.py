"""The operator-store contract on the in-memory fake (the SQL stores run it on both drivers
in ``tests/integration/test_sql_store_contracts.py``)."""

from __future__ import annotations

import pytest

from contracts.operator_store_contract import OperatorStoreContract
from jarvis.testing.operators import InMemoryOperatorStore


class TestInMemoryOperatorStore(OperatorStoreContract[InMemoryOperatorStore]):
    @pytest.fixture
    def store(self) -> InMemoryOperatorStore:
        return InMemoryOperatorStore()
