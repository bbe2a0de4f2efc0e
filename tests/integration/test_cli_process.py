"""The command line as a real process: embedded engine, loopback server, closed port, Ctrl-C,
closed or ASCII-only streams, and paths and bytes that would hang or exhaust it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.stub_server import ANSWER, StubServer
from tests.support.gated_engine import GatedEngine
from tests.support.ports import closed_port

pytestmark = pytest.mark.integration

JARVIS = [sys.executable, "-m", "jarvis"]


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
    (jarvis_home / "config.toml").write_text("[engine]\nmax_retries = 0\n", encoding="utf-8")
    with closed_port() as port:
        url = f"http://127.0.0.1:{port}/v1"
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


def test_ctrl_c_while_streaming(jarvis_home: Path) -> None:
    with GatedEngine() as engine:  # holds the answer back until after the interrupt
        process = subprocess.Popen(
            [*JARVIS, "ask", "--base-url", engine.url, "-m", "gated-model", "q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env_for(jarvis_home),
        )
        assert process.stdout is not None
        first = os.read(process.stdout.fileno(), 64)  # blocks until the first word arrives
        assert first == b"The", "the first word was not streamed before the interrupt"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    text = (first + out).decode()
    assert text == "The\n"  # stopped mid-answer, the cursor left on a fresh line
    assert err.decode() == "jarvis: interrupted\n"


def test_reader_closing_the_pipe_is_not_an_error(jarvis_home: Path) -> None:
    with GatedEngine() as engine:
        process = subprocess.Popen(
            [*JARVIS, "ask", "--base-url", engine.url, "-m", "gated-model", "q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env_for(jarvis_home),
        )
        assert process.stdout is not None
        assert process.stderr is not None
        assert os.read(process.stdout.fileno(), 3) == b"The"
        process.stdout.close()  # like `jarvis ask ... | head -c 3`
        engine.release()  # the rest of the answer now meets a closed pipe
        assert process.wait(timeout=60) == 0
        assert process.stderr.read() == b""
        process.stderr.close()


@pytest.mark.parametrize("mode", [[], ["--no-stream"], ["--json"]], ids=["stream", "whole", "json"])
def test_reader_gone_before_the_first_byte(
    jarvis_home: Path, stub_server: StubServer, mode: list[str]
) -> None:
    process = subprocess.Popen(
        [*JARVIS, "ask", *mode, "--base-url", stub_server.url, "q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(jarvis_home),
    )
    assert process.stdout is not None
    process.stdout.close()  # like `jarvis ask ... | head -c 0`
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert err == b""


def _close_fd(fd: int) -> Callable[[], None]:
    def close() -> None:
        os.close(fd)

    return close


def test_a_closed_stdout_is_a_usage_error(jarvis_home: Path, stub_server: StubServer) -> None:
    asked_before = stub_server.requests
    process = subprocess.run(
        [*JARVIS, "ask", "--base-url", stub_server.url, "q"],
        stderr=subprocess.PIPE,
        env=env_for(jarvis_home),
        preexec_fn=_close_fd(1),  # `jarvis ask q >&-`
        timeout=60,
        check=False,
    )
    err = process.stderr.decode()
    assert process.returncode == 2, err
    assert err.startswith("jarvis: Standard output is closed")
    assert "Traceback" not in err
    assert stub_server.requests == asked_before  # no answer computed that could go nowhere


def test_a_closed_stderr_costs_nothing_of_the_answer(
    jarvis_home: Path, stub_server: StubServer
) -> None:
    process = subprocess.run(
        [*JARVIS, "ask", "--verbose", "--base-url", stub_server.url, "q"],
        stdout=subprocess.PIPE,
        env=env_for(jarvis_home),
        preexec_fn=_close_fd(2),  # `jarvis ask -v q 2>&-`
        timeout=60,
        check=False,
    )
    assert process.returncode == 0
    assert process.stdout.decode() == ANSWER + "\n"


def _limit_memory() -> None:
    """1 GiB of address space: an unbounded read fails fast instead of filling the host."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("option", ["--context-file", "--config"])
@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_path_that_is_not_a_regular_file_is_refused_at_once(
    jarvis_home: Path, tmp_path: Path, stub_server: StubServer, option: str, kind: str
) -> None:
    if kind == "device":
        path = Path("/dev/zero")  # endless, and its size says 0
    else:
        path = tmp_path / "fifo"
        os.mkfifo(path)  # opening it for reading blocks until a writer comes
    result = subprocess.run(
        [*JARVIS, "ask", "-a", "rlm", option, str(path), "--base-url", stub_server.url, "q"],
        capture_output=True,
        text=True,
        env=env_for(jarvis_home),
        preexec_fn=_limit_memory,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    what = "a character device" if kind == "device" else "a named pipe"
    assert f"'{path}' is {what}, not a regular file" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_question_from_an_endless_stdin_is_refused(
    jarvis_home: Path, stub_server: StubServer
) -> None:
    with open("/dev/zero", "rb") as zero:
        result = subprocess.run(
            [*JARVIS, "ask", "--base-url", stub_server.url],
            stdin=zero,
            capture_output=True,
            text=True,
            env=env_for(jarvis_home),
            preexec_fn=_limit_memory,
            timeout=60,
            check=False,
        )
    assert result.returncode == 2, result.stderr
    assert "The question on stdin is longer than" in result.stderr


def test_argument_bytes_that_are_not_utf8(jarvis_home: Path, stub_server: StubServer) -> None:
    args = [*JARVIS, "ask", "--base-url", stub_server.url, "-m", "stub-model"]
    result = subprocess.run(
        [*(a.encode() for a in args), b"Capital of Fran\xe7e?"],
        capture_output=True,
        env=env_for(jarvis_home),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (ANSWER + "\n").encode()


@pytest.mark.parametrize(
    "env",
    [
        {"PYTHONIOENCODING": "ascii"},
        {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"},
    ],
    ids=["PYTHONIOENCODING=ascii", "LANG=C"],
)
def test_an_ascii_only_stdout_gets_the_whole_answer(jarvis_home: Path, env: dict[str, str]) -> None:
    with GatedEngine(answer="Bien sûr : Paris.") as engine:
        engine.release()
        for mode, expected in (([], "Bien s\\xfbr : Paris.\n"), (["--json"], None)):
            result = subprocess.run(
                [*JARVIS, "ask", *mode, "--base-url", engine.url, "q"],
                capture_output=True,
                env={**env_for(jarvis_home), **env},
                timeout=60,
                check=False,
            )
            assert result.returncode == 0, result.stderr
            out = result.stdout.decode("ascii")
            if expected is None:
                assert json.loads(out)["content"] == "Bien sûr : Paris."
            else:
                assert out == expected


def test_credentials_in_the_url_are_never_printed(
    jarvis_home: Path, stub_server: StubServer
) -> None:
    url = stub_server.url.replace("http://", "http://alice:s3cr3t@")
    result = jarvis(jarvis_home, "ask", "--verbose", "--base-url", url, "q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ANSWER + "\n"
    assert "engine: openai at http://***@127.0.0.1:" in result.stderr
    assert "s3cr3t" not in result.stderr
    assert "alice" not in result.stderr
