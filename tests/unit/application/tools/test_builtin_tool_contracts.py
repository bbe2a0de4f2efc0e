"""Every in-process tool passes the tool contract: built-ins, function tools and the fake."""

from __future__ import annotations

import pytest

from contracts.tool_contract import ToolContract
from jarvis.application.tools.calculator import CalculatorTool
from jarvis.application.tools.function_tool import FunctionTool, tool
from jarvis.application.tools.llm import LlmTool
from jarvis.application.tools.retrieval import RetrievalTool
from jarvis.application.tools.think import ThinkTool
from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryMemory, InMemoryTool, ScriptedInference


class TestCalculatorTool(ToolContract[CalculatorTool]):
    @pytest.fixture
    def tool(self) -> CalculatorTool:
        return CalculatorTool()

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"expression": "(17 * 23) / 4"}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject:
        return {"expression": "9**9**9"}


class TestThinkTool(ToolContract[ThinkTool]):
    @pytest.fixture
    def tool(self) -> ThinkTool:
        return ThinkTool()

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"thought": "First add, then divide."}


class TestLlmTool(ToolContract[LlmTool]):
    @pytest.fixture
    def tool(self) -> LlmTool:
        return LlmTool(ScriptedInference(["A short summary."]), "scripted-model")

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"prompt": "Summarise: jarvis runs agents locally.", "system": "Be brief."}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject:
        return {"prompt": "   "}


class TestRetrievalTool(ToolContract[RetrievalTool]):
    @pytest.fixture
    async def tool(self) -> RetrievalTool:
        memory = InMemoryMemory()
        await memory.store("The backup runs at 02:00 every night.", source="ops.md")
        return RetrievalTool(memory)

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"query": "when does the backup run", "top_k": 3}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject:
        return {"query": " "}


@tool(category="demo")
def convert(amount: float, rate: float = 1.1) -> float:
    """Convert an amount with an exchange rate.

    Args:
        amount: The amount to convert; must not be negative.
        rate: The exchange rate.
    """
    if amount < 0:
        raise ValueError("amount must not be negative")
    return round(amount * rate, 2)


class TestFunctionTool(ToolContract[FunctionTool[[float, float], float]]):
    @pytest.fixture
    def tool(self) -> FunctionTool[[float, float], float]:
        return convert

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"amount": 10}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject:
        return {"amount": -1}


class TestInMemoryTool(ToolContract[InMemoryTool]):
    @pytest.fixture
    def tool(self) -> InMemoryTool:
        spec = ToolSpec(
            name="echo",
            description="Echo the text.",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        )
        return InMemoryTool(spec, lambda arguments: str(arguments.get("text", "")))

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"text": "hello"}
