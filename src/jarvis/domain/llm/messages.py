"""Conversation messages and the one canonical tool-call shape.

Every engine adapter converts its wire format to these types, so agents never see the
difference between OpenAI's nested ``function`` objects, Ollama's object arguments or a
text protocol's parsed action.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

from jarvis.domain.json_types import JSONObject


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A request by the model to run one tool.

    ``arguments`` is always a JSON object. When the model produced text that is not a JSON
    object, ``arguments`` is empty and ``raw_arguments`` keeps the text, so the executor can
    report the parse error back to the model instead of guessing.
    """

    id: str
    name: str
    arguments: JSONObject = field(default_factory=dict)
    raw_arguments: str | None = None

    @property
    def parsed(self) -> bool:
        """True when the arguments were a valid JSON object."""
        return self.raw_arguments is None

    def arguments_json(self) -> str:
        """The arguments as compact JSON text (the raw text when they did not parse)."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json_text(cls, *, id: str, name: str, text: str | None) -> ToolCall:
        """Build a call from argument text as engines send it ("" and None mean ``{}``)."""
        if text is None or not text.strip():
            return cls(id=id, name=name)
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return cls(id=id, name=name, raw_arguments=text)
        if isinstance(value, dict):
            return cls(id=id, name=name, arguments=value)
        return cls(id=id, name=name, raw_arguments=text)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of a conversation.

    ``tool_calls`` is set on assistant messages that requested tools; ``tool_call_id`` (and
    ``name``) on the TOOL messages that answer them.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role=Role.SYSTEM, content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role=Role.USER, content=content)

    @classmethod
    def assistant(cls, content: str, tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role=Role.ASSISTANT, content=content, tool_calls=tool_calls)

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str, name: str) -> Message:
        return cls(role=Role.TOOL, content=content, tool_call_id=tool_call_id, name=name)
