"""What a use case streams, and the one place that tells its kinds apart.

:meth:`~jarvis.application.ask.AskService.stream` yields the agent's updates and, in place
of the agent's ``RunFinished``, the :class:`~jarvis.application.ask.Answer`. Every reader
(the CLI's ask and chat, the SDK, the sandbox worker, the HTTP encoders, the MCP server)
gives :func:`handle` an :class:`UpdateHandler`; the exhaustive ``match`` below is checked by
mypy, so a new kind of update cannot be forgotten by one of them.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias, TypeVar, assert_never

from jarvis.application.ask import Answer
from jarvis.domain.run.updates import (
    ApprovalDecided,
    ApprovalRequired,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)

AnswerUpdate: TypeAlias = (
    TextDelta | ToolCallsRequested | ToolResultReady | ApprovalRequired | ApprovalDecided | Answer
)
"""One item of a use case's stream: the run's updates, then its :class:`Answer` last."""

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")


class UpdateHandler(Protocol[T_co]):
    """What a reader does with each kind of update (a method each)."""

    def text(self, update: TextDelta) -> T_co: ...

    def tool_calls(self, update: ToolCallsRequested) -> T_co: ...

    def tool_result(self, update: ToolResultReady) -> T_co: ...

    def approval_required(self, update: ApprovalRequired) -> T_co:
        """A call waits for a decision (recorded with whoever decides)."""
        ...

    def approval_decided(self, update: ApprovalDecided) -> T_co:
        """A call was allowed or denied (before the allowed ones run)."""
        ...

    def answer(self, update: Answer) -> T_co: ...


def handle(update: AnswerUpdate, handler: UpdateHandler[T]) -> T:
    """``handler``'s method for ``update``'s kind, called on it."""
    match update:
        case TextDelta():
            return handler.text(update)
        case ToolCallsRequested():
            return handler.tool_calls(update)
        case ToolResultReady():
            return handler.tool_result(update)
        case ApprovalRequired():
            return handler.approval_required(update)
        case ApprovalDecided():
            return handler.approval_decided(update)
        case Answer():
            return handler.answer(update)
        case _:
            assert_never(update)


class _TextOf:
    """The text of a text update, ``None`` for the other kinds."""

    def text(self, update: TextDelta) -> str | None:
        return update.text

    def tool_calls(self, update: ToolCallsRequested) -> str | None:
        return None

    def tool_result(self, update: ToolResultReady) -> str | None:
        return None

    def approval_required(self, update: ApprovalRequired) -> str | None:
        return None

    def approval_decided(self, update: ApprovalDecided) -> str | None:
        return None

    def answer(self, update: Answer) -> str | None:
        return None


_TEXT_OF = _TextOf()


def text_of(update: AnswerUpdate) -> str | None:
    """The piece of answer text ``update`` carries (``None``: it is not a text update)."""
    return handle(update, _TEXT_OF)


class _AnswerOf:
    """The answer, ``None`` for the run's other updates."""

    def text(self, update: TextDelta) -> Answer | None:
        return None

    def tool_calls(self, update: ToolCallsRequested) -> Answer | None:
        return None

    def tool_result(self, update: ToolResultReady) -> Answer | None:
        return None

    def approval_required(self, update: ApprovalRequired) -> Answer | None:
        return None

    def approval_decided(self, update: ApprovalDecided) -> Answer | None:
        return None

    def answer(self, update: Answer) -> Answer | None:
        return update


_ANSWER_OF = _AnswerOf()


def answer_of(update: AnswerUpdate) -> Answer | None:
    """The :class:`Answer` ``update`` is (``None``: it is one of the run's updates)."""
    return handle(update, _ANSWER_OF)
