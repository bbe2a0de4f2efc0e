"""Tools from the command line: ``jarvis tools`` and ``jarvis ask --tools``, on a fake engine."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.cli.errors import EXIT_USAGE
from jarvis.entrypoints.composition import Container
from jarvis.testing import ScriptedInference

BUILTINS = [
    "calculator",
    "code_interpreter",
    "file_read",
    "llm",
    "memory_manage",
    "retrieval",
    "think",
    "user_profile_manage",
    "web_search",
]


def run(container: Container, *args: str) -> Result:
    return CliRunner().invoke(app, list(args), obj=container)


def with_engine(engine: ScriptedInference) -> Container:
    container = Container()
    container.inference.override(engine)
    return container


def calls(*pairs: tuple[str, str]) -> Completion:
    return Completion(
        content="",
        tool_calls=tuple(
            ToolCall(id=f"c{n}", name="calculator", arguments={"expression": expression})
            for n, (_, expression) in enumerate(pairs)
        ),
        finish_reason="tool_calls",
    )


class TestToolsCommand:
    def test_lists_every_tool_with_its_parameters(self, jarvis_home: Path) -> None:
        result = run(Container(), "tools")
        assert result.exit_code == 0, result.output
        blocks = {block.split()[0]: block for block in result.stdout.strip().split("\n\n")}
        assert sorted(blocks) == BUILTINS
        assert blocks["calculator"].splitlines()[0] == "calculator [math]"
        assert "  - expression (string, required): The expression" in blocks["calculator"]
        assert "  - top_k (integer): How many passages" in blocks["retrieval"]
        assert "  - path (string, required)" in blocks["file_read"]
        assert not (jarvis_home / "memory.db").exists()  # listing opens nothing

    def test_json_lists_names_types_and_required_flags(self) -> None:
        result = run(Container(), "tools", "--json")
        assert result.exit_code == 0, result.output
        rows = {row["name"]: row for row in json.loads(result.stdout)}
        assert sorted(rows) == BUILTINS
        assert rows["web_search"]["category"] == "search"
        assert rows["web_search"]["parameters"] == [
            {
                "name": "query",
                "type": "string",
                "required": True,
                "description": "Search terms, or one URL such as 'https://example.org/page'.",
            },
            {
                "name": "max_results",
                "type": "integer",
                "required": False,
                "description": "How many search results (default 5).",
            },
        ]
        assert rows["memory_manage"]["side_effects"] is True
        assert rows["memory_manage"]["effects"] == "side_effects"
        assert rows["calculator"]["effects"] == "read_only"
        assert rows["code_interpreter"]["effects"] == "side_effects"
        assert rows["calculator"]["schema"]["required"] == ["expression"]


class TestAskWithTools:
    def test_the_orchestrator_runs_the_named_tools(self) -> None:
        engine = ScriptedInference([calls(("calculator", "6*7")), "It is 42."])
        result = run(
            with_engine(engine),
            "ask",
            "--agent",
            "orchestrator",
            "--tools",
            "calculator, think",
            "--json",
            "6*7?",
        )
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["content"] == "It is 42."
        assert [(r["tool_name"], r["content"], r["success"]) for r in data["tool_results"]] == [
            ("calculator", "42", True)
        ]
        offered = [spec.name for spec in engine.requests[0].tools]
        assert offered == ["calculator", "think"]

    def test_streaming_shows_tool_activity_on_stderr(self) -> None:
        engine = ScriptedInference([calls(("calculator", "2**10")), "1024."])
        result = run(
            with_engine(engine), "ask", "-a", "orchestrator", "--tools", "calculator", "2^10?"
        )
        assert result.exit_code == 0, result.output
        assert result.stdout == "1024.\n"
        assert 'calculator({"expression":"2**10"})' in result.stderr
        assert "1024" in result.stderr  # the tool's result, shown as it happens

    def test_unknown_tools_are_a_usage_error_listing_the_known_ones(self) -> None:
        result = run(
            with_engine(ScriptedInference()),
            "ask",
            "-a",
            "orchestrator",
            "--tools",
            "calculator,teleport",
            "q",
        )
        assert result.exit_code == EXIT_USAGE
        assert "Unknown tool: 'teleport'." in result.stderr
        assert "Known tools: " + ", ".join(BUILTINS) in result.stderr

    def test_tools_on_an_agent_that_takes_none_are_a_usage_error(self) -> None:
        engine = ScriptedInference(["never"])
        result = run(with_engine(engine), "ask", "--agent", "simple", "--tools", "calculator", "q")
        assert result.exit_code == EXIT_USAGE
        assert "Agent 'simple' does not take tools, but tools were given: calculator" in (
            result.stderr
        )
        assert engine.requests == []

    def test_an_empty_tools_option_is_a_usage_error(self) -> None:
        result = run(
            with_engine(ScriptedInference()), "ask", "-a", "orchestrator", "--tools", ",", "q"
        )
        assert result.exit_code == EXIT_USAGE
        assert "--tools names no tool." in result.stderr

    def test_configured_tools_are_the_default_for_tool_using_agents(
        self, jarvis_home: Path
    ) -> None:
        (jarvis_home / "config.toml").write_text('[tools]\nenabled = ["calculator"]\n')
        engine = ScriptedInference(["done"])
        result = run(with_engine(engine), "ask", "-a", "orchestrator", "q")
        assert result.exit_code == 0, result.output
        assert [spec.name for spec in engine.requests[0].tools] == ["calculator"]
        simple = ScriptedInference(["plain"])
        result = run(with_engine(simple), "ask", "-a", "simple", "q")
        assert result.exit_code == 0, result.output
        assert simple.requests[0].tools == ()

    def test_file_read_is_confined_to_the_configured_roots(
        self, jarvis_home: Path, tmp_path: Path
    ) -> None:
        workspace = tmp_path / "ws"
        workspace.mkdir()
        (workspace / "todo.txt").write_text("buy milk\n")
        (tmp_path / "private.txt").write_text("no\n")
        (jarvis_home / "config.toml").write_text(f'[tools.file_read]\nroots = ["{workspace}"]\n')
        read = Completion(
            content="",
            tool_calls=(
                ToolCall(id="a", name="file_read", arguments={"path": "todo.txt"}),
                ToolCall(id="b", name="file_read", arguments={"path": "../private.txt"}),
            ),
            finish_reason="tool_calls",
        )
        engine = ScriptedInference([read, "Buy milk."])
        result = run(
            with_engine(engine), "ask", "-a", "orchestrator", "--tools", "file_read", "--json", "q"
        )
        assert result.exit_code == 0, result.output
        first, second = json.loads(result.stdout)["tool_results"]
        assert (first["success"], first["content"]) == (True, "buy milk\n")
        assert not second["success"]
        assert "outside the allowed folders" in second["content"]
