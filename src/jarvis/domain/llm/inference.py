"""The request an agent sends to an inference engine."""

from __future__ import annotations

from dataclasses import dataclass, field

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import ResponseFormat, ToolChoice
from jarvis.domain.llm.messages import Message
from jarvis.domain.tools.specs import ToolSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceRequest:
    """One generation request, identical for streaming and non-streaming calls.

    ``tools`` are offered to the model (never silently dropped: an engine that cannot take
    them raises :class:`~jarvis.domain.errors.ToolsNotSupportedError`). ``options`` carries
    engine-specific knobs that adapters understand by name (``num_ctx`` for Ollama, ``top_p``,
    ``seed``...); unknown keys are ignored by adapters that do not know them.
    """

    messages: tuple[Message, ...]
    model: str
    temperature: float = 0.7
    max_tokens: int = 1024
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    response_format: ResponseFormat | None = None
    options: JSONObject = field(default_factory=dict)
