"""What the operator stores share beyond their storage: a tick is claimed through its lease,
so ``claim_tick`` is written once here for the real stores and the fake."""

from __future__ import annotations

from jarvis.domain.operators import tick_lease


class TicksClaimedByLeases:
    """``claim_tick`` of the operator store port, the same in every store: a tick is
    claimed by acquiring its lease (:func:`tick_lease`)."""

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        raise NotImplementedError

    async def claim_tick(
        self, operator_id: str, tick_us: int, holder: str, ttl_seconds: float
    ) -> bool:
        return await self.acquire_lease(tick_lease(operator_id, tick_us), holder, ttl_seconds)
