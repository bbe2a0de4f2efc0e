"""How a run's updates become the messages a session keeps.

Apart from :mod:`.conversation`, which decides what history a turn replays and when the
exchange is stored: this module only decides what the stored exchange is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from jarvis.application.ask import Answer
from jarvis.application.run_updates import AnswerUpdate, handle
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.run.updates import (
    ApprovalDecided,
    ApprovalRequired,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.domain.sessions.records import SessionMessage


def tool_message_content(content: str, *, success: bool) -> str:
    """A tool result as the model was shown it (a failure reads ``Error: ...``)."""
    return content if success else f"Error: {content}"


class TurnRecorder:
    """Turns a run's updates into the messages the session keeps, in order.

    A tool exchange (the assistant's calls and their results) is held apart until every call
    has its result, so that a run cut short (:meth:`interrupted`) never leaves a call without
    its result, which no engine could replay.
    """

    def __init__(self, clock: Callable[[], datetime], model: str = "") -> None:
        self.clock = clock
        self.model = model
        """Stamped on what an interrupted run stored (no answer names the model)."""
        self.records: list[SessionMessage] = []
        self.text_seen: list[str] = []
        self._exchange: list[SessionMessage] = []
        self._waiting: set[str] = set()

    def see(self, update: AnswerUpdate) -> None:
        handle(update, self)

    def text(self, update: TextDelta) -> None:
        self.text_seen.append(update.text)

    def tool_calls(self, update: ToolCallsRequested) -> None:
        self._close_exchange()
        message = Message.assistant("".join(self.text_seen), update.calls)
        self.text_seen.clear()
        self._exchange = [
            SessionMessage(message=message, model=self.model, created_at=self.clock())
        ]
        self._waiting = {call.id for call in update.calls}

    def tool_result(self, update: ToolResultReady) -> None:
        result = update.result
        message = Message.tool(
            tool_message_content(result.content, success=result.success),
            tool_call_id=result.call_id,
            name=result.tool_name,
        )
        record = SessionMessage(message=message, created_at=self.clock())
        if not self._exchange:  # a result no call announced: kept as it came
            self.records.append(record)
            return
        self._exchange.append(record)
        self._waiting.discard(result.call_id)
        if not self._waiting:
            self._close_exchange()

    def approval_required(self, update: ApprovalRequired) -> None:
        """Nothing: a call's approval is not part of the conversation (its result is)."""

    def approval_decided(self, update: ApprovalDecided) -> None:
        """Nothing: a denied call's result says it was denied."""

    def answer(self, update: Answer) -> None:
        """Nothing yet: :meth:`finish` records the answer once the turn is stored."""

    def _close_exchange(self) -> None:
        self.records.extend(self._exchange)
        self._exchange = []
        self._waiting = set()

    def finish(self, answer: Answer) -> list[SessionMessage]:
        """Every record, the model stamped on the assistant's, the usage on the answer."""
        self._close_exchange()
        records = [
            replace(r, model=answer.model) if r.message.role is Role.ASSISTANT else r
            for r in self.records
        ]
        records.append(
            SessionMessage(
                message=Message.assistant(answer.content),
                model=answer.model,
                usage=answer.usage,
                created_at=self.clock(),
            )
        )
        return records

    def interrupted(self) -> list[SessionMessage]:
        """What a run cut short completed: whole tool exchanges, then the text streamed since
        (an exchange still waiting for a result is left out)."""
        if not self._waiting:
            self._close_exchange()
        records = list(self.records)
        text = "".join(self.text_seen)
        if text.strip():
            message = Message.assistant(text)
            records.append(
                SessionMessage(message=message, model=self.model, created_at=self.clock())
            )
        return records
