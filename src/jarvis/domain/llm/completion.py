"""What an inference engine returns: completions, stream chunks and token usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import ToolCall

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error"]
"""Why the engine stopped generating. Adapters map their own vocabulary onto this."""

ToolChoice = Literal["auto", "required", "none"]
"""Whether the model may, must or must not call a tool when tools are offered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts. Summed across every inference of an agent run."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFormat:
    """Structured output: ``json_object`` (any JSON) or ``json_schema`` (this schema).

    ``strict`` asks an OpenAI-compatible server for its strict schema mode; it is set only
    for schemas that mode accepts (every object closed, every property required).
    """

    type: Literal["json_object", "json_schema"] = "json_schema"
    schema: JSONObject | None = None
    name: str = "response"
    strict: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """A finished, non-streamed generation."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamChunk:
    """One piece of a streamed generation.

    Content arrives in many chunks. Tool calls are never fragments: the adapter assembles
    them and delivers every complete call in the final chunk, together with the finish
    reason and (when the engine reports it) the usage.
    """

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    model: str = ""

    @property
    def is_final(self) -> bool:
        return self.finish_reason is not None
