"""The shipped memory fake passes the memory contract."""

from __future__ import annotations

import pytest

from contracts.memory_contract import MemoryContract
from jarvis.testing import InMemoryMemory


class TestInMemoryMemory(MemoryContract[InMemoryMemory]):
    @pytest.fixture
    def memory(self) -> InMemoryMemory:
        return InMemoryMemory()
