"""``jarvis ask`` within a stored conversation: ``-c`` / ``--session``, or a plain ask kept
as a new session (the default: ``[sessions] keep_asks``).

Not loaded by ``jarvis ask --no-keep`` (or with ``keep_asks = false``), which never
imports the session store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jarvis.application.conversation import without_history
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.sessions.ids import check_session_id
from jarvis.domain.sessions.records import MAX_RECORD_BYTES, SessionStoreCorruptError

if TYPE_CHECKING:
    from jarvis.application.ask import AskQuestion
    from jarvis.application.conversation import ConversationService
    from jarvis.application.run_updates import AnswerUpdate
    from jarvis.entrypoints.composition import Runtime


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionChoice:
    """The session a command continues: a name, or the last one (a new one if none)."""

    name: str | None = None
    continue_last: bool = False

    @classmethod
    def of(cls, *, continue_last: bool, name: str | None) -> SessionChoice:
        if continue_last and name is not None:
            raise ConfigurationError(
                "--continue and --session cannot be used together.",
                hint="-c continues the last conversation; --session NAME continues NAME.",
            )
        return cls(
            name=None if name is None else check_session_id(name), continue_last=continue_last
        )


def too_large_to_keep(question: str) -> str:
    """Why a plain ask's ``question`` cannot be kept as a session (a question on stdin may
    be larger than a stored message may be), or ``""``: such an ask is answered all the
    same and stores nothing, where ``-c`` / ``--session`` (asked for) refuse it."""

    if len(question) <= MAX_RECORD_BYTES // 4:
        return ""
    size = len(question.encode("utf-8", "surrogatepass"))
    if size <= MAX_RECORD_BYTES - 1024:  # room for the record's other fields
        return ""
    return (
        f"the question ({size:,} bytes) is too large to keep as a session (at most "
        f"{MAX_RECORD_BYTES:,}): it is answered, and nothing is stored"
    )


async def resolve_session(
    service: ConversationService,
    choice: SessionChoice,
    *,
    notice: Callable[[str], None] | None = None,
) -> str:
    """The session id ``choice`` means (``-c`` with no conversation yet starts one)."""
    if choice.name is not None:
        return choice.name
    if choice.continue_last:
        last = await service.last_session()
        if last is not None:
            if notice is not None:
                notice(f"session: continuing the last conversation, {last}")
            return last
    fresh = service.new_session_id()
    if notice is not None:
        notice(f"session: a new conversation, {fresh}")
    return fresh


async def conversation_updates(
    runtime: Runtime,
    choice: SessionChoice,
    command: AskQuestion,
    *,
    notice: Callable[[str], None] | None = None,
) -> tuple[str, AsyncIterator[AnswerUpdate]]:
    """The session id and the turn's updates (the ``--verbose`` history line said first)."""
    service = await runtime.conversations()
    if choice.name is None and not choice.continue_last:  # a plain ask, kept: a new session
        session_id = service.new_session_id()
        # open the store before the engine is asked: one that is damaged or out of reach
        # fails the command now (exit code 7 or 3), not after the answer was paid for
        await service.exists(session_id)
        if notice is not None:
            notice(f"session: a new conversation, {session_id}")
        updates = service.stream(session_id, command, fresh=True)
    else:
        session_id = await resolve_session(service, choice, notice=notice)
        updates = service.stream(session_id, command)
    return session_id, without_history(updates, notice)


def ends_the_conversation(exc: BaseException) -> bool:
    """A damaged session store ends a chat (its exit code says so); other errors of a turn
    (an engine down, an unknown tool) are reported and the chat goes on."""
    return isinstance(exc, SessionStoreCorruptError)
