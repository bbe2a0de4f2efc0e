"""``InMemorySessionStore``: conversation history kept in a dict."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from jarvis.domain.owners import Owner
from jarvis.domain.sessions.ids import check_session_id
from jarvis.domain.sessions.records import (
    PAGE_SIZE,
    SessionInfo,
    SessionMessage,
    SessionPage,
    check_page_bounds,
    check_page_size,
    encode_record,
    page_of,
    title_of,
    to_micros,
    utc_now,
)
from jarvis.domain.sessions.store_defaults import MessagesFromRecords, check_limit, newest
from jarvis.testing.owned import Owners, check_owner


@dataclass(slots=True)
class _Session:
    created_at: datetime
    updated_at: datetime
    title: str = ""
    order: int = 0
    records: list[SessionMessage] = field(default_factory=list)


class InMemorySessionStore(MessagesFromRecords):
    """Behaves like the real stores, without touching the disk.

    Each call runs without awaiting, so an append is one unit for every other task.

    ``owners`` says whether a definition is stored (the ``holds`` of the in-memory
    managed-agent or operator store that shares this store's "database"), for the appends
    of a run and the deletions that name their owner; without it such a call is refused,
    as the ``jsonl`` store refuses it.
    """

    def __init__(self, *, owners: Owners | None = None) -> None:
        self._sessions: dict[str, _Session] = {}
        self._clock = 0
        self._owners = owners

    async def load_records(
        self, session_id: str, *, limit: int | None = None
    ) -> tuple[SessionMessage, ...]:
        check_session_id(session_id)
        check_limit(limit)
        session = self._sessions.get(session_id)
        records = session.records if session else []
        return tuple(newest(records, limit))

    async def iter_records(
        self, session_id: str, *, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[SessionMessage]:
        check_session_id(session_id)
        check_page_size(page_size)
        start = 0
        while True:
            session = self._sessions.get(session_id)
            page = session.records[start : start + page_size] if session else []
            for record in page:
                yield record
            if len(page) < page_size:
                return
            start += page_size

    async def load_page(
        self, session_id: str, *, limit: int, before: int | None = None
    ) -> SessionPage:
        check_session_id(session_id)
        check_page_bounds(limit, before)
        session = self._sessions.get(session_id)
        return page_of(session.records if session else [], limit=limit, before=before)

    async def append_records(
        self, session_id: str, records: Sequence[SessionMessage], *, owner: Owner | None = None
    ) -> None:
        check_session_id(session_id)
        if not records:
            return
        for record in records:
            encode_record(record)  # the same size bound as the real stores
        check_owner(self._owners, owner, "session store")
        now = utc_now()
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session(created_at=now, updated_at=now)
        session.records.extend(records)
        session.updated_at = max(now, session.updated_at)
        self._clock += 1
        session.order = self._clock  # the latest append lists first, even within a tick
        if not session.title:
            session.title = title_of(list(records))

    async def sessions(self) -> list[str]:
        return sorted(self._sessions)

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        check_limit(limit)
        items = sorted(self._sessions.items(), key=lambda item: -item[1].order)
        if limit is not None:
            items = items[:limit]
        return [
            SessionInfo(
                id=session_id,
                message_count=len(session.records),
                created_us=to_micros(session.created_at),
                updated_us=to_micros(session.updated_at),
                title=session.title,
            )
            for session_id, session in items
        ]

    async def delete(self, session_id: str, *, owner: Owner | None = None) -> None:
        check_session_id(session_id)
        check_owner(self._owners, owner, "session store")
        self._sessions.pop(session_id, None)
