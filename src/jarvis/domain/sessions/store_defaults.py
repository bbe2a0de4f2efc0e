"""What every session store does the same way, written once for the real stores and the
fake: ``load`` and ``append`` follow from ``load_records`` and ``append_records`` (a
message is a record without its model, usage and time), and a ``limit`` is checked and
applied alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.messages import Message
from jarvis.domain.sessions.records import SessionMessage

if TYPE_CHECKING:
    from jarvis.domain.owners import Owner

T = TypeVar("T")


def check_limit(limit: int | None) -> None:
    """Refuse a negative ``limit`` (a ``ConfigurationError``); ``None`` means no limit."""
    if limit is not None and limit < 0:
        raise ConfigurationError(f"limit must be >= 0, got {limit}.")


def newest(records: Sequence[T], limit: int | None) -> Sequence[T]:
    """The last ``limit`` of ``records`` (all of them for ``None``, none for 0)."""
    if limit is None:
        return records
    return records[len(records) - limit :] if limit else records[:0]


class MessagesFromRecords:
    """``load`` and ``append`` of the session store port, in terms of the store's own
    ``load_records`` and ``append_records``."""

    async def load_records(
        self, session_id: str, *, limit: int | None = None
    ) -> tuple[SessionMessage, ...]:
        raise NotImplementedError

    async def append_records(
        self, session_id: str, records: Sequence[SessionMessage], *, owner: Owner | None = None
    ) -> None:
        raise NotImplementedError

    async def load(self, session_id: str, *, limit: int | None = None) -> tuple[Message, ...]:
        return tuple(r.message for r in await self.load_records(session_id, limit=limit))

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        await self.append_records(session_id, [SessionMessage(message=m) for m in messages])
