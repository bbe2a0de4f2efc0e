"""The ``calculator`` tool: exact, bounded arithmetic for the model (see :mod:`.safe_math`)."""

from __future__ import annotations

from typing import Final

from jarvis.application.tools.safe_math import (
    CONSTANTS,
    FUNCTIONS,
    CalculationError,
    evaluate,
    format_number,
)
from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolResult, ToolSpec

CALCULATOR_SPEC: Final = ToolSpec(
    name="calculator",
    description=(
        "Evaluate an arithmetic expression exactly. Numbers, + - * / // % and ** "
        "(^ also means power), parentheses, the functions "
        + ", ".join(FUNCTIONS)
        + " and the constants "
        + ", ".join(CONSTANTS)
        + ". Integers stay exact (2**100 is given in full). Example: sqrt(2) * (3 + 4)^2"
    ),
    parameters={
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": "The expression, e.g. '(17 * 23) / 4' or 'log(1000, 10)'.",
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
    category="math",
    timeout_seconds=5.0,
    blocking=False,  # bounded work, never waits: awaited directly
)


class CalculatorTool:
    """Evaluates one expression; a refused or undefined expression is a failed result."""

    @property
    def spec(self) -> ToolSpec:
        return CALCULATOR_SPEC

    async def execute(self, arguments: JSONObject) -> ToolResult:
        expression = arguments.get("expression")
        if not isinstance(expression, str):
            return ToolResult(
                tool_name="calculator",
                content="Error: 'expression' must be a string such as '2 + 2'.",
                success=False,
            )
        try:
            value = evaluate(expression)
        except CalculationError as exc:
            return ToolResult(tool_name="calculator", content=f"Error: {exc}.", success=False)
        return ToolResult(tool_name="calculator", content=format_number(value))
