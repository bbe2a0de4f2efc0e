"""The OpenAI Chat Completions request, read leniently, and its translation to jarvis.

Unknown fields are ignored (clients send many: ``logprobs``, ``seed``, ``user``...); fields
jarvis reads are validated, and a request it cannot honour (images, ``n`` > 1, a malformed
tool) is refused with a 400 saying why instead of being silently answered differently.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import Message, Role, ToolCall
from jarvis.domain.tools.specs import ToolSpec
from jarvis.entrypoints.http.errors import ApiError

MAX_MESSAGES = 10_000
MAX_TOOLS = 512
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Lenient):
    type: str = Field(max_length=64)
    text: str | None = None


class FunctionCallIn(_Lenient):
    name: str = Field(max_length=256)
    arguments: str = ""


class ToolCallIn(_Lenient):
    id: str = Field(max_length=256)
    type: str = "function"
    function: FunctionCallIn


class ChatMessageIn(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = Field(default=None, max_length=256)
    tool_calls: list[ToolCallIn] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_call_id: str | None = Field(default=None, max_length=256)


class FunctionSpecIn(_Lenient):
    name: str = Field(max_length=256)
    description: str = ""
    parameters: dict[str, JsonValue] | None = None


class ToolIn(_Lenient):
    type: Literal["function"] = "function"
    function: FunctionSpecIn


class NamedFunction(_Lenient):
    name: str


class NamedToolChoice(_Lenient):
    type: Literal["function"] = "function"
    function: NamedFunction


class StreamOptions(_Lenient):
    include_usage: bool = False


class JsonSchemaIn(_Lenient):
    name: str = Field(default="response", max_length=64)
    schema_: dict[str, JsonValue] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormatIn(_Lenient):
    """OpenAI's ``response_format``: ``text``, ``json_object`` or ``json_schema``."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaIn | None = None


class ChatRequest(_Lenient):
    """``POST /v1/chat/completions``. ``model``: ``jarvis/<agent key>`` or a managed agent."""

    model: str = Field(min_length=1, max_length=256)
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=1 << 20)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=1 << 20)
    tools: list[ToolIn] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=1)
    response_format: ResponseFormatIn | None = None


def text_of(content: str | list[ContentPart] | None) -> str:
    """The text of a message's content; a part that is not text is refused."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content:
        if part.type not in ("text", "input_text") or part.text is None:
            raise ApiError(
                400,
                f"Content parts of type {part.type!r} are not supported: "
                "jarvis agents read text only.",
            )
        texts.append(part.text)
    return "".join(texts)


def to_messages(messages: list[ChatMessageIn], *, max_chars: int) -> list[Message]:
    """The conversation as jarvis messages; more than ``max_chars`` of text is refused."""
    out: list[Message] = []
    names: dict[str, str] = {}
    total = 0
    for item in messages:
        text = text_of(item.content)
        total += len(text)
        if total > max_chars:
            raise ApiError(
                413,
                f"The messages hold more than {max_chars} characters.",
                code="message_too_large",
            )
        if item.role in ("system", "developer"):
            out.append(Message.system(text))
        elif item.role == "user":
            out.append(Message.user(text))
        elif item.role == "assistant":
            calls = tuple(
                ToolCall.from_json_text(id=c.id, name=c.function.name, text=c.function.arguments)
                for c in item.tool_calls or ()
            )
            names.update((c.id, c.name) for c in calls)
            out.append(Message.assistant(text, calls))
        else:
            if not item.tool_call_id:
                raise ApiError(400, "A tool message needs its tool_call_id.")
            name = item.name or names.get(item.tool_call_id, "tool")
            out.append(Message.tool(text, tool_call_id=item.tool_call_id, name=name))
    return out


def to_tool_specs(tools: list[ToolIn]) -> tuple[ToolSpec, ...]:
    specs: list[ToolSpec] = []
    for tool in tools:
        name = tool.function.name
        if not _TOOL_NAME.match(name):
            raise ApiError(400, f"Invalid tool name {name[:64]!r}.")
        parameters: JSONObject = dict(tool.function.parameters or {})
        if parameters.get("type", "object") != "object":
            raise ApiError(400, f"The parameters of tool {name!r} must be a JSON object schema.")
        parameters.setdefault("type", "object")
        specs.append(
            ToolSpec(name=name, description=tool.function.description, parameters=parameters)
        )
    return tuple(specs)


def split_question(messages: list[Message]) -> tuple[str, tuple[Message, ...]]:
    """The last user message (the question) and the conversation before it."""
    if not messages or messages[-1].role is not Role.USER:
        raise ApiError(
            400,
            "The last message must be the user's (a tool result continues a tool exchange "
            "only when the request also sends its tools).",
        )
    return messages[-1].content, tuple(messages[:-1])


def tool_call_out(index: int, call: ToolCall) -> dict[str, object]:
    return {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_json()},
    }
