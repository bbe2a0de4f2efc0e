"""Every message that crosses the sandbox container's boundary, one JSON object per line.

Host -> container: ``run`` (once, first: the inner agent, its persona, conversation, tool
settings and secrets), then answers to the container's requests: ``completion``,
``chunk`` (streamed inference), ``inference_error``, ``tool_reply``.

Container -> host: ``inference`` (generate or stream, with the tools offered), ``tool``
(a host tool the user allowed), ``text``, ``tool_calls``, ``tool_result`` (the run as it
happens), then ``result`` or ``error`` as the last line.

Every field is bounded (strings, lists, numbers), so a line that validates is bounded
too; the host validates every line against :data:`CONTAINER_MESSAGE` and never trusts
what the container says beyond that (see :mod:`jarvis.domain.sandbox.host`). The JSON
Schemas in ``contracts/schemas/sandbox/`` are generated from these models
(``scripts/export_schemas.py``; a test fails when they drift).
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, Field, JsonValue, TypeAdapter

from jarvis.domain.llm.completion import (
    FinishReason,
    StreamChunk,
)
from jarvis.domain.run.contract import AgentResult, MemoryHit, StopReason
from jarvis.domain.sandbox.shapes import (
    MAX_ITEMS,
    MAX_NAME,
    MAX_TEXT,
    CompletionModel,
    FinishName,
    InferenceRequestModel,
    MemoryHitModel,
    MessageModel,
    Name,
    RequestId,
    Text,
    ToolCallModel,
    ToolResultModel,
    ToolSpecModel,
    UsageModel,
    WireModel,
)

PROTOCOL_VERSION = 1
MAX_LINE_CHARS = 8 * 1024 * 1024
"""A line from the container longer than this is a protocol violation (checked before it
is parsed)."""
MAX_RUN_CHARS = 64 * 1024 * 1024
"""The ``run`` line at most (the question, conversation and context travel in it)."""
MAX_SECRETS = 64

_Message = WireModel


# --- host -> container --------------------------------------------------------------------


class RunMessage(_Message):
    """The inner agent and everything it runs with. Sent once, first; the only place the
    secrets travel (never the container's environment or command line)."""

    type: Literal["run"] = "run"
    protocol_version: int = PROTOCOL_VERSION
    question: Annotated[str, Field(max_length=MAX_RUN_CHARS)]
    agent: Name
    model: Name
    engine_id: Name = ""
    temperature: float = Field(ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=1 << 24)
    system_prompt: Text | None = None
    persona_prompt: Text = ""
    agent_options: dict[str, JsonValue] = Field(default_factory=dict)
    default_max_turns: int | None = Field(default=None, ge=1, le=10_000)
    tools: list[Name] = Field(default_factory=list, max_length=64)
    """Tools that run inside (see ``INSIDE_TOOLS``)."""
    host_tools: list[ToolSpecModel] = Field(default_factory=list, max_length=64)
    """Tools the user allowed to be brokered to the host, with the host's own specs."""
    file_roots: list[Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=list, max_length=64
    )
    """The mount targets ``file_read`` may read inside."""
    conversation: list[MessageModel] = Field(default_factory=list, max_length=100_000)
    memory_results: list[MemoryHitModel] = Field(default_factory=list, max_length=MAX_ITEMS)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    secrets: dict[Name, Annotated[str, Field(max_length=65536)]] = Field(
        default_factory=dict, max_length=MAX_SECRETS
    )
    stream: bool = True


class CompletionReply(_Message):
    type: Literal["completion"] = "completion"
    id: RequestId
    completion: CompletionModel


class ChunkReply(_Message):
    """One piece of a streamed inference; the one with ``finish_reason`` is the last."""

    type: Literal["chunk"] = "chunk"
    id: RequestId
    content: Text = ""
    tool_calls: list[ToolCallModel] = Field(default_factory=list, max_length=MAX_ITEMS)
    finish_reason: FinishName | None = None
    usage: UsageModel | None = None
    model: Name = ""

    @classmethod
    def of(cls, request_id: int, chunk: StreamChunk) -> ChunkReply:
        return cls(
            id=request_id,
            content=chunk.content,
            tool_calls=[ToolCallModel.of(c) for c in chunk.tool_calls],
            finish_reason=chunk.finish_reason,
            usage=None if chunk.usage is None else UsageModel.of(chunk.usage),
            model=chunk.model,
        )

    def value(self) -> StreamChunk:
        return StreamChunk(
            content=self.content,
            tool_calls=tuple(c.value() for c in self.tool_calls),
            finish_reason=self.finish_reason,
            usage=None if self.usage is None else self.usage.value(),
            model=self.model,
        )


class InferenceErrorReply(_Message):
    """The host's engine failed: ``kind`` is the error's class name (see
    :func:`jarvis.domain.sandbox.client.inference_error`)."""

    type: Literal["inference_error"] = "inference_error"
    id: RequestId
    kind: Name
    message: Text
    hint: Text = ""


class ToolReply(_Message):
    type: Literal["tool_reply"] = "tool_reply"
    id: RequestId
    result: ToolResultModel


HostMessage: TypeAlias = Annotated[
    RunMessage | CompletionReply | ChunkReply | InferenceErrorReply | ToolReply,
    Field(discriminator="type"),
]

# --- container -> host --------------------------------------------------------------------


class InferenceAsk(_Message):
    """The inner agent asks the host's engine: one generation, streamed or not."""

    type: Literal["inference"] = "inference"
    id: RequestId
    stream: bool = False
    request: InferenceRequestModel


class ToolAsk(_Message):
    """The inner agent calls a host tool (one the user allowed)."""

    type: Literal["tool"] = "tool"
    id: RequestId
    name: Name
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class TextUpdate(_Message):
    type: Literal["text"] = "text"
    text: Text


class ToolCallsUpdate(_Message):
    type: Literal["tool_calls"] = "tool_calls"
    calls: list[ToolCallModel] = Field(max_length=MAX_ITEMS)


class ToolResultUpdate(_Message):
    type: Literal["tool_result"] = "tool_result"
    result: ToolResultModel


StopName: TypeAlias = StopReason
"""The run's own stop reasons: the wire names them as the run does."""


class ResultMessage(_Message):
    """The inner agent's result; the last line of a run that answered."""

    type: Literal["result"] = "result"
    content: Text
    stop_reason: StopName = "final_answer"
    tool_results: list[ToolResultModel] = Field(default_factory=list, max_length=MAX_ITEMS)
    turns: int = Field(default=0, ge=0, le=1 << 20)
    usage: UsageModel = Field(default_factory=UsageModel)
    model: Name = ""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @classmethod
    def of(cls, result: AgentResult) -> ResultMessage:
        return cls(
            content=result.content,
            stop_reason=result.stop_reason,
            tool_results=[ToolResultModel.of(r) for r in result.tool_results],
            turns=result.turns,
            usage=UsageModel.of(result.usage),
            model=result.model,
            metadata=result.metadata,
        )


class ErrorMessage(_Message):
    """The inner run failed. ``kind``: ``configuration``, ``sandbox``, ``tool``,
    ``unexpected`` or the class name of an inference error."""

    type: Literal["error"] = "error"
    kind: Name
    message: Text
    hint: Text = ""


ContainerMessage: TypeAlias = Annotated[
    InferenceAsk
    | ToolAsk
    | TextUpdate
    | ToolCallsUpdate
    | ToolResultUpdate
    | ResultMessage
    | ErrorMessage,
    Field(discriminator="type"),
]

HOST_MESSAGE: TypeAdapter[HostMessage] = TypeAdapter(HostMessage)
CONTAINER_MESSAGE: TypeAdapter[ContainerMessage] = TypeAdapter(ContainerMessage)


def encode(message: BaseModel) -> str:
    """One line of JSON (no newline inside: JSON escapes them)."""
    return message.model_dump_json(by_alias=True)


def memory_hits(hits: tuple[MemoryHit, ...]) -> list[MemoryHitModel]:
    return [MemoryHitModel(content=h.content, source=h.source, score=h.score) for h in hits]


def stop_reason(name: StopName) -> StopReason:
    return name


def finish_reason(name: FinishName) -> FinishReason:
    return name


def schemas() -> dict[str, dict[str, JsonValue]]:
    """The JSON Schema of each direction, by file name."""
    return {
        "host_to_container.schema.json": HOST_MESSAGE.json_schema(by_alias=True),
        "container_to_host.schema.json": CONTAINER_MESSAGE.json_schema(by_alias=True),
    }


__all__ = [
    "MAX_ITEMS",
    "MAX_LINE_CHARS",
    "MAX_NAME",
    "MAX_RUN_CHARS",
    "MAX_SECRETS",
    "MAX_TEXT",
    "PROTOCOL_VERSION",
    "ChunkReply",
    "CompletionModel",
    "CompletionReply",
    "ErrorMessage",
    "FinishName",
    "InferenceAsk",
    "InferenceErrorReply",
    "InferenceRequestModel",
    "MemoryHitModel",
    "MessageModel",
    "ResultMessage",
    "RunMessage",
    "StopName",
    "TextUpdate",
    "ToolAsk",
    "ToolCallModel",
    "ToolCallsUpdate",
    "ToolReply",
    "ToolResultModel",
    "ToolResultUpdate",
    "ToolSpecModel",
    "UsageModel",
    "WireModel",
    "encode",
    "finish_reason",
    "memory_hits",
    "schemas",
    "stop_reason",
]
