"""The CLI's tool activity lines and ``--agent-option`` parsing, through the real CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject
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


def _cut_inside_the_password(limit: int, before: str) -> JSONObject:
    """Arguments whose JSON is cut at ``limit`` characters five characters into a URL's
    password (``before``: what the JSON holds ahead of the expression's text)."""
    pad = limit - 5 - len(before) - len(" http://admin:")
    return {"expression": "1" * pad + " http://admin:Hunter2Secret@db.internal/x"}


def test_a_tool_line_cut_inside_a_url_keeps_none_of_its_credentials() -> None:
    """stderr masks URL credentials, but a line cut before a URL's ``@`` has none to find."""
    arguments = _cut_inside_the_password(199, '{"expression":"')
    call = ToolCall(id="c1", name="calculator", arguments=arguments)
    engine = ScriptedInference([Completion(content="", tool_calls=(call,)), "Done."])
    code, _, err = run(engine, "-a", "orchestrator", "--tools", "calculator", "compute")
    assert code == 0, err
    assert '→ calculator({"expression":"111' in err
    assert "http://***…" in err
    assert "admin" not in err
    assert "Hunte" not in err


def test_an_approval_prompt_cut_inside_a_url_keeps_none_of_its_credentials() -> None:
    from jarvis.domain.approvals import MAX_SHOWN_ARGUMENTS, ApprovalRequest
    from jarvis.entrypoints.cli.approval_prompt import describe

    arguments = _cut_inside_the_password(MAX_SHOWN_ARGUMENTS, '{"expression":"')
    call = ToolCall(id="c1", name="shell", arguments=arguments)
    request = ApprovalRequest(id="c1", call=call, effects="side_effects", reason="r", rule="x")
    shown = describe(request)
    assert "http://***…[" in shown
    assert "admin" not in shown
    assert "Hunte" not in shown
