"""The behaviour every ApprovalStorePort implementation shows (fake and real alike)."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import pytest

from jarvis.domain.approval_store import ApprovalStorePort, StoredApproval

StoreT = TypeVar("StoreT", bound=ApprovalStorePort)


def pending(approval_id: str = "call_1", *, agent: str = "a1", **changes: object) -> StoredApproval:
    fields: dict[str, object] = {
        "agent_id": agent,
        "id": approval_id,
        "tool": "delete_file",
        "arguments": '{"path":"ä.txt"}',
        "request": '{"reason":"marked destructive"}',
        "created_us": 1_700_000_000_000_000,
    }
    fields.update(changes)
    return StoredApproval(**fields)  # type: ignore[arg-type]


class ApprovalStoreContract(Generic[StoreT]):
    """Subclass with a ``store`` fixture returning a fresh, empty store."""

    @pytest.fixture
    def store(self) -> StoreT:
        raise NotImplementedError("subclass must provide the `store` fixture")

    async def test_a_recorded_call_is_pending_and_round_trips(self, store: StoreT) -> None:
        added = await store.add(pending())
        assert added == pending()
        assert await store.get("a1", "call_1") == pending()
        assert await store.get("a1", "other") is None
        assert await store.get("a2", "call_1") is None
        assert added.to_json()["reason"] == "marked destructive"

    async def test_the_same_call_is_found_again_until_used(self, store: StoreT) -> None:
        await store.add(pending("call_1"))
        again = await store.add(pending("call_9", created_us=5))
        assert again.id == "call_1"  # a run started again waits on the same approval
        other = await store.add(pending("call_2", arguments='{"path":"b"}'))
        assert other.id == "call_2"
        elsewhere = await store.add(pending("call_3", agent="a2"))
        assert elsewhere.id == "call_3"
        await store.decide("a1", "call_1", allow=True, reason="", now_us=7)
        assert (await store.add(pending("call_9"))).status == "allowed"
        assert await store.use("a1", "call_1") is not None
        assert (await store.add(pending("call_9"))).id == "call_9"

    async def test_decide_once_then_use_once(self, store: StoreT) -> None:
        await store.add(pending())
        decided = await store.decide("a1", "call_1", allow=True, reason="fine", now_us=9)
        assert decided is not None
        assert (decided.status, decided.reason, decided.decided_us) == ("allowed", "fine", 9)
        again = await store.decide("a1", "call_1", allow=False, reason="no", now_us=10)
        assert again is not None
        assert again.status == "allowed"  # a decision is never changed
        assert await store.decide("a1", "nobody", allow=True, reason="", now_us=1) is None
        used = await store.use("a1", "call_1")
        assert used is not None
        assert used.allowed
        assert await store.use("a1", "call_1") is None
        row = await store.get("a1", "call_1")
        assert row is not None
        assert row.status == "used"

    async def test_a_pending_approval_cannot_be_used_and_expires_once(self, store: StoreT) -> None:
        await store.add(pending())
        assert await store.use("a1", "call_1") is None
        assert await store.expire("a1", "call_1") is True
        assert await store.expire("a1", "call_1") is False
        late = await store.decide("a1", "call_1", allow=True, reason="", now_us=1)
        assert late is not None
        assert late.status == "expired"

    async def test_concurrent_uses_take_a_decision_exactly_once(self, store: StoreT) -> None:
        await store.add(pending())
        await store.decide("a1", "call_1", allow=True, reason="", now_us=1)
        taken = await asyncio.gather(*(store.use("a1", "call_1") for _ in range(8)))
        assert sum(row is not None for row in taken) == 1

    async def test_pending_lists_the_open_ones_oldest_first_and_forget(self, store: StoreT) -> None:
        for index in range(4):
            await store.add(pending(f"c{index}", arguments=str(index), created_us=10 - index))
        await store.decide("a1", "c0", allow=False, reason="", now_us=1)
        await store.use("a1", "c0")
        await store.add(pending("x", agent="a2"))
        listed = await store.pending("a1", limit=10)
        assert [row.id for row in listed] == ["c3", "c2", "c1"]
        assert [row.id for row in await store.pending("a1", limit=2)] == ["c3", "c2"]
        await store.forget("a1")
        assert await store.pending("a1", limit=10) == []
        assert await store.get("a1", "c0") is None
        assert [row.id for row in await store.pending("a2", limit=10)] == ["x"]
