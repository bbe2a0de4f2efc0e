"""MCP servers through the CLI, for real: ``jarvis ask`` on the scripted engine calls a
tool of a real MCP server (the engine's request log shows the result), ``jarvis tools``,
``jarvis mcp list`` and ``jarvis mcp call``; a server that crashes mid-run; the
configuration's errors. Every test ends with a look at the process table."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import processes_with
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_reference_server.py")


def jarvis(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


@pytest.fixture
def tag() -> Iterator[str]:
    word = f"mcp-cli-{uuid.uuid4().hex}"
    yield word
    assert processes_with(word) == [], "an MCP server outlived its jarvis command"


def write_config(path: Path, tag: str, extra: str = "") -> Path:
    path.write_text(
        f"""
[mcp.servers.ref]
command = {json.dumps(sys.executable)}
args = [{json.dumps(SERVER)}, "--tag", "{tag}"]
disabled_tools = ["flood"]

[tools.approval]
default = "auto"  # the servers' tools run unasked: these tests are about MCP itself
{extra}
"""
    )
    return path


def tool_messages(engine: ScriptedEngine, index: int) -> list[dict[str, object]]:
    return [m for m in engine.messages(index) if m["role"] == "tool"]


def test_ask_runs_an_orchestrator_that_calls_a_real_mcp_tool(tmp_path: Path, tag: str) -> None:
    config = write_config(tmp_path / "config.toml", tag)
    call = tool_call("call_1", "ref_add", {"a": 2, "b": 40})
    with ScriptedEngine([Reply(tool_calls=[call]), Reply("It is 42.")]) as engine:
        result = jarvis(
            "ask", "--config", str(config), "--base-url", engine.url, "-m", MODEL,
            "-a", "orchestrator", "--tools", "ref.add,calculator", "What is 2+40?",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "It is 42." in result.stdout
        offered = engine.requests[0]["tools"]
        assert isinstance(offered, list)
        names = [t["function"]["name"] for t in offered]
        assert sorted(names) == ["calculator", "ref_add"]
        [add] = [t["function"] for t in offered if t["function"]["name"] == "ref_add"]
        assert add["parameters"]["required"] == ["a", "b"]
        [answer] = tool_messages(engine, 1)
        assert answer["tool_call_id"] == "call_1"
        assert json.loads(str(answer["content"])) == {"sum": 42}


def test_tools_enabled_names_a_whole_server(tmp_path: Path, tag: str) -> None:
    config = write_config(tmp_path / "config.toml", tag, '[tools]\nenabled = ["ref"]\n')
    with ScriptedEngine([Reply("Nothing to do.")]) as engine:
        result = jarvis(
            "ask", "--config", str(config), "--base-url", engine.url, "-m", MODEL,
            "-a", "orchestrator", "Hello",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        offered = engine.requests[0]["tools"]
        assert isinstance(offered, list)
        names = {t["function"]["name"] for t in offered}
    assert {"ref_echo", "ref_add", "ref_tiny_image", "ref_hang"} <= names
    assert "ref_flood" not in names


def test_a_crash_mid_run_is_a_failed_result_and_the_server_restarts(
    tmp_path: Path, tag: str
) -> None:
    config = write_config(tmp_path / "config.toml", tag)
    script = [
        Reply(tool_calls=[tool_call("c1", "ref_crash", {})]),
        Reply(tool_calls=[tool_call("c2", "ref_echo", {"text": "back again"})]),
        Reply("Recovered."),
    ]
    with ScriptedEngine(script) as engine:
        result = jarvis(
            "ask", "--config", str(config), "--base-url", engine.url, "-m", MODEL,
            "-a", "orchestrator", "--tools", "ref", "Go",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "Recovered." in result.stdout
        [crashed] = tool_messages(engine, 1)
        assert "exited with code 3" in str(crashed["content"])
        echoed = tool_messages(engine, 2)[-1]
        assert echoed["content"] == "back again"
    faults = [line for line in result.stderr.splitlines() if line.startswith("jarvis: MCP")]
    assert len(faults) == 1, result.stderr
    assert "ref.crash" in faults[0]


def test_a_server_that_cannot_start_fails_its_tool_not_the_run(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[mcp.servers.gone]\ncommand = "/nonexistent/mcp-server"\n')
    script = [Reply(tool_calls=[tool_call("c1", "gone", {})]), Reply("It is down.")]
    with ScriptedEngine(script) as engine:
        result = jarvis(
            "ask", "--config", str(config), "--base-url", engine.url, "-m", MODEL,
            "-a", "orchestrator", "--tools", "gone,calculator", "--approve", "auto", "Go",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        [failed] = tool_messages(engine, 1)
        assert "cannot run" in str(failed["content"])
    assert [line for line in result.stderr.splitlines() if line.startswith("jarvis: MCP")] == [
        "jarvis: MCP server 'gone' could not start: cannot run '/nonexistent/mcp-server' "
        "(No such file or directory)."
    ]


def test_tools_lists_mcp_tools_with_their_server(tmp_path: Path, tag: str) -> None:
    config = write_config(tmp_path / "config.toml", tag)
    result = jarvis("tools", "--json", "--config", str(config))
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["ref_echo"]["server"] == "ref"
    assert rows["calculator"]["server"] is None
    assert "ref_flood" not in rows
    text = jarvis("tools", "--config", str(config))
    assert "ref_echo [mcp:ref]" in text.stdout


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_tools_says_once_why_a_server_gave_no_tools(
    tmp_path: Path, tag: str, json_output: bool
) -> None:
    extra = '[mcp.servers.gone]\ncommand = "/nonexistent/mcp-server"\n'
    config = write_config(tmp_path / "config.toml", tag, extra)
    result = jarvis("tools", *(["--json"] if json_output else []), "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "gone" in line] == [
        "jarvis: MCP server 'gone' could not start: cannot run '/nonexistent/mcp-server' "
        "(No such file or directory)."
    ]
    assert "ref_echo" in result.stdout  # the server that started is listed all the same


def test_mcp_list_shows_each_server_its_state_and_why_one_failed(tmp_path: Path, tag: str) -> None:
    extra = '[mcp.servers.gone]\ncommand = "/nonexistent/mcp-server"\n'
    config = write_config(tmp_path / "config.toml", tag, extra)
    result = jarvis("mcp", "list", "--json", "--config", str(config))
    assert result.returncode == 0, result.stderr
    servers = {row["name"]: row for row in json.loads(result.stdout)}
    assert servers["gone"]["state"] == "failed"
    assert "cannot run" in servers["gone"]["error"]
    ref = servers["ref"]
    assert (ref["state"], ref["transport"]) == ("running", "stdio")
    tools = {tool["name"]: tool for tool in ref["tools"]}
    assert tools["echo"]["model_name"] == "ref_echo"
    assert tools["echo"]["read_only_hint"] is True
    assert tools["flood"]["enabled"] is False
    text = jarvis("mcp", "list", "--config", str(config))
    assert "ref (stdio): running" in text.stdout
    assert "ref.echo (as ref_echo) [read-only]" in text.stdout
    # why a server failed is said once, in the listing
    assert text.stdout.count("cannot run '/nonexistent/mcp-server'") == 1
    assert "gone" not in result.stderr + text.stderr


SECRETS = ("alice", "s3cr3t", "tok-QUERY-secret", "private_abc123", "postgres-pw")


@pytest.mark.parametrize("table", ["mcp.servers", "tools.mcp"])
def test_a_server_url_is_shown_without_its_secrets(tmp_path: Path, table: str) -> None:
    """Userinfo, query values and a token-like path segment (OpenJarvis's Home Assistant
    example) are masked wherever a command shows the server; nothing listens there, so
    the server fails to start, as a wrong token would make it."""
    url = "http://alice:s3cr3t@127.0.0.1:1/private_abc123/mcp?token=tok-QUERY-secret&v=2"
    args = ["--db", "postgres://me:postgres-pw@127.0.0.1/x"]
    if table == "mcp.servers":
        text = f"[mcp.servers.ha]\nurl = {json.dumps(url)}\n"
        text += f'[mcp.servers.db]\ncommand = "/nonexistent/db-mcp"\nargs = {json.dumps(args)}\n'
    else:
        servers: list[dict[str, object]] = [
            {"name": "ha", "url": url},
            {"name": "db", "command": "/nonexistent/db-mcp", "args": args},
        ]
        text = f"[tools.mcp]\nservers = {json.dumps(json.dumps(servers))}\n"
    config = tmp_path / "config.toml"
    config.write_text(text)
    listed = jarvis("mcp", "list", "--json", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    targets = {row["name"]: row["target"] for row in json.loads(listed.stdout)}
    assert targets == {
        "ha": "http://***@127.0.0.1:1/***/mcp?token=***&v=***",
        "db": "/nonexistent/db-mcp --db postgres://***@127.0.0.1/x",
    }
    for command in (["mcp", "list"], ["tools"], ["tools", "--json"], ["config", "check"]):
        result = jarvis(*command, "--config", str(config))
        assert result.returncode == 0, result.stderr
        for output in (listed, result):
            shown = output.stdout + output.stderr
            assert not [secret for secret in SECRETS if secret in shown], (command, shown)


def test_a_bad_server_url_is_quoted_without_its_secrets(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[mcp.servers.ha]\nurl = "ftp://alice:s3cr3t@h/private_abc123?token=tok-QUERY-secret"\n'
    )
    result = jarvis("mcp", "list", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert "[mcp.servers.ha] url: 'ftp://***@h/***?token=***' is not a usable URL" in result.stderr
    assert not [secret for secret in SECRETS if secret in result.stderr]


def test_mcp_call_calls_one_tool_by_hand(tmp_path: Path, tag: str) -> None:
    config = write_config(tmp_path / "config.toml", tag)
    added = jarvis("mcp", "call", "ref.add", '{"a": 1, "b": 2}', "--config", str(config))
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout) == {"sum": 3}
    image = jarvis("mcp", "call", "ref.tiny_image", "--config", str(config))
    assert image.stdout.strip() == "[image: image/png, 68 bytes]"
    failed = jarvis("mcp", "call", "ref.fail", '{"message": "boom"}', "--config", str(config))
    assert failed.returncode == 1
    assert "Error executing tool fail" in failed.stderr  # the SDK hides the message
    bad = jarvis("mcp", "call", "ref.add", '{"a": "one"}', "--config", str(config))
    assert bad.returncode == 2
    assert "Invalid arguments for ref.add" in bad.stderr
    unknown = jarvis("mcp", "call", "nope.add", "{}", "--config", str(config))
    assert unknown.returncode == 2
    assert "No MCP server named 'nope'" in unknown.stderr
    not_json = jarvis("mcp", "call", "ref.add", "{a: 1}", "--config", str(config))
    assert not_json.returncode == 2


def test_an_openjarvis_tools_mcp_table_is_read(tmp_path: Path, tag: str) -> None:
    servers = [
        {
            "name": "oj",
            "command": sys.executable,
            "args": [SERVER, "--tag", tag],
            "include_tools": ["echo"],
        }
    ]
    config = tmp_path / "config.toml"
    config.write_text(f"[tools.mcp]\nenabled = true\nservers = {json.dumps(json.dumps(servers))}\n")
    result = jarvis(
        "mcp", "call", "oj.echo", '{"text": "from OpenJarvis"}', "--config", str(config)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "from OpenJarvis"
    listed = json.loads(jarvis("mcp", "list", "--json", "--config", str(config)).stdout)
    enabled = [tool["name"] for tool in listed[0]["tools"] if tool["enabled"]]
    assert enabled == ["echo"]


@contextlib.contextmanager
def http_reference_server(tmp_path: Path, tag: str, authorization: str) -> Iterator[str]:
    """The reference server over streamable HTTP, refusing a request whose
    ``Authorization`` is not ``authorization``; its URL. It says when it listens (its port
    in a file): the test waits for that, not for a time."""
    port_file = tmp_path / "port"
    server = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port_file), "--tag", tag,
         "--require-header", f"Authorization={authorization}"],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(600):
            if port_file.exists() or server.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        server.kill()
        server.wait()


def test_a_streamable_http_server_is_called_by_url_with_its_headers(
    tmp_path: Path, tag: str
) -> None:
    with http_reference_server(tmp_path, tag, "Bearer s3cret") as url:
        config = tmp_path / "config.toml"
        config.write_text(f'[mcp.servers.web]\nurl = "{url}"\n')
        refused = jarvis("mcp", "call", "web.add", '{"a": 1, "b": 1}', "--config", str(config))
        assert refused.returncode == 1
        assert "web" in refused.stderr
        config.write_text(
            f'[mcp.servers.web]\nurl = "{url}"\nheaders = {{ Authorization = "Bearer s3cret" }}\n'
        )
        result = jarvis("mcp", "call", "web.add", '{"a": 20, "b": 22}', "--config", str(config))
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {"sum": 42}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[mcp.servers.x]\ncommand = "a"\nurl = "http://127.0.0.1:1/mcp"\n', "not both"),
        ('[mcp.servers."a.b"]\ncommand = "a"\n', "not a usable MCP server name"),
        ('[mcp.servers.x]\ncommand = "a"\ntimeout = 0\n', "timeout must be"),
        ('[mcp.servers.x]\ncommand = "a"\ncomand = "b"\n', "comand"),
        ('[mcp.servers.x]\nurl = "ftp://127.0.0.1/mcp"\n', "only http:// and https://"),
        ("[tools.mcp]\nenabled = true\nservers = '[{\"name\": 1}]'\n", "name must be a string"),
        ("[tools.mcp]\nenabled = true\nservers = '[not json'\n", "is not valid JSON"),
        (
            '[mcp.servers.x]\ncommand = "a"\n[tools.mcp]\nenabled = true\n'
            'servers = \'[{"name": "x", "command": "b"}]\'\n',
            "configured twice",
        ),
    ],
)
def test_a_bad_mcp_configuration_is_a_usage_error(tmp_path: Path, table: str, message: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(table)
    result = jarvis("mcp", "list", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_chat_keeps_its_server_for_the_whole_conversation(tmp_path: Path, tag: str) -> None:
    config = write_config(tmp_path / "config.toml", tag)
    script = [
        Reply(tool_calls=[tool_call("c1", "ref_pid", {})]),
        Reply("First."),
        Reply(tool_calls=[tool_call("c2", "ref_pid", {})]),
        Reply("Second."),
    ]
    with ScriptedEngine(script) as engine:
        result = subprocess.run(
            [sys.executable, "-m", "jarvis", "chat", "--config", str(config),
             "--base-url", engine.url, "-m", MODEL, "-a", "orchestrator", "--tools", "ref.pid"],
            input="one\ntwo\n", capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == ["First.", "Second."]
        first = [m["content"] for m in engine.messages(1) if m["role"] == "tool"]
        both = [m["content"] for m in engine.messages(3) if m["role"] == "tool"]
    assert len(both) == 2
    assert both[0] == both[1] == first[0]  # one server process answered both questions


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("command", ["call", "tools"])
def test_a_command_stopped_by_a_signal_stops_its_servers(
    tmp_path: Path, tag: str, stop: signal.Signals, command: str
) -> None:
    """Stopped while a server works (a call that never ends, or a server that never
    answers its start): the command ends as Ctrl-C ends it (130), and the servers it
    started with it (they run in a session of their own, out of a hang-up's reach)."""
    marker = tmp_path / "hanging"
    if command == "call":
        config = write_config(tmp_path / "config.toml", tag)
        args = ["mcp", "call", "--config", str(config), "ref.hang"]
        args.append(json.dumps({"marker": str(marker)}))
    else:
        config = write_config(tmp_path / "config.toml", tag)
        text = config.read_text().replace('"--tag"', '"--never-start", "--tag"')
        config.write_text(text + '[tools]\nenabled = ["ref"]\n')
        args = ["tools", "--config", str(config)]
    process = subprocess.Popen(
        [sys.executable, "-m", "jarvis", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() if command == "call" else processes_with(tag)):
            assert process.poll() is None, process.stderr
            assert time.monotonic() < deadline, "the server never got to work"
            time.sleep(0.05)
        process.send_signal(stop)
        assert process.wait(60) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
