"""The claude_code runtime for real: the checkout's runner on the pinned Claude Agent SDK
(its native ``claude`` binary included), talking to jarvis's own Anthropic-compatible
endpoint on loopback, over the scripted OpenAI-compatible engine (or the llama.cpp
server); through the adapter, the agent, the SDK and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
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
from jarvis.adapters.claude_agent_sdk import ClaudeCodeRuntime
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.adapters.subprocess_repl.process_jail import process_tree
from jarvis.domain.errors import ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalRunRequest, ExternalToolDone
from jarvis.entrypoints.composition.loopback import loopback_endpoint
from jarvis.entrypoints.http.loopback_endpoint import LoopbackEndpoint
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call
from tests.support.users import open_directory, throwaway_user

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "claude_code_runner"
VERSION = json.loads((SOURCE / "package.json").read_text())["version"]
ANSWER = "The capital of France is Paris."


def _installed() -> Path | None:
    """``$JARVIS_CLAUDE_CODE_RUNNER_DIR``, else the copy scripts/lib/install.sh caches."""
    explicit = os.environ.get("JARVIS_CLAUDE_CODE_RUNNER_DIR")
    cache = Path(os.environ.get("JARVIS_RUNTIMES") or Path.home() / ".cache/jarvis/runtimes")
    candidate = Path(explicit) if explicit else cache / f"claude-code-runner-{VERSION}"
    sdk = candidate / "node_modules/@anthropic-ai/claude-agent-sdk/package.json"
    return candidate if sdk.is_file() else None


def _require(reason: str) -> None:
    reason += " (scripts/lib/install.sh ensure_agent_runtimes installs it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must install it")
    pytest.skip(reason)


@pytest.fixture
def runner_dir(tmp_path: Path) -> Path:
    """A ready install of the checkout's runner.mjs (what is tested is the script in this
    tree) next to the cached dependencies."""
    if shutil.which("node") is None:
        _require("node is not on PATH")
    installed = _installed()
    if installed is None:
        _require(f"claude_code_runner {VERSION} is not installed")
    assert installed is not None
    home = tmp_path / "runner"
    home.mkdir()
    for name in ("runner.mjs", "package.json"):
        shutil.copy(SOURCE / name, home / name)
    (home / "node_modules").symlink_to(installed / "node_modules")
    return home


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    with ScriptedEngine([Reply(ANSWER)]) as scripted:
        yield scripted


@pytest.fixture
async def inference(engine: ScriptedEngine) -> AsyncIterator[OpenAICompatibleEngine]:
    opened = OpenAICompatibleEngine(engine.url, engine_id="openai", max_retries=0)
    yield opened
    await opened.aclose()


@pytest.fixture
async def runtime(tmp_path: Path, runner_dir: Path) -> AsyncIterator[ClaudeCodeRuntime]:
    opened = ClaudeCodeRuntime(
        install_root=tmp_path / "install",
        state_dir=tmp_path / "state",
        endpoint=loopback_endpoint(),
        runner_dir=runner_dir,
    )
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
def request_for(inference: OpenAICompatibleEngine) -> Callable[..., ExternalRunRequest]:
    return request_factory(model=MODEL, engine=inference, timeout=120)


def group_members(pgid: int) -> list[int]:
    """Live processes in process group ``pgid`` (the runner, its claude binary, tools)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def alive(pid: int) -> bool:
    """Running (a zombie is dead: it holds no memory, files or children)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :][:1] not in ("Z", "X")


def wait_until_gone(pgid: int, within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)  # the parent-death signal and SIGKILL take effect asynchronously
    return group_members(pgid)


class TestClaudeCodeContract(ExternalRuntimeContract):
    expected_answer = ANSWER

    @pytest.fixture
    def run_request(
        self, request_for: Callable[..., ExternalRunRequest]
    ) -> Callable[..., ExternalRunRequest]:
        return request_for


async def test_a_tool_round_writes_the_file_and_returns_the_result_to_the_model(
    runtime: ClaudeCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "hello.txt"
    engine.script = [
        Reply(
            tool_calls=[
                tool_call("toolu_write_1", "Write", {"file_path": str(target), "content": "hi\n"})
            ]
        ),
        Reply("Wrote hello.txt."),
    ]
    events = await collect(runtime, request_for("write hello.txt", str(workspace)))
    result = done(events)
    assert target.read_text() == "hi\n"
    assert result.content == "Wrote hello.txt."
    assert [t.tool_name for t in result.tool_results] == ["Write"]
    assert result.tool_results[0].success
    assert result.tool_results[0].call_id == "toolu_write_1"
    assert result.turns == 2
    streamed = [e.result for e in events if isinstance(e, ExternalToolDone)]
    assert [t.tool_name for t in streamed] == ["Write"]
    sent = engine.messages(-1)
    tool_messages = [m for m in sent if m.get("role") == "tool"]
    assert [m.get("tool_call_id") for m in tool_messages] == ["toolu_write_1"]
    assert result.usage.completion_tokens > 0


async def test_a_resumed_session_sends_the_history_to_the_model(
    runtime: ClaudeCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    first = done(
        await collect(runtime, request_for("remember: the word is kumquat", str(tmp_path)))
    )
    other = tmp_path / "elsewhere"
    other.mkdir()
    resumed = done(
        await collect(
            runtime, request_for("what was the word?", str(other), session_id=first.session_id)
        )
    )
    assert resumed.session_id == first.session_id
    history = json.dumps(engine.messages(-1))
    assert "the word is kumquat" in history
    assert "what was the word?" in history


async def test_the_endpoint_is_loopback_and_needs_its_key(
    runtime: ClaudeCodeRuntime,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    import httpx

    done(await collect(runtime, request_for("hi", str(tmp_path))))
    endpoint = runtime.endpoint
    assert isinstance(endpoint, LoopbackEndpoint)
    assert endpoint.url.startswith("http://127.0.0.1:")
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    async with httpx.AsyncClient(base_url=endpoint.url) as client:
        assert (await client.post("/v1/messages", json=body)).status_code == 401
        guess = await client.post("/v1/messages", json=body, headers={"x-api-key": "guess"})
        assert guess.status_code == 401
        assert (await client.get("/v1/models")).status_code in (401, 404)
    state = tmp_path / "state"
    assert oct(state.stat().st_mode & 0o777) == "0o700"
    url = endpoint.url
    await runtime.aclose()
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(url + "/health")


async def test_a_timeout_stops_the_whole_process_tree_with_a_clear_error(
    runtime: ClaudeCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-must-not-leak")
    monkeypatch.setenv("JARVIS_SECRET_TOKEN", "must-not-leak-either")
    engine.script = [Reply("Never finished.", hold=True)]
    groups: list[int] = []
    tree: list[int] = []
    environments: list[bytes] = []

    async def note_the_group() -> None:
        await asyncio.to_thread(engine.first_word_sent.wait, 60)
        pid = runtime.running[0].pid
        assert pid is not None
        groups.append(pid)
        # the jail (bubblewrap), the runner and its claude binary, in the jail's namespace
        members = sorted(process_tree(pid))
        tree.extend(members)
        assert len(members) >= 3
        environments.extend((Path("/proc") / str(m) / "environ").read_bytes() for m in members)

    watcher = asyncio.create_task(note_the_group())
    started = time.monotonic()
    try:
        with pytest.raises(ExternalRuntimeError, match="did not finish within 4 s") as caught:
            await collect(runtime, request_for("slow", str(tmp_path), timeout=4))
    finally:
        engine.release()
        await watcher
    assert time.monotonic() - started < 60  # a margin for load: the answer is held for good
    assert "-O timeout=SECONDS" in caught.value.hint
    for environ in environments:  # the caller's secrets never reach the runtime
        assert b"must-not-leak" not in environ
        assert f"HOME={tmp_path / 'state'}".encode() in environ.split(b"\0")
    assert wait_until_gone(groups[0]) == []
    assert [pid for pid in tree if alive(pid)] == []
    assert runtime.running == ()


async def test_a_runner_that_dies_mid_run_is_a_clear_error(
    runtime: ClaudeCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
) -> None:
    engine.script = [Reply("Held.", hold=True)]
    groups: list[int] = []

    async def kill_the_runner() -> None:
        await asyncio.to_thread(engine.first_word_sent.wait, 60)
        pid = runtime.running[0].pid
        assert pid is not None
        groups.append(pid)
        os.kill(pid, signal.SIGKILL)  # node only: its claude child is left to the adapter

    killer = asyncio.create_task(kill_the_runner())
    try:
        with pytest.raises(ExternalRuntimeError, match="killed by signal 9") as caught:
            await collect(runtime, request_for("crash", str(tmp_path)))
    finally:
        engine.release()
        await killer
    assert "without its final block" in str(caught.value)
    assert wait_until_gone(groups[0]) == []


async def test_missing_node_is_a_clear_error(tmp_path: Path, runner_dir: Path) -> None:
    runtime = ClaudeCodeRuntime(
        install_root=tmp_path / "i",
        state_dir=tmp_path / "s",
        endpoint=loopback_endpoint(),
        runner_dir=runner_dir,
        node_path=str(tmp_path / "empty-bin"),
    )
    request = ExternalRunRequest(
        prompt="x", workspace=str(tmp_path), model="m", base_url="", api_key="k"
    )
    with pytest.raises(ExternalRuntimeError, match=r"Node\.js is not installed") as caught:
        await collect(runtime, request)
    assert "18.14" in caught.value.hint


# --- the SDK and the CLI ---------------------------------------------------------------------


def _env(home: Path, runner_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJARVIS", "JARVIS_"))}
    env.pop("ANTHROPIC_API_KEY", None)
    env.update(OPENJARVIS_HOME=str(home), JARVIS_CLAUDE_CODE_RUNNER_DIR=str(runner_dir), **extra)
    return env


def _ask(engine: ScriptedEngine, workspace: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "jarvis",
        "ask",
        "-a",
        "claude_code",
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


def test_the_sdk_runs_claude_code_on_the_engine(
    engine: ScriptedEngine, runner_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jarvis import Jarvis

    monkeypatch.setenv("OPENJARVIS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JARVIS_CLAUDE_CODE_RUNNER_DIR", str(runner_dir))
    with Jarvis(engine="openai", base_url=engine.url, model=MODEL) as j:
        answer = j.ask_full(
            "capital of France?",
            agent="claude_code",
            agent_options={"workspace": str(tmp_path), "allowed_tools": "Read"},
        )
    assert answer.content == ANSWER
    assert (tmp_path / "home" / "runtimes" / "claude_code").is_dir()
    offered = engine.requests[0].get("tools")
    assert isinstance(offered, list)
    names = {t["function"]["name"] for t in offered}
    assert "Read" in names  # the one tool allowed...
    assert not names & {"Write", "Edit", "Bash"}  # ...and none of the others


def test_cli_writes_a_file_streams_and_leaves_nothing_behind(
    engine: ScriptedEngine, runner_dir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "note.txt"
    engine.script = [
        Reply(
            tool_calls=[tool_call("toolu_1", "Write", {"file_path": str(target), "content": "x"})]
        ),
        Reply("Saved the note."),
    ]
    finished = subprocess.run(
        [*_ask(engine, tmp_path, "--json"), "save a note"],
        env=_env(tmp_path / "home", runner_dir),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert finished.returncode == 0, finished.stderr
    answer = json.loads(finished.stdout)
    assert answer["content"] == "Saved the note."
    assert [t["tool_name"] for t in answer["tool_results"]] == ["Write"]
    assert target.read_text() == "x"
    home = tmp_path / "home"
    assert list((home / "runtimes" / "claude_code" / "projects").glob("*/*.jsonl"))
    assert not (Path.home() / ".claude" / "projects" / str(tmp_path).replace("/", "-")).exists()


def test_cli_timeout_exit_6_with_a_clear_message(
    engine: ScriptedEngine, runner_dir: Path, tmp_path: Path
) -> None:
    engine.script = [Reply("Held.", hold=True)]
    try:
        finished = subprocess.run(
            [*_ask(engine, tmp_path, "-O", "timeout=3"), "slow"],
            env=_env(tmp_path / "home", runner_dir),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        engine.release()
    assert finished.returncode == 6, finished.stderr
    assert "claude_code did not finish within 3 s" in finished.stderr
    assert "Traceback" not in finished.stderr


def test_cli_without_node_exit_6_says_what_to_install(
    engine: ScriptedEngine, runner_dir: Path, tmp_path: Path
) -> None:
    finished = subprocess.run(
        [*_ask(engine, tmp_path), "hi"],
        env=_env(tmp_path / "home", runner_dir, PATH=str(tmp_path / "no-bin")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 6, finished.stderr
    assert "Node.js is not installed" in finished.stderr
    assert "18.14" in finished.stderr
    assert "Traceback" not in finished.stderr


def test_cli_cloud_without_a_key_is_refused(
    engine: ScriptedEngine, runner_dir: Path, tmp_path: Path
) -> None:
    finished = subprocess.run(
        [*_ask(engine, tmp_path, "-O", "cloud=true"), "hi"],
        env=_env(tmp_path / "home", runner_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 2, finished.stderr
    assert "ANTHROPIC_API_KEY" in finished.stderr
    assert engine.requests == []


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_cli_ctrl_c_exit_130_and_no_process_left(
    engine: ScriptedEngine, runner_dir: Path, tmp_path: Path
) -> None:
    engine.script = [Reply("Held answer.", hold=True)]
    proc = subprocess.Popen(
        [*_ask(engine, tmp_path), "hold on"],
        env=_env(tmp_path / "home", runner_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert engine.first_word_sent.wait(120), "the model was never asked"
        runners = _children(proc.pid)
        assert runners, "the runner is a child of jarvis"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        engine.release()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    for runner in runners:
        assert wait_until_gone(runner) == []


@pytest.mark.timeout(420)
def test_claude_code_onto_the_llama_cpp_server(
    llama_server: object, runner_dir: Path, tmp_path: Path
) -> None:
    """Protocol behaviour on a real engine, not wisdom: the SDK's prompt reaches SmolLM2
    (a 2048-token context) through jarvis's Anthropic endpoint and llama.cpp's OpenAI API,
    and the run ends in bounded time either with an answer or with the engine's error as a
    clear ``ExternalRuntimeError`` (never a hang, never a traceback)."""
    from tests.support.llama_server import LlamaServer

    assert isinstance(llama_server, LlamaServer)

    async def main() -> str:
        engine = OpenAICompatibleEngine(llama_server.base_url, max_retries=0)
        runtime = ClaudeCodeRuntime(
            install_root=tmp_path / "i",
            state_dir=tmp_path / "s",
            endpoint=loopback_endpoint(),
            runner_dir=runner_dir,
        )
        request = ExternalRunRequest(
            prompt="Say hello.",
            workspace=str(tmp_path),
            model=llama_server.model,
            base_url="",
            engine=engine,
            allowed_tools=("Read",),
            max_turns=2,
            timeout=240,
        )
        try:
            result = done(await collect(runtime, request))
        except ExternalRuntimeError as exc:
            return f"error: {exc}"
        finally:
            await runtime.aclose()
            await engine.aclose()
        return "answer" if result.session_id else "no session"

    started = time.monotonic()
    outcome = asyncio.run(main())
    assert time.monotonic() - started < 300
    assert outcome == "answer" or outcome.startswith("error: claude_code"), outcome


# --- another user on the same machine ----------------------------------------------------------

_ATTACKER = """
import json, os, sys, urllib.request, urllib.error
url, state, pids = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3].split(",")]
seen = {"cmdlines": [], "environ": [], "status": None, "state": None}
for pid in pids:
    for name, into in (("cmdline", "cmdlines"), ("environ", "environ")):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as handle:
                seen[into].append(handle.read().decode("utf-8", "replace"))
        except OSError as exc:
            seen[into].append(f"denied: {type(exc).__name__}")
body = json.dumps({"model": "m", "max_tokens": 5,
                   "messages": [{"role": "user", "content": "x"}]}).encode()
request = urllib.request.Request(url + "/v1/messages", data=body,
                                 headers={"content-type": "application/json"})
try:
    urllib.request.urlopen(request, timeout=10)
    seen["status"] = 200
except urllib.error.HTTPError as exc:
    seen["status"] = exc.code
try:
    seen["state"] = os.listdir(state)
except OSError as exc:
    seen["state"] = f"denied: {type(exc).__name__}"
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def other_user() -> Iterator[tuple[int, int]]:
    with throwaway_user("jvcc") as ids:
        yield ids


@pytest.fixture
def open_dir() -> Iterator[Path]:
    with open_directory("jarvis-cc-attack-") as path:
        yield path


async def test_another_user_can_neither_call_the_endpoint_nor_see_its_key(
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    runner_dir: Path,
    open_dir: Path,
    other_user: tuple[int, int],
) -> None:
    """While a run holds, an ordinary user of the machine reads every /proc entry of the
    runner's process group it may, calls the endpoint and lists the SDK's state (in a dir
    it may walk to): the key appears nowhere it can read, the endpoint refuses it, and the
    state dir's own mode keeps it out."""
    runtime = ClaudeCodeRuntime(
        install_root=open_dir / "install",
        state_dir=open_dir / "state",
        endpoint=loopback_endpoint(),
        runner_dir=runner_dir,
    )
    workspace = open_dir / "ws"
    workspace.mkdir()
    engine.script = [Reply("Held.", hold=True)]
    uid, gid = other_user
    python = next(
        (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)),
        None,
    )
    if python is None:
        pytest.skip("no system python3 the other user may run")

    async def attack() -> tuple[str, dict[str, object]]:
        await asyncio.to_thread(engine.first_word_sent.wait, 60)
        endpoint = runtime.endpoint
        assert isinstance(endpoint, LoopbackEndpoint)
        pid = runtime.running[0].pid
        assert pid is not None
        pids = ",".join(str(p) for p in group_members(pid))
        state = str(open_dir / "state")
        done_ = await asyncio.to_thread(
            subprocess.run,
            [python, "-I", "-c", _ATTACKER, endpoint.url, state, pids],
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
        return endpoint.api_key, json.loads(done_.stdout)

    attacker = asyncio.create_task(attack())
    try:
        done(await collect(runtime, request_for("hold", str(workspace))))
    finally:
        engine.release()
        await runtime.aclose()
    key, seen = await attacker
    assert len(key) >= 32
    assert seen["status"] == 403  # another user: refused before its key is looked at
    assert str(seen["state"]).startswith("denied")
    cmdlines, environ = seen["cmdlines"], seen["environ"]
    assert isinstance(cmdlines, list)
    assert isinstance(environ, list)
    assert cmdlines
    assert all(key not in text for text in cmdlines)
    assert all(text.startswith("denied") for text in environ)


@pytest.mark.timeout(420)
def test_claude_code_on_the_embedded_engine(runner_dir: Path, tmp_path: Path) -> None:
    """The embedded engine has no HTTP API of its own: jarvis's endpoint serves it to the
    SDK. SmolLM2's 2048-token context is smaller than the SDK's prompt, so the protocol is
    what is checked: the request reaches the in-process engine and the run ends in bounded
    time with an answer or the engine's error, clearly."""
    from jarvis.adapters.inference.llamacpp import LlamaCppEngine
    from jarvis.domain.llm.completion import StreamChunk
    from jarvis.domain.llm.inference import InferenceRequest
    from tests.support.llama_server import missing_requirement

    reason = missing_requirement()
    if reason is not None:
        pytest.skip(reason)
    asked: list[InferenceRequest] = []

    class Recording(LlamaCppEngine):
        async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
            asked.append(request)
            async for chunk in super().stream(request):
                yield chunk

    async def main() -> str:
        engine = Recording(n_ctx=2048)
        runtime = ClaudeCodeRuntime(
            install_root=tmp_path / "i",
            state_dir=tmp_path / "s",
            endpoint=loopback_endpoint(),
            runner_dir=runner_dir,
        )
        request = ExternalRunRequest(
            prompt="Say hello.",
            workspace=str(tmp_path),
            model="",
            base_url="",
            engine=engine,
            allowed_tools=("Read",),
            max_turns=1,
            timeout=240,
        )
        try:
            result = done(await collect(runtime, request))
        except ExternalRuntimeError as exc:
            return f"error: {exc}"
        finally:
            await runtime.aclose()
            await engine.aclose()
        return "answer" if result.session_id else "no session"

    outcome = asyncio.run(main())
    assert asked, "the embedded engine was never asked"
    assert "Say hello." in json.dumps([m.content for m in asked[0].messages], default=str)
    assert outcome == "answer" or outcome.startswith("error: claude_code"), outcome


@pytest.mark.parametrize("confine", [True, False], ids=["jailed", "unconfined-control"])
async def test_a_bash_call_writes_only_inside_the_workspace(
    runtime: ClaudeCodeRuntime,
    engine: ScriptedEngine,
    request_for: Callable[..., ExternalRunRequest],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    confine: bool,
) -> None:
    """A model whose shell is pre-approved (``allowed_tools=Bash``) runs a command that
    writes to /tmp, to the home directory and to the workspace: jailed, only the workspace
    file appears (the tool reports a read-only filesystem); unjailed, all three do."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    unique = os.urandom(8).hex()
    in_tmp, in_home = Path(f"/tmp/outside-{unique}"), home / f"outside-{unique}"
    inside = workspace / f"inside-{unique}"
    command = f"sh -c 'echo x > {in_tmp}'; sh -c 'echo x > {in_home}'; sh -c 'echo x > {inside}'"
    engine.script = [
        Reply(tool_calls=[tool_call("toolu_bash_1", "Bash", {"command": command})]),
        Reply("Done."),
    ]
    request = request_for("write", str(workspace), allowed_tools=("Bash",), confine=confine)
    try:
        result = done(await collect(runtime, request))
        assert result.metadata["confined"] is confine
        assert inside.read_text() == "x\n"
        written = {p for p in (in_tmp, in_home) if p.exists()}
        if confine:
            assert written == set()
            assert "Read-only file system" in result.tool_results[0].content
        else:
            assert written == {in_tmp, in_home}
    finally:
        in_tmp.unlink(missing_ok=True)  # noqa: ASYNC240
