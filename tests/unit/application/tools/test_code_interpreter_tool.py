"""``code_interpreter`` over the in-memory REPL: the tool contract and how results read."""

from __future__ import annotations

import pytest

from contracts.tool_contract import ToolContract
from jarvis.application.tools.code_interpreter import CodeInterpreterTool, render
from jarvis.domain.json_types import JSONObject
from jarvis.domain.repl import ExecutionResult, ReplLimits
from jarvis.testing import InMemoryRepl


class TestCodeInterpreterOverTheTestDouble(ToolContract[CodeInterpreterTool]):
    @pytest.fixture
    def tool(self) -> CodeInterpreterTool:
        return CodeInterpreterTool(InMemoryRepl())

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"code": "print('hi')\n6 * 7"}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject | None:
        return {"code": "raise ValueError('bad input')"}


async def test_stdout_value_and_error_reach_the_model() -> None:
    tool = CodeInterpreterTool(InMemoryRepl())
    result = await tool.execute({"code": "print('out')\n1 + 1"})
    assert result.content == "out\n2"
    failed = await tool.execute({"code": "print('partial')\n1 / 0"})
    assert not failed.success
    assert "partial" in failed.content
    assert "ZeroDivisionError" in failed.content
    assert failed.metadata["error_kind"] == "exception"


async def test_each_call_starts_fresh() -> None:
    repl = InMemoryRepl()
    tool = CodeInterpreterTool(repl)
    await tool.execute({"code": "x = 1"})
    again = await tool.execute({"code": "x"})
    assert "NameError" in again.content
    assert len(repl.sessions) == 2


async def test_empty_code_is_refused() -> None:
    result = await CodeInterpreterTool(InMemoryRepl()).execute({"code": "  "})
    assert not result.success
    assert "non-empty" in result.content


def test_limits_are_explained() -> None:
    text = render(ExecutionResult(error="Execution timed out after 5 s", error_kind="timeout"), 100)
    assert "timed out" in text
    assert "faster" in text
    memory = render(ExecutionResult(error="MemoryError", error_kind="memory_limit"), 100)
    assert "out of memory" in memory


def test_the_spec_states_the_limits() -> None:
    spec = CodeInterpreterTool(InMemoryRepl(), limits=ReplLimits(timeout_seconds=7)).spec
    assert spec.category == "code"
    assert spec.parameters["required"] == ["code"]
    assert "7 s" in spec.description
    assert spec.timeout_seconds > 7
