"""The one dispatch over a use case's updates: each kind reaches its own handler method."""

from __future__ import annotations

from jarvis.application.ask import Answer
from jarvis.application.run_updates import AnswerUpdate, answer_of, handle, text_of
from jarvis.domain.approvals import ApprovalDecision, ApprovalRequest
from jarvis.domain.llm.completion import Usage
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.run.updates import (
    ApprovalDecided,
    ApprovalRequired,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.domain.tools.specs import ToolResult

ANSWER = Answer(
    content="84",
    turns=2,
    tool_results=(),
    usage=Usage(),
    model="m",
    engine="e",
    stop_reason="final_answer",
)
CALL = ToolCall(id="c1", name="calculator", arguments={})
UPDATES: list[AnswerUpdate] = [
    TextDelta(text="So "),
    ToolCallsRequested(calls=(CALL,)),
    ApprovalRequired(
        request=ApprovalRequest(
            id="a1", call=CALL, effects="side_effects", reason="asked", rule="--approve ask"
        )
    ),
    ApprovalDecided(
        decision=ApprovalDecision(
            call_id="c1", tool="calculator", allowed=True, rule="--approve ask", asked=True
        )
    ),
    ToolResultReady(result=ToolResult(tool_name="calculator", content="84", call_id="c1")),
    ANSWER,
]


class Named:
    def text(self, update: TextDelta) -> str:
        return f"text {update.text!r}"

    def tool_calls(self, update: ToolCallsRequested) -> str:
        return "calls " + ",".join(c.id for c in update.calls)

    def tool_result(self, update: ToolResultReady) -> str:
        return "result " + update.result.call_id

    def approval_required(self, update: ApprovalRequired) -> str:
        return "asked " + update.request.id

    def approval_decided(self, update: ApprovalDecided) -> str:
        return "decided " + update.decision.call_id

    def answer(self, update: Answer) -> str:
        return "answer " + update.content


def test_each_kind_of_update_reaches_its_own_method() -> None:
    assert [handle(u, Named()) for u in UPDATES] == [
        "text 'So '",
        "calls c1",
        "asked a1",
        "decided c1",
        "result c1",
        "answer 84",
    ]


def test_the_text_and_the_answer_are_read_off_a_stream() -> None:
    assert [text_of(u) for u in UPDATES] == ["So ", None, None, None, None, None]
    assert [answer_of(u) for u in UPDATES] == [None, None, None, None, None, ANSWER]
