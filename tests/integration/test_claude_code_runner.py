"""``claude_code_runner/runner.mjs`` for real: the checkout's runner on the pinned Claude Agent
SDK (its native CLI included) against a loopback Anthropic Messages API, over the runner's
stdin/stdout protocol (claude_code_runner/README.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.stub_server import ANSWER as STUB_ANSWER
from bench.stub_server import MODEL as STUB_MODEL
from bench.stub_server import StubServer
from tests.support.anthropic_stub import MODEL, AnthropicReply, AnthropicStub, ToolUse
from tests.support.users import throwaway_user

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "claude_code_runner"
VERSION = json.loads((SOURCE / "package.json").read_text())["version"]
START = "---OPENJARVIS_OUTPUT_START---"
END = "---OPENJARVIS_OUTPUT_END---"
RUN_TIMEOUT = 120.0
"""A backstop only: every run here ends on its own well before this."""


def installed_runner_dir() -> Path | None:
    """``$JARVIS_CLAUDE_CODE_RUNNER_DIR``, else the copy scripts/lib/install.sh caches."""
    explicit = os.environ.get("JARVIS_CLAUDE_CODE_RUNNER_DIR")
    if explicit:
        candidate = Path(explicit)
    else:
        cache = Path(os.environ.get("JARVIS_RUNTIMES") or Path.home() / ".cache/jarvis/runtimes")
        candidate = cache / f"claude-code-runner-{VERSION}"
    sdk = candidate / "node_modules/@anthropic-ai/claude-agent-sdk/package.json"
    return candidate if sdk.is_file() else None


def require(what: str) -> None:
    reason = f"{what} (scripts/lib/install.sh ensure_agent_runtimes installs it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must install it")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def node() -> str:
    binary = shutil.which("node")
    if binary is None:
        require("node is not on PATH")
    assert binary is not None
    return binary


@pytest.fixture
def runner(tmp_path: Path) -> Path:
    """The checkout's runner.mjs next to the installed dependencies: what is tested is the
    script in this tree, not whichever copy the cache holds."""
    installed = installed_runner_dir()
    if installed is None:
        require(f"claude_code_runner {VERSION} is not installed")
    assert installed is not None
    home = tmp_path / "runner"
    home.mkdir()
    shutil.copy(SOURCE / "runner.mjs", home / "runner.mjs")
    shutil.copy(SOURCE / "package.json", home / "package.json")
    (home / "node_modules").symlink_to(installed / "node_modules")
    return home / "runner.mjs"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    return tmp_path / "claude-config"


@dataclass
class Run:
    code: int
    events: list[dict[str, object]]
    final: dict[str, object]
    stderr: str
    seconds: float


def parse(stdout: str) -> tuple[list[dict[str, object]], dict[str, object]]:
    """The protocol, strictly: JSON event lines, then START, one JSON line, END, nothing else."""
    lines = stdout.splitlines()
    assert lines.count(START) == 1, stdout
    at = lines.index(START)
    assert lines[at + 2 :] == [END], stdout
    events = [json.loads(line) for line in lines[:at]]
    final = json.loads(lines[at + 1])
    assert isinstance(final, dict)
    return events, final


def request(
    stub: AnthropicStub, workspace: Path, config_dir: Path, **fields: object
) -> dict[str, object]:
    body: dict[str, object] = {
        "prompt": "What is the capital of France?",
        "api_key": "stub-key",
        "base_url": stub.base_url,
        "workspace": str(workspace),
        "allowed_tools": [],
        "system_prompt": "",
        "session_id": "",
        "model": MODEL,
        "max_turns": 5,
        "permission_mode": "default",
        "config_dir": str(config_dir),
        "mcp_servers": {},
    }
    body.update(fields)
    return body


def run(node: str, runner: Path, stdin: str) -> Run:
    started = time.monotonic()
    done = subprocess.run(
        [node, str(runner)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    events, final = parse(done.stdout)
    return Run(done.returncode, events, final, done.stderr, time.monotonic() - started)


def run_request(node: str, runner: Path, body: dict[str, object]) -> Run:
    return run(node, runner, json.dumps(body))


@pytest.fixture
def stub() -> Iterator[AnthropicStub]:
    with AnthropicStub([AnthropicReply("The capital of France is Paris.")]) as server:
        yield server


def test_a_text_answer_streams_deltas_and_ends_with_the_final_block(
    node: str, runner: Path, stub: AnthropicStub, workspace: Path, config_dir: Path
) -> None:
    done = run_request(
        node, runner, request(stub, workspace, config_dir, system_prompt="You are Jarvis.")
    )

    assert done.code == 0, done.stderr
    session = done.events[0]
    assert session["type"] == "session"
    assert isinstance(session["session_id"], str)
    assert session["session_id"]
    deltas = [e["text"] for e in done.events if e["type"] == "text_delta"]
    assert len(deltas) == 6
    assert "".join(map(str, deltas)) == "The capital of France is Paris."
    assert {e["type"] for e in done.events} == {"session", "text_delta"}
    assert done.final == {
        "content": "The capital of France is Paris.",
        "session_id": session["session_id"],
        "num_turns": 1,
        "usage": {"input_tokens": 17, "output_tokens": 5},
        "tool_results": [],
        "is_error": False,
        "subtype": "success",
        "error": "",
    }
    # one model call, with the persona in the system prompt and the prompt as the user's turn
    assert len(stub.requests) == 1
    sent = stub.requests[0]
    assert sent["model"] == MODEL
    assert sent["stream"] is True
    assert "You are Jarvis." in json.dumps(sent["system"])
    assert "What is the capital of France?" in json.dumps(sent["messages"])
    assert stub.headers[0].get("x-api-key") == "stub-key"
    # all state in the private config dir: the session transcript lives there
    assert list(config_dir.glob(f"projects/*/{session['session_id']}.jsonl"))


def test_a_tool_round_writes_the_file_and_sends_the_result_back(
    node: str, runner: Path, workspace: Path, config_dir: Path
) -> None:
    target = workspace / "hello.txt"
    write = ToolUse("toolu_stub_1", "Write", {"file_path": str(target), "content": "hi\n"})
    script = [AnthropicReply("Writing it.", tool_uses=[write]), AnthropicReply("Done.")]
    with AnthropicStub(script) as stub:
        body = request(
            stub, workspace, config_dir, allowed_tools=["Write"], permission_mode="acceptEdits"
        )
        done = run_request(node, runner, body)

    assert done.code == 0, done.stderr
    assert target.read_text() == "hi\n"
    assert len(stub.requests) == 2
    # the tool set is restricted to what was allowed (a deferred placeholder is never callable)
    tools = stub.requests[0]["tools"]
    assert isinstance(tools, list)
    assert [t["name"] for t in tools if not t.get("defer_loading")] == ["Write"]
    messages = stub.requests[1]["messages"]
    assert isinstance(messages, list)
    results = [
        block
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["toolu_stub_1"]
    assert not results[0].get("is_error")
    uses = [e for e in done.events if e["type"] == "tool_use"]
    assert uses == [
        {"type": "tool_use", "id": "toolu_stub_1", "name": "Write", "input": write.input}
    ]
    tool_events = [e for e in done.events if e["type"] == "tool_result"]
    assert len(tool_events) == 1
    assert tool_events[0]["is_error"] is False
    assert done.final["content"] == "Done."
    assert done.final["num_turns"] == 2
    assert done.final["usage"] == {"input_tokens": 34, "output_tokens": 10}
    listed = done.final["tool_results"]
    assert isinstance(listed, list)
    assert len(listed) == 1
    assert listed[0]["tool_name"] == "Write"
    assert listed[0]["tool_use_id"] == "toolu_stub_1"
    assert listed[0]["input"] == write.input
    assert listed[0]["is_error"] is False
    assert listed[0]["content"] == tool_events[0]["content"]
    assert "hello.txt" in listed[0]["content"]


def test_a_session_id_resumes_the_conversation(
    node: str, runner: Path, workspace: Path, config_dir: Path
) -> None:
    script = [AnthropicReply("Your name is Ada."), AnthropicReply("You told me: Ada.")]
    with AnthropicStub(script) as stub:
        first = run_request(
            node, runner, request(stub, workspace, config_dir, prompt="My name is Ada.")
        )
        session_id = first.final["session_id"]
        second = run_request(
            node,
            runner,
            request(stub, workspace, config_dir, prompt="What is my name?", session_id=session_id),
        )

    assert first.code == 0, first.stderr
    assert second.code == 0, second.stderr
    assert second.final["session_id"] == session_id
    assert second.final["content"] == "You told me: Ada."
    resumed = json.dumps(stub.requests[1]["messages"])
    for earlier in ("My name is Ada.", "Your name is Ada.", "What is my name?"):
        assert earlier in resumed
    assert "Your name is Ada." not in json.dumps(stub.requests[0]["messages"])


@pytest.mark.parametrize(
    ("stdin", "complaint"),
    [
        ("", "no request"),
        ("{not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ("missing:prompt", 'missing field "prompt"'),
        ("missing:config_dir", 'missing field "config_dir"'),
        ("bad:max_turns", '"max_turns"'),
        ("bad:permission_mode", '"permission_mode"'),
        ("bad:workspace", '"workspace"'),
        ("bad:allowed_tools", '"allowed_tools"'),
    ],
)
def test_bad_input_is_an_error_block_and_exit_code_2(
    node: str,
    runner: Path,
    stub: AnthropicStub,
    workspace: Path,
    config_dir: Path,
    stdin: str,
    complaint: str,
) -> None:
    if ":" in stdin and not stdin.startswith("{"):
        kind, field = stdin.split(":")
        body = request(stub, workspace, config_dir)
        if kind == "missing":
            del body[field]
        else:
            body[field] = {
                "max_turns": 0,
                "permission_mode": "yolo",
                "workspace": "relative/dir",
            }.get(field, "Write")
        stdin = json.dumps(body)

    done = run(node, runner, stdin)

    assert done.code == 2
    assert done.events == []
    assert done.final["is_error"] is True
    assert done.final["subtype"] == "error_input"
    assert complaint in str(done.final["error"])
    assert stub.requests == []


def test_unknown_keys_are_ignored(
    node: str, runner: Path, stub: AnthropicStub, workspace: Path, config_dir: Path
) -> None:
    body = request(stub, workspace, config_dir) | {"future_option": {"x": 1}}

    done = run_request(node, runner, body)

    assert done.code == 0, done.stderr
    assert done.final["content"] == "The capital of France is Paris."


@pytest.mark.parametrize(
    "failure", [AnthropicReply(status=500), AnthropicReply(drop=True)], ids=["500", "dropped"]
)
def test_a_failing_engine_is_an_error_result_in_bounded_time(
    node: str,
    runner: Path,
    workspace: Path,
    config_dir: Path,
    failure: AnthropicReply,
) -> None:
    with AnthropicStub([failure]) as stub:
        done = run_request(node, runner, request(stub, workspace, config_dir))

    assert done.code == 1, done.stderr
    assert done.final["is_error"] is True
    assert done.final["error"]
    # CLAUDE_CODE_MAX_RETRIES=1: one retry, not the default ten over three minutes
    assert 1 <= len(stub.requests) <= 4
    assert done.seconds < 60


def processes_in_group(group: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields after the command: state, ppid, pgrp; a zombie is already gone for good
        if fields[0] != "Z" and int(fields[2]) == group:
            found.append(int(entry.name))
    return found


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_mid_run_aborts_and_leaves_no_process(
    node: str, runner: Path, workspace: Path, config_dir: Path, sig: signal.Signals
) -> None:
    held = AnthropicReply("A long answer that never ends.", hold=True)
    with AnthropicStub([held]) as stub, (workspace.parent / "request.json").open("w+") as body:
        json.dump(request(stub, workspace, config_dir), body)
        body.seek(0)
        proc = subprocess.Popen(
            [node, str(runner)],
            stdin=body,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert stub.first_chunk_sent.wait(RUN_TIMEOUT), "the CLI never asked the model"
            cli = children_of(proc.pid)
            assert cli, "the runner has no CLI child mid-run"
            started = time.monotonic()
            proc.send_signal(sig)
            stdout, stderr = proc.communicate(timeout=30)
            took = time.monotonic() - started
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    assert proc.returncode == 1, stderr
    assert took < 30  # it ends on the signal, not at the run timeout (a margin for load)
    events, final = parse(stdout)
    assert final["is_error"] is True
    assert final["subtype"] == "error_runtime"
    assert sig.name in str(final["error"])
    assert [e["type"] for e in events][:1] == ["session"]
    # neither the CLI child nor anything else of the runner's process group is left (a wait
    # that ends as soon as they are gone: its bound is for a loaded machine)
    deadline = time.monotonic() + 30
    while (processes_in_group(proc.pid) or any(map(alive, cli))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_in_group(proc.pid) == []
    assert [pid for pid in cli if alive(pid)] == []


def test_stdin_closed_early_is_bad_input(
    node: str, runner: Path, stub: AnthropicStub, workspace: Path, config_dir: Path
) -> None:
    whole = json.dumps(request(stub, workspace, config_dir))

    done = run(node, runner, whole[: len(whole) // 2])

    assert done.code == 2
    assert done.final["subtype"] == "error_input"
    assert stub.requests == []


def test_an_oversized_request_is_bad_input(
    node: str, runner: Path, stub: AnthropicStub, workspace: Path, config_dir: Path
) -> None:
    body = request(stub, workspace, config_dir, prompt="x" * (5 * 1024 * 1024))

    done = run_request(node, runner, body)

    assert done.code == 2
    assert done.final["subtype"] == "error_input"
    assert "larger than" in str(done.final["error"])
    assert stub.requests == []


def test_an_unknown_session_is_a_runtime_error(
    node: str, runner: Path, stub: AnthropicStub, workspace: Path, config_dir: Path
) -> None:
    unknown = "00000000-0000-4000-8000-000000000000"

    done = run_request(node, runner, request(stub, workspace, config_dir, session_id=unknown))

    assert done.code == 1, done.stderr
    assert done.final["is_error"] is True
    assert done.final["error"]
    assert stub.requests == []


def test_the_turn_limit_ends_the_run_with_the_sdk_subtype(
    node: str, runner: Path, workspace: Path, config_dir: Path
) -> None:
    again = ToolUse("toolu_again", "Write", {"file_path": str(workspace / "a.txt"), "content": "a"})
    with AnthropicStub([AnthropicReply(tool_uses=[again])]) as stub:
        body = request(
            stub,
            workspace,
            config_dir,
            allowed_tools=["Write"],
            permission_mode="acceptEdits",
            max_turns=1,
        )
        done = run_request(node, runner, body)

    assert done.code == 1, done.stderr
    assert done.final["is_error"] is True
    assert done.final["subtype"] == "error_max_turns"
    assert len(stub.requests) == 1


def test_without_permission_a_write_is_refused_and_the_refusal_goes_back(
    node: str, runner: Path, workspace: Path, config_dir: Path
) -> None:
    target = workspace / "refused.txt"
    write = ToolUse("toolu_no", "Write", {"file_path": str(target), "content": "no\n"})
    script = [AnthropicReply(tool_uses=[write]), AnthropicReply("I may not write.")]
    with AnthropicStub(script) as stub:
        body = request(stub, workspace, config_dir, allowed_tools=[], permission_mode="dontAsk")
        done = run_request(node, runner, body)

    assert done.code == 0, done.stderr
    assert not target.exists()
    listed = done.final["tool_results"]
    assert isinstance(listed, list)
    assert [r["tool_use_id"] for r in listed] == ["toolu_no"]
    assert listed[0]["is_error"] is True
    assert "toolu_no" in json.dumps(stub.requests[1]["messages"])


def test_an_allowed_tool_runs_without_asking(
    node: str, runner: Path, workspace: Path, config_dir: Path
) -> None:
    target = workspace / "allowed.txt"
    write = ToolUse("toolu_yes", "Write", {"file_path": str(target), "content": "yes\n"})
    script = [AnthropicReply(tool_uses=[write]), AnthropicReply("Written.")]
    with AnthropicStub(script) as stub:
        body = request(
            stub, workspace, config_dir, allowed_tools=["Write"], permission_mode="dontAsk"
        )
        done = run_request(node, runner, body)

    assert done.code == 0, done.stderr
    assert target.read_text() == "yes\n"
    listed = done.final["tool_results"]
    assert isinstance(listed, list)
    assert [r["is_error"] for r in listed] == [False]


def test_the_callers_environment_and_home_stay_out_of_the_run(
    node: str, runner: Path, workspace: Path, config_dir: Path, tmp_path: Path
) -> None:
    """The CLI's environment is replaced: a secret of the caller's never reaches a tool, a
    cloud key and URL of the caller's never reach the CLI, nothing lands in HOME or TMPDIR."""
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    probe = ToolUse(
        "toolu_env", "Bash", {"command": "env; echo HOME_IS=$HOME", "description": "env"}
    )
    script = [AnthropicReply(tool_uses=[probe]), AnthropicReply("Seen.")]
    with AnthropicStub(script) as stub:
        body = request(stub, workspace, config_dir, allowed_tools=["Bash"])
        started = subprocess.run(
            [node, str(runner)],
            input=json.dumps(body),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(home),
                "TMPDIR": str(tmp),
                "CALLER_SECRET": "s3cret-of-the-caller",
                "ANTHROPIC_API_KEY": "sk-ant-cloud-key-of-the-caller",
                "ANTHROPIC_AUTH_TOKEN": "cloud-token-of-the-caller",
            },
        )

    assert started.returncode == 0, started.stderr
    _, final = parse(started.stdout)
    listed = final["tool_results"]
    assert isinstance(listed, list)
    output = str(listed[0]["content"])
    assert f"HOME_IS={config_dir}" in output
    assert "s3cret-of-the-caller" not in output
    assert "cloud" not in output
    assert {h.get("x-api-key") for h in stub.headers} == {"stub-key"}
    assert not any("authorization" in {k.lower() for k in h} for h in stub.headers)
    assert list(home.iterdir()) == []
    assert list(tmp.iterdir()) == []


@pytest.fixture(scope="module")
def other_user() -> Iterator[tuple[int, int]]:
    with throwaway_user("jvcr") as ids:
        yield ids


def test_another_user_cannot_read_the_sessions(
    node: str, runner: Path, stub: AnthropicStub, workspace: Path, other_user: tuple[int, int]
) -> None:
    """The runner creates config_dir private (0700): another user on the machine reads no
    transcript, even where the directory above it is open to all."""
    uid, gid = other_user
    open_dir = Path(tempfile.mkdtemp(prefix="jarvis-cc-test-"))
    try:
        open_dir.chmod(0o755)
        readable = open_dir / "readable.txt"
        readable.write_text("anyone\n")
        readable.chmod(0o644)
        config_dir = open_dir / "claude-config"
        done = run_request(node, runner, request(stub, workspace, config_dir))
        assert done.code == 0, done.stderr
        transcripts = list(config_dir.glob("projects/*/*.jsonl"))
        assert len(transcripts) == 1

        def as_other(*command: str) -> int:
            return subprocess.run(
                command, user=uid, group=gid, extra_groups=[], capture_output=True, check=False
            ).returncode

        assert as_other("cat", str(readable)) == 0
        assert as_other("ls", str(config_dir)) != 0
        assert as_other("cat", str(transcripts[0])) != 0
        assert config_dir.stat().st_mode & 0o077 == 0
    finally:
        shutil.rmtree(open_dir)


def test_an_mcp_server_entry_gives_the_run_jarvis_mcp_serve(
    node: str,
    runner: Path,
    workspace: Path,
    config_dir: Path,
    stub_server: StubServer,
    jarvis_home: Path,
) -> None:
    """The real Claude Agent SDK starts ``jarvis mcp serve`` (stdio) from the request's
    ``mcp_servers`` entry and calls its ``ask`` tool: jarvis answers on the loopback engine,
    and the answer goes back to the model as the tool's result."""
    import sys

    ask = ToolUse("toolu_stub_ask", "mcp__jarvis__ask", {"question": "Capital of France?"})
    script = [AnthropicReply("Asking jarvis.", tool_uses=[ask]), AnthropicReply("Paris.")]
    jarvis = {
        "command": sys.executable,
        "args": [
            *("-m", "jarvis", "mcp", "serve", "--engine", "openai"),
            *("--base-url", stub_server.url, "--model", STUB_MODEL),
        ],
        "env": {
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "OPENJARVIS_HOME": str(jarvis_home),
        },
    }
    before = stub_server.requests
    with AnthropicStub(script) as stub:
        body = request(
            stub,
            workspace,
            config_dir,
            allowed_tools=["mcp__jarvis__ask"],
            mcp_servers={"jarvis": jarvis},
        )
        done = run_request(node, runner, body)

    assert done.code == 0, done.stderr
    offered = stub.requests[0]["tools"]
    assert isinstance(offered, list)
    assert "mcp__jarvis__ask" in [t["name"] for t in offered]
    results = [e for e in done.events if e["type"] == "tool_result"]
    assert len(results) == 1
    assert results[0]["is_error"] is False
    assert STUB_ANSWER in str(results[0]["content"])
    sent_back = json.dumps(stub.requests[1]["messages"])
    assert STUB_ANSWER in sent_back  # the model saw jarvis's answer
    assert stub_server.requests > before  # jarvis asked its engine
    assert done.final["content"] == "Paris."


def test_an_invalid_mcp_server_entry_is_bad_input(
    node: str, runner: Path, stub: AnthropicStub, workspace: Path, config_dir: Path
) -> None:
    invalid: list[dict[str, object]] = [
        {"bad name": {"command": "x"}},
        {"ok": {"command": ""}},
        {"ok": []},
    ]
    for servers in invalid:
        done = run_request(node, runner, request(stub, workspace, config_dir, mcp_servers=servers))
        assert done.code == 2, servers
        assert done.final["subtype"] == "error_input"
        assert "mcp_servers" in str(done.final["error"])
    assert stub.requests == []
