"""The command line in-process: typer's CliRunner on a container whose engine is a fake."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from jarvis.application.registry import builtin_agents
from jarvis.domain.errors import (
    ContextTooLongError,
    EngineProtocolError,
    EngineUnavailableError,
    ToolsNotSupportedError,
)
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.cli.errors import (
    EXIT_ENGINE_ERROR,
    EXIT_ENGINE_UNAVAILABLE,
    EXIT_INTERRUPTED,
    EXIT_MODEL_NOT_FOUND,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
)
from jarvis.entrypoints.composition import Container
from jarvis.testing import InMemoryExternalRuntime, InMemoryExternalRuntimes, ScriptedInference

ANSWER_KEYS = {
    "content",
    "turns",
    "tool_results",
    "usage",
    "model",
    "engine",
    "stop_reason",
    "metadata",
}


class StreamOnly(ScriptedInference):
    """Refuses non-streamed generation: proves which path the CLI took."""

    async def generate(self, request: InferenceRequest) -> Completion:
        raise AssertionError("generate() called, stream() expected")


class GenerateOnly(ScriptedInference):
    """Refuses streaming: proves --no-stream and --json do not stream."""

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        raise AssertionError("stream() called, generate() expected")


class Interrupting(ScriptedInference):
    """Streams one chunk, then behaves as if Ctrl-C had been pressed."""

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        yield StreamChunk(content="Partial")
        raise KeyboardInterrupt


class Exploding(ScriptedInference):
    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        raise RuntimeError("boom")


class ToolAgent(BaseAgent):
    agent_id = "tooly"
    accepts_tools = True

    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        return AgentResult(content=input, turns=1)


def run(container: Container, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), obj=container, input=input)


def with_engine(engine: ScriptedInference) -> Container:
    container = Container()
    container.inference.override(engine)
    return container


class TestAsk:
    def test_streams_the_answer(self) -> None:
        engine = StreamOnly(["Paris is the capital of France."])
        result = run(with_engine(engine), "ask", "What is the capital of France?")
        assert result.exit_code == 0, result.output
        assert result.stdout == "Paris is the capital of France.\n"
        assert engine.requests[0].messages[-1].content == "What is the capital of France?"

    def test_streamed_chunks_are_written_in_order(self) -> None:
        chunks = [
            StreamChunk(content="Par"),
            StreamChunk(content="is"),
            StreamChunk(content=".\n"),
            StreamChunk(finish_reason="stop"),
        ]
        result = run(with_engine(StreamOnly([chunks])), "ask", "q")
        assert result.exit_code == 0
        assert result.stdout == "Paris.\n"  # no extra newline after one the model wrote

    def test_no_stream_prints_the_whole_answer(self) -> None:
        # --no-keep: a kept ask is a conversation turn, streamed from the engine like -c
        result = run(
            with_engine(GenerateOnly(["Whole answer."])), "ask", "--no-keep", "--no-stream", "q"
        )
        assert result.exit_code == 0, result.output
        assert result.stdout == "Whole answer.\n"

    def test_json_prints_the_answer_fields(self) -> None:
        result = run(with_engine(GenerateOnly(["Paris."])), "ask", "--no-keep", "--json", "q")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert set(data) == ANSWER_KEYS
        assert data["content"] == "Paris."
        assert data["turns"] == 1
        assert data["tool_results"] == []
        assert data["engine"] == "scripted"
        assert data["model"] == "scripted-model"
        assert data["stop_reason"] == "final_answer"
        assert data["usage"]["completion_tokens"] >= 1
        assert data["usage"]["total_tokens"] == (
            data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"]
        )

    def test_json_and_verbose_name_the_runtime_session_to_continue(self, tmp_path: Path) -> None:
        runtime = InMemoryExternalRuntime(runtime_id="opencode")
        container = with_engine(ScriptedInference(["unused"]))
        container.external_runtimes.override(InMemoryExternalRuntimes({"opencode": runtime}))
        workspace = ["-O", f"workspace={tmp_path}", "-O", "base_url=http://127.0.0.1:9/v1"]
        result = run(container, "ask", "-a", "opencode", "--json", *workspace, "q")
        assert result.exit_code == 0, result.output
        session = json.loads(result.stdout)["metadata"]["session_id"]
        assert session == "ses_0"
        result = run(container, "ask", "-a", "opencode", "--verbose", *workspace, "again")
        assert result.exit_code == 0, result.output
        assert f"runtime session {session}" in result.stderr
        assert runtime.prompts(session) == ["q", "again"]

    def test_sampling_options_reach_the_engine(self) -> None:
        engine = ScriptedInference(["ok"])
        args = ["ask", "-t", "0.2", "--max-tokens", "7", "--system", "Be brief.", "-m", "mx", "q"]
        result = run(with_engine(engine), *args)
        assert result.exit_code == 0, result.output
        request = engine.requests[0]
        assert request.temperature == 0.2
        assert request.max_tokens == 7
        assert request.model == "mx"
        assert request.messages[0].content == "Be brief."

    def test_agent_defaults_come_from_config(self, jarvis_home: Path) -> None:
        (jarvis_home / "config.toml").write_text(
            '[engine]\nmodel = "from-file"\n[agent]\ntemperature = 0.1\nmax_tokens = 9\n',
            encoding="utf-8",
        )
        engine = ScriptedInference(["ok"])
        assert run(with_engine(engine), "ask", "q").exit_code == 0
        request = engine.requests[0]
        assert (request.model, request.temperature, request.max_tokens) == ("from-file", 0.1, 9)

    def test_question_from_piped_stdin(self) -> None:
        engine = ScriptedInference(["ok"])
        result = run(with_engine(engine), "ask", input="What is 2+2?\n")
        assert result.exit_code == 0, result.output
        assert engine.requests[0].messages[-1].content == "What is 2+2?"

    def test_dash_reads_stdin(self) -> None:
        engine = ScriptedInference(["ok"])
        result = run(with_engine(engine), "ask", "-", input="From stdin")
        assert result.exit_code == 0
        assert engine.requests[0].messages[-1].content == "From stdin"

    def test_verbose_names_engine_and_totals(self) -> None:
        result = run(with_engine(ScriptedInference(["ok"])), "ask", "-v", "q")
        assert result.exit_code == 0
        assert "engine: scripted (provided by the caller)" in result.stderr
        assert "1 turn(s)" in result.stderr
        assert result.stdout == "ok\n"

    def test_answer_goes_to_stdout_only(self) -> None:
        result = run(with_engine(ScriptedInference(["only this"])), "ask", "q")
        assert result.stdout == "only this\n"
        assert result.stderr == ""


class TestUsageErrors:
    def test_a_long_unknown_agent_is_cut_in_the_message(self) -> None:
        name = "x" * 100_000
        result = run(with_engine(ScriptedInference()), "ask", "--agent", name, "q")
        assert result.exit_code == EXIT_USAGE
        assert "Unknown agent 'xxxx" in result.stderr
        assert len(result.stderr) < 2_000

    def test_unknown_agent_lists_the_known_ones(self) -> None:
        result = run(with_engine(ScriptedInference()), "ask", "--agent", "nope", "q")
        assert result.exit_code == EXIT_USAGE
        assert "Unknown agent 'nope'" in result.stderr
        known = result.stderr.split("Known agents: ", 1)[1].strip().split(", ")
        assert "simple" in known
        assert "Traceback" not in result.output

    @pytest.mark.parametrize("question", ["", "   ", "\n"])
    def test_empty_question(self, question: str) -> None:
        engine = ScriptedInference()
        result = run(with_engine(engine), "ask", question)
        assert result.exit_code == EXIT_USAGE
        assert "question is empty" in result.stderr
        assert engine.requests == []

    def test_empty_stdin(self) -> None:
        result = run(with_engine(ScriptedInference()), "ask", input="")
        assert result.exit_code == EXIT_USAGE
        assert "empty" in result.stderr

    def test_invalid_config_names_file_and_key(self, jarvis_home: Path) -> None:
        path = jarvis_home / "config.toml"
        path.write_text("[engine]\ntimout = 5\n", encoding="utf-8")
        result = run(with_engine(ScriptedInference()), "ask", "q")
        assert result.exit_code == EXIT_USAGE
        assert str(path) in result.stderr
        assert "engine.timout: unknown key (did you mean engine.timeout?)" in result.stderr

    def test_broken_toml(self, tmp_path: Path) -> None:
        path = tmp_path / "c.toml"
        path.write_text("[engine\n", encoding="utf-8")
        result = run(with_engine(ScriptedInference()), "ask", "--config", str(path), "q")
        assert result.exit_code == EXIT_USAGE
        assert str(path) in result.stderr

    def test_unknown_default_agent_in_config(self, jarvis_home: Path) -> None:
        (jarvis_home / "config.toml").write_text('[agent]\ndefault = "gone"\n', encoding="utf-8")
        result = run(with_engine(ScriptedInference()), "ask", "q")
        assert result.exit_code == EXIT_USAGE
        assert "Unknown agent 'gone'" in result.stderr

    def test_unknown_engine_option(self) -> None:
        result = run(Container(), "ask", "--engine", "gpt", "q")
        assert result.exit_code == EXIT_USAGE
        assert "gpt" in result.output

    def test_base_url_with_embedded_engine(self) -> None:
        result = run(Container(), "ask", "--engine", "llamacpp", "--base-url", "http://x", "q")
        assert result.exit_code == EXIT_USAGE
        assert "does not apply" in result.stderr


class TestEngineErrors:
    def test_engine_unavailable_names_engine_url_and_remedy(self) -> None:
        error = EngineUnavailableError(
            "Cannot connect.", engine="ollama", url="http://localhost:11434"
        )
        result = run(with_engine(ScriptedInference([error])), "ask", "q")
        assert result.exit_code == EXIT_ENGINE_UNAVAILABLE
        assert "ollama" in result.stderr
        assert "http://localhost:11434" in result.stderr
        assert "ollama serve" in result.stderr
        assert "Traceback" not in result.output

    def test_model_not_found_lists_the_models(self) -> None:
        engine = ScriptedInference(models=["small", "large"], strict_models=True)
        result = run(with_engine(engine), "ask", "--model", "huge", "q")
        assert result.exit_code == EXIT_MODEL_NOT_FOUND
        assert "huge" in result.stderr
        assert "Available models: small, large" in result.stderr

    @pytest.mark.parametrize(
        "error",
        [
            ContextTooLongError("The prompt does not fit.", engine="vllm", url="http://h/v1"),
            EngineProtocolError("Unparseable answer.", engine="openai", url="http://h/v1"),
            ToolsNotSupportedError("No tools for this model.", engine="ollama"),
        ],
    )
    def test_other_engine_errors(self, error: Exception) -> None:
        result = run(with_engine(ScriptedInference([error])), "ask", "q")
        assert result.exit_code == EXIT_ENGINE_ERROR
        assert str(error).splitlines()[0] in result.stderr
        assert result.stderr.count("\n") <= 2

    def test_unexpected_error_is_one_line(self) -> None:
        result = run(with_engine(Exploding()), "ask", "q")
        assert result.exit_code == EXIT_UNEXPECTED
        assert result.stderr.strip().splitlines() == [
            "jarvis: unexpected error: RuntimeError: boom (run with --verbose for the traceback)"
        ]

    def test_verbose_shows_the_traceback(self) -> None:
        result = run(with_engine(Exploding()), "ask", "--verbose", "q")
        assert result.exit_code == EXIT_UNEXPECTED
        assert "Traceback" in result.stderr
        assert "RuntimeError: boom" in result.stderr

    def test_interrupt_leaves_a_clean_line(self) -> None:
        result = run(with_engine(Interrupting()), "ask", "q")
        assert result.exit_code == EXIT_INTERRUPTED
        assert result.stdout == "Partial\n"
        assert result.stderr == "jarvis: interrupted\n"


class TestListing:
    def test_agents(self) -> None:
        result = run(Container(), "agents")
        assert result.exit_code == 0
        lines = result.stdout.splitlines()
        assert lines[0].split() == ["AGENT", "TOOLS", "ALIASES"]
        assert ["simple", "no"] in [line.split() for line in lines[1:]]

    def test_agents_show_tools_and_aliases(self) -> None:
        registry = builtin_agents()
        registry.register("tooly", ToolAgent, aliases=("t", "tt"))
        container = Container()
        container.agents.override(registry)
        result = run(container, "agents", "--json")
        rows = {row["key"]: row for row in json.loads(result.stdout)}
        assert rows["simple"] == {"key": "simple", "accepts_tools": False, "aliases": []}
        assert rows["tooly"] == {"key": "tooly", "accepts_tools": True, "aliases": ["t", "tt"]}
        text = run(container, "agents").stdout
        assert ["tooly", "yes", "t,", "tt"] in [line.split() for line in text.splitlines()]

    def test_models(self) -> None:
        engine = ScriptedInference(models=["m1", "m2"])
        result = run(with_engine(engine), "models")
        assert result.exit_code == 0
        assert result.stdout == "m1\nm2\n"
        assert json.loads(run(with_engine(engine), "models", "--json").stdout) == ["m1", "m2"]

    def test_models_engine_unavailable(self) -> None:
        result = run(with_engine(ScriptedInference(healthy=False)), "models")
        assert result.exit_code == EXIT_ENGINE_UNAVAILABLE


class TestHelp:
    def test_help_lists_commands_and_exit_codes(self) -> None:
        result = CliRunner().invoke(app, ["--help"])
        assert result.exit_code == 0
        for word in ("ask", "agents", "models", "Exit codes", "130"):
            assert word in result.stdout

    def test_no_arguments_shows_help(self) -> None:
        result = CliRunner().invoke(app, [])
        assert "Usage" in result.output

    def test_version(self) -> None:
        result = CliRunner().invoke(app, ["--version"])
        assert result.exit_code == 0
        assert result.stdout.startswith("jarvis ")
