"""The openhands runtime for real: the pinned openhands SDK (Python 3.12 venv) on the
scripted engine, through the adapter, the agent and the CLI. The SDK takes 6-12 s to
import, so each test makes as few runs as its assertions need."""

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
from jarvis.adapters.openhands_sdk import OpenHandsRuntime
from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalRunRequest, ExternalTextDelta, ExternalToolDone
from tests.support.openhands import (
    openhands_processes,
    own_temp_dir,
    private_dirs,
    require_openhands,
    temp_dir_in,
    wait_for_command,
)
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call
from tests.support.users import open_directory, throwaway_user

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _own_temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from own_temp_dir(monkeypatch)


ANSWER = "The capital of France is Paris."
BACKGROUND = "nohup sleep 600 >/dev/null 2>&1 &"
SLEEP = [
    Reply(tool_calls=[tool_call("call_s", "terminal", {"command": BACKGROUND})]),
    Reply("Held.", hold=True),
]
"""The agent's terminal leaves a command running in the background, immune to the hangup
its shell gets when the runner goes, then the model is held: the run is stopped while a
process outside the runner's group is alive, and that process must go too."""


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    with ScriptedEngine([Reply(ANSWER)]) as scripted:
        yield scripted


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[OpenHandsRuntime]:
    opened = OpenHandsRuntime(data_dir=tmp_path / "data", python=require_openhands())
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
def request_for(engine: ScriptedEngine) -> Callable[..., ExternalRunRequest]:
    return request_factory(model=MODEL, base_url=engine.url, timeout=120)


class TestOpenHandsContract(ExternalRuntimeContract):
    expected_answer = ANSWER

    @pytest.fixture
    def run_request(
        self, request_for: Callable[..., ExternalRunRequest]
    ) -> Callable[..., ExternalRunRequest]:
        return request_for


async def test_a_tool_round_writes_the_file_and_returns_the_result_to_the_model(
    runtime: OpenHandsRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "hello.txt"
    arguments: dict[str, object] = {"command": "create", "path": str(target), "file_text": "hi\n"}
    engine.script = [
        Reply(tool_calls=[tool_call("call_1", "file_editor", arguments)]),
        Reply("Wrote hello.txt."),
    ]
    request = request_for("write hello.txt", str(workspace), system_prompt="You are Ada.")
    events = await collect(runtime, request)
    result = done(events)
    assert target.read_text() == "hi\n"
    assert result.content == "Wrote hello.txt."
    assert [t.tool_name for t in result.tool_results] == ["file_editor"]
    assert result.tool_results[0].success
    assert result.tool_results[0].call_id == "call_1"
    assert result.turns == 2
    assert result.usage.total_tokens == 24  # two calls of the scripted engine's 12
    streamed = [e for e in events if isinstance(e, ExternalToolDone)]
    assert [e.result.call_id for e in streamed] == ["call_1"]
    assert "".join(e.text for e in events if isinstance(e, ExternalTextDelta)) == result.content
    # the model saw the tool's result, under its call id, on the second request
    assert len(engine.requests) == 2
    tool_messages = [m for m in engine.messages(-1) if m.get("role") == "tool"]
    assert [m.get("tool_call_id") for m in tool_messages] == ["call_1"]
    assert "hello.txt" in json.dumps(tool_messages[0].get("content"))
    # the LLM was pointed at the engine as the runner was told: model, no reasoning effort
    first = engine.requests[0]
    assert first["model"] == MODEL
    assert first.get("stream") is True
    assert "reasoning_effort" not in first
    system = json.dumps(engine.messages(0)[0])
    assert "You are Ada." in system  # the persona reaches the SDK's system message


async def test_the_turn_limit_ends_the_run_with_the_sdks_error(
    runtime: OpenHandsRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    """A model that never stops calling tools meets ``max_turns`` (the SDK's iterations)."""
    engine.script = [Reply(tool_calls=[tool_call("call_l", "terminal", {"command": "true"})])]
    with pytest.raises(ExternalRuntimeError, match=r"maximum iterations limit \(2\)"):
        await collect(runtime, request_for("loop", str(tmp_path), max_turns=2))
    assert len(engine.requests) == 2


async def test_plan_mode_can_neither_write_nor_run_commands(
    runtime: OpenHandsRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    """A model that tries anyway, in plan mode: neither tool exists there, the attempts come
    back to it as failed tool results, and the workspace is untouched."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "planned.txt"
    create: dict[str, object] = {"command": "create", "path": str(target), "file_text": "x"}
    engine.script = [
        Reply(
            tool_calls=[
                tool_call("call_e", "file_editor", create),
                tool_call("call_t", "terminal", {"command": f"touch {target}"}),
            ]
        ),
        Reply("I may only plan."),
    ]
    result = done(await collect(runtime, request_for("edit it", str(workspace), mode="plan")))
    assert result.content == "I may only plan."
    assert not await asyncio.to_thread(target.exists)
    assert {t.call_id for t in result.tool_results} == {"call_e", "call_t"}
    assert not any(t.success for t in result.tool_results)
    tools = engine.requests[0]["tools"]
    assert isinstance(tools, list)
    offered = {tool["function"]["name"] for tool in tools}
    assert {"file_editor", "terminal"}.isdisjoint(offered)
    assert {"glob", "grep"} <= offered
    tool_messages = [m for m in engine.messages(-1) if m.get("role") == "tool"]
    assert {m.get("tool_call_id") for m in tool_messages} == {"call_e", "call_t"}


async def test_build_and_plan_keep_a_conversation_each(
    runtime: OpenHandsRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    """The SDK refuses to continue a conversation with other tools: a workspace's last
    conversation is kept per mode, and a named one asked in the other mode is a clear
    error before anything starts."""
    build = done(await collect(runtime, request_for("one", str(tmp_path))))
    plan = done(await collect(runtime, request_for("two", str(tmp_path), mode="plan")))
    assert plan.session_id != build.session_id
    with pytest.raises(ConfigurationError, match="was started in build mode") as caught:
        await collect(
            runtime, request_for("three", str(tmp_path), mode="plan", session_id=build.session_id)
        )
    assert "-O agent=build" in caught.value.hint
    assert len(engine.requests) == 2


async def test_the_runner_is_private_and_leaves_nothing_behind(
    runtime: OpenHandsRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    """The runner's environment holds none of the user's variables (a key in the caller's
    environment does not reach the SDK), its HOME is private, and after the run no process
    of its tree (not even the command it left in the background) and no temp dir remain;
    the terminal tool ran in the workspace."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    engine.script = [
        Reply(
            tool_calls=[
                tool_call(
                    "call_t",
                    "terminal",
                    {"command": f"pwd > where.txt; env > env.txt; {BACKGROUND}"},
                )
            ]
        ),
        Reply("Done."),
    ]
    os.environ["JARVIS_TEST_SECRET"] = "do-not-leak"
    with temp_dir_in(tmp_path / "tmp") as tmp:
        try:
            result = done(await collect(runtime, request_for("where am I", str(workspace))))
        finally:
            del os.environ["JARVIS_TEST_SECRET"]
    assert result.tool_results[0].tool_name == "terminal"
    assert (workspace / "where.txt").read_text().strip() == str(workspace)
    env = (workspace / "env.txt").read_text()
    assert "do-not-leak" not in env
    home = next(line[5:] for line in env.splitlines() if line.startswith("HOME="))
    assert "/jarvis-openhands-" in home
    assert home != str(Path.home())
    assert not await asyncio.to_thread(os.path.exists, home)
    assert home.startswith(f"{tmp}/")
    assert openhands_processes(f"{tmp}/") == []
    assert private_dirs(str(tmp)) == []
    assert not runtime.running


async def test_a_timeout_stops_the_run_with_a_clear_error_and_no_process_left(
    runtime: OpenHandsRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    """Whatever the runner is doing when the time is up (importing the SDK, waiting for
    the held answer), its whole group goes and the error says what happened."""
    engine.script = [Reply("Never finished.", hold=True)]
    started = time.monotonic()
    with temp_dir_in(tmp_path / "tmp") as tmp:
        try:
            with pytest.raises(ExternalRuntimeError, match="did not finish within 4 s") as caught:
                await collect(runtime, request_for("slow", str(tmp_path), timeout=4))
        finally:
            engine.release()
    assert "-O timeout=SECONDS" in caught.value.hint
    assert time.monotonic() - started < 60  # a margin for load: the answer is held for good
    assert openhands_processes(f"{tmp}/") == []
    assert private_dirs(str(tmp)) == []


async def test_a_runner_that_dies_mid_run_is_a_clear_error_and_its_orphans_go(
    runtime: OpenHandsRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    engine.script = list(SLEEP)

    async def kill_while_the_tool_runs() -> None:
        await asyncio.to_thread(wait_for_command, b"sleep\x00600")
        assert await asyncio.to_thread(engine.first_word_sent.wait, 60)
        (runner,) = runtime.running
        assert runner.pid is not None
        os.killpg(runner.pid, signal.SIGKILL)  # the runner's group only, as a crash would

    killer = asyncio.create_task(kill_while_the_tool_runs())
    with temp_dir_in(tmp_path / "tmp") as tmp:
        try:
            with pytest.raises(ExternalRuntimeError, match="stopped before the run finished"):
                await collect(runtime, request_for("crash", str(tmp_path)))
        finally:
            engine.release()
            await killer
    assert not runtime.running
    assert openhands_processes(f"{tmp}/") == []  # the terminal's shell and its sleep too
    assert private_dirs(str(tmp)) == []


async def test_an_engine_that_refuses_is_the_runners_error(tmp_path: Path) -> None:
    """Nothing listens at the engine's URL: the SDK's own error comes back as a clear
    ``ExternalRuntimeError`` (not a hang, not a traceback)."""
    runtime = OpenHandsRuntime(data_dir=tmp_path / "data", python=require_openhands())
    request = ExternalRunRequest(
        prompt="x", workspace=str(tmp_path), model=MODEL, base_url="http://127.0.0.1:9/v1"
    )
    with pytest.raises(ExternalRuntimeError, match="openhands failed: ") as caught:
        await collect(runtime, request)
    assert "Traceback" not in str(caught.value)


def _base_python() -> str:
    """The 3.12 the pinned venv was made from: new enough, but without the SDK."""
    config = (Path(require_openhands()).parent.parent / "pyvenv.cfg").read_text()
    return next(
        line.split("=", 1)[1].strip()
        for line in config.splitlines()
        if line.startswith("executable")
    )


@pytest.mark.parametrize(
    ("which", "says"),
    [
        ("/usr/bin/python3", "openhands needs Python 3.12 or newer; '{}' is Python 3."),
        ("missing", "The Python for openhands, '{}', does not run."),
        ("base", "The openhands SDK is not installed in '{}' (Python 3.12"),
    ],
)
async def test_a_python_without_the_sdk_says_how_to_install_it(
    which: str, says: str, tmp_path: Path
) -> None:
    python = {"missing": str(tmp_path / "no-python"), "base": ""}.get(which, which)
    python = python or await asyncio.to_thread(_base_python)
    runtime = OpenHandsRuntime(data_dir=tmp_path, python=python)
    request = ExternalRunRequest(
        prompt="x", workspace=str(tmp_path), model="m", base_url="http://127.0.0.1:9/v1"
    )
    with pytest.raises(ExternalRuntimeError) as caught:
        await collect(runtime, request)
    assert str(caught.value).startswith(says.format(python))
    assert "openhands-sdk==1.58.2 openhands-tools==1.58.2" in caught.value.hint
    assert "JARVIS_OPENHANDS_PYTHON" in caught.value.hint


# --- through the CLI -------------------------------------------------------------------------


def _cli_env(home: Path, tmp: Path, python: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJARVIS", "JARVIS_"))}
    env.update(OPENJARVIS_HOME=str(home), TMPDIR=str(tmp), JARVIS_OPENHANDS_PYTHON=python)
    return env


def _ask(engine: ScriptedEngine, workspace: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "jarvis",
        "ask",
        "-a",
        "openhands",
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


def test_cli_answers_and_keeps_its_conversations_in_the_config_dir(
    engine: ScriptedEngine, tmp_path: Path
) -> None:
    python = require_openhands()
    tmp = Path(tempfile.gettempdir())  # this test's own (see own_temp_dir)
    before = set(openhands_processes())
    done_ = subprocess.run(
        [*_ask(engine, tmp_path, "--json"), "what is the capital of France?"],
        env=_cli_env(tmp_path / "home", tmp, python),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done_.returncode == 0, done_.stderr
    answer = json.loads(done_.stdout)
    assert answer["content"] == ANSWER
    assert answer["turns"] == 1
    data = tmp_path / "home" / "runtimes" / "openhands"
    assert len(list(data.glob("*/base_state.json"))) == 1
    assert len(list((data / "workspaces").iterdir())) == 1  # the workspace's last session
    # a second ask in the same workspace, another process: the conversation goes on
    again = subprocess.run(
        [*_ask(engine, tmp_path), "and of Italy?"],
        env=_cli_env(tmp_path / "home", tmp, python),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert again.returncode == 0, again.stderr
    assert ANSWER in again.stdout
    history = json.dumps(engine.messages(-1))
    assert "what is the capital of France?" in history
    assert "and of Italy?" in history
    assert len(list(data.glob("*/base_state.json"))) == 1
    assert set(openhands_processes()) == before
    assert private_dirs(str(tmp)) == []


def test_cli_python_without_the_sdk_exit_6_with_install_hint(
    engine: ScriptedEngine, tmp_path: Path
) -> None:
    tmp = Path(tempfile.gettempdir())  # this test's own (see own_temp_dir)
    done_ = subprocess.run(
        [*_ask(engine, tmp_path), "hi"],
        env=_cli_env(tmp_path / "home", tmp, "/usr/bin/python3"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done_.returncode == 6, done_.stderr
    assert "/usr/bin/python3" in done_.stderr
    assert "pip install openhands-sdk==1.58.2" in done_.stderr.replace("DIR/bin/", "")
    assert "Traceback" not in done_.stderr
    assert engine.requests == []


def test_cli_timeout_exit_6_with_the_limit_and_nothing_left_behind(
    engine: ScriptedEngine, tmp_path: Path
) -> None:
    python = require_openhands()
    tmp = Path(tempfile.gettempdir())  # this test's own (see own_temp_dir)
    engine.script = [Reply("Never finished.", hold=True)]
    before = set(openhands_processes())
    try:
        done_ = subprocess.run(
            [*_ask(engine, tmp_path, "-O", "timeout=3"), "slow"],
            env=_cli_env(tmp_path / "home", tmp, python),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        engine.release()
    assert done_.returncode == 6, done_.stderr
    assert "openhands did not finish within 3 s" in done_.stderr
    assert "-O timeout=SECONDS" in done_.stderr
    assert "Traceback" not in done_.stderr
    assert set(openhands_processes()) == before
    assert private_dirs(str(tmp)) == []


def test_cli_ctrl_c_exit_130_and_nothing_left_behind(
    engine: ScriptedEngine, tmp_path: Path
) -> None:
    """Ctrl-C while the agent's command runs in the background: jarvis exits 130 and the
    runner, the terminal's shell (in a session of its own) and the command are all gone."""
    python = require_openhands()
    tmp = Path(tempfile.gettempdir())  # this test's own (see own_temp_dir)
    engine.script = list(SLEEP)
    before = set(openhands_processes())
    proc = subprocess.Popen(
        [*_ask(engine, tmp_path), "hold on"],
        env=_cli_env(tmp_path / "home", tmp, python),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_command(b"sleep\x00600")
        assert engine.first_word_sent.wait(60), "the model was never asked again"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        engine.release()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert set(openhands_processes()) == before
    assert private_dirs(str(tmp)) == []


@pytest.mark.timeout(240)
def test_openhands_onto_the_llama_cpp_server(llama_server: object, tmp_path: Path) -> None:
    """Protocol behaviour on a real engine, not wisdom: the SDK's large system prompt and
    tool schemas reach SmolLM2 (2048-token context) through llama.cpp's OpenAI API, and the
    run ends in bounded time either with an answer or with the engine's refusal as a clear
    ``ExternalRuntimeError`` (never a hang, never a traceback), leaving no process."""
    from tests.support.llama_server import LlamaServer

    assert isinstance(llama_server, LlamaServer)
    python = require_openhands()
    before = set(openhands_processes())

    async def main() -> str:
        runtime = OpenHandsRuntime(data_dir=tmp_path / "data", python=python)
        request = ExternalRunRequest(
            prompt="Say hello.",
            workspace=str(tmp_path),
            model=llama_server.model,
            base_url=llama_server.base_url,
            timeout=120,
        )
        try:
            result = done(await collect(runtime, request))
        except ExternalRuntimeError as exc:
            return f"error: {exc}"
        finally:
            await runtime.aclose()
        return "answer" if result.session_id else "no session"

    started = time.monotonic()
    outcome = asyncio.run(main())
    assert outcome == "answer" or outcome.startswith("error: openhands failed: "), outcome
    assert "Traceback" not in outcome
    assert "validation error" not in outcome  # the server took the SDK's messages as sent
    assert time.monotonic() - started < 130
    assert set(openhands_processes()) == before


# --- another user on the same machine ----------------------------------------------------------

_ATTACKER = """
import json, os, sys
data, home, pids = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3].split(",")]
seen = {"cmdlines": [], "environ": [], "data": None, "home": None}
for pid in pids:
    for name, into in (("cmdline", "cmdlines"), ("environ", "environ")):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as handle:
                seen[into].append(handle.read().decode("utf-8", "replace"))
        except OSError as exc:
            seen[into].append(f"denied: {type(exc).__name__}")
for key, path in (("data", data), ("home", home)):
    try:
        seen[key] = os.listdir(path)
    except OSError as exc:
        seen[key] = f"denied: {type(exc).__name__}"
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def other_user() -> Iterator[tuple[int, int]]:
    with throwaway_user("jvoh") as ids:
        yield ids


@pytest.fixture
def open_dir() -> Iterator[Path]:
    with open_directory("jarvis-oh-attack-") as path:
        yield path


async def test_another_user_sees_neither_the_key_nor_the_conversations(
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    open_dir: Path,
    other_user: tuple[int, int],
) -> None:
    """While a run holds, an ordinary user of the machine reads every /proc entry of the
    runner's tree it may, and lists the conversations dir (created loosely beforehand, in
    a dir it may walk to) and the runner's HOME: the engine's key is in no command line,
    the environments are closed to it, both dirs too; and no file the SDK persisted holds
    the key."""
    from jarvis.adapters.openhands_sdk.process import runner_tree

    data = open_dir / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    runtime = OpenHandsRuntime(data_dir=data, python=require_openhands())
    workspace = open_dir / "ws"
    workspace.mkdir()
    engine.script = [Reply("Held.", hold=True)]
    key = "sk-jarvis-test-" + os.urandom(12).hex()
    uid, gid = other_user
    python = next(
        (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)),
        None,
    )
    if python is None:
        pytest.skip("no system python3 the other user may run")

    async def attack() -> dict[str, object]:
        assert await asyncio.to_thread(engine.first_word_sent.wait, 90)
        (runner,) = runtime.running
        assert runner.pid is not None
        pids = ",".join(str(p) for p in sorted(runner_tree(runner.pid, runner.private)))
        done_ = await asyncio.to_thread(
            subprocess.run,
            [python, "-I", "-c", _ATTACKER, str(data), runner.private, pids],
            user=uid,
            group=gid,
            extra_groups=[],
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
        )
        engine.release()
        assert done_.returncode == 0, done_.stderr
        seen: dict[str, object] = json.loads(done_.stdout)
        return seen

    attacker = asyncio.create_task(attack())
    try:
        done(await collect(runtime, request_for("hold", str(workspace), api_key=key)))
    finally:
        engine.release()
        await runtime.aclose()
    seen = await attacker
    assert str(seen["data"]).startswith("denied")
    assert str(seen["home"]).startswith("denied")
    cmdlines, environ = seen["cmdlines"], seen["environ"]
    assert isinstance(cmdlines, list)
    assert isinstance(environ, list)
    assert len(cmdlines) >= 2  # the runner and the terminal's shell at least
    assert all(key not in text for text in cmdlines)
    assert all(str(text).startswith("denied") for text in environ)
    assert engine.requests[0]["model"] == MODEL
    stored = await asyncio.to_thread(
        lambda: [p for p in data.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    )
    assert stored == []
