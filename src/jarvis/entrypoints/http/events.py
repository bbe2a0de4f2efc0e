"""Every event the server streams, as pydantic models: what is sent is what is documented.

Three streams leave the server as Server-Sent Events:

* the managed-agent stream (``POST /v1/managed-agents/{id}/messages`` with ``stream``):
  OpenAI chunks (:class:`ChatChunk`) for the text, named events ``tool_calls``
  (:class:`ToolCallsEvent`), ``approval_required`` (:class:`ApprovalRequiredEvent`),
  ``approval`` (:class:`ApprovalEvent`) and ``tool_result`` (:class:`ToolResultEvent`) for
  the tool loop, ``error`` (:class:`ErrorEvent`) when the run fails, a final chunk with
  ``finish_reason`` and ``usage``, then ``data: [DONE]`` — always;
* ``POST /v1/chat/completions`` with ``stream``: OpenAI chunks, then ``data: [DONE]``;
* ``POST /v1/messages`` with ``stream``: Anthropic's events (:data:`ANTHROPIC_EVENTS`).

:func:`schemas` renders them as the JSON Schemas committed under
``contracts/schemas/sse/`` (a unit test fails when they drift).
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    JsonValue,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

from jarvis.domain.json_types import JSONObject
from jarvis.entrypoints.http.json_body import model_json


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- OpenAI chunks (both the managed-agent stream and /v1/chat/completions) ----------------


class FunctionDelta(_Event):
    name: str
    arguments: str
    """The call's arguments as JSON text, whole (never fragments)."""


class ToolCallDelta(_Event):
    index: int
    id: str
    type: Literal["function"] = "function"
    function: FunctionDelta


class Delta(_Event):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(_Event):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter"] | None = None
    """``null`` until the last chunk (always present, as OpenAI sends it)."""

    @model_serializer(mode="wrap")
    def _keep_finish_reason(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        data.setdefault("finish_reason", None)
        return data


class ChunkUsage(_Event):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class MemoryChunk(_Event):
    """One chunk of the knowledge base a run received as context (``memory``)."""

    citation: str
    """``[source:line]``, as the prompt quoted it."""
    source: str
    line: int
    end_line: int
    score: float


class RunSummary(_Event):
    """What the agent's run ended with (a jarvis extension of the final chunk)."""

    stop_reason: str
    """``final_answer``, ``max_turns``, ``max_seconds``, ``max_total_tokens``,
    ``loop_detected``, ``parse_error``, ``error``, ``cancelled`` (a managed agent deleted
    while it ran)..."""
    turns: int
    tool_calls: int
    memory_results: list[MemoryChunk] | None = None
    """The knowledge base's chunks the run received (left out when it received none)."""


class ChatChunk(_Event):
    """One ``data:`` line of an OpenAI-format stream."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChunkUsage | None = None
    jarvis: RunSummary | None = None


# --- named events of the managed-agent stream ----------------------------------------------


class CallInfo(_Event):
    id: str
    tool_name: str
    arguments: str
    """The arguments as JSON text (the model's own text when it was not valid JSON)."""


class ToolCallsEvent(_Event):
    """``event: tool_calls``: the model asked for these calls; they run now."""

    calls: list[CallInfo]


class ToolResultEvent(_Event):
    """``event: tool_result``: one call finished."""

    tool_name: str
    output: str
    success: bool
    call_id: str
    latency_ms: float


class ApprovalRequiredEvent(_Event):
    """``event: approval_required``: a tool call waits for ``POST
    /v1/managed-agents/{agent}/approvals/{id}`` (``{"allow": true|false, "reason": ...}``)."""

    id: str
    call_id: str
    tool_name: str
    arguments: str
    """The call's arguments as JSON text, cut to 2000 characters."""
    effects: Literal["read_only", "side_effects", "destructive"]
    reason: str
    """Why it asks: what the tool may do."""
    rule: str
    """The rule that made it ask."""
    timeout_seconds: float
    """How long the run waits before the call is denied."""


class ApprovalEvent(_Event):
    """``event: approval``: the decision on one tool call, before the allowed calls run."""

    call_id: str
    tool_name: str
    decision: Literal["allow", "deny"]
    rule: str
    """The rule that made the decision."""
    reason: str | None = None
    asked: bool


class ErrorBody(_Event):
    message: str
    type: str
    code: str | None = None


class ErrorEvent(_Event):
    """``event: error``: the run failed; the final chunk and ``[DONE]`` follow."""

    error: ErrorBody


# --- Anthropic Messages stream -------------------------------------------------------------


class AnthropicUsage(_Event):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class TextBlock(_Event):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(_Event):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, JsonValue]


class AnthropicMessage(_Event):
    """The whole reply of ``POST /v1/messages`` (and the shell in ``message_start``)."""

    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    content: list[TextBlock | ToolUseBlock]
    model: str
    stop_reason: Literal["end_turn", "max_tokens", "tool_use", "stop_sequence"] | None
    stop_sequence: str | None = None
    usage: AnthropicUsage

    @model_serializer(mode="wrap")
    def _keep_stop_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        data.setdefault("stop_reason", None)  # null while streaming, as Anthropic sends it
        data.setdefault("stop_sequence", None)
        return data


class MessageStart(_Event):
    type: Literal["message_start"] = "message_start"
    message: AnthropicMessage


class ContentBlockStart(_Event):
    type: Literal["content_block_start"] = "content_block_start"
    index: int
    content_block: TextBlock | ToolUseBlock


class TextDeltaBody(_Event):
    type: Literal["text_delta"] = "text_delta"
    text: str


class InputJsonDelta(_Event):
    type: Literal["input_json_delta"] = "input_json_delta"
    partial_json: str


class ContentBlockDelta(_Event):
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: TextDeltaBody | InputJsonDelta


class ContentBlockStop(_Event):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class MessageDeltaBody(_Event):
    stop_reason: Literal["end_turn", "max_tokens", "tool_use", "stop_sequence"]
    stop_sequence: str | None = None


class MessageDeltaUsage(_Event):
    output_tokens: int
    input_tokens: int | None = None


class MessageDelta(_Event):
    type: Literal["message_delta"] = "message_delta"
    delta: MessageDeltaBody
    usage: MessageDeltaUsage


class MessageStop(_Event):
    type: Literal["message_stop"] = "message_stop"


class Ping(_Event):
    type: Literal["ping"] = "ping"


class AnthropicErrorBody(_Event):
    type: str
    message: str


class AnthropicError(_Event):
    """The error body of every ``/v1/messages`` failure, streamed as ``event: error``."""

    type: Literal["error"] = "error"
    error: AnthropicErrorBody


AnthropicEvent = (
    MessageStart
    | ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
    | Ping
    | AnthropicError
)
ANTHROPIC_EVENTS: TypeAdapter[AnthropicEvent] = TypeAdapter(AnthropicEvent)
"""Every Anthropic stream event; the SSE ``event:`` name is the object's ``type``."""


def encode(event_name: str | None, event: _Event) -> bytes:
    """One SSE frame: ``event: NAME`` (when named), ``data: JSON``, blank line. Fields that
    are ``None`` are left out (``finish_reason`` excepted)."""
    data = model_json(event)
    if event_name is None:
        return b"data: " + data.encode() + b"\n\n"
    return b"event: " + event_name.encode() + b"\ndata: " + data.encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def _schema(title: str, model: type[BaseModel] | TypeAdapter[AnthropicEvent]) -> JSONObject:
    body = model.json_schema() if isinstance(model, TypeAdapter) else model.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **body}


def schemas() -> dict[str, JSONObject]:
    """Every SSE event's JSON Schema, by file name under ``contracts/schemas/sse/``."""
    return {
        "chat_chunk.schema.json": _schema(
            "jarvis SSE: an OpenAI chat.completion.chunk (managed agents, /v1/chat/completions)",
            ChatChunk,
        ),
        "tool_calls.schema.json": _schema(
            "jarvis SSE: event tool_calls (managed agents)", ToolCallsEvent
        ),
        "tool_result.schema.json": _schema(
            "jarvis SSE: event tool_result (managed agents)", ToolResultEvent
        ),
        "error.schema.json": _schema("jarvis SSE: event error (managed agents)", ErrorEvent),
        "approval_required.schema.json": _schema(
            "jarvis SSE: event approval_required (managed agents)", ApprovalRequiredEvent
        ),
        "approval.schema.json": _schema(
            "jarvis SSE: event approval (managed agents)", ApprovalEvent
        ),
        "anthropic_event.schema.json": _schema(
            "jarvis SSE: an Anthropic Messages stream event (/v1/messages)", ANTHROPIC_EVENTS
        ),
    }


__all__ = [
    "ANTHROPIC_EVENTS",
    "DONE",
    "AnthropicMessage",
    "ChatChunk",
    "ErrorEvent",
    "ToolCallsEvent",
    "ToolResultEvent",
    "encode",
    "schemas",
]
