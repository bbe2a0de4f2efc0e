"""Conversation history by session id."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol

from jarvis.domain.llm.messages import Message
from jarvis.domain.sessions.records import PAGE_SIZE, SessionInfo, SessionMessage, SessionPage

if TYPE_CHECKING:
    from jarvis.domain.owners import Owner


class SessionStorePort(Protocol):
    """Conversation history by session id (conversations, managed agents, operatives).

    Every method raises :class:`~jarvis.domain.sessions.records.SessionStoreError` (never a driver
    exception) when the store fails: ``SessionStoreUnavailableError`` when it cannot be
    reached or stayed locked, ``SessionStoreCorruptError`` when its data is damaged. A
    failed call changes nothing. An invalid session id is a ``ConfigurationError``.
    """

    async def load(self, session_id: str, *, limit: int | None = None) -> tuple[Message, ...]:
        """The session's messages, oldest first (the newest ``limit`` when given)."""
        ...

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        """Add messages at the end of the session, creating it when needed (stamped now)."""
        ...

    async def load_records(
        self, session_id: str, *, limit: int | None = None
    ) -> tuple[SessionMessage, ...]:
        """Like :meth:`load`, with each message's model, usage and time."""
        ...

    def iter_records(
        self, session_id: str, *, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[SessionMessage]:
        """Every message of the session, oldest first, read from the store ``page_size`` at
        a time: what a reader of a long session (``jarvis sessions show/export``) holds is
        one page, not the session. An unknown session yields nothing; messages appended
        meanwhile may or may not be included, none twice or out of order."""
        ...

    async def load_page(
        self, session_id: str, *, limit: int, before: int | None = None
    ) -> SessionPage:
        """The newest ``limit`` (at least 1) messages whose position in the session is below
        ``before`` (every message when ``None``), oldest first, with the position of the
        first of them (see :class:`~jarvis.domain.sessions.records.SessionPage`): a reader walks a
        long session backwards, newest page first, holding one page at a time. An unknown
        session, or ``before=0``, is an empty page."""
        ...

    async def append_records(
        self, session_id: str, records: Sequence[SessionMessage], *, owner: Owner | None = None
    ) -> None:
        """Add ``records`` at the end of the session as one unit: all of them or none.

        Concurrent appends (other tasks, processes, machines) never interleave inside one
        call and never lose a message; a crash during the call loses at most this call.

        With ``owner`` (a managed agent's or an operator's run), only while ``owner``'s
        definition is stored in the operator store of this store's database (under
        ``owner.key``, with ``owner.incarnation``), checked in the same transaction as the
        append: else :class:`~jarvis.domain.owners.OwnerGoneError`, and nothing is written.
        A store that keeps no definitions (``jsonl``) refuses an owner with a
        ``ConfigurationError``.
        """
        ...

    async def sessions(self) -> list[str]:
        """The ids of every stored session, sorted."""
        ...

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        """Every session (the ``limit`` most recent), most recently appended to first."""
        ...

    async def delete(self, session_id: str, *, owner: Owner | None = None) -> None:
        """Forget a session; deleting an unknown id is not an error.

        With ``owner`` (the definition whose conversation it is), only while ``owner``'s
        definition is stored, checked in the same transaction as the deletion, as for
        :meth:`append_records`: else :class:`~jarvis.domain.owners.OwnerGoneError`, and
        nothing is deleted (the session may be the conversation of a definition created
        again since under the same id). With the :func:`~jarvis.domain.owners.vacancy` of
        a definition, only while none is stored (a creation clears an earlier one's
        leftovers so, never a conversation of one created meanwhile). A store that keeps
        no definitions (``jsonl``) refuses an owner with a ``ConfigurationError``.
        """
        ...
