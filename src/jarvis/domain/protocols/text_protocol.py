"""What the text protocols (ReAct, structured JSON/text) share: one call per reply, read by
:mod:`~jarvis.domain.protocols.react_parser`, results returned as ``Observation:`` messages."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.protocols.react_parser import (
    ActionLabels,
    ParsedAction,
    ParsedFinal,
    find_labels,
    parse_reply,
)
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.protocols.tool_protocol import (
    Decision,
    FinalAnswer,
    ParseFailure,
    TextFilter,
    ThinkFilter,
    ToolCalls,
    ToolProtocol,
)
from jarvis.domain.tools.json_schema import validate
from jarvis.domain.tools.specs import ToolResult, ToolSpec


class LabelledTextProtocol(ToolProtocol):
    """A protocol whose replies are labelled text or JSON envelopes, one action per reply."""

    labels: ActionLabels
    call_prefix: str = "call"

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        super().__init__(specs)
        self._by_name = {s.name.lower(): s for s in self.specs}

    def interpret(self, completion: Completion, *, turn: int) -> Decision:
        parsed = parse_reply(completion.content, self.labels)
        if isinstance(parsed, ParsedFinal):
            return FinalAnswer(parsed.answer)
        if isinstance(parsed, ParsedAction):
            call = self.to_call(parsed, call_id=f"{self.call_prefix}_{turn}")
            text = parsed.text[: parsed.end].strip()
            return ToolCalls(calls=(call,), thought=parsed.thought, text=text)
        return ParseFailure(self.explain(parsed.error))

    def explain(self, error: str) -> str:
        """The parse error as the model reads it, with a reminder of the format."""
        return error

    def to_call(self, parsed: ParsedAction, *, call_id: str) -> ToolCall:
        """The tool call for a parsed action: the tool's own spelling of its name, and
        non-object input given to a tool with a single parameter as that parameter."""
        spec = self._by_name.get(parsed.tool.lower())
        name = spec.name if spec is not None else parsed.tool
        if parsed.arguments is not None:
            return ToolCall(id=call_id, name=name, arguments=parsed.arguments)
        arguments = _single_parameter(spec, parsed.raw_input) if spec is not None else None
        if arguments is not None:
            return ToolCall(id=call_id, name=name, arguments=arguments)
        return ToolCall(id=call_id, name=name, raw_arguments=parsed.raw_input)

    def assistant_message(self, completion: Completion, decision: Decision) -> Message:
        if isinstance(decision, ToolCalls) and decision.text is not None:
            return Message.assistant(decision.text)
        return Message.assistant(strip_think(completion.content))

    def observations(self, results: Sequence[ToolResult]) -> list[Message]:
        lines = [
            f"Observation: {r.content}" if r.success else f"Observation: Error: {r.content}"
            for r in results
        ]
        return [Message.user("\n\n".join(lines))]

    def final_answer(self, completion: Completion) -> str:
        parsed = parse_reply(completion.content, self.labels)
        if isinstance(parsed, ParsedFinal):
            return parsed.answer
        if isinstance(parsed, ParsedAction):
            return parsed.thought
        return ""

    def text_filter(self) -> TextFilter:
        return LabelledAnswerFilter(self.labels)


def _single_parameter(spec: ToolSpec, raw: str) -> JSONObject | None:
    """``{"param": value}`` when the tool has exactly one parameter (or one required) and
    ``raw`` is a valid value for it."""
    properties = spec.parameters.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    required = spec.parameters.get("required")
    names = list(properties)
    if len(names) != 1 and isinstance(required, list) and len(required) == 1:
        names = [str(required[0])]
    if len(names) != 1:
        return None
    name = names[0]
    candidates: list[JSONValue] = []
    with contextlib.suppress(ValueError, RecursionError):
        candidates.append(json.loads(raw))
    candidates.append(raw)
    for value in candidates:
        arguments: JSONObject = {name: value}
        if not validate(arguments, spec.parameters):
            return arguments
    return None


class LabelledAnswerFilter:
    """Streams only the final answer: nothing until a line-anchored final-answer label
    appears (and never when an action label comes first), then everything after it.

    A label lies on one line and ends at that line's first ``:``, so a line is decided as
    soon as it holds a colon: only the current line is kept, and it is read once, when its
    first colon arrives. That keeps a long stream linear (reading the whole buffer again at
    every colon was quadratic)."""

    __slots__ = ("_closed", "_decided", "_labels", "_line", "_open", "_shown", "_think")

    def __init__(self, labels: ActionLabels) -> None:
        self._labels = labels
        self._think = ThinkFilter()
        self._line: list[str] = []
        """The pieces of the current, undecided line (joined only when its colon comes)."""
        self._decided = False
        """Whether the current line already had its colon and no label."""
        self._open = False
        self._closed = False
        self._shown = False

    def feed(self, piece: str) -> str:
        visible = self._think.feed(piece)
        if self._open:
            return self._show(visible)
        if self._closed or not visible:
            return ""
        if self._decided:
            newline = visible.find("\n")
            if newline < 0:
                return ""
            self._decided = False
            visible = visible[newline + 1 :]
        if ":" not in visible:
            newline = visible.rfind("\n")
            if newline >= 0:
                self._line = [visible[newline + 1 :]]
            else:
                self._line.append(visible)
            return ""
        text = "".join(self._line) + visible
        self._line = []
        for kind, _start, end in find_labels(text, self._labels):
            if kind == "action":
                self._closed = True
                return ""
            if kind == "final":
                self._open = True
                return self._show(text[end:])
        tail = text[text.rfind("\n") + 1 :]
        if ":" in tail:
            self._decided = True
        else:
            self._line = [tail]
        return ""

    def _show(self, text: str) -> str:
        if not self._shown:
            text = text.lstrip()
            self._shown = bool(text)
        return text
