"""The structured protocol: each reply is one JSON step, for engines without native tools.

With ``output="json_schema"`` the engine's structured-output feature forces every reply into
``{"thought", "tool", "arguments"}`` or ``{"thought", "final_answer"}`` (one ``anyOf``
schema with a branch per tool, whose ``arguments`` follow that tool's parameter schema).
With ``output="text"`` — engines with no schema support — the model is asked for a strict
labelled text format
(``THOUGHT:`` / ``TOOL:`` / ``ARGUMENTS:`` or ``THOUGHT:`` / ``FINAL_ANSWER:``). Either way
the reader accepts both forms, since models drift between them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Literal

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Completion, ResponseFormat
from jarvis.domain.llm.messages import Message
from jarvis.domain.protocols.react_parser import STRUCTURED_LABELS
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.protocols.text_protocol import LabelledTextProtocol
from jarvis.domain.protocols.tool_protocol import (
    Decision,
    FinalAnswer,
    ParseFailure,
    RequestShape,
    SilentFilter,
    TextFilter,
)
from jarvis.domain.tools.descriptions import build_tool_descriptions
from jarvis.domain.tools.specs import ToolSpec

StructuredOutput = Literal["json_schema", "text"]

_JSON_FORMAT = """Reply with exactly one JSON object and nothing else.
To call a tool:
{"thought": "<your reasoning>", "tool": "<tool name>", "arguments": {<the tool's arguments>}}
To finish:
{"thought": "<your reasoning>", "final_answer": "<your answer>"}
After a tool call you receive its result as "Observation: ..."."""

_TEXT_FORMAT = """Reply in exactly one of these two forms and nothing else.
To call a tool:
THOUGHT: <your reasoning>
TOOL: <tool name>
ARGUMENTS: <the tool's arguments as one JSON object>
To finish:
THOUGHT: <your reasoning>
FINAL_ANSWER: <your answer>
After a tool call you receive its result as "Observation: ..."."""


THOUGHT_SCHEMA: JSONObject = {"type": "string", "maxLength": 600}
"""A bounded thought, so a rambling model cannot spend its whole token budget before acting."""


def final_step_schema() -> JSONObject:
    """The schema of a finishing step."""
    return {
        "type": "object",
        "properties": {"thought": dict(THOUGHT_SCHEMA), "final_answer": {"type": "string"}},
        "required": ["thought", "final_answer"],
        "additionalProperties": False,
    }


def _has_ref(value: JSONValue) -> bool:
    if isinstance(value, dict):
        return "$ref" in value or any(_has_ref(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_ref(v) for v in value)
    return False


def tool_step_schema(spec: ToolSpec) -> JSONObject:
    """A call of one tool: its name fixed and its arguments held to the tool's own schema
    (a schema with ``$ref`` cannot be inlined and is replaced by "any object")."""
    arguments: JSONValue = (
        {"type": "object"} if _has_ref(spec.parameters) else dict(spec.parameters)
    )
    return {
        "type": "object",
        "properties": {
            "thought": dict(THOUGHT_SCHEMA),
            "tool": {"type": "string", "enum": [spec.name]},
            "arguments": arguments,
        },
        "required": ["thought", "tool", "arguments"],
        "additionalProperties": False,
    }


def step_schema(specs: Sequence[ToolSpec]) -> JSONObject:
    """The schema of one step: a call of one of ``specs`` with arguments that fit that
    tool's schema, or a final answer. Grammar-based engines (llama.cpp, Ollama) then cannot
    produce a malformed call at all."""
    branches: list[JSONValue] = [tool_step_schema(s) for s in specs]
    branches.append(final_step_schema())
    return {"anyOf": branches} if len(branches) > 1 else final_step_schema()


class StructuredProtocol(LabelledTextProtocol):
    """One JSON (or labelled text) step per reply; tool calls get ids ``step_<turn>``."""

    name = "structured"
    labels = STRUCTURED_LABELS
    call_prefix = "step"

    def __init__(
        self, specs: Sequence[ToolSpec], *, output: StructuredOutput = "json_schema"
    ) -> None:
        super().__init__(specs)
        self.output: StructuredOutput = output
        if output == "json_schema":
            self._shape = RequestShape(
                response_format=ResponseFormat(schema=step_schema(self.specs), name="agent_step")
            )
            self._final_shape = RequestShape(
                response_format=ResponseFormat(schema=final_step_schema(), name="final_step")
            )
        else:
            self._shape = self._final_shape = RequestShape()
        form = _JSON_FORMAT if output == "json_schema" else _TEXT_FORMAT
        tools = build_tool_descriptions(self.specs)
        self._instructions = (
            "Solve the task step by step, using the tools below when they help.\n\n"
            f"## Tools\n\n{tools}\n\n## Format\n\n{form}"
        )

    def instructions(self) -> str:
        return self._instructions

    def request_shape(self) -> RequestShape:
        return self._shape

    def final_shape(self) -> RequestShape:
        return self._final_shape

    def interpret(self, completion: Completion, *, turn: int) -> Decision:
        decision = super().interpret(completion, turn=turn)
        # a JSON object that is neither step kind is a broken step, not an answer
        if (
            isinstance(decision, FinalAnswer)
            and decision.content.startswith(("{", "```"))
            and decision.content == strip_think(completion.content)
        ):
            return ParseFailure(
                self.explain("the JSON step has neither a 'tool' nor a 'final_answer'")
            )
        return decision

    def final_answer(self, completion: Completion) -> str:
        decision = self.interpret(completion, turn=0)
        if isinstance(decision, FinalAnswer):
            return decision.content
        return self.visible_text(completion)

    def visible_text(self, completion: Completion) -> str:
        """What a person can read in a step, even a truncated one: its final answer or its
        thought, never the raw JSON."""
        text = strip_think(completion.content)
        if not text.startswith(("{", "```")):
            return text
        for key in ("final_answer", "thought"):
            match = re.search(rf'"{key}"\s*+:\s*+"((?:[^"\\]++|\\.)*+)', text)
            if match is not None and match.group(1).strip():
                try:
                    value = json.loads(f'"{match.group(1)}"')
                except ValueError:
                    value = match.group(1)
                if isinstance(value, str) and value.strip():
                    return value.strip()
        return ""

    def explain(self, error: str) -> str:
        if self.output == "json_schema":
            return (
                f"{error}. Reply with one JSON object: either "
                '{"thought": ..., "tool": ..., "arguments": {...}} or '
                '{"thought": ..., "final_answer": ...}.'
            )
        return f"{error}. Reply with THOUGHT/TOOL/ARGUMENTS lines or THOUGHT/FINAL_ANSWER lines."

    def parse_error_messages(self, failure: ParseFailure) -> list[Message]:
        return [Message.user(f"Observation: Your reply could not be parsed: {failure.error}")]

    def final_request(self, budget: str) -> Message:
        base = super().final_request(budget).content
        if self.output == "json_schema":
            return Message.user(f'{base} Reply with {{"thought": ..., "final_answer": ...}}.')
        return Message.user(f"{base} Reply with a FINAL_ANSWER line.")

    def text_filter(self) -> TextFilter:
        if self.output == "json_schema":
            return SilentFilter()
        return super().text_filter()
