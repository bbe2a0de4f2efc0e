"""The behaviour every ManagedAgentStorePort implementation shows (fake and real alike)."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.managed_agents import MAX_DEFINITION_BYTES, ManagedAgent, ManagedAgentStorePort

StoreT = TypeVar("StoreT", bound=ManagedAgentStorePort)

INCARNATION = "5f3a9c0e1d2b4a68"
"""The incarnation of every :func:`_agent` unless it is given another."""


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
        "memory": True,
        "created_us": 1_700_000_000_000_000,
        "updated_us": 1_700_000_000_000_001,
        "incarnation": INCARNATION,
    }
    fields.update(changes)
    return ManagedAgent(**fields)  # type: ignore[arg-type]


class ManagedAgentStoreContract(Generic[StoreT]):
    """Subclass with a ``store`` fixture returning a fresh, empty store; a store on a
    database others can share overrides ``second_store`` (another connection to it, as
    another process would open)."""

    @pytest.fixture
    def store(self) -> StoreT:
        raise NotImplementedError("subclass must provide the `store` fixture")

    @pytest.fixture
    def second_store(self, store: StoreT) -> StoreT:
        """What another process sees of ``store``'s definitions: ``store`` itself here."""
        return store

    async def test_create_stores_a_definition_only_where_there_is_none(self, store: StoreT) -> None:
        first = _agent()
        assert await store.create(first) is True
        assert await store.get("a1") == first
        second = _agent(system_prompt="Other.", incarnation="0000000000000002")
        assert await store.create(second) is False
        assert await store.get("a1") == first  # untouched: not replaced, not merged
        assert await store.count() == 1
        assert await store.delete("a1", INCARNATION) is True
        assert await store.create(second) is True  # deleted: the id is free again
        assert await store.get("a1") == second

    async def test_create_refuses_what_put_refuses(self, store: StoreT) -> None:
        with pytest.raises(ConfigurationError):
            await store.create(ManagedAgent(id="../etc"))
        with pytest.raises(ConfigurationError):
            await store.create(_agent(system_prompt="x" * (MAX_DEFINITION_BYTES + 1)))
        assert await store.count() == 0

    async def test_concurrent_creations_of_one_id_one_wins(self, store: StoreT) -> None:
        rivals = [_agent(system_prompt=f"Rival {n}.", incarnation=f"{n:016x}") for n in range(20)]
        won = await asyncio.gather(*(store.create(a) for a in rivals))
        assert won.count(True) == 1
        assert await store.get("a1") == rivals[won.index(True)]
        assert await store.count() == 1

    async def test_creations_through_two_connections_one_wins(
        self, store: StoreT, second_store: StoreT
    ) -> None:
        """Two processes (servers, workers) creating one id at once on one database: one
        is told it created the definition, every other that it exists, and all read the
        winner's."""
        rivals = [_agent(system_prompt=f"Rival {n}.", incarnation=f"{n:016x}") for n in range(10)]
        stores = (store, second_store)
        won = await asyncio.gather(*(stores[n % 2].create(a) for n, a in enumerate(rivals)))
        assert won.count(True) == 1
        winner = rivals[won.index(True)]
        assert await store.get("a1") == winner
        assert await second_store.get("a1") == winner

    async def test_an_unknown_id_is_none(self, store: StoreT) -> None:
        assert await store.get("nobody") is None
        assert await store.list() == []
        assert await store.delete("nobody", INCARNATION) is False

    async def test_a_definition_round_trips_exactly(self, store: StoreT) -> None:
        agent = _agent()
        await store.put(agent)
        assert await store.get("a1") == agent

    async def test_defaults_round_trip(self, store: StoreT) -> None:
        agent = ManagedAgent(id="plain")
        await store.put(agent)
        assert await store.get("plain") == agent

    @pytest.mark.parametrize("memory", [True, False, None])
    async def test_the_memory_switch_round_trips_in_all_three_states(
        self, store: StoreT, memory: bool | None
    ) -> None:
        await store.put(_agent("m", memory=memory))
        found = await store.get("m")
        assert found is not None
        assert found.memory is memory
        [listed] = await store.list()
        assert listed.memory is memory

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
        assert await store.delete("x", INCARNATION) is True
        assert await store.get("x") is None
        assert [a.id for a in await store.list()] == ["y"]

    @pytest.mark.parametrize("bad", ["", "../etc", "a b", "x" * 65, "é", "a:b"])
    async def test_invalid_ids_are_refused(self, store: StoreT, bad: str) -> None:
        with pytest.raises(ConfigurationError):
            await store.get(bad)
        with pytest.raises(ConfigurationError):
            await store.put(ManagedAgent(id=bad))
        with pytest.raises(ConfigurationError):
            await store.delete(bad, "")

    async def test_an_oversized_definition_is_refused_and_nothing_stored(
        self, store: StoreT
    ) -> None:
        with pytest.raises(ConfigurationError):
            await store.put(_agent(system_prompt="x" * (MAX_DEFINITION_BYTES + 1)))
        assert await store.get("a1") is None

    async def test_concurrent_puts_all_land(self, store: StoreT) -> None:
        await asyncio.gather(*(store.put(_agent(f"n{i}", created_us=i)) for i in range(20)))
        assert [a.id for a in await store.list()] == [f"n{i}" for i in range(20)]

    async def test_count_is_the_number_of_definitions(self, store: StoreT) -> None:
        assert await store.count() == 0
        for i in range(3):
            await store.put(_agent(f"c{i}"))
        await store.put(_agent("c0", name="replaced"))
        assert await store.count() == 3
        assert await store.delete("c1", INCARNATION) is True
        assert await store.count() == 2

    async def test_pages_walk_every_definition_once_in_order(self, store: StoreT) -> None:
        # equal creation times are ordered by id; ids sort by code point ("B" < "a")
        created = {"a": 5, "B": 5, "c": 1, "d-1": 9, "d_0": 9, "e": 5, "f": 0}
        decoy: dict[str, object] = {"created_us": 99, "note": '"created_us":77'}
        for agent_id, created_us in created.items():  # the record's own time, not a decoy's
            await store.put(_agent(agent_id, created_us=created_us, agent_options=decoy))
        expected = [a.id for a in await store.list()]
        assert expected == ["f", "c", "B", "a", "e", "d-1", "d_0"]
        for size in (1, 2, 3, 7, 8):
            seen: list[str] = []
            after: tuple[int, str] | None = None
            while True:
                page = await store.list(after=after, limit=size)
                assert len(page) <= size
                if not page:
                    break
                seen.extend(a.id for a in page)
                after = (page[-1].created_us, page[-1].id)
            assert seen == expected, size

    async def test_a_page_after_a_deleted_definition_continues(self, store: StoreT) -> None:
        for i in range(4):
            await store.put(_agent(f"p{i}", created_us=i))
        first = await store.list(limit=2)
        assert await store.delete(first[-1].id, first[-1].incarnation) is True
        rest = await store.list(after=(first[-1].created_us, first[-1].id), limit=10)
        assert [a.id for a in rest] == ["p2", "p3"]

    async def test_limit_zero_lists_nothing(self, store: StoreT) -> None:
        await store.put(_agent())
        assert await store.list(limit=0) == []

    async def test_update_changes_only_the_definition_it_read(self, store: StoreT) -> None:
        await store.put(_agent())
        changed = _agent(system_prompt="Other.", max_turns=None)
        assert await store.update(changed) is True
        assert await store.get("a1") == changed
        legacy = ManagedAgent(id="old")  # stored before definitions had an incarnation
        await store.put(legacy)
        assert await store.update(ManagedAgent(id="old", name="renamed")) is True
        assert await store.count() == 2

    async def test_update_never_creates_a_definition(self, store: StoreT) -> None:
        assert await store.update(_agent()) is False
        assert await store.get("a1") is None
        await store.put(_agent())
        assert await store.delete("a1", INCARNATION) is True
        assert await store.update(_agent(system_prompt="Late.")) is False  # deleted meanwhile
        assert await store.get("a1") is None
        assert await store.count() == 0

    async def test_update_leaves_a_definition_created_again_alone(self, store: StoreT) -> None:
        await store.put(_agent())
        assert await store.delete("a1", INCARNATION) is True
        successor = _agent(system_prompt="New.", incarnation="0000000000000002")
        await store.put(successor)
        assert await store.update(_agent(system_prompt="Late.")) is False
        assert await store.get("a1") == successor

    async def test_delete_forgets_only_the_definition_it_read(self, store: StoreT) -> None:
        await store.put(_agent())
        assert await store.delete("a1", "0000000000000009") is False  # not the one stored
        assert await store.get("a1") == _agent()
        assert await store.delete("a1", INCARNATION) is True
        assert await store.get("a1") is None
        assert await store.delete("a1", INCARNATION) is False  # gone already
        legacy = ManagedAgent(id="old")  # stored before definitions had an incarnation
        await store.put(legacy)
        assert await store.delete("old", "") is True
        assert await store.count() == 0

    async def test_a_stale_delete_leaves_a_definition_created_again_alone(
        self, store: StoreT
    ) -> None:
        """Read, then deleted and created again by another client: the deletion of what was
        read removes nothing; one of the definition stored now removes it."""
        read = _agent()
        await store.put(read)
        assert await store.delete("a1", read.incarnation) is True  # the other client's
        successor = _agent(system_prompt="New.", incarnation="0000000000000002")
        await store.put(successor)
        assert await store.delete("a1", read.incarnation) is False
        assert await store.get("a1") == successor
        assert await store.count() == 1
        assert await store.delete("a1", successor.incarnation) is True
        assert await store.get("a1") is None
        assert await store.count() == 0

    async def test_update_refuses_what_put_refuses(self, store: StoreT) -> None:
        await store.put(_agent())
        with pytest.raises(ConfigurationError):
            await store.update(_agent(system_prompt="x" * (MAX_DEFINITION_BYTES + 1)))
        with pytest.raises(ConfigurationError):
            await store.update(ManagedAgent(id="../etc"))
        assert await store.get("a1") == _agent()
