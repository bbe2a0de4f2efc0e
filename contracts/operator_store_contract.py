"""The behaviour every OperatorStorePort implementation shows (fake and real alike)."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONValue
from jarvis.domain.operators import (
    DEFINITION_PREFIX,
    MAX_STATE_BYTES,
    Operator,
    key_prefix,
    operator_to_record,
    owner_of,
    state_key,
)
from jarvis.domain.owners import OwnerGoneError, vacancy
from jarvis.domain.ports import OperatorStorePort

StoreT = TypeVar("StoreT", bound=OperatorStorePort)

EXPIRED_AFTER = 0.3
"""How long the expiry tests wait past a 0.05 s lease: longer is always expired."""

DEFINITION = DEFINITION_PREFIX + "op1"


async def added(store: OperatorStorePort, operator: Operator, state: str) -> None:
    """Store ``operator``'s definition as ``OperatorService.add`` does, and its state."""
    await store.put_state(DEFINITION, operator_to_record(operator))
    await store.put_state(state_key(operator.id), state, owner=owner_of(operator))


class OperatorStoreContract(Generic[StoreT]):
    """Subclass with a ``store`` fixture returning a fresh, empty store; a store on a
    database others can share overrides ``second_store`` (another connection to it, as
    another process would open)."""

    @pytest.fixture
    def store(self) -> StoreT:
        raise NotImplementedError("subclass must provide the `store` fixture")

    @pytest.fixture
    def second_store(self, store: StoreT) -> StoreT:
        """What another process sees of ``store``'s state: ``store`` itself here."""
        return store

    # -- state ---------------------------------------------------------------------------

    async def test_an_unknown_key_is_none(self, store: StoreT) -> None:
        assert await store.get_state("operator:x:state") is None
        assert await store.state_keys("operator:") == []

    async def test_a_value_round_trips_exactly(self, store: StoreT) -> None:
        value: JSONValue = {
            "n": 3,
            "f": 2.5,
            "ok": True,
            "none": None,
            "list": [1, "ü 🚀", {"a": []}],
            "nul": "a\x00b",
            "quote": "'; DROP TABLE x; --",
        }
        await store.put_state("operator:a:state", value)
        assert await store.get_state("operator:a:state") == value
        await store.put_state("operator:a:text", "plain")
        assert await store.get_state("operator:a:text") == "plain"

    async def test_put_replaces(self, store: StoreT) -> None:
        await store.put_state("operator:a:state", {"v": 1})
        await store.put_state("operator:a:state", [2])
        assert await store.get_state("operator:a:state") == [2]

    async def test_concurrent_puts_leave_one_whole_value(self, store: StoreT) -> None:
        values: list[JSONValue] = [{"writer": n, "payload": "x" * 1000} for n in range(20)]
        await asyncio.gather(*(store.put_state("operator:a:state", v) for v in values))
        assert await store.get_state("operator:a:state") in values

    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), {"x": [float("-inf")]}])
    async def test_non_finite_numbers_are_refused(self, store: StoreT, bad: object) -> None:
        with pytest.raises(ConfigurationError):
            await store.put_state("operator:a:state", bad)  # type: ignore[arg-type]
        assert await store.get_state("operator:a:state") is None

    async def test_an_oversized_value_is_refused(self, store: StoreT) -> None:
        with pytest.raises(ConfigurationError, match="too large"):
            await store.put_state("operator:a:state", "x" * (MAX_STATE_BYTES + 1))
        assert await store.get_state("operator:a:state") is None

    @pytest.mark.parametrize("bad", ["", "a b", "é", "x" * 201, "tab\there", "new\nline"])
    async def test_invalid_keys_are_refused(self, store: StoreT, bad: str) -> None:
        with pytest.raises(ConfigurationError):
            await store.put_state(bad, 1)
        with pytest.raises(ConfigurationError):
            await store.get_state(bad)

    async def test_keys_by_prefix_sorted_and_deleted(self, store: StoreT) -> None:
        for key in ("operator:b:state", "operator:a:z", "operator:a:A", "operator:ab:state"):
            await store.put_state(key, 1)
        assert await store.state_keys("operator:a:") == ["operator:a:A", "operator:a:z"]
        assert await store.delete_state("operator:a:") == 2
        assert await store.state_keys("operator:") == ["operator:ab:state", "operator:b:state"]
        assert await store.get_state("operator:ab:state") == 1

    async def test_one_key_is_deleted_alone(self, store: StoreT) -> None:
        for key in ("operator-def:op1", "operator-def:op10", "operator-def:op1x"):
            await store.put_state(key, 1)
        assert await store.delete_key("operator-def:op1") is True
        assert await store.delete_key("operator-def:op1") is False
        assert await store.state_keys("operator-def:") == ["operator-def:op10", "operator-def:op1x"]
        with pytest.raises(ConfigurationError):
            await store.delete_key("a b")

    async def test_a_removal_deletes_the_state_and_definition_it_read(self, store: StoreT) -> None:
        read = Operator(id="op1", prompt="Task.", incarnation="t1")
        await added(store, read, "kept")
        await store.put_state("operator:op10:state", "another's")
        other = Operator(id="op1", prompt="Task.", incarnation="t2")  # not the one stored
        with pytest.raises(OwnerGoneError, match="operator 'op1'"):
            await store.delete_state(key_prefix("op1"), owner=owner_of(other))
        with pytest.raises(OwnerGoneError):
            await store.delete_key(DEFINITION, owner=owner_of(other))
        assert await store.get_state(state_key("op1")) == "kept"
        assert await store.delete_state(key_prefix("op1"), owner=owner_of(read)) == 1
        assert await store.delete_key(DEFINITION, owner=owner_of(read)) is True
        assert await store.state_keys("operator") == ["operator:op10:state"]
        with pytest.raises(OwnerGoneError):  # gone already
            await store.delete_key(DEFINITION, owner=owner_of(read))
        legacy = Operator(id="op1", prompt="Task.")  # stored before definitions had one
        await store.put_state(DEFINITION, operator_to_record(legacy))
        assert await store.delete_key(DEFINITION, owner=owner_of(legacy)) is True
        assert await store.state_keys("operator-def:") == []

    async def test_a_stale_removal_leaves_an_operator_added_again_alone(
        self, store: StoreT
    ) -> None:
        """Read, then removed and added again by another client: the removal of what was
        read deletes neither the new definition nor its state; one of the definition
        stored now deletes both."""
        read = Operator(id="op1", prompt="Old task.", incarnation="old")
        await added(store, read, "old state")
        assert await store.delete_key(DEFINITION, owner=owner_of(read)) is True  # another's
        new = Operator(id="op1", prompt="New task.", incarnation="new")
        await added(store, new, "new state")
        with pytest.raises(OwnerGoneError, match="operator 'op1' was deleted"):
            await store.delete_state(key_prefix("op1"), owner=owner_of(read))
        with pytest.raises(OwnerGoneError):
            await store.delete_key(DEFINITION, owner=owner_of(read))
        assert await store.get_state(DEFINITION) == operator_to_record(new)
        assert await store.get_state(state_key("op1")) == "new state"
        assert await store.delete_state(key_prefix("op1"), owner=owner_of(new)) == 1
        assert await store.delete_key(DEFINITION, owner=owner_of(new)) is True
        assert await store.state_keys("operator") == []

    # -- adding a definition ---------------------------------------------------------------

    async def test_put_if_absent_writes_only_where_nothing_is(self, store: StoreT) -> None:
        first = operator_to_record(Operator(id="op1", prompt="First.", incarnation="t1"))
        second = operator_to_record(Operator(id="op1", prompt="Second.", incarnation="t2"))
        assert await store.put_state_if_absent(DEFINITION, first) is True
        assert await store.put_state_if_absent(DEFINITION, second) is False
        assert await store.get_state(DEFINITION) == first  # untouched
        assert await store.delete_key(DEFINITION) is True
        assert await store.put_state_if_absent(DEFINITION, second) is True  # free again
        assert await store.get_state(DEFINITION) == second

    async def test_put_if_absent_refuses_what_put_refuses(self, store: StoreT) -> None:
        with pytest.raises(ConfigurationError):
            await store.put_state_if_absent("a b", 1)
        with pytest.raises(ConfigurationError):
            await store.put_state_if_absent("operator:a:state", float("nan"))
        with pytest.raises(ConfigurationError, match="too large"):
            await store.put_state_if_absent("operator:a:state", "x" * (MAX_STATE_BYTES + 1))
        gone = Operator(id="op1", prompt="Task.", incarnation="t1")  # never stored
        with pytest.raises(OwnerGoneError, match="operator 'op1' was deleted"):
            await store.put_state_if_absent(state_key("op1"), 1, owner=owner_of(gone))
        assert await store.state_keys("operator") == []

    async def test_concurrent_puts_if_absent_one_wins(self, store: StoreT) -> None:
        values: list[JSONValue] = [f"writer {n}" for n in range(20)]
        won = await asyncio.gather(*(store.put_state_if_absent(DEFINITION, v) for v in values))
        assert won.count(True) == 1
        assert await store.get_state(DEFINITION) == values[won.index(True)]

    async def test_puts_if_absent_through_two_connections_one_wins(
        self, store: StoreT, second_store: StoreT
    ) -> None:
        """Two processes adding one operator at once on one database: one is told it
        added it, every other that it exists, and all read the winner's."""
        values: list[JSONValue] = [f"writer {n}" for n in range(10)]
        stores = (store, second_store)
        won = await asyncio.gather(
            *(stores[n % 2].put_state_if_absent(DEFINITION, v) for n, v in enumerate(values))
        )
        assert won.count(True) == 1
        assert await store.get_state(DEFINITION) == values[won.index(True)]
        assert await second_store.get_state(DEFINITION) == values[won.index(True)]

    async def test_leftovers_are_cleared_for_a_vacancy_only_while_no_definition_is(
        self, store: StoreT
    ) -> None:
        """An addition clears what an earlier operator of the name left for the name's
        vacancy: never the state of one added meanwhile by another process."""
        op = Operator(id="op1", prompt="Task.", incarnation="t1")
        await store.put_state(state_key("op1"), "left by an earlier one")
        assert await store.delete_state(key_prefix("op1"), owner=vacancy(owner_of(op))) == 1
        assert await store.state_keys("operator") == []  # the check left no row behind
        await added(store, op, "the new one's")
        with pytest.raises(OwnerGoneError, match="operator 'op1' was created meanwhile"):
            await store.delete_state(key_prefix("op1"), owner=vacancy(owner_of(op)))
        assert await store.get_state(state_key("op1")) == "the new one's"
        assert await store.get_state(DEFINITION) == operator_to_record(op)

    async def test_a_short_prefix_cannot_delete_everything(self, store: StoreT) -> None:
        await store.put_state("operator:a:state", 1)
        with pytest.raises(ConfigurationError):
            await store.delete_state("")
        with pytest.raises(ConfigurationError):
            await store.delete_state("op")
        assert await store.get_state("operator:a:state") == 1

    # -- leases --------------------------------------------------------------------------

    async def test_one_holder_at_a_time(self, store: StoreT) -> None:
        assert await store.acquire_lease("run:a", "h1", 60) is True
        assert await store.acquire_lease("run:a", "h2", 60) is False
        assert await store.acquire_lease("run:a", "h1", 60) is True  # its own: extended
        assert await store.renew_lease("run:a", "h2", 60) is False
        assert await store.renew_lease("run:a", "h1", 60) is True
        await store.release_lease("run:a", "h2")  # not h2's: nothing happens
        assert await store.acquire_lease("run:a", "h2", 60) is False
        await store.release_lease("run:a", "h1")
        assert await store.acquire_lease("run:a", "h2", 60) is True
        assert await store.renew_lease("run:a", "h1", 60) is False

    async def test_an_expired_lease_can_be_taken(self, store: StoreT) -> None:
        assert await store.acquire_lease("run:a", "h1", 0.05) is True
        await asyncio.sleep(EXPIRED_AFTER)
        assert await store.acquire_lease("run:a", "h2", 60) is True
        assert await store.renew_lease("run:a", "h1", 60) is False

    async def test_concurrent_takers_one_wins(self, store: StoreT) -> None:
        won = await asyncio.gather(*(store.acquire_lease("run:a", f"h{n}", 60) for n in range(20)))
        assert won.count(True) == 1

    @pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), 1e12])
    async def test_invalid_ttls_are_refused(self, store: StoreT, ttl: float) -> None:
        with pytest.raises(ConfigurationError):
            await store.acquire_lease("run:a", "h1", ttl)

    # -- ticks ---------------------------------------------------------------------------

    async def test_a_tick_is_claimed_once(self, store: StoreT) -> None:
        won = await asyncio.gather(*(store.claim_tick("a", 1_000, f"h{n}", 60) for n in range(10)))
        assert won.count(True) == 1
        winner = f"h{won.index(True)}"
        assert await store.complete_tick("a", 1_000, "intruder") is False
        assert await store.complete_tick("a", 1_000, winner) is True
        assert await store.claim_tick("a", 1_000, winner, 60) is False
        assert await store.claim_tick("a", 1_000, "h-late", 60) is False

    async def test_a_completed_tick_never_expires(self, store: StoreT) -> None:
        assert await store.claim_tick("a", 5, "h1", 0.05) is True
        assert await store.complete_tick("a", 5, "h1") is True
        await asyncio.sleep(EXPIRED_AFTER)
        assert await store.claim_tick("a", 5, "h2", 60) is False
        assert await store.renew_lease("tick:a:00000000000000000005", "h1", 60) is False

    async def test_an_abandoned_claim_can_be_taken_again(self, store: StoreT) -> None:
        assert await store.claim_tick("a", 7, "crashed", 0.05) is True
        await asyncio.sleep(EXPIRED_AFTER)
        assert await store.claim_tick("a", 7, "h2", 60) is True
        assert await store.complete_tick("a", 7, "crashed") is False
        assert await store.complete_tick("a", 7, "h2") is True

    async def test_ticks_of_other_operators_and_times_are_separate(self, store: StoreT) -> None:
        assert await store.claim_tick("a", 1, "h1", 60) is True
        assert await store.claim_tick("a", 2, "h2", 60) is True
        assert await store.claim_tick("b", 1, "h2", 60) is True
        assert await store.complete_tick("a", 2, "h2") is True
        assert await store.claim_tick("a", 1, "h3", 60) is False  # still h1's, not completed
