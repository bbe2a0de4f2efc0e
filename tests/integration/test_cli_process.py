"""The command line as a real process: embedded engine, loopback server, closed port, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.stub_server import ANSWER, StubServer

pytestmark = pytest.mark.integration

JARVIS = [sys.executable, "-m", "jarvis"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def env_for(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OLLAMA_HOST", "VLLM_HOST", "OPENAI_BASE_URL", "OPENAI_API_KEY"}
    }
    env["OPENJARVIS_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def jarvis(
    home: Path, *args: str, input: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*JARVIS, *args],
        input=input,
        capture_output=True,
        text=True,
        env=env_for(home),
        timeout=timeout,
        check=False,
    )


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "jarvis"
    result = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0
    assert "Exit codes" in result.stdout


@pytest.mark.slow
def test_embedded_engine_answers(jarvis_home: Path) -> None:
    result = jarvis(
        jarvis_home,
        "ask",
        "--engine",
        "llamacpp",
        "--max-tokens",
        "24",
        "What is the capital of France?",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert result.stdout.endswith("\n")


def test_closed_port_is_engine_unavailable(jarvis_home: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    (jarvis_home / "config.toml").write_text("[engine]\nmax_retries = 0\n", encoding="utf-8")
    result = jarvis(jarvis_home, "ask", "--engine", "openai", "--base-url", url, "q")
    assert result.returncode == 3, result.stderr
    assert "openai" in result.stderr
    assert url in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_answer_from_a_loopback_server(jarvis_home: Path, stub_server: StubServer) -> None:
    args = ["ask", "--base-url", stub_server.url, "-m", "stub-model", "Capital of France?"]
    result = jarvis(jarvis_home, *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ANSWER + "\n"


def test_json_from_a_loopback_server(jarvis_home: Path, stub_server: StubServer) -> None:
    result = jarvis(jarvis_home, "ask", "--json", "--base-url", stub_server.url, "q")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["content"] == ANSWER
    assert data["engine"] == "openai"
    assert data["model"] == "stub-model"  # the engine's first model, none configured


def test_question_piped_on_stdin(jarvis_home: Path, stub_server: StubServer) -> None:
    result = jarvis(jarvis_home, "ask", "--base-url", stub_server.url, input="Capital?\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ANSWER + "\n"


def test_models_from_a_loopback_server(jarvis_home: Path, stub_server: StubServer) -> None:
    result = jarvis(jarvis_home, "models", "--engine", "openai", "--base-url", stub_server.url)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "stub-model\n"


def test_verbose_says_which_engine_and_why(jarvis_home: Path, stub_server: StubServer) -> None:
    result = jarvis(
        jarvis_home, "ask", "-v", "--engine", "openai", "--base-url", stub_server.url, "q"
    )
    assert result.returncode == 0, result.stderr
    assert f"engine: openai at {stub_server.url} (chosen by --engine" in result.stderr


def test_ctrl_c_while_streaming(jarvis_home: Path, slow_stub_server: StubServer) -> None:
    process = subprocess.Popen(
        [*JARVIS, "ask", "--base-url", slow_stub_server.url, "-m", "stub-model", "q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(jarvis_home),
    )
    assert process.stdout is not None
    first = os.read(process.stdout.fileno(), 64)  # blocks until the first words arrive
    assert first, "nothing was streamed before the interrupt"
    time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    text = (first + out).decode()
    assert text.endswith("\n")  # the cursor is left on a fresh line
    assert len(text.strip()) < len(ANSWER)  # it really stopped mid-answer
    assert err.decode() == "jarvis: interrupted\n"


def test_reader_closing_the_pipe_is_not_an_error(
    jarvis_home: Path, slow_stub_server: StubServer
) -> None:
    process = subprocess.Popen(
        [*JARVIS, "ask", "--base-url", slow_stub_server.url, "-m", "stub-model", "q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(jarvis_home),
    )
    assert process.stdout is not None
    assert process.stderr is not None
    assert os.read(process.stdout.fileno(), 3)
    process.stdout.close()  # like `jarvis ask ... | head -c 3`
    assert process.wait(timeout=30) == 0
    assert process.stderr.read() == b""
    process.stderr.close()
