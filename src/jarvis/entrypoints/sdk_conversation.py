"""The SDK's conversations: ``with j.conversation() as c: c.ask(...)``.

::

    with Jarvis() as j:
        with j.conversation() as chat:               # a new session
            chat.ask("What is the capital of France?")
            chat.ask("And its population?")          # carries the first exchange
        print(chat.session_id)                       # resumable: jarvis ask --session ID

        j.conversation("support-42").ask("...")      # a named session, started when new

    async with Jarvis() as j:
        async with j.aconversation("notes") as chat:
            await chat.aask("...")

Each question goes through :class:`~jarvis.application.conversation.ConversationService`,
the use case of ``jarvis ask -c`` and ``jarvis chat``: the session's bounded history
(``[sessions] history_messages`` / ``history_tokens``) enters the prompt as messages, and
the exchange (tool calls and results included) is stored in ``[sessions]`` once answered.
A question that fails, or a stream closed early, stores nothing. Options given to
``conversation()`` apply to each question; a question's own options win.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator
from typing import TYPE_CHECKING, Protocol, TypeVar, Unpack

from jarvis.domain.sessions.ids import check_session_id
from jarvis.entrypoints.closing import AcloseOnExit, CloseOnExit
from jarvis.entrypoints.composition import AskOptions, Runtime
from jarvis.entrypoints.sdk_loop import blocking_pieces

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from jarvis.application.ask import Answer, AskQuestion
    from jarvis.domain.sessions.records import SessionMessage

T = TypeVar("T")


class _Owner(Protocol):
    """What a conversation uses of its ``Jarvis`` (not imported: ``sdk`` imports this)."""

    _runtime: Runtime

    def _question(self, question: str, **options: Unpack[AskOptions]) -> AskQuestion: ...

    def _call(self, coro: Coroutine[object, object, T]) -> T: ...

    def _check_open(self) -> None: ...


class _Turns:
    """What both kinds of conversation share: the session and how one turn runs."""

    def __init__(self, jarvis: _Owner, name: str | None, options: AskOptions) -> None:
        from jarvis.application.conversation import new_session_id

        self._jarvis = jarvis
        self.session_id = check_session_id(name) if name is not None else new_session_id()
        """The stored session's id (``jarvis sessions show ID``)."""
        self.options = options

    def _command(self, question: str, options: AskOptions) -> AskQuestion:
        merged: AskOptions = {**self.options, **options}
        return self._jarvis._question(question, **merged)

    async def _answer(self, command: AskQuestion) -> Answer:
        service = await self._jarvis._runtime.conversations()
        return (await service.ask(self.session_id, command)).answer

    async def _pieces(self, command: AskQuestion) -> AsyncGenerator[str, None]:
        from jarvis.application.conversation import without_history
        from jarvis.application.run_updates import text_of

        service = await self._jarvis._runtime.conversations()
        turn = without_history(service.stream(self.session_id, command))
        try:
            async for update in turn:
                text = text_of(update)
                if text is not None:
                    yield text
        finally:
            await turn.aclose()  # closes the turn's own stream too

    async def _records(self) -> tuple[SessionMessage, ...]:
        return await self._jarvis._runtime.sessions().load_records(self.session_id)


class Conversation(_Turns, CloseOnExit):
    """A conversation for synchronous code (``Jarvis.conversation``)."""

    def ask(self, question: str, **options: Unpack[AskOptions]) -> str:
        """The answer's text; the question and answer join the session."""
        return self.ask_full(question, **options).content

    def ask_full(self, question: str, **options: Unpack[AskOptions]) -> Answer:
        """The whole answer (content, turns, tool results, usage, model, stop reason)."""
        return self._jarvis._call(self._answer(self._command(question, options)))

    def ask_stream(
        self, question: str, **options: Unpack[AskOptions]
    ) -> Generator[str, None, None]:
        """The answer's text as it is generated; stored once it is complete (stopping
        early stores nothing)."""
        yield from blocking_pieces(
            self._jarvis._call, self._pieces(self._command(question, options))
        )

    def messages(self) -> tuple[SessionMessage, ...]:
        """Every stored message of the session, oldest first, with model, usage, time."""
        return self._jarvis._call(self._records())

    def __enter__(self) -> Conversation:
        return self

    def close(self) -> None:
        """Nothing to close: the session is stored after each answer."""


class AsyncConversation(_Turns, AcloseOnExit):
    """A conversation for ``async`` code (``Jarvis.aconversation``), on the caller's loop."""

    async def aask(self, question: str, **options: Unpack[AskOptions]) -> str:
        return (await self.aask_full(question, **options)).content

    async def aask_full(self, question: str, **options: Unpack[AskOptions]) -> Answer:
        self._jarvis._check_open()
        return await self._answer(self._command(question, options))

    async def aask_stream(self, question: str, **options: Unpack[AskOptions]) -> AsyncIterator[str]:
        self._jarvis._check_open()
        async for piece in self._pieces(self._command(question, options)):
            yield piece

    async def amessages(self) -> tuple[SessionMessage, ...]:
        return await self._records()

    async def __aenter__(self) -> AsyncConversation:
        return self

    async def aclose(self) -> None:
        """Nothing to close: the session is stored after each answer."""
