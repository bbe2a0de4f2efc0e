"""The behaviour every ManagedAgentStorePort implementation shows (fake and real alike)."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.managed_agents import MAX_DEFINITION_BYTES, ManagedAgent, ManagedAgentStorePort

StoreT = TypeVar("StoreT", bound=ManagedAgentStorePort)


def _agent(agent_id: str = "a1", **changes: object) -> ManagedAgent:
    fields: dict[str, object] = {
        "id": agent_id,
        "name": "Researcher ✓",
        "agent": "orchestrator",
        "model": "qwen3:8b",
        "system_prompt": "Be brief.\nÜnïcode kept.",
        "tools": ("calculator", "think"),
        "persona": "work",
        "temperature": 0.25,
        "max_tokens": 512,
        "max_turns": 4,
        "agent_options": {"tool_choice": "auto", "nested": {"list": [1, 2.5, None, True]}},
        "created_us": 1_700_000_000_000_000,
        "updated_us": 1_700_000_000_000_001,
    }
    fields.update(changes)
    return ManagedAgent(**fields)  # type: ignore[arg-type]


class ManagedAgentStoreContract(Generic[StoreT]):
    """Subclass with a ``store`` fixture returning a fresh, empty store."""

    @pytest.fixture
    def store(self) -> StoreT:
        raise NotImplementedError("subclass must provide the `store` fixture")

    async def test_an_unknown_id_is_none(self, store: StoreT) -> None:
        assert await store.get("nobody") is None
        assert await store.list() == []
        assert await store.delete("nobody") is False

    async def test_a_definition_round_trips_exactly(self, store: StoreT) -> None:
        agent = _agent()
        await store.put(agent)
        assert await store.get("a1") == agent

    async def test_defaults_round_trip(self, store: StoreT) -> None:
        agent = ManagedAgent(id="plain")
        await store.put(agent)
        assert await store.get("plain") == agent

    async def test_put_replaces(self, store: StoreT) -> None:
        await store.put(_agent())
        changed = _agent(system_prompt="Other.", tools=(), max_turns=None)
        await store.put(changed)
        assert await store.get("a1") == changed
        assert len(await store.list()) == 1

    async def test_list_is_oldest_first(self, store: StoreT) -> None:
        await store.put(_agent("b", created_us=2))
        await store.put(_agent("c", created_us=1))
        await store.put(_agent("a", created_us=2))
        assert [a.id for a in await store.list()] == ["c", "a", "b"]

    async def test_delete_forgets_only_that_one(self, store: StoreT) -> None:
        await store.put(_agent("x"))
        await store.put(_agent("y"))
        assert await store.delete("x") is True
        assert await store.get("x") is None
        assert [a.id for a in await store.list()] == ["y"]

    @pytest.mark.parametrize("bad", ["", "../etc", "a b", "x" * 65, "é", "a:b"])
    async def test_invalid_ids_are_refused(self, store: StoreT, bad: str) -> None:
        with pytest.raises(ConfigurationError):
            await store.get(bad)
        with pytest.raises(ConfigurationError):
            await store.put(ManagedAgent(id=bad))
        with pytest.raises(ConfigurationError):
            await store.delete(bad)

    async def test_an_oversized_definition_is_refused_and_nothing_stored(
        self, store: StoreT
    ) -> None:
        with pytest.raises(ConfigurationError):
            await store.put(_agent(system_prompt="x" * (MAX_DEFINITION_BYTES + 1)))
        assert await store.get("a1") is None

    async def test_concurrent_puts_all_land(self, store: StoreT) -> None:
        await asyncio.gather(*(store.put(_agent(f"n{i}", created_us=i)) for i in range(20)))
        assert [a.id for a in await store.list()] == [f"n{i}" for i in range(20)]
