"""OpenJarvis configuration files, read by the real command line: ``jarvis ask`` answers
through the engine they name (the stub engine over the Ollama protocol and over the OpenAI
protocol), and ``jarvis config check`` says how every key is read.

The files are in ``tests/compat/openjarvis_configs/``, written after OpenJarvis's own
``configs/openjarvis/`` (``config.toml`` and ``examples/*.toml``); the test only puts the
loopback server's address in place of ``@OLLAMA_HOST@`` / ``@OPENAI_HOST@``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.stub_server import ANSWER, StubServer
from jarvis.application.openjarvis_config import file_keys
from tests.support.ollama_server import OllamaProtocolServer, running_ollama_server

pytestmark = pytest.mark.integration

CONFIGS = Path(__file__).parents[1] / "compat" / "openjarvis_configs"
JARVIS = [sys.executable, "-m", "jarvis"]


def jarvis(
    home: Path, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OLLAMA_HOST", "VLLM_HOST", "OPENAI_BASE_URL", "OPENAI_API_KEY"}
        and not k.startswith("OPENJARVIS_")
    }
    env["OPENJARVIS_HOME"] = str(home)
    env.update(extra_env or {})
    return subprocess.run(
        [*JARVIS, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def config_file(tmp_path: Path, name: str, **hosts: str) -> Path:
    text = (CONFIGS / name).read_text(encoding="utf-8")
    for marker, value in hosts.items():
        text = text.replace(f"@{marker}@", value)
    assert "@" not in text.replace("@modelcontextprotocol", ""), "a marker was left"
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def ollama_on_stub(stub_server: StubServer) -> Iterator[OllamaProtocolServer]:
    """The Ollama protocol in front of the stub engine (its canned answer, any model)."""
    with running_ollama_server(stub_server.url, "stub-model") as server:
        yield server


def test_minimal_config_answers_over_the_ollama_protocol(
    jarvis_home: Path, tmp_path: Path, ollama_on_stub: OllamaProtocolServer
) -> None:
    file = config_file(tmp_path, "minimal.toml", OLLAMA_HOST=ollama_on_stub.url)
    result = jarvis(jarvis_home, "ask", "--config", str(file), "-v", "What is the capital?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ANSWER
    # [intelligence] default_model and temperature, [agent] system_prompt reached the engine
    sent: Any = ollama_on_stub.requests[-1]
    assert sent["model"] == "smollm2:135m"
    assert sent["options"]["temperature"] == 0.25
    assert sent["messages"][0]["content"].startswith("You are a terse assistant.")
    notices = [line for line in result.stderr.splitlines() if "jarvis: config:" in line]
    assert len(notices) == 1, result.stderr  # listed once
    assert "intelligence.default_model as engine.model" in notices[0]


def test_openjarvis_config_variable_is_honoured(
    jarvis_home: Path, tmp_path: Path, ollama_on_stub: OllamaProtocolServer
) -> None:
    file = config_file(tmp_path, "minimal.toml", OLLAMA_HOST=ollama_on_stub.url)
    result = jarvis(jarvis_home, "ask", "hello", extra_env={"OPENJARVIS_CONFIG": str(file)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ANSWER
    missing = jarvis(
        jarvis_home, "ask", "hello", extra_env={"OPENJARVIS_CONFIG": str(tmp_path / "none")}
    )
    assert missing.returncode == 2
    assert "$OPENJARVIS_CONFIG" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_config_with_mcp_servers_answers_over_the_openai_protocol(
    jarvis_home: Path, tmp_path: Path, stub_server: StubServer
) -> None:
    host = stub_server.url.removesuffix("/v1")  # OpenJarvis writes vLLM's host without /v1
    file = config_file(tmp_path, "mcp.toml", OPENAI_HOST=host)
    result = jarvis(jarvis_home, "ask", "--config", str(file), "--json", "What is 2+2?")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["content"] == ANSWER
    assert answer["engine"] == "vllm"
    assert answer["model"] == "stub-model"
    # [agent] default_agent = "orchestrator" with [agent] tools: the stub called the first tool
    assert [r["tool_name"] for r in answer["tool_results"]] == ["calculator"]
    assert answer["tool_results"][0]["content"] == "4"


def test_full_config_with_many_engines_answers_through_lmstudio(
    jarvis_home: Path, tmp_path: Path, stub_server: StubServer
) -> None:
    host = stub_server.url.removesuffix("/v1")
    file = config_file(tmp_path, "full.toml", OPENAI_HOST=host)
    result = jarvis(jarvis_home, "ask", "--config", str(file), "--json", "hello")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["content"] == ANSWER
    assert answer["engine"] == "openai"  # the LM Studio server, reached as OpenAI-compatible


@pytest.mark.parametrize("name", ["minimal.toml", "mcp.toml", "full.toml"])
def test_config_check_reports_every_key(jarvis_home: Path, tmp_path: Path, name: str) -> None:
    file = config_file(
        tmp_path, name, OLLAMA_HOST="http://127.0.0.1:9", OPENAI_HOST="http://127.0.0.1:9"
    )
    result = jarvis(jarvis_home, "config", "check", "--config", str(file), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    reported = [row["key"] for row in report["keys"]]
    for key in file_keys(tomllib.loads(file.read_text(encoding="utf-8"))):
        assert any(key == r or key.startswith(r + ".") for r in reported), key
    text = jarvis(jarvis_home, "config", "check", "--config", str(file))
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"{file}: valid")


def test_config_check_says_what_each_openjarvis_key_became(
    jarvis_home: Path, tmp_path: Path
) -> None:
    file = config_file(tmp_path, "full.toml", OPENAI_HOST="http://127.0.0.1:9")
    result = jarvis(jarvis_home, "config", "check", "--config", str(file))
    assert result.returncode == 0, result.stderr
    lines = {line.strip() for line in result.stdout.splitlines()}
    assert "intelligence.default_model: read as engine.model" in lines
    assert "engine.lmstudio.host: read as engine.openai.base_url" in lines
    assert "agent.tools: not used, tools.enabled is set and wins" in lines
    assert "tools.enabled: read as tools.enabled (a comma list)" in lines
    assert "learning: ignored (jarvis does no learning or optimisation)" in lines
    assert "telemetry.enabled: read" in lines
    assert "traces.db_path: read" in lines
    assert "telemetry.gpu_metrics: ignored (jarvis measures no GPU or energy)" in lines
    assert (
        "telemetry.db_path: ignored (jarvis stats reads the trace store ([traces] db_path))"
        in lines
    )
    assert "voice: ignored (jarvis has no voice input or output)" in lines
    assert "tools.mcp: kept for the MCP client" in lines
    assert "engine.cloud: ignored (not the engine in use)" in lines
    assert "sandbox.runtime: read" in lines  # the same key in both vocabularies


def test_key_in_neither_vocabulary_is_refused_with_the_nearest(
    jarvis_home: Path, tmp_path: Path
) -> None:
    file = tmp_path / "config.toml"
    file.write_text(
        '[engine]\ndefault = "ollama"\ntimout = 5\n[intelligence]\ntemprature = 0.1\n',
        encoding="utf-8",
    )
    for args in (["ask", "hi"], ["config", "check"]):
        result = jarvis(jarvis_home, *args, "--config", str(file))
        assert result.returncode == 2
        assert "engine.timout: unknown key (did you mean engine.timeout?)" in result.stderr
        assert "intelligence.temprature: unknown key (did you mean intelligence.temperature?)" in (
            result.stderr
        )
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "[tools.mcp] servers is not valid JSON"),
        ('[{"name": "fs"}]', "[tools.mcp] servers"),
    ],
    ids=["nested-past-reading", "no-command"],
)
def test_config_check_reads_the_mcp_servers_as_mcp_list_does(
    jarvis_home: Path, tmp_path: Path, servers: str, message: str
) -> None:
    """What `jarvis mcp list` would refuse, `config check` refuses too: not "valid"."""
    file = tmp_path / "config.toml"
    file.write_text(f"[tools.mcp]\nenabled = true\nservers = '{servers}'\n", encoding="utf-8")
    for args in (["config", "check"], ["mcp", "list"]):
        result = jarvis(jarvis_home, *args, "--config", str(file))
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("table", "shown"),
    [
        (
            "[agent]\ntemperature = true\n",
            "agent.temperature: true (a boolean) is not a number (accepted: at least 0 and at "
            "most 2)",
        ),
        (
            "[intelligence]\ntemperature = false\n",
            "intelligence.temperature (read as agent.temperature): false (a boolean) is not a "
            "number",
        ),
        (
            '[server]\nport = "8000"\n',
            'server.port: "8000" (a string) is not an integer; write it without quotes '
            "(accepted: at least 0 and at most 65535)",
        ),
        ("[server]\nport = 8000.0\n", "server.port: 8000.0 (a float) is not an integer"),
        ("[traces]\nenabled = 1\n", "traces.enabled: 1 (an integer) is not true or false"),
        (
            '[mcp.servers.fs]\ncommand = "npx"\ntimeout = "30"\n',
            'mcp.servers.fs.timeout: "30" (a string) is not a number; write it without quotes',
        ),
    ],
    ids=["bool-number", "openjarvis-key", "quoted-port", "float-port", "int-flag", "mcp-table"],
)
def test_a_value_of_another_toml_type_is_refused_not_converted(
    jarvis_home: Path, tmp_path: Path, table: str, shown: str
) -> None:
    """OpenJarvis converts no TOML value either (a quoted port reaches uvicorn as a
    string); a boolean taken for a number would hide a mistake."""
    file = tmp_path / "config.toml"
    file.write_text(table, encoding="utf-8")
    for args in (["config", "check"], ["ask", "hello"]):
        result = jarvis(jarvis_home, *args, "--config", str(file))
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert f"jarvis: Invalid config file {file}: {shown}" in result.stderr
        assert "Traceback" not in result.stderr


def test_numbers_written_as_numbers_combine_with_the_environment_and_options(
    jarvis_home: Path, tmp_path: Path, ollama_on_stub: OllamaProtocolServer
) -> None:
    """The environment's and ``-O``'s values are text parsed by their own code: a file
    of TOML numbers still takes them."""
    file = tmp_path / "config.toml"
    file.write_text(
        '[engine]\nname = "ollama"\nmodel = "smollm2:135m"\ntimeout = 30\n'
        "[agent]\ntemperature = 1\nmax_turns = 4\n[server]\nport = 8000\n",
        encoding="utf-8",
    )
    result = jarvis(
        jarvis_home, "ask", "--config", str(file), "-a", "orchestrator", "-O", "max_turns=2",
        "-O", "max_seconds=60.5", "hello", extra_env={"OLLAMA_HOST": ollama_on_stub.url},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ANSWER
    sent: Any = ollama_on_stub.requests[-1]
    assert sent["options"]["temperature"] == 1
