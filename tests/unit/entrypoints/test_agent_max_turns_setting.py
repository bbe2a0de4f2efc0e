"""``[agent] max_turns`` from config.toml reaches the agents, through the CLI and the SDK."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from jarvis import Jarvis
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.composition import Container
from jarvis.testing import ScriptedInference


def calls_forever() -> ScriptedInference:
    """An engine whose model calls ``think`` on every turn, never answering by itself."""
    call = Completion(
        content="", tool_calls=(ToolCall(id="c", name="think", arguments={"thought": "hm"}),)
    )
    return ScriptedInference([call])


def configure_max_turns(home: Path, turns: int) -> None:
    (home / "config.toml").write_text(f"[agent]\nmax_turns = {turns}\n", encoding="utf-8")


def test_the_sdk_runs_tool_agents_with_the_configured_max_turns(jarvis_home: Path) -> None:
    configure_max_turns(jarvis_home, 2)
    engine = calls_forever()
    with Jarvis(inference=engine) as j:
        answer = j.ask_full("q", agent="orchestrator", tools=["think"])
    assert answer.stop_reason == "max_turns"
    assert answer.turns == 3  # two tool turns, then the one tool-less final call
    assert len(engine.requests) == 3


def test_on_the_command_line_an_explicit_option_wins(jarvis_home: Path) -> None:
    configure_max_turns(jarvis_home, 4)

    def ask(*options: str) -> dict[str, object]:
        container = Container()
        container.inference.override(calls_forever())
        result = CliRunner().invoke(
            app,
            ["ask", "--agent", "orchestrator", "--tools", "think", "--json", *options, "q"],
            obj=container,
        )
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert isinstance(data, dict)
        return data

    assert ask()["turns"] == 5  # the configured 4, plus the final call
    assert ask("-O", "max_turns=1")["turns"] == 2
