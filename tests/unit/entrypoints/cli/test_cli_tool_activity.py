"""The CLI's tool activity lines and ``--agent-option`` parsing, through the real CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.cli.ask import parse_agent_options
from jarvis.entrypoints.cli.render import tool_call_line, tool_result_line
from jarvis.entrypoints.composition import Container
from jarvis.testing import ScriptedInference


def test_tool_lines() -> None:
    assert tool_call_line("calculator", '{"expression":"2+2"}') == (
        '→ calculator({"expression":"2+2"})'
    )
    assert tool_result_line("4", success=True) == "← 4"
    assert tool_result_line("Unknown tool 'x'.\nAvailable: y", success=False) == (
        "← failed: Unknown tool 'x'. Available: y"
    )
    assert len(tool_result_line("x" * 500, success=True)) == 202


def test_agent_options_are_json_or_text() -> None:
    assert parse_agent_options(["mode=structured", "max_turns=3", "flag=true"]) == {
        "mode": "structured",
        "max_turns": 3,
        "flag": True,
    }
    with pytest.raises(ConfigurationError):
        parse_agent_options(["no-equals"])


def run(engine: ScriptedInference, *args: str) -> tuple[int, str, str]:
    container = Container()
    container.inference.override(engine)
    result = CliRunner().invoke(app, ["ask", "-m", "m", *args], obj=container)
    return result.exit_code, result.stdout, result.stderr


def test_streamed_tool_activity_goes_to_stderr_and_the_answer_to_stdout() -> None:
    call = ToolCall(id="c1", name="calculator", arguments={"expression": "6*7"})
    engine = ScriptedInference([Completion(content="", tool_calls=(call,)), "It is 42."])
    code, out, err = run(engine, "-a", "orchestrator", "--tools", "calculator", "6*7?")
    assert code == 0, err
    assert out.strip() == "It is 42."
    assert '→ calculator({"expression":"6*7"})' in err
    assert "← 42" in err


def test_agent_options_reach_the_agent_and_bad_ones_are_usage_errors() -> None:
    engine = ScriptedInference(['{"thought": "easy", "final_answer": "Paris"}'])
    code, out, err = run(engine, "-a", "orchestrator", "-O", "mode=structured", "--json", "q")
    assert code == 0, err
    assert json.loads(out)["content"] == "Paris"
    assert engine.requests[0].response_format is not None
    code, _, err = run(ScriptedInference(), "-a", "orchestrator", "-O", "colour=blue", "q")
    assert code == 2
    assert "cannot be built with these options" in err
