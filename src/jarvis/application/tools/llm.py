"""The ``llm`` tool: ask a sub-model a self-contained question through the InferencePort.

It uses the run's engine; the model is the run's unless the tool was built with another
one. Engine failures are failed results, so the calling agent can carry on without it.
"""

from __future__ import annotations

from typing import Final

from jarvis.domain.errors import InferenceError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.ports import InferencePort
from jarvis.domain.tools.specs import ToolResult, ToolSpec

LLM_SPEC: Final = ToolSpec(
    name="llm",
    description=(
        "Ask a language model a self-contained question (it cannot see this conversation) "
        "and get its answer: summarise, translate, rewrite or draft text."
    ),
    parameters={
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The complete question or task."},
            "system": {
                "type": "string",
                "description": "Optional instructions for how the model should answer.",
            },
        },
        "required": ["prompt"],
        "additionalProperties": False,
    },
    category="inference",
    timeout_seconds=120.0,
)


class LlmTool:
    """One generation per call: optional system message, then the prompt."""

    def __init__(
        self,
        inference: InferencePort,
        model: str,
        *,
        temperature: float = 0.3,
        max_tokens: int = 1024,
    ) -> None:
        self.inference = inference
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens

    @property
    def spec(self) -> ToolSpec:
        return LLM_SPEC

    async def execute(self, arguments: JSONObject) -> ToolResult:
        prompt = arguments.get("prompt")
        system = arguments.get("system")
        if not isinstance(prompt, str) or not prompt.strip():
            return ToolResult(
                tool_name="llm",
                content="Error: 'prompt' must be a non-empty string.",
                success=False,
            )
        messages: list[Message] = []
        if isinstance(system, str) and system.strip():
            messages.append(Message.system(system))
        messages.append(Message.user(prompt))
        request = InferenceRequest(
            messages=tuple(messages),
            model=self.model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        try:
            completion = await self.inference.generate(request)
        except InferenceError as exc:
            return ToolResult(
                tool_name="llm", content=f"Error: the model call failed: {exc}", success=False
            )
        usage = completion.usage
        return ToolResult(
            tool_name="llm",
            content=completion.content,
            metadata={
                "model": completion.model or self.model,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            },
        )
