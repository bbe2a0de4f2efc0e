"""The shapes both directions of the sandbox wire share (tool calls, messages, tool specs,
usage, inference requests, completions, tool results, memory hits), each bounded, with the
conversions to and from the domain's own values. The messages themselves are in
:mod:`jarvis.domain.sandbox.protocol`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from jarvis.domain.llm.completion import (
    Completion,
    ResponseFormat,
    Usage,
)
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, Role, ToolCall
from jarvis.domain.tools.specs import ToolResult, ToolSpec

MAX_TEXT = 8 * 1024 * 1024
MAX_NAME = 256
MAX_ITEMS = 4096

Text = Annotated[str, Field(max_length=MAX_TEXT)]
Name = Annotated[str, Field(max_length=MAX_NAME)]
RequestId = Annotated[int, Field(ge=1, le=1 << 40)]
Tokens = Annotated[int, Field(ge=0, le=1 << 40)]


class WireModel(BaseModel):
    """Every message of the sandbox wire: no field but its own, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --- shared shapes ------------------------------------------------------------------------


class ToolCallModel(WireModel):
    id: Name
    name: Name
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    raw_arguments: Text | None = None

    @classmethod
    def of(cls, call: ToolCall) -> ToolCallModel:
        return cls(
            id=call.id, name=call.name, arguments=call.arguments, raw_arguments=call.raw_arguments
        )

    def value(self) -> ToolCall:
        return ToolCall(
            id=self.id,
            name=self.name,
            arguments=dict(self.arguments),
            raw_arguments=self.raw_arguments,
        )


class MessageModel(WireModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: Text = ""
    tool_calls: list[ToolCallModel] = Field(default_factory=list, max_length=MAX_ITEMS)
    tool_call_id: Name | None = None
    name: Name | None = None

    @classmethod
    def of(cls, message: Message) -> MessageModel:
        return cls(
            role=message.role.value,
            content=message.content,
            tool_calls=[ToolCallModel.of(c) for c in message.tool_calls],
            tool_call_id=message.tool_call_id,
            name=message.name,
        )

    def value(self) -> Message:
        return Message(
            role=Role(self.role),
            content=self.content,
            tool_calls=tuple(c.value() for c in self.tool_calls),
            tool_call_id=self.tool_call_id,
            name=self.name,
        )


class ToolSpecModel(WireModel):
    name: Name
    description: Text
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    category: Name = ""
    timeout_seconds: float = Field(default=30.0, gt=0, le=86_400)
    side_effects: bool = False
    blocking: bool = True
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None

    @classmethod
    def of(cls, spec: ToolSpec) -> ToolSpecModel:
        return cls(
            name=spec.name,
            description=spec.description,
            parameters=spec.parameters,
            category=spec.category,
            timeout_seconds=spec.timeout_seconds,
            side_effects=spec.side_effects,
            blocking=spec.blocking,
            read_only_hint=spec.read_only_hint,
            destructive_hint=spec.destructive_hint,
        )

    def value(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=dict(self.parameters),
            category=self.category,
            timeout_seconds=self.timeout_seconds,
            side_effects=self.side_effects,
            blocking=self.blocking,
            read_only_hint=self.read_only_hint,
            destructive_hint=self.destructive_hint,
        )


class UsageModel(WireModel):
    prompt_tokens: Tokens = 0
    completion_tokens: Tokens = 0

    @classmethod
    def of(cls, usage: Usage) -> UsageModel:
        return cls(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)

    def value(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)


class ResponseFormatModel(WireModel):
    type: Literal["json_object", "json_schema"] = "json_schema"
    schema_: dict[str, JsonValue] | None = Field(default=None, alias="schema")
    name: Name = "response"
    strict: bool = False

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class InferenceRequestModel(WireModel):
    messages: list[MessageModel] = Field(max_length=100_000)
    model: Name
    temperature: float = Field(ge=0, le=2)
    max_tokens: int = Field(ge=1, le=1 << 24)
    tools: list[ToolSpecModel] = Field(default_factory=list, max_length=MAX_ITEMS)
    tool_choice: Literal["auto", "required", "none"] = "auto"
    response_format: ResponseFormatModel | None = None
    options: dict[str, JsonValue] = Field(default_factory=dict)

    @classmethod
    def of(cls, request: InferenceRequest) -> InferenceRequestModel:
        response = request.response_format
        return cls(
            messages=[MessageModel.of(m) for m in request.messages],
            model=request.model,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            tools=[ToolSpecModel.of(t) for t in request.tools],
            tool_choice=request.tool_choice,
            response_format=None
            if response is None
            else ResponseFormatModel(
                type=response.type,
                schema=response.schema,
                name=response.name,
                strict=response.strict,
            ),
            options=request.options,
        )

    def value(self) -> InferenceRequest:
        response = self.response_format
        return InferenceRequest(
            messages=tuple(m.value() for m in self.messages),
            model=self.model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            tools=tuple(t.value() for t in self.tools),
            tool_choice=self.tool_choice,
            response_format=None
            if response is None
            else ResponseFormat(
                type=response.type,
                schema=None if response.schema_ is None else dict(response.schema_),
                name=response.name,
                strict=response.strict,
            ),
            options=dict(self.options),
        )


FinishName = Literal["stop", "length", "tool_calls", "content_filter", "error"]


class CompletionModel(WireModel):
    content: Text = ""
    tool_calls: list[ToolCallModel] = Field(default_factory=list, max_length=MAX_ITEMS)
    finish_reason: FinishName = "stop"
    usage: UsageModel = Field(default_factory=UsageModel)
    model: Name = ""

    @classmethod
    def of(cls, completion: Completion) -> CompletionModel:
        return cls(
            content=completion.content,
            tool_calls=[ToolCallModel.of(c) for c in completion.tool_calls],
            finish_reason=completion.finish_reason,
            usage=UsageModel.of(completion.usage),
            model=completion.model,
        )

    def value(self) -> Completion:
        return Completion(
            content=self.content,
            tool_calls=tuple(c.value() for c in self.tool_calls),
            finish_reason=self.finish_reason,
            usage=self.usage.value(),
            model=self.model,
        )


class ToolResultModel(WireModel):
    tool_name: Name
    content: Text
    success: bool = True
    call_id: Name = ""
    latency_seconds: float = Field(default=0.0, ge=0, le=1e7)
    truncated: bool = False
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @classmethod
    def of(cls, result: ToolResult) -> ToolResultModel:
        return cls(
            tool_name=result.tool_name,
            content=result.content,
            success=result.success,
            call_id=result.call_id,
            latency_seconds=max(0.0, result.latency_seconds),
            truncated=result.truncated,
            metadata=result.metadata,
        )

    def value(self) -> ToolResult:
        return ToolResult(
            tool_name=self.tool_name,
            content=self.content,
            success=self.success,
            call_id=self.call_id,
            latency_seconds=self.latency_seconds,
            truncated=self.truncated,
            metadata=dict(self.metadata),
        )


class MemoryHitModel(WireModel):
    content: Text
    source: Name = ""
    score: float = 0.0
