"""The shipped session-store fake passes the session-store contract."""

from __future__ import annotations

import pytest

from contracts.session_store_contract import SessionStoreContract
from jarvis.testing.sessions import InMemorySessionStore


class TestInMemorySessionStore(SessionStoreContract[InMemorySessionStore]):
    @pytest.fixture
    def store(self) -> InMemorySessionStore:
        return InMemorySessionStore()
