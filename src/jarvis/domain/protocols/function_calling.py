"""Native function calling: tools sent as definitions, calls returned as structured data."""

from __future__ import annotations

from collections.abc import Sequence

from jarvis.domain.llm.completion import Completion, ToolChoice
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.protocols.tool_protocol import (
    Decision,
    FinalAnswer,
    ParseFailure,
    RequestShape,
    ToolCalls,
    ToolProtocol,
)
from jarvis.domain.tools.specs import ToolResult, ToolSpec

FUNCTION_CALLING_INSTRUCTIONS = (
    "You can call the tools you are given. Call a tool when it helps you answer; call "
    "several at once when they do not depend on each other. When you have the answer, "
    "reply with it directly, without calling a tool."
)


class FunctionCallingProtocol(ToolProtocol):
    """Every returned call is run; one assistant message carries all of a turn's calls and
    one TOOL message per call answers it, matched by call id. A reply without calls is the
    final answer."""

    name = "function_calling"
    native_tools = True

    def __init__(
        self, specs: Sequence[ToolSpec], *, first_tool_choice: ToolChoice = "auto"
    ) -> None:
        super().__init__(specs)
        self._shape = RequestShape(tools=self.specs)
        self._first_shape = (
            RequestShape(tools=self.specs, tool_choice=first_tool_choice)
            if self.specs and first_tool_choice != "auto"
            else self._shape
        )

    def instructions(self) -> str:
        return FUNCTION_CALLING_INSTRUCTIONS if self.specs else ""

    def request_shape(self) -> RequestShape:
        return self._shape

    def request_shape_for(self, turn: int) -> RequestShape:
        """``first_tool_choice`` (e.g. ``required``: force a call) holds for the first turn
        only; later turns are ``auto``, so a forced model can still answer."""
        return self._first_shape if turn == 1 else self._shape

    def interpret(self, completion: Completion, *, turn: int) -> Decision:
        if completion.tool_calls:
            return ToolCalls(calls=_with_ids(completion.tool_calls, turn))
        answer = strip_think(completion.content)
        if not answer:
            return ParseFailure(
                error="the reply was empty. Answer the question, or call one of the tools."
            )
        return FinalAnswer(answer)

    def assistant_message(self, completion: Completion, decision: Decision) -> Message:
        calls = decision.calls if isinstance(decision, ToolCalls) else ()
        return Message.assistant(strip_think(completion.content), calls)

    def observations(self, results: Sequence[ToolResult]) -> list[Message]:
        return [
            Message.tool(
                r.content if r.success else f"Error: {r.content}",
                tool_call_id=r.call_id,
                name=r.tool_name,
            )
            for r in results
        ]

    def final_answer(self, completion: Completion) -> str:
        return strip_think(completion.content)


def _with_ids(calls: tuple[ToolCall, ...], turn: int) -> tuple[ToolCall, ...]:
    """The calls with unique, non-empty ids (some engines send none, or repeat them)."""
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    changed = False
    for index, call in enumerate(calls):
        if not call.id or call.id in seen:
            call = ToolCall(
                id=f"call_{turn}_{index}",
                name=call.name,
                arguments=call.arguments,
                raw_arguments=call.raw_arguments,
            )
            changed = True
        seen.add(call.id)
        fixed.append(call)
    return tuple(fixed) if changed else calls
