"""``native_react`` (alias ``react``): Thought / Action / Action Input / Observation / Final
Answer as plain text, for any engine — no native tool support needed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from jarvis.domain.llm.messages import Message
from jarvis.domain.loop.tool_loop import ToolUsingAgent
from jarvis.domain.protocols.react_parser import REACT_LABELS, render_action, render_final
from jarvis.domain.protocols.text_protocol import LabelledTextProtocol
from jarvis.domain.protocols.tool_protocol import ParseFailure, RequestShape, ToolProtocol
from jarvis.domain.tools.descriptions import build_tool_descriptions
from jarvis.domain.tools.specs import ToolSpec

REACT_TEMPLATE = "You are Jarvis, a ReAct agent that reasons step by step and uses tools."

_FORMAT = """Respond with exactly one of these two forms.

To use a tool:
{action}

Then stop: the result comes back to you as "Observation: ...". When you know the answer:
{final}

Rules: one Action per reply; the Action Input is one JSON object with the tool's
parameters; never write the Observation yourself."""


class ReActProtocol(LabelledTextProtocol):
    """The ReAct text protocol. Tool calls get ids ``react_<turn>``."""

    name = "react"
    labels = REACT_LABELS
    call_prefix = "react"

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        super().__init__(specs)
        self._instructions = self._render_instructions()

    def _render_instructions(self) -> str:
        example_tool = self.specs[0].name if self.specs else "tool_name"
        form = _FORMAT.format(
            action=render_action(
                example_tool, {"parameter": "value"}, "what you will do and why"
            ).replace('{"parameter": "value"}', "<JSON object with the tool's arguments>"),
            final=render_final("<your answer>", "I now know the answer"),
        )
        tools = build_tool_descriptions(self.specs)
        names = ", ".join(s.name for s in self.specs) or "none"
        return f"## Tools\n\nAvailable tools: {names}\n\n{tools}\n\n## Format\n\n{form}"

    def instructions(self) -> str:
        return self._instructions

    def request_shape(self) -> RequestShape:
        return RequestShape()

    def explain(self, error: str) -> str:
        return (
            f"{error}. Reply either with 'Action: <tool name>' and 'Action Input: <JSON "
            "object>' lines, or with a 'Final Answer: <answer>' line."
        )

    def parse_error_messages(self, failure: ParseFailure) -> list[Message]:
        return [Message.user(f"Observation: Your reply could not be parsed: {failure.error}")]

    def final_request(self, budget: str) -> Message:
        base = super().final_request(budget).content
        return Message.user(f"{base} Reply with 'Final Answer: <your answer>'.")


class NativeReActAgent(ToolUsingAgent):
    """ReAct over plain text. A reply without any label is taken as the final answer; a
    reply that uses the labels but cannot be read is fed back as a parse error."""

    agent_id: ClassVar[str] = "native_react"

    def template(self) -> str:
        return REACT_TEMPLATE

    def make_protocol(self, specs: Sequence[ToolSpec]) -> ToolProtocol:
        return ReActProtocol(specs)
