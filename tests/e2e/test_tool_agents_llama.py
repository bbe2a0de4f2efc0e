"""``orchestrator`` and ``native_react`` through the CLI against the real llama.cpp server.

SmolLM2-135M is tiny: forced tool choice and grammar-constrained structured output make it
produce real tool calls, often with nonsense arguments. Whatever it does, every run must end
with exit code 0 and a clear stop reason, within its turn budget — never a crash.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner, Result

from jarvis.entrypoints.cli import app
from jarvis.entrypoints.composition import Container
from tests.support.llama_server import LlamaServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUESTION = "What is 12*7? Use the calculator."
STOP_REASONS = {"final_answer", "max_turns", "parse_error"}


def jarvis(server: LlamaServer, *args: str) -> Result:
    return CliRunner().invoke(
        app,
        ["ask", *server.ask_options(max_tokens=96), "--tools", "calculator", *args],
        obj=Container(),
    )


def answer(result: Result) -> dict[str, object]:
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    assert data["stop_reason"] in STOP_REASONS
    assert isinstance(data["content"], str)
    assert data["content"].strip()
    return data


def tool_results(data: dict[str, object]) -> list[dict[str, object]]:
    results = data["tool_results"]
    assert isinstance(results, list)
    return results


def turns(data: dict[str, object]) -> int:
    value = data["turns"]
    assert isinstance(value, int)
    return value


def test_orchestrator_forced_tool_choice_makes_a_real_call(llama_server: LlamaServer) -> None:
    data = answer(
        jarvis(
            llama_server,
            "--agent",
            "orchestrator",
            "-O",
            "tool_choice=required",
            "-O",
            "max_turns=3",
            "--json",
            QUESTION,
        )
    )
    results = tool_results(data)
    assert results, "the forced first turn must call the tool"
    assert results[0]["tool_name"] == "calculator"
    assert 2 <= turns(data) <= 4  # 3 tool turns at most + the final tool-less call


def test_orchestrator_streams_tool_calls_and_results(llama_server: LlamaServer) -> None:
    result = jarvis(
        llama_server,
        "--agent",
        "orchestrator",
        "-O",
        "tool_choice=required",
        "-O",
        "max_turns=2",
        QUESTION,
    )
    assert result.exit_code == 0, result.output
    assert "→ calculator(" in result.stderr
    assert "← " in result.stderr
    assert result.stdout.strip()


def test_orchestrator_structured_mode_calls_only_offered_tools(llama_server: LlamaServer) -> None:
    data = answer(
        jarvis(
            llama_server,
            "--agent",
            "orchestrator",
            "-O",
            "mode=structured",
            "-O",
            "max_turns=3",
            "--json",
            QUESTION,
        )
    )
    results = tool_results(data)
    assert results, "the grammar-constrained first step calls the calculator"
    assert {r["tool_name"] for r in results} == {"calculator"}
    assert turns(data) <= 4


def test_orchestrator_structured_mode_streams(llama_server: LlamaServer) -> None:
    result = jarvis(
        llama_server,
        "--agent",
        "orchestrator",
        "-O",
        "mode=structured",
        "-O",
        "max_turns=2",
        QUESTION,
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip()
    assert not result.stdout.lstrip().startswith("{")  # the answer, never the raw JSON step


@pytest.mark.parametrize("streaming", [False, True])
def test_react_finishes_with_a_clear_stop_reason(
    llama_server: LlamaServer, streaming: bool
) -> None:
    if streaming:
        result = jarvis(llama_server, "--agent", "react", "-O", "max_turns=3", QUESTION)
        assert result.exit_code == 0, result.output
        assert result.stdout.strip()
        return
    data = answer(
        jarvis(llama_server, "--agent", "native_react", "-O", "max_turns=3", "--json", QUESTION)
    )
    assert 1 <= turns(data) <= 4
