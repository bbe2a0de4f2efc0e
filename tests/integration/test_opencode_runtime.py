"""The opencode runtime for real: ``opencode serve`` (the pinned binary) on the scripted
engine over HTTP, through the adapter, the agent and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from contracts.external_runtime_contract import (
    ExternalRuntimeContract,
    collect,
    done,
    request_factory,
)
from jarvis.adapters.opencode_server import OpenCodeRuntime
from jarvis.domain.errors import ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalRunRequest, ExternalToolDone
from tests.support.opencode import (
    opencode_processes,
    opencode_runtime,
    private_dirs,
    require_opencode,
)
from tests.support.own_temp import own_temp_dir
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

ANSWER = "The capital of France is Paris."


@pytest.fixture(autouse=True)
def _own_temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from own_temp_dir(monkeypatch)


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    with ScriptedEngine([Reply(ANSWER)]) as scripted:
        yield scripted


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[OpenCodeRuntime]:
    async with opencode_runtime(tmp_path) as opened:
        yield opened


@pytest.fixture
def request_for(engine: ScriptedEngine) -> Callable[..., ExternalRunRequest]:
    return request_factory(model=MODEL, base_url=engine.url, timeout=120)


class TestOpenCodeContract(ExternalRuntimeContract):
    expected_answer = ANSWER

    @pytest.fixture
    def run_request(
        self, request_for: Callable[..., ExternalRunRequest]
    ) -> Callable[..., ExternalRunRequest]:
        return request_for


async def test_a_tool_round_writes_the_file_and_returns_the_result_to_the_model(
    runtime: OpenCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "hello.txt"
    engine.script = [
        Reply(
            tool_calls=[tool_call("call_1", "write", {"filePath": str(target), "content": "hi\n"})]
        ),
        Reply("Wrote hello.txt."),
    ]
    events = await collect(runtime, request_for("write hello.txt", str(workspace)))
    result = done(events)
    assert target.read_text() == "hi\n"
    assert result.content == "Wrote hello.txt."
    assert [t.tool_name for t in result.tool_results] == ["write"]
    assert result.tool_results[0].success
    assert any(isinstance(e, ExternalToolDone) for e in events)
    sent = engine.messages(-1)
    tool_messages = [m for m in sent if m.get("role") == "tool"]
    assert tool_messages
    assert tool_messages[0].get("tool_call_id") == "call_1"


async def test_the_server_is_private_and_needs_its_password(
    runtime: OpenCodeRuntime, request_for: Callable[..., ExternalRunRequest], tmp_path: Path
) -> None:
    import httpx

    done(await collect(runtime, request_for("hi", str(tmp_path))))
    server = runtime.server
    assert server is not None
    url = server.endpoint.url
    assert url.startswith("http://127.0.0.1:")
    async with httpx.AsyncClient() as client:
        assert (await client.get(url + "/global/health")).status_code == 401
        wrong = await client.get(url + "/global/health", auth=("opencode", "guess"))
        assert wrong.status_code == 401
    env = (Path("/proc") / str(server.pid) / "environ").read_bytes().split(b"\0")
    home = next(e for e in env if e.startswith(b"HOME=")).decode()[5:]
    assert home == server.private
    assert home != str(Path.home())
    config = Path(server.config_path)
    assert config.parent == Path(server.private)
    assert oct(os.stat(config).st_mode & 0o777) == "0o600"


async def test_close_leaves_no_process_and_no_temp_files(
    engine: ScriptedEngine, request_for: Callable[..., ExternalRunRequest], tmp_path: Path
) -> None:
    binary = require_opencode()
    runtime = OpenCodeRuntime(data_dir=tmp_path / "data", binary=binary)
    done(await collect(runtime, request_for("hi", str(tmp_path))))
    assert runtime.server is not None
    private = runtime.server.private
    assert opencode_processes(private)  # the server (in its jail) runs
    assert os.path.isdir(private)  # noqa: ASYNC240
    await runtime.aclose()
    assert opencode_processes(private) == []
    assert not os.path.lexists(private)  # noqa: ASYNC240


async def test_a_timeout_aborts_the_run_with_a_clear_error(
    runtime: OpenCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    engine.script = [Reply("Never finished.", hold=True)]
    started = time.monotonic()
    try:
        with pytest.raises(ExternalRuntimeError, match="did not finish within 3 s"):
            await collect(runtime, request_for("slow", str(tmp_path), timeout=3))
    finally:
        engine.release()
    assert time.monotonic() - started < 60  # a margin for load: the answer is held for good


async def test_a_server_that_dies_mid_run_is_a_clear_error(
    runtime: OpenCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    engine.script = [Reply("Held.", hold=True)]

    async def kill_when_asked() -> None:
        await asyncio.to_thread(engine.first_word_sent.wait, 60)
        server = runtime.server
        assert server is not None
        assert server.pid is not None
        os.killpg(server.pid, signal.SIGKILL)

    killer = asyncio.create_task(kill_when_asked())
    try:
        with pytest.raises(ExternalRuntimeError, match="opencode stopped before the run finished"):
            await collect(runtime, request_for("crash", str(tmp_path)))
    finally:
        engine.release()
        await killer


async def test_a_missing_binary_says_how_to_install_it(tmp_path: Path) -> None:
    runtime = OpenCodeRuntime(data_dir=tmp_path, binary=str(tmp_path / "no-opencode"))
    request = ExternalRunRequest(
        prompt="x", workspace=str(tmp_path), model="m", base_url="http://127.0.0.1:9/v1"
    )
    with pytest.raises(ExternalRuntimeError, match="not installed") as caught:
        await collect(runtime, request)
    assert "npm install opencode-ai@1.18.33" in caught.value.hint


# --- through the CLI -------------------------------------------------------------------------


def _cli_env(home: Path, tmp: Path, binary: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJARVIS", "JARVIS_"))}
    env.update(OPENJARVIS_HOME=str(home), TMPDIR=str(tmp))
    env["JARVIS_OPENCODE_BIN"] = binary or str(tmp / "missing-opencode")
    return env


def _ask(engine: ScriptedEngine, workspace: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "jarvis",
        "ask",
        "-a",
        "opencode",
        "--engine",
        "openai",
        "--base-url",
        engine.url,
        "--model",
        MODEL,
        "-O",
        f"workspace={workspace}",
        *extra,
    ]


def test_cli_answers_streams_and_leaves_nothing_behind(
    engine: ScriptedEngine, tmp_path: Path
) -> None:
    binary = require_opencode()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done_ = subprocess.run(
        [*_ask(engine, tmp_path, "--json"), "what is the capital of France?"],
        env=_cli_env(tmp_path / "home", tmp, binary),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done_.returncode == 0, done_.stderr
    answer = json.loads(done_.stdout)
    assert answer["content"] == ANSWER
    assert answer["metadata"]["confined"] is True
    assert opencode_processes(f"{tmp}/") == []
    assert private_dirs(str(tmp)) == []


def test_cli_missing_binary_exit_6_with_install_hint(
    engine: ScriptedEngine, tmp_path: Path
) -> None:
    tmp = Path(tempfile.gettempdir())  # this test's own (see own_temp_dir)
    done_ = subprocess.run(
        [*_ask(engine, tmp_path), "hi"],
        env=_cli_env(tmp_path / "home", tmp, None),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done_.returncode == 6
    assert "opencode binary is not installed" in done_.stderr
    assert "npm install opencode-ai@1.18.33" in done_.stderr
    assert "Traceback" not in done_.stderr


def test_cli_ctrl_c_exit_130_and_no_orphan_server(engine: ScriptedEngine, tmp_path: Path) -> None:
    binary = require_opencode()
    tmp = Path(tempfile.gettempdir())  # this test's own (see own_temp_dir)
    engine.script = [Reply("Held answer.", hold=True)]
    proc = subprocess.Popen(
        [*_ask(engine, tmp_path), "hold on"],
        env=_cli_env(tmp_path / "home", tmp, binary),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert engine.first_word_sent.wait(120), "the model was never asked"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        engine.release()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while opencode_processes(f"{tmp}/") and time.monotonic() < deadline:
        time.sleep(0.1)  # the parent-death signal reaches the server as jarvis exits
    assert opencode_processes(f"{tmp}/") == []
    assert private_dirs(str(tmp)) == []


@pytest.mark.timeout(420)
def test_opencode_onto_the_llama_cpp_server(llama_server: object, tmp_path: Path) -> None:
    """Protocol behaviour on a real engine, not wisdom: opencode's ~10 KB prompt and its
    tools reach SmolLM2 (2048-token context) through llama.cpp's OpenAI API, and the run
    ends in bounded time either with an answer or with the engine's error as a clear
    ``ExternalRuntimeError`` (never a hang, never a traceback)."""
    from tests.support.llama_server import LlamaServer

    assert isinstance(llama_server, LlamaServer)
    binary = require_opencode()

    async def main() -> str:
        runtime = OpenCodeRuntime(data_dir=tmp_path / "data", binary=binary)
        request = ExternalRunRequest(
            prompt="Say hello.",
            workspace=str(tmp_path),
            model=llama_server.model,
            base_url=llama_server.base_url,
            timeout=240,
        )
        try:
            result = done(await collect(runtime, request))
        except ExternalRuntimeError as exc:
            return f"error: {exc}"
        finally:
            await runtime.aclose()
        return "answer" if result.session_id else "no session"

    outcome = asyncio.run(main())
    assert outcome == "answer" or outcome.startswith("error: opencode"), outcome


async def test_runs_in_two_workspaces_at_once_each_get_a_jailed_server(
    runtime: OpenCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    """A jailed server serves one workspace: a run in a second workspace while the first
    is held gets a server of its own, and the first run still finishes."""
    first, second = tmp_path / "one", tmp_path / "two"
    for folder in (first, second):
        folder.mkdir()
    engine.script = [Reply("Held answer.", hold=True), Reply(ANSWER)]
    held = asyncio.create_task(collect(runtime, request_for("first", str(first))))
    try:
        assert await asyncio.to_thread(engine.first_word_sent.wait, 120)
        other = done(await collect(runtime, request_for("second", str(second))))
        assert other.content == ANSWER
    finally:
        engine.release()
    result = done(await held)
    assert result.content == "Held answer."
    assert result.metadata["confined"] is True
