"""What ``monitor_operative`` does with each tool output: compress what the model is shown
(``observation_compression``) and keep something of it for later ticks
(``memory_extraction``).

Both act on the outputs of the user's tools through :class:`ObservedTool`, which wraps each
tool of a tick: the model sees the compressed output, the tick's memory gets what was
extracted, and every inference made for it (a summary, an extraction) is counted in the
tick's usage. Model output is parsed in linear time and bounded: at most
:data:`MAX_RELATIONS_PER_OUTPUT` relations from one output, each field cut short.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.ports import ToolPort
from jarvis.domain.tools.specs import ToolResult, ToolSpec

MemoryExtraction = Literal["causality_graph", "scratchpad", "structured_json", "none"]
MEMORY_EXTRACTIONS: tuple[MemoryExtraction, ...] = (
    "causality_graph",
    "scratchpad",
    "structured_json",
    "none",
)
ObservationCompression = Literal["summarize", "truncate", "none"]
OBSERVATION_COMPRESSIONS: tuple[ObservationCompression, ...] = ("summarize", "truncate", "none")

COMPRESS_ABOVE = 2000
"""Outputs longer than this are compressed (summarised or truncated)."""
SUMMARY_INPUT_CHARS = 8000
EXTRACT_FROM = 50
"""Outputs shorter than this hold nothing worth extracting."""
EXTRACT_INPUT_CHARS = 4000
MAX_RELATIONS_PER_OUTPUT = 10
FIELD_CHARS = 200
NOTE_CHARS = 1000
SUMMARY_TOKENS = 512
EXTRACTION_TOKENS = 512

SUMMARIZE_PROMPT = (
    "Summarize the following tool output concisely, preserving all key facts and data points."
)
EXTRACT_PROMPT = (
    "Extract the causal relationships stated or clearly implied in this tool output. Reply "
    "with only a JSON array of objects with the keys 'cause', 'effect' and 'confidence' "
    "(a number from 0 to 1); reply [] when there are none."
)

Generate = Callable[[InferenceRequest], Awaitable[Completion]]


@dataclass(slots=True)
class Observations:
    """What one tick extracted from its tool outputs, and the inferences that cost."""

    relations: list[JSONObject] = field(default_factory=list)
    scratchpad: list[JSONObject] = field(default_factory=list)
    structured: list[JSONObject] = field(default_factory=list)
    compressed: int = 0
    summary_calls: int = 0
    extraction_calls: int = 0


def outermost_json_array(text: str) -> list[JSONValue]:
    """The outermost JSON array in a model's reply (prose or a code fence around it is
    fine); ``[]`` when there is none. Never raises."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end <= start:
        return []
    try:
        data = json.loads(text[start : end + 1])
    except (ValueError, RecursionError):
        return []
    return data if isinstance(data, list) else []


def relations_from_reply(text: str) -> list[JSONObject]:
    """The relations in a model's reply: the outermost JSON array (a code fence around it
    is fine), entries with a text cause and effect; bounded, never raises."""
    data = outermost_json_array(text)
    out: list[JSONObject] = []
    for item in data:
        if len(out) == MAX_RELATIONS_PER_OUTPUT:
            break
        if not isinstance(item, dict):
            continue
        cause, effect = item.get("cause"), item.get("effect")
        if not isinstance(cause, str) or not isinstance(effect, str):
            continue
        if not cause.strip() or not effect.strip():
            continue
        confidence = item.get("confidence", 0.5)
        if isinstance(confidence, bool) or not isinstance(confidence, int | float):
            confidence = 0.5
        out.append(
            {
                "cause": cause.strip()[:FIELD_CHARS],
                "effect": effect.strip()[:FIELD_CHARS],
                "confidence": min(1.0, max(0.0, float(confidence))),
            }
        )
    return out


def structured_value(text: str) -> JSONValue:
    """The output as JSON when it is JSON (bounded), else its first characters as text."""
    if len(text) <= 100_000:
        try:
            value: JSONValue = json.loads(text)
        except (ValueError, RecursionError):
            pass
        else:
            if len(json.dumps(value)) <= 8 * NOTE_CHARS:
                return value
    return text[:NOTE_CHARS]


class ObservedTool:
    """One user tool of a monitor tick, its output compressed and mined for memory."""

    def __init__(
        self,
        tool: ToolPort,
        *,
        generate: Generate,
        model: str,
        compression: ObservationCompression,
        extraction: MemoryExtraction,
        observations: Observations,
        spend: Callable[[Completion], None],
    ) -> None:
        self.tool = tool
        self.generate = generate
        self.model = model
        self.compression = compression
        self.extraction = extraction
        self.observations = observations
        self.spend = spend
        inner = tool.spec
        extra = 0.0
        if compression == "summarize":
            extra += 120.0
        if extraction == "causality_graph":
            extra += 120.0
        self._spec: ToolSpec = replace(inner, timeout_seconds=inner.timeout_seconds + extra)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def _ask(self, system: str, text: str, max_tokens: int) -> str:
        completion = await self.generate(
            InferenceRequest(
                messages=(Message.system(system), Message.user(text)),
                model=self.model,
                temperature=0.0,
                max_tokens=max_tokens,
            )
        )
        self.spend(completion)
        return completion.content.strip()

    async def execute(self, arguments: JSONObject) -> ToolResult:
        result = await self.tool.execute(arguments)
        output = result.content
        if result.success and len(output) >= EXTRACT_FROM:
            await self._extract(output)
        shown = await self._compress(output)
        if shown is output:
            return result
        self.observations.compressed += 1
        metadata: JSONObject = dict(result.metadata)
        metadata["compressed"] = self.compression
        metadata["original_chars"] = len(output)
        return replace(result, content=shown, metadata=metadata)

    async def _compress(self, output: str) -> str:
        if self.compression == "none" or len(output) <= COMPRESS_ABOVE:
            return output
        if self.compression == "summarize":
            self.observations.summary_calls += 1
            summary = await self._ask(
                SUMMARIZE_PROMPT, output[:SUMMARY_INPUT_CHARS], SUMMARY_TOKENS
            )
            if summary:
                return f"[summary of {len(output)} characters of output]\n{summary}"
        return output[:COMPRESS_ABOVE] + "\n... [truncated]"

    async def _extract(self, output: str) -> None:
        name = self.tool.spec.name
        memory = self.observations
        if self.extraction == "causality_graph":
            memory.extraction_calls += 1
            reply = await self._ask(EXTRACT_PROMPT, output[:EXTRACT_INPUT_CHARS], EXTRACTION_TOKENS)
            for relation in relations_from_reply(reply):
                memory.relations.append({**relation, "source": name})
        elif self.extraction == "scratchpad":
            memory.scratchpad.append({"tool": name, "note": output[:NOTE_CHARS]})
        elif self.extraction == "structured_json":
            memory.structured.append({"tool": name, "value": structured_value(output)})
