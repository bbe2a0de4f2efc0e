"""``jarvis ask --agent rlm --context-file ...`` and ``--agent native_openhands`` through the
CLI and the SDK, on a scripted engine and the in-memory REPL."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from jarvis.entrypoints.cli import app
from jarvis.entrypoints.cli.errors import EXIT_USAGE
from jarvis.entrypoints.composition import Container
from jarvis.entrypoints.sdk import Jarvis
from jarvis.testing import InMemoryRepl, ScriptedInference

NEEDLE = "the-key-is-under-the-mat"


def run(container: Container, *args: str) -> Result:
    return CliRunner().invoke(app, list(args), obj=container)


def wired(engine: ScriptedInference, repl: InMemoryRepl | None = None) -> Container:
    container = Container()
    container.inference.override(engine)
    container.repl.override(repl or InMemoryRepl())
    return container


def big_file(tmp_path: Path) -> Path:
    path = tmp_path / "big.txt"
    path.write_text("lorem ipsum dolor sit amet\n" * 40_000 + NEEDLE + "\n", encoding="utf-8")
    return path


def test_rlm_reads_the_context_file_into_its_repl_not_its_prompt(tmp_path: Path) -> None:
    engine = ScriptedInference(["```python\nFINAL(context.strip().splitlines()[-1])\n```"])
    result = run(
        wired(engine),
        "ask",
        "--agent",
        "rlm",
        "--context-file",
        str(big_file(tmp_path)),
        "--json",
        "Where is the key?",
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["content"] == NEEDLE
    assert answer["stop_reason"] == "final_answer"
    for request in engine.requests:
        assert sum(len(m.content) for m in request.messages) < 8_000
        assert all("lorem ipsum" not in m.content for m in request.messages)


def test_a_missing_context_file_is_a_usage_error(tmp_path: Path) -> None:
    engine = ScriptedInference(["unused"])
    result = run(wired(engine), "ask", "-a", "rlm", "--context-file", str(tmp_path / "no.txt"), "q")
    assert result.exit_code == EXIT_USAGE
    assert "Cannot read the context file" in result.output
    assert "no.txt" in result.output
    assert engine.requests == []


def test_a_binary_context_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\xff\xfe\x00binary")
    result = run(wired(ScriptedInference()), "ask", "-a", "rlm", "--context-file", str(path), "q")
    assert result.exit_code == EXIT_USAGE
    assert "not UTF-8 text" in result.output


def test_native_openhands_runs_code_through_the_cli() -> None:
    repl = InMemoryRepl()
    engine = ScriptedInference(["```python\nprint(sum(range(10)))\n```", "Final Answer: 45"])
    result = run(wired(engine, repl), "ask", "--agent", "native_openhands", "--json", "Sum 0..9")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["content"] == "45"
    assert answer["turns"] == 2
    assert answer["tool_results"][0]["tool_name"] == "python"
    assert repl.sessions[0].executed == ["print(sum(range(10)))\n"]
    assert engine.requests[1].messages[-1].content == "Execution output:\n45"


def test_agent_options_reach_the_code_agents() -> None:
    engine = ScriptedInference(["```python\nx = 1\n```"] * 5 + ["Final Answer: stopped"])
    result = run(
        wired(engine), "ask", "-a", "native_openhands", "-O", "max_turns=1", "--json", "loop"
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["stop_reason"] == "max_turns"
    assert answer["turns"] == 2


def test_the_sdk_passes_context_to_the_rlm(tmp_path: Path) -> None:
    engine = ScriptedInference(["```python\nFINAL(len(context))\n```"])
    jarvis = Jarvis(inference=engine)
    jarvis.container.repl.override(InMemoryRepl())
    try:
        assert jarvis.ask("How long?", agent="rlm", context="x" * 12_345) == "12345"
    finally:
        jarvis.close()
    assert all("xxxxxxxx" not in m.content for r in engine.requests for m in r.messages)
