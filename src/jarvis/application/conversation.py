"""The conversation use case: a question asked with the history of a stored session.

A turn loads the session's newest messages, bounds them (messages and tokens, oldest
dropped first, never splitting an assistant's tool calls from their results: see
:func:`~jarvis.domain.sessions.history.trim_history`), hands them to the agent as
:attr:`AgentContext.conversation` (real messages, never flattened into text), runs the
question, then appends the whole exchange to the session in one atomic append: the user's
message, each assistant message with its tool calls and ids, each tool result with its call
id, and the final answer with its model and usage. A turn that fails or is cancelled stores
nothing, so a session never holds half an exchange.

Managed agents store the user's message *first* (a client that goes away never loses what it
said; a message may be queued and answered later), so :meth:`ConversationService.pending`
finds the stored question and :meth:`ConversationService.answer` runs it: the same history
bounds, the same recorder (:mod:`.turn_recording`), only the run's messages appended. There
a run that fails or is cancelled keeps what it completed (``keep_partial``): whole tool
exchanges and the text streamed so far, saved even while the caller is being cancelled.

The CLI (``jarvis ask -c``, ``jarvis chat``, ``jarvis sessions``), the SDK's conversation
objects and the managed-agent HTTP API all go through :class:`ConversationService`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol, TypeAlias

from jarvis.application.ask import Answer, AskQuestion
from jarvis.application.run_updates import AnswerUpdate, answer_of
from jarvis.application.turn_recording import TurnRecorder
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.owners import Owner, OwnerGoneError
from jarvis.domain.ports import SessionStorePort
from jarvis.domain.run.contract import AgentContext
from jarvis.domain.run.updates import (
    RunFinished,
    RunUpdate,
)
from jarvis.domain.sessions.history import TrimmedHistory, trim_history
from jarvis.domain.sessions.ids import check_session_id
from jarvis.domain.sessions.records import SessionInfo, SessionMessage, utc_now

LOAD_SLACK = 64
"""Messages read beyond ``max_messages``: room for the tool results of a unit that straddles
the bound, so that the window read never decides what the bounds keep."""

LISTED_IN_ERRORS = 20
"""How many existing sessions an "unknown session" message names."""

SAVE_TIMEOUT = 10.0
"""Seconds a cancelled turn may still spend storing what it completed (``keep_partial``)."""


class UnknownSessionError(ConfigurationError):
    """No session has this id; ``existing`` holds the most recent ids (exit code 2)."""

    def __init__(self, session_id: str, existing: list[str], total: int) -> None:
        if existing:
            more = f" (and {total - len(existing)} more)" if total > len(existing) else ""
            listing = "Existing sessions: " + ", ".join(existing) + more + "."
        else:
            listing = "There are no sessions yet."
        super().__init__(
            f"No session named {session_id!r}. {listing}",
            hint="See them with `jarvis sessions list`.",
        )
        self.session_id = session_id
        self.existing = existing


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryLimits:
    """How much of a session enters the prompt (``[sessions] history_messages/_tokens``).

    ``None`` is no bound; ``0`` replays nothing.
    """

    max_messages: int | None = 40
    max_tokens: int | None = 3000


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryUsed:
    """What of the session entered the prompt, and what was left out (``--verbose``).

    The first item of :meth:`ConversationService.stream`.
    """

    session_id: str
    trimmed: TrimmedHistory
    older_unread: bool = False
    """The session holds messages older than the window read (all left out)."""
    new_session: bool = False
    """The session had no messages: this turn starts it."""

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.trimmed.messages

    def describe(self) -> str:
        """One line, e.g. ``history of session 'work': 6 messages (~80 tokens), 4 older
        left out``."""
        if self.new_session:
            return f"history of session {self.session_id!r}: none (a new session)"
        text = self.trimmed.describe().removeprefix("history: ")
        if self.older_unread:
            text += ", and every older message"
        return f"history of session {self.session_id!r}: {text}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationAnswer:
    """A turn's answer, what history it was given, and what was stored."""

    answer: Answer
    history: HistoryUsed
    saved: tuple[SessionMessage, ...]

    @property
    def session_id(self) -> str:
        return self.history.session_id


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingTurn:
    """A user message stored before it was answered, and the history its answer is given.

    Found by :meth:`ConversationService.pending`, run by :meth:`ConversationService.answer`.
    """

    question: SessionMessage
    history: HistoryUsed


ConversationUpdate: TypeAlias = HistoryUsed | AnswerUpdate
"""What :meth:`ConversationService.stream` yields: ``HistoryUsed`` first, then the run's
updates, then the :class:`~jarvis.application.ask.Answer` (after the turn was stored)."""


class Asker(Protocol):
    """What a conversation runs its questions on (:class:`~jarvis.application.ask.AskService`)."""

    def stream(self, command: AskQuestion) -> AsyncIterator[RunUpdate | Answer]: ...


def new_session_id(now: datetime | None = None) -> str:
    """A fresh session id: the UTC time, then random hex (``20261201-093012-4f2a9c``)."""
    moment = now or utc_now()
    return f"{moment:%Y%m%d-%H%M%S}-{os.urandom(3).hex()}"  # not `secrets`: 1.4 ms to import


class Sessions:
    """The stored sessions themselves: which to use, listing, reading, deleting.

    Every method raises ``SessionStoreError`` subclasses when the store fails (nothing
    stored changes), ``ConfigurationError`` for an invalid session id, and
    :class:`UnknownSessionError` where a session must exist.
    """

    def __init__(self, store: SessionStorePort, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.store = store
        self.clock = clock

    def new_session_id(self) -> str:
        return new_session_id(self.clock())

    async def last_session(self) -> str | None:
        """The session appended to most recently (``jarvis ask -c``), ``None`` if none."""
        latest = await self.store.list_sessions(limit=1)
        return latest[0].id if latest else None

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        """Sessions, most recently appended to first."""
        return await self.store.list_sessions(limit=limit)

    async def exists(self, session_id: str) -> bool:
        return bool(await self.store.load_records(check_session_id(session_id), limit=1))

    async def require(self, session_id: str) -> None:
        """Raise :class:`UnknownSessionError` (naming existing ones) unless it exists."""
        if not await self.exists(session_id):
            sessions = await self.store.list_sessions()
            raise UnknownSessionError(
                session_id, [s.id for s in sessions[:LISTED_IN_ERRORS]], len(sessions)
            )

    async def records(self, session_id: str) -> tuple[SessionMessage, ...]:
        """Every stored message of an existing session, oldest first."""
        records = await self.store.load_records(check_session_id(session_id))
        if not records:
            await self.require(session_id)
        return records

    async def iter_records(self, session_id: str) -> AsyncIterator[SessionMessage]:
        """Every stored message of a session, oldest first, read a page at a time (a long
        session is never held whole); nothing for an unknown one (see :meth:`require`)."""
        async for record in self.store.iter_records(session_id):
            yield record

    async def delete(self, session_id: str) -> None:
        """Forget an existing session."""
        await self.require(session_id)
        await self.store.delete(session_id)


class ConversationService(Sessions):
    """Questions asked within stored sessions: the history in, the exchange saved.

    Build one per event loop from the loop's ``AskService`` (the ``asker``) and the
    (loop-independent) session store.

    * :meth:`ask` / :meth:`stream`: one turn in a session (created by its first turn);
    * :meth:`history`: what the next turn of a session would replay;
    * from :class:`Sessions`: :meth:`last_session`, :meth:`new_session_id`,
      :meth:`list_sessions`, :meth:`require`, :meth:`records`, :meth:`delete`.

    Two turns of one session running at once each see the history as it was when they
    started, and each exchange is appended whole.
    """

    def __init__(
        self,
        asker: Asker,
        store: SessionStorePort,
        *,
        limits: HistoryLimits | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        super().__init__(store, clock=clock)
        self.asker = asker
        self.limits = limits or HistoryLimits()

    # -- one turn ----------------------------------------------------------------------------

    def _window(self) -> int | None:
        limits = self.limits
        return None if limits.max_messages is None else limits.max_messages + LOAD_SLACK

    async def history(self, session_id: str) -> HistoryUsed:
        """The bounded history the next turn of ``session_id`` replays."""
        check_session_id(session_id)
        window = self._window()
        messages = list(await self.store.load(session_id, limit=window))
        older_unread = window is not None and len(messages) >= window
        return self._bounded(session_id, messages, older_unread=older_unread)

    async def pending(
        self, session_id: str, question: SessionMessage | None = None
    ) -> PendingTurn | None:
        """The turn answering ``question`` (a user message already stored), else the user
        message waiting at the end of the session; ``None`` if no message waits.

        Its history is the rest of the session, bounded as :meth:`history` bounds it; other
        messages stored meanwhile (another client's) stay in it and never make ``question``
        unanswerable.
        """
        check_session_id(session_id)
        window = self._window()
        read = None if window is None else window + 1  # the question comes on top
        records = list(await self.store.load_records(session_id, limit=read))
        older_unread = read is not None and len(records) >= read
        if question is not None:
            if question in records:
                records.remove(question)
        elif records and records[-1].message.role is Role.USER:
            question = records.pop()
        else:
            return None
        messages = [r.message for r in records]
        used = self._bounded(session_id, messages, older_unread=older_unread)
        return PendingTurn(question=question, history=used)

    def _bounded(
        self, session_id: str, messages: list[Message], *, older_unread: bool
    ) -> HistoryUsed:
        if not messages:
            return HistoryUsed(
                session_id=session_id, trimmed=TrimmedHistory(messages=()), new_session=True
            )
        limits = self.limits
        cut = 0
        if older_unread:  # the window may start inside an exchange: begin at a user message
            while cut < len(messages) and messages[cut].role is not Role.USER:
                cut += 1
        trimmed = trim_history(
            messages[cut:], max_messages=limits.max_messages, max_tokens=limits.max_tokens
        )
        if cut:
            trimmed = replace(trimmed, dropped=trimmed.dropped + cut)
        return HistoryUsed(session_id=session_id, trimmed=trimmed, older_unread=older_unread)

    def stream(
        self,
        session_id: str,
        command: AskQuestion,
        *,
        keep_partial: bool = False,
        fresh: bool = False,
    ) -> AsyncIterator[ConversationUpdate]:
        """One turn: :class:`HistoryUsed`, the run's updates, then the ``Answer``, yielded
        once the exchange is stored. Closing the iterator early stores nothing, unless
        ``keep_partial``: then the question and what the run completed are stored.
        ``fresh``: ``session_id`` was just made (:meth:`new_session_id`), so no history is
        read for it (a kept ``jarvis ask`` pays for its one append only)."""
        used = None
        if fresh:
            empty = TrimmedHistory(messages=())
            used = HistoryUsed(session_id=session_id, trimmed=empty, new_session=True)
        return self._turn(session_id, command, [], used=used, keep_partial=keep_partial)

    def answer(
        self,
        session_id: str,
        turn: PendingTurn,
        command: AskQuestion,
        *,
        keep_partial: bool = True,
        owner: Owner | None = None,
    ) -> AsyncGenerator[ConversationUpdate, None]:
        """Answer a stored question (:meth:`pending`): ``command`` asked with the question's
        text and ``turn.history``; only the run's messages are appended, the question being
        stored already. By default what a failed or cancelled run completed is kept (the
        question is stored, so a partial answer belongs after it). Close the generator to
        cancel the run; it stores before it ends.

        ``owner``: the definition the session belongs to (a managed agent's): the answer is
        appended only while it is stored, else ``OwnerGoneError`` (a partial answer is then
        dropped quietly: the run's own error is the one to report)."""
        command = replace(command, question=turn.question.message.content)
        return self._turn(
            session_id,
            command,
            [],
            used=turn.history,
            asked=False,
            keep_partial=keep_partial,
            owner=owner,
        )

    async def ask(self, session_id: str, command: AskQuestion) -> ConversationAnswer:
        """One turn, run to its end (see :meth:`stream`)."""
        saved: list[SessionMessage] = []
        used: HistoryUsed | None = None
        turn = self._turn(session_id, command, saved)
        try:
            async for update in turn:
                if isinstance(update, HistoryUsed):
                    used = update
                    continue
                answer = answer_of(update)
                if answer is not None and used is not None:
                    return ConversationAnswer(answer=answer, history=used, saved=tuple(saved))
        finally:
            await turn.aclose()
        raise RuntimeError("the conversation turn ended without an answer")

    async def _turn(
        self,
        session_id: str,
        command: AskQuestion,
        saved: list[SessionMessage],
        *,
        used: HistoryUsed | None = None,
        asked: bool = True,
        keep_partial: bool = False,
        owner: Owner | None = None,
    ) -> AsyncGenerator[ConversationUpdate, None]:
        """``asked``: the user's message is part of the exchange to store (else it is
        stored already); ``owner``: see :meth:`answer`."""
        started = self.clock()
        if used is None:
            used = await self.history(session_id)
        yield used
        context = command.context or AgentContext()
        context = replace(context, conversation=(*used.messages, *context.conversation))
        question = SessionMessage(message=Message.user(command.question), created_at=started)
        head = [question] if asked else []
        recorder = TurnRecorder(self.clock, command.model or "")
        stored = False
        run = self.asker.stream(replace(command, context=context))
        try:
            async for update in run:
                if isinstance(update, RunFinished):  # AskService turns it into the Answer
                    continue
                answer = answer_of(update)
                if answer is not None:
                    records = [*head, *recorder.finish(answer)]
                    stored = True  # a failed append stores nothing: never retried as partial
                    save = self.store.append_records(session_id, records, owner=owner)
                    await (_shielded(save) if keep_partial else save)
                    saved.extend(records)
                    async for _ in run:  # the run's own end: what follows its answer
                        pass  # (an agent's cleanup, such as a sandbox's container stop)
                    yield answer
                    return
                recorder.see(update)
                yield update
        finally:
            # a run left early (an error, a cancellation) is closed now, not whenever the
            # collector finalises it (after the runtime was closed)
            try:
                await _close(run)
            finally:
                if keep_partial and not stored:
                    partial = recorder.interrupted()
                    records = [*head, *partial]
                    if partial and await self._keep(session_id, records, owner):
                        saved.extend(records)

    async def _keep(
        self, session_id: str, records: list[SessionMessage], owner: Owner | None
    ) -> bool:
        """Store what a cut-short run completed, even while it is being cancelled; whether
        it was stored (not when its owner is gone: nothing is kept for it)."""
        try:
            await _shielded(self.store.append_records(session_id, records, owner=owner))
        except OwnerGoneError:
            return False
        return True


async def _shielded(save: Awaitable[None]) -> None:
    """Finish ``save`` even while the caller is being cancelled (bounded in time): what a
    cut-short run completed must not be lost to the cancellation that cut it short."""
    task = asyncio.ensure_future(asyncio.wait_for(save, SAVE_TIMEOUT))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task}, timeout=SAVE_TIMEOUT)
        raise


async def without_history(
    updates: AsyncIterator[ConversationUpdate], notice: Callable[[str], None] | None = None
) -> AsyncGenerator[AnswerUpdate, None]:
    """A turn's updates without its :class:`HistoryUsed` (described to ``notice``, if
    given); ``updates`` is closed however this ends (a cancelled reader cancels the run)."""
    try:
        async for update in updates:
            if isinstance(update, HistoryUsed):
                if notice is not None:
                    notice(update.describe())
                continue
            yield update
    finally:
        await _close(updates)


async def _close(run: AsyncIterator[object]) -> None:
    """Close ``run`` if it is a generator (an iterator that is not has nothing to close)."""
    close = getattr(run, "aclose", None)
    if close is not None:
        await close()
