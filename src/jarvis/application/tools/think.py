"""The ``think`` tool: a scratchpad. The model writes a thought; the thought comes back.

It lets a function-calling model reason in a step of its own without answering yet.
"""

from __future__ import annotations

from typing import Final

from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolResult, ToolSpec

THINK_SPEC: Final = ToolSpec(
    name="think",
    description=(
        "Think step by step before acting. Write your reasoning in 'thought'; it is returned "
        "unchanged and changes nothing else."
    ),
    parameters={
        "type": "object",
        "properties": {"thought": {"type": "string", "description": "Your reasoning."}},
        "required": ["thought"],
        "additionalProperties": False,
    },
    category="reasoning",
    timeout_seconds=5.0,
    blocking=False,  # bounded work, never waits: awaited directly
)


class ThinkTool:
    @property
    def spec(self) -> ToolSpec:
        return THINK_SPEC

    async def execute(self, arguments: JSONObject) -> ToolResult:
        thought = arguments.get("thought")
        if not isinstance(thought, str):
            return ToolResult(
                tool_name="think", content="Error: 'thought' must be a string.", success=False
            )
        return ToolResult(tool_name="think", content=thought)
