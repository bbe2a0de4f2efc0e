"""``orchestrator``: the tool loop over native function calling, or over structured output.

``mode="function_calling"`` (default) sends the tool definitions natively and runs every call
the model returns; ``tool_choice="required"`` forces a call on the first turn (later turns
are ``auto``, so the model can answer). ``mode="structured"`` drives the same loop through
one JSON step per reply (see :mod:`~jarvis.domain.protocols.structured`), for engines without
native tool calls.

When the engine refuses tool definitions (``ToolsNotSupportedError``, e.g. Ollama's "does
not support tools"), the run switches to structured mode and says so in its metadata
(``mode = "structured"``, ``fallback = "tools_not_supported"``): the tools are never silently
dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal, Self, Unpack

from jarvis.domain.errors import ConfigurationError, InferenceError, ToolsNotSupportedError
from jarvis.domain.llm.completion import ToolChoice
from jarvis.domain.loop.options import AgentOptions, AgentParts
from jarvis.domain.loop.tool_loop import ToolAgentOptions, ToolUsingAgent
from jarvis.domain.ports import InferencePort
from jarvis.domain.protocols.function_calling import FunctionCallingProtocol
from jarvis.domain.protocols.structured import StructuredOutput, StructuredProtocol
from jarvis.domain.protocols.tool_protocol import ToolProtocol
from jarvis.domain.tools.specs import ToolSpec

OrchestratorMode = Literal["function_calling", "structured"]
_MODES: tuple[OrchestratorMode, ...] = ("function_calling", "structured")
_OUTPUTS: tuple[StructuredOutput, ...] = ("json_schema", "text")
_TOOL_CHOICES: tuple[ToolChoice, ...] = ("auto", "required", "none")


class OrchestratorAgent(ToolUsingAgent):
    """Function-calling tool loop with a structured-output mode and automatic fallback."""

    agent_id: ClassVar[str] = "orchestrator"

    def __init__(
        self,
        inference: InferencePort,
        model: str,
        *,
        mode: OrchestratorMode = "function_calling",
        structured_output: StructuredOutput = "json_schema",
        tool_choice: ToolChoice = "auto",
        **options: Unpack[ToolAgentOptions],
    ) -> None:
        if mode not in _MODES:
            raise ConfigurationError(
                f"Unknown orchestrator mode '{mode}'.", hint="Modes: " + ", ".join(_MODES)
            )
        if structured_output not in _OUTPUTS:
            raise ConfigurationError(
                f"Unknown structured output '{structured_output}'.",
                hint="Choose one of: " + ", ".join(_OUTPUTS),
            )
        if tool_choice not in _TOOL_CHOICES:
            raise ConfigurationError(
                f"Unknown tool choice '{tool_choice}'.",
                hint="Choose one of: " + ", ".join(_TOOL_CHOICES),
            )
        self.tool_choice: ToolChoice = tool_choice
        self.mode: OrchestratorMode = mode
        self.structured_output: StructuredOutput = structured_output
        super().__init__(inference, model, **options)

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        return cls(
            parts.inference,
            parts.model,
            mode=options.choice("mode", _MODES, "function_calling", what="mode"),
            structured_output=options.choice(
                "structured_output", _OUTPUTS, "json_schema", what="structured output"
            ),
            tool_choice=options.choice("tool_choice", _TOOL_CHOICES, "auto", what="tool choice"),
            **cls.tool_agent_options(parts, options),
        )

    def make_protocol(self, specs: Sequence[ToolSpec]) -> ToolProtocol:
        if self.mode == "structured":
            return StructuredProtocol(specs, output=self.structured_output)
        return FunctionCallingProtocol(specs, first_tool_choice=self.tool_choice)

    def fallback_protocol(
        self, error: InferenceError, current: ToolProtocol
    ) -> ToolProtocol | None:
        if isinstance(error, ToolsNotSupportedError) and current.native_tools:
            return StructuredProtocol(current.specs, output=self.structured_output)
        return None
