"""``code_interpreter`` over the real isolated REPL: the tool contract, and the messages a
model reads when its code hits a limit."""

from __future__ import annotations

import os

import pytest

from contracts.tool_contract import ToolContract
from jarvis.adapters.subprocess_repl import SubprocessRepl
from jarvis.application.tools.code_interpreter import CodeInterpreterTool
from jarvis.domain.json_types import JSONObject
from jarvis.domain.repl import ReplLimits

pytestmark = pytest.mark.integration

LIMITS = ReplLimits(timeout_seconds=2.0, memory_mb=256, max_output_chars=500)


@pytest.fixture(scope="module")
def repl() -> SubprocessRepl:
    return SubprocessRepl(limits=LIMITS)


class TestCodeInterpreterOverTheIsolatedRepl(ToolContract[CodeInterpreterTool]):
    @pytest.fixture
    def tool(self, repl: SubprocessRepl) -> CodeInterpreterTool:
        return CodeInterpreterTool(repl, limits=LIMITS)

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"code": "import math\nprint(math.factorial(5))\nmath.pi"}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject | None:
        return {"code": "open('/etc/passwd', 'a')"}


async def test_a_timeout_is_a_clear_failed_result(repl: SubprocessRepl) -> None:
    result = await CodeInterpreterTool(repl, limits=LIMITS).execute({"code": "while True: pass"})
    assert not result.success
    assert "timed out after 2 s" in result.content
    assert "faster" in result.content
    assert result.metadata["error_kind"] == "timeout"


async def test_a_memory_bomb_is_a_clear_failed_result(repl: SubprocessRepl) -> None:
    result = await CodeInterpreterTool(repl, limits=LIMITS).execute(
        {"code": "x = 'a' * (2 * 1024 ** 3)"}
    )
    assert not result.success
    assert "MemoryError" in result.content
    assert "out of memory" in result.content


async def test_the_host_environment_is_not_visible(
    repl: SubprocessRepl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    result = await CodeInterpreterTool(repl, limits=LIMITS).execute(
        {"code": "import os\nsorted(os.environ)"}
    )
    assert result.success
    assert "OPENAI_API_KEY" not in result.content
    assert "sk-must-not-leak" not in result.content
    assert os.environ["OPENAI_API_KEY"] == "sk-must-not-leak"
