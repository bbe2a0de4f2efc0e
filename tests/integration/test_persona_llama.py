"""The persona against the real local llama.cpp server: the CLI and the SDK end to end.

The server's own prompt-token count proves what it received: the same question costs more
prompt tokens with a persona than with ``--persona none``, and an edit of MEMORY.md between
two questions of one SDK instance shows up in the second count.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jarvis import Jarvis
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.composition import Container
from tests.support.llama_server import LlamaServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOUL = "You are a ship's navigator. Answer in one short sentence, like a sailor would.\n"


def ask_json(server: LlamaServer, *args: str) -> dict[str, object]:
    """``jarvis ask --json``, not kept: a kept ask streams, and llama-cpp-python's server
    reports no usage in a stream (the prompt tokens are what the test compares)."""
    result = CliRunner().invoke(
        app,
        ["ask", *server.ask_options(max_tokens=8), "--json", "--no-keep", *args],
        obj=Container(),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def prompt_tokens(answer: dict[str, object]) -> int:
    usage = answer["usage"]
    assert isinstance(usage, dict)
    tokens = usage["prompt_tokens"]
    assert isinstance(tokens, int)
    return tokens


def test_the_cli_sends_the_persona_to_the_real_server(
    llama_server: LlamaServer, jarvis_home: Path
) -> None:
    (jarvis_home / "personas" / "sea").mkdir(parents=True)
    (jarvis_home / "personas" / "sea" / "SOUL.md").write_text(SOUL, encoding="utf-8")
    bare = ask_json(llama_server, "--persona", "none", "Where are we?")
    sea = ask_json(llama_server, "--persona", "sea", "Where are we?")
    assert isinstance(sea["content"], str)
    assert sea["engine"] == "openai"
    # the persona's ~20 words reach the model: more prompt tokens for the same question
    assert prompt_tokens(sea) >= prompt_tokens(bare) + 15


def test_an_unknown_persona_fails_before_the_server_is_asked(
    llama_server: LlamaServer, jarvis_home: Path
) -> None:
    result = CliRunner().invoke(
        app,
        ["ask", "--engine", "openai", "--base-url", llama_server.base_url, "-p", "ghost", "q"],
        obj=Container(),
    )
    assert result.exit_code == 2
    assert "Unknown persona 'ghost'" in result.stderr


def test_an_edit_applies_to_the_next_question_on_the_real_server(
    llama_server: LlamaServer, jarvis_home: Path
) -> None:
    memory = jarvis_home / "MEMORY.md"
    memory.write_text("- the user sails a small boat\n", encoding="utf-8")
    with Jarvis(engine="openai", base_url=llama_server.base_url, model=llama_server.model) as j:
        before = j.ask_full("Hi", max_tokens=4, temperature=0)
        memory.write_text(
            "- the user sails a small boat\n"
            "- the user's boat is called Albatross and is moored in Brest harbour\n",
            encoding="utf-8",
        )
        after = j.ask_full("Hi", max_tokens=4, temperature=0)
    assert after.usage.prompt_tokens >= before.usage.prompt_tokens + 8
