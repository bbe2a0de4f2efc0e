"""The shipped REPL test double passes the REPL contract (well-behaved code only: it has no
isolation and no limits by design)."""

from __future__ import annotations

import pytest

from contracts.repl_contract import ReplContract
from jarvis.testing.repl import InMemoryRepl


class TestInMemoryRepl(ReplContract[InMemoryRepl]):
    @pytest.fixture
    def repl(self) -> InMemoryRepl:
        return InMemoryRepl()

    def test_it_says_it_is_not_isolated(self, repl: InMemoryRepl) -> None:
        isolation = repl.isolation()
        assert not isolation.isolated
        assert "NETWORK NOT ISOLATED" in isolation.describe()
