"""``InMemorySessionStore``: conversation history kept in a dict."""

from __future__ import annotations

from collections.abc import Sequence

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.messages import Message
from jarvis.domain.session_ids import check_session_id


class InMemorySessionStore:
    """Behaves like the file-backed store, without touching the disk."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[Message]] = {}

    async def load(self, session_id: str, *, limit: int | None = None) -> tuple[Message, ...]:
        check_session_id(session_id)
        messages = self._sessions.get(session_id, [])
        if limit is not None:
            if limit < 0:
                raise ConfigurationError(f"limit must be >= 0, got {limit}.")
            messages = messages[len(messages) - limit :] if limit else []
        return tuple(messages)

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        check_session_id(session_id)
        self._sessions.setdefault(session_id, []).extend(messages)

    async def sessions(self) -> list[str]:
        return sorted(self._sessions)

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        self._sessions.pop(session_id, None)
