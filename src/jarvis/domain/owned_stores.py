"""The stores as one run of a definition sees them: every write it makes names its owner.

An operator's tick writes through many hands (its own end, ``memory_store``, the monitor's
memory); handing it these views instead of the stores makes each of those writes apply
only while the operator it started for is stored (see :mod:`jarvis.domain.owners`),
without any of them having to remember to say so. Reads, deletes and leases pass through.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from jarvis.domain.json_types import JSONValue
from jarvis.domain.owners import Owner
from jarvis.domain.ports import OperatorStorePort, SessionStorePort
from jarvis.domain.sessions.records import PAGE_SIZE, SessionInfo, SessionMessage, SessionPage
from jarvis.domain.sessions.store_defaults import MessagesFromRecords


class OwnedOperatorStore:
    """``store``, whose state writes are ``owner``'s."""

    def __init__(self, store: OperatorStorePort, owner: Owner) -> None:
        self.store = store
        self.owner = owner

    async def get_state(self, key: str) -> JSONValue | None:
        return await self.store.get_state(key)

    async def put_state(self, key: str, value: JSONValue, *, owner: Owner | None = None) -> None:
        await self.store.put_state(key, value, owner=owner or self.owner)

    async def put_state_if_absent(
        self, key: str, value: JSONValue, *, owner: Owner | None = None
    ) -> bool:
        return await self.store.put_state_if_absent(key, value, owner=owner or self.owner)

    async def delete_state(self, prefix: str, *, owner: Owner | None = None) -> int:
        return await self.store.delete_state(prefix, owner=owner)

    async def delete_key(self, key: str, *, owner: Owner | None = None) -> bool:
        return await self.store.delete_key(key, owner=owner)

    async def state_keys(self, prefix: str) -> list[str]:
        return await self.store.state_keys(prefix)

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        return await self.store.acquire_lease(name, holder, ttl_seconds)

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        return await self.store.renew_lease(name, holder, ttl_seconds)

    async def release_lease(self, name: str, holder: str) -> None:
        await self.store.release_lease(name, holder)

    async def claim_tick(
        self, operator_id: str, tick_us: int, holder: str, ttl_seconds: float
    ) -> bool:
        return await self.store.claim_tick(operator_id, tick_us, holder, ttl_seconds)

    async def complete_tick(self, operator_id: str, tick_us: int, holder: str) -> bool:
        return await self.store.complete_tick(operator_id, tick_us, holder)


class OwnedSessionStore(MessagesFromRecords):
    """``store``, whose appends are ``owner``'s."""

    def __init__(self, store: SessionStorePort, owner: Owner) -> None:
        self.store = store
        self.owner = owner

    async def load_records(
        self, session_id: str, *, limit: int | None = None
    ) -> tuple[SessionMessage, ...]:
        return await self.store.load_records(session_id, limit=limit)

    def iter_records(
        self, session_id: str, *, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[SessionMessage]:
        return self.store.iter_records(session_id, page_size=page_size)

    async def load_page(
        self, session_id: str, *, limit: int, before: int | None = None
    ) -> SessionPage:
        return await self.store.load_page(session_id, limit=limit, before=before)

    async def append_records(
        self, session_id: str, records: Sequence[SessionMessage], *, owner: Owner | None = None
    ) -> None:
        await self.store.append_records(session_id, records, owner=owner or self.owner)

    async def sessions(self) -> list[str]:
        return await self.store.sessions()

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        return await self.store.list_sessions(limit=limit)

    async def delete(self, session_id: str, *, owner: Owner | None = None) -> None:
        await self.store.delete(session_id, owner=owner)
