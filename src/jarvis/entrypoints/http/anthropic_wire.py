"""The Anthropic Messages request, read as the Claude Agent SDK sends it, and its translation.

Accepted and understood: ``system`` as a string or a list of blocks (``cache_control`` and
other block fields ignored), ``role: "system"`` entries inside ``messages``, text,
``tool_use`` and ``tool_result`` blocks (tool results by their ``tool_use_id``, text or
block lists, ``is_error`` kept as a marker), custom tools with ``input_schema`` (also those
with ``defer_loading``), ``tool_choice`` ``auto``/``any``/``tool``/``none``.

Accepted and ignored: ``thinking`` and ``redacted_thinking`` blocks, ``thinking``,
``output_config``, ``context_management``, ``metadata``, ``stop_sequences``, ``top_k``,
``service_tier``, server tools (a ``type`` other than ``custom`` and no schema), and any
field not named here. Images and documents become a short placeholder text (the engine
reads text). Nothing unknown is a 422.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import Message, Role, ToolCall
from jarvis.domain.tools.specs import ToolSpec
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.openai_wire import MAX_MESSAGES, MAX_TOOLS


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Block(_Lenient):
    type: str = Field(max_length=64)
    text: str | None = None
    id: str | None = Field(default=None, max_length=256)
    name: str | None = Field(default=None, max_length=256)
    input: dict[str, JsonValue] | None = None
    tool_use_id: str | None = Field(default=None, max_length=256)
    content: str | list[Block] | None = None
    is_error: bool | None = None


class MessageIn(_Lenient):
    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


class ToolIn(_Lenient):
    name: str = Field(max_length=256)
    type: str | None = None
    description: str = ""
    input_schema: dict[str, JsonValue] | None = None


class ToolChoiceIn(_Lenient):
    type: Literal["auto", "any", "tool", "none"] = "auto"
    name: str | None = None


class MessagesRequest(_Lenient):
    """``POST /v1/messages``: Anthropic's Messages API over the server's engine."""

    model: str = Field(min_length=1, max_length=256)
    messages: list[MessageIn] = Field(max_length=MAX_MESSAGES)
    system: str | list[Block] | None = None
    max_tokens: int = Field(default=4096, ge=1, le=1 << 24)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    stream: bool = False
    tools: list[ToolIn] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: ToolChoiceIn | None = None


class CountTokensRequest(_Lenient):
    """``POST /v1/messages/count_tokens``: the same fields, nothing generated."""

    model: str = Field(default="", max_length=256)
    messages: list[MessageIn] = Field(default_factory=list, max_length=MAX_MESSAGES)
    system: str | list[Block] | None = None
    tools: list[ToolIn] | None = Field(default=None, max_length=MAX_TOOLS)


def _placeholder(block: Block) -> str:
    return f"[{block.type} omitted: this server passes text only]"


def block_text(content: str | list[Block] | None) -> str:
    """The text of a string or of a block list (non-text blocks as placeholders)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if block.type == "text":
            parts.append(block.text or "")
        elif block.type in ("image", "document"):
            parts.append(_placeholder(block))
    return "".join(parts)


def _system_parts(content: str | list[Block] | None) -> list[str]:
    if content is None or isinstance(content, str):
        return [content or ""]
    return [block_text([block]) for block in content]


def system_text(request: MessagesRequest | CountTokensRequest) -> str:
    """``system`` and every ``role: "system"`` message, in order, as one text."""
    parts = _system_parts(request.system)
    for message in request.messages:
        if message.role == "system":
            parts.extend(_system_parts(message.content))
    return "\n\n".join(p for p in parts if p.strip())


def to_messages(request: MessagesRequest, *, max_chars: int) -> list[Message]:
    """The conversation (system entries left out: see :func:`system_text`)."""
    out: list[Message] = []
    names: dict[str, str] = {}
    total = 0
    for item in request.messages:
        if item.role == "system":
            continue
        blocks = (
            [Block(type="text", text=item.content)]
            if isinstance(item.content, str)
            else item.content
        )
        texts: list[str] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        for block in blocks:
            if block.type == "text":
                texts.append(block.text or "")
            elif block.type == "tool_use" and item.role == "assistant":
                if not block.id or not block.name:
                    raise ApiError(400, "A tool_use block needs its id and name.")
                arguments: JSONObject = dict(block.input or {})
                calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
                names[block.id] = block.name
            elif block.type == "tool_result" and item.role == "user":
                if not block.tool_use_id:
                    raise ApiError(400, "A tool_result block needs its tool_use_id.")
                text = block_text(block.content)
                if block.is_error:
                    text = "Error: " + text
                results.append(
                    Message.tool(
                        text,
                        tool_call_id=block.tool_use_id,
                        name=names.get(block.tool_use_id, "tool"),
                    )
                )
            elif block.type in ("image", "document"):
                texts.append(_placeholder(block))
            # thinking, redacted_thinking, server tool blocks: not for the engine
        text = "".join(texts)
        total += len(text) + sum(len(r.content) for r in results)
        if total > max_chars:
            raise ApiError(
                413,
                f"The messages hold more than {max_chars} characters.",
                code="message_too_large",
            )
        if item.role == "assistant":
            out.append(Message.assistant(text, tuple(calls)))
        else:
            out.extend(results)
            if text or not results:
                out.append(Message.user(text))
    return out


def to_tool_specs(tools: list[ToolIn] | None) -> tuple[ToolSpec, ...]:
    """Custom tools (with an ``input_schema``); server tools are left out."""
    specs: list[ToolSpec] = []
    for tool in tools or ():
        if tool.input_schema is None or tool.type not in (None, "custom"):
            continue
        schema: JSONObject = dict(tool.input_schema)
        schema.setdefault("type", "object")
        specs.append(ToolSpec(name=tool.name, description=tool.description, parameters=schema))
    return tuple(specs)


def estimate_tokens(request: MessagesRequest | CountTokensRequest) -> int:
    """About four characters a token, over everything the model would read."""
    chars = len(system_text(request))
    for message in request.messages:
        if isinstance(message.content, str):
            chars += len(message.content)
        else:
            chars += sum(len(b.model_dump_json(exclude_none=True)) for b in message.content)
    for tool in request.tools or ():
        chars += len(tool.name) + len(tool.description)
        chars += len(json.dumps(tool.input_schema or {}))
    return max(1, (chars + 3) // 4) + 4 * len(request.messages)


def last_is_answerable(messages: list[Message]) -> None:
    if not messages or messages[-1].role not in (Role.USER, Role.TOOL):
        raise ApiError(400, "messages must end with a user turn.")
