"""``InMemoryOperatorStore``: operator state and leases kept in dicts."""

from __future__ import annotations

import time
from collections.abc import Callable

from jarvis.domain.json_types import JSONValue
from jarvis.domain.operator_leases import TicksClaimedByLeases
from jarvis.domain.operators import (
    COMPLETED_US,
    DEFINITION_PREFIX,
    check_prefix,
    check_state_key,
    decode_state,
    encode_state,
    lease_ttl_us,
    tick_lease,
)
from jarvis.domain.owners import Owner, OwnerGoneError, holds


class InMemoryOperatorStore(TicksClaimedByLeases):
    """Behaves like the real stores (same key rules, same size bound), without a database.

    ``clock`` (seconds since the epoch) is the store's clock for lease expiry, so tests can
    move time on instead of waiting.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._state: dict[str, str] = {}
        self._leases: dict[str, tuple[str, int]] = {}

    def _now_us(self) -> int:
        return round(self.clock() * 1_000_000)

    async def get_state(self, key: str) -> JSONValue | None:
        text = self._state.get(check_state_key(key))
        return None if text is None else decode_state(text)

    def holds(self, owner: Owner) -> bool:
        """Whether ``owner``'s very definition is stored here (an operator's, whose
        definition lives in this store); for a vacancy, whether none is. A key that is no
        operator's definition is never held (another store answers for it)."""
        if not owner.key.startswith(DEFINITION_PREFIX):
            return False
        return holds(self._state.get(owner.key), owner)

    def _check(self, owner: Owner | None) -> None:
        """Refuse a call for ``owner`` unless its very definition is stored here."""
        if owner is not None and not self.holds(owner):
            raise OwnerGoneError(owner)

    async def put_state(self, key: str, value: JSONValue, *, owner: Owner | None = None) -> None:
        text = encode_state(value)
        self._check(owner)
        self._state[check_state_key(key)] = text

    async def put_state_if_absent(
        self, key: str, value: JSONValue, *, owner: Owner | None = None
    ) -> bool:
        text = encode_state(value)
        self._check(owner)
        if check_state_key(key) in self._state:
            return False
        self._state[key] = text  # no await since the check: nothing came between
        return True

    async def delete_state(self, prefix: str, *, owner: Owner | None = None) -> int:
        check_prefix(prefix)
        self._check(owner)
        doomed = [key for key in self._state if key.startswith(prefix)]
        for key in doomed:
            del self._state[key]
        return len(doomed)

    async def delete_key(self, key: str, *, owner: Owner | None = None) -> bool:
        check_state_key(key)
        self._check(owner)
        return self._state.pop(key, None) is not None

    async def state_keys(self, prefix: str) -> list[str]:
        return sorted(
            (k for k in self._state if k.startswith(check_state_key(prefix))),
            key=lambda k: k.encode(),
        )

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        check_state_key(name)
        ttl, now = lease_ttl_us(ttl_seconds), self._now_us()
        current = self._leases.get(name)
        if current is not None and current[0] != holder and current[1] > now:
            return False
        if current is not None and current[1] == COMPLETED_US:
            return False
        self._leases[name] = (holder, now + ttl)
        return True

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        check_state_key(name)
        ttl = lease_ttl_us(ttl_seconds)
        current = self._leases.get(name)
        if current is None or current[0] != holder or current[1] == COMPLETED_US:
            return False
        self._leases[name] = (holder, self._now_us() + ttl)
        return True

    async def release_lease(self, name: str, holder: str) -> None:
        current = self._leases.get(check_state_key(name))
        if current is not None and current[0] == holder and current[1] != COMPLETED_US:
            del self._leases[name]

    async def complete_tick(self, operator_id: str, tick_us: int, holder: str) -> bool:
        name = tick_lease(operator_id, tick_us)
        current = self._leases.get(name)
        if current is None or current[0] != holder:
            return False
        self._leases[name] = (holder, COMPLETED_US)
        prefix = tick_lease(operator_id, 0)[:-20]
        for other, (_, expiry) in list(self._leases.items()):
            if other.startswith(prefix) and other < name and expiry == COMPLETED_US:
                del self._leases[other]
        return True
