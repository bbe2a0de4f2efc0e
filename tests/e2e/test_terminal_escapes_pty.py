"""A hostile engine's terminal escapes never reach a terminal raw, through a real
pseudo-terminal (pexpect): an answer and a tool-call id holding an OSC title sequence, a
CSI sequence, a C1 control, a carriage return and a bidi override are shown with U+FFFD
instead by ``jarvis ask``, ``jarvis chat`` and ``jarvis sessions show``; the same text
reaches a pipe (and ``--json``) unchanged."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pexpect
import pytest

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

TIMEOUT = 60

TITLE = "\x1b]0;pwned\x07"
CSI = "\x1b[31;1;4m"
C1_CSI = "\x9b2J"
BIDI = "\u202e"
HOSTILE_ANSWER = f"Paris{TITLE}is{CSI}the{C1_CSI}capital{BIDI}sure\rdone"
HOSTILE_ID = f"call{TITLE}x"
RAW = (TITLE, "\x1b[31;1;4m", "\x9b", BIDI, "pwned\x07")
"""What must never reach the terminal (``pwned`` may: its ESC and BEL may not)."""


def spawn(*args: str, cwd: str | None = None) -> pexpect.spawn[str]:
    env = dict(os.environ)
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    env["TERM"] = "xterm"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "jarvis", *args],
        env=env,
        encoding="utf-8",
        codec_errors="replace",
        timeout=TIMEOUT,
        dimensions=(40, 200),
        cwd=cwd,
    )
    child.logfile_read = io.StringIO()  # everything the terminal received
    return child


def everything(child: pexpect.spawn[str]) -> str:
    child.expect(pexpect.EOF)
    child.close()
    log = child.logfile_read
    assert isinstance(log, io.StringIO)
    return log.getvalue()


def assert_neutralised(seen: str) -> None:
    for raw in RAW:
        assert raw not in seen, (raw, seen)
    assert "\ufffd" in seen
    assert "Paris" in seen
    assert "capital" in seen


def jarvis(*args: str) -> subprocess.CompletedProcess[str]:
    """The command with its output read as bytes (text mode would turn ``\\r`` into
    ``\\n``), decoded."""
    result = subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8"),
        result.stderr.decode("utf-8", "replace"),
    )


def hostile_script() -> list[Reply]:
    calls = [tool_call(HOSTILE_ID, "calculator", {"expression": "6*7"})]
    return [Reply(tool_calls=calls), Reply(HOSTILE_ANSWER)]


def test_ask_and_sessions_show_filter_escapes_on_a_terminal_only() -> None:
    tools = ("-a", "orchestrator", "--tools", "calculator")
    with ScriptedEngine(hostile_script()) as engine:
        child = spawn("ask", "--base-url", engine.url, "-m", MODEL, *tools, "--session", "s", "q")
        on_terminal = everything(child)
    assert child.exitstatus == 0, on_terminal
    assert_neutralised(on_terminal)

    shown = everything(spawn("sessions", "show", "s"))
    assert_neutralised(shown)
    assert "call\ufffd" in shown  # the tool call's id, neutralised too

    piped = jarvis("sessions", "show", "s")  # a pipe: exactly what was said
    assert piped.returncode == 0, piped.stderr
    assert HOSTILE_ANSWER in piped.stdout
    assert HOSTILE_ID in piped.stdout
    exported = jarvis("sessions", "export", "s")
    contents = [json.loads(line)["content"] for line in exported.stdout.splitlines()]
    assert HOSTILE_ANSWER in contents
    as_json = everything(spawn("sessions", "show", "s", "--json"))  # JSON on a terminal:
    for raw in RAW:  # the same value, its controls written as \\u escapes
        assert raw not in as_json
    assert "\\u009b" in as_json
    assert "\\u202e" in as_json


@pytest.mark.parametrize("mode", ["stream", "--no-stream"])
def test_a_plain_ask_on_a_terminal_filters_the_answer(mode: str) -> None:
    flags = () if mode == "stream" else (mode,)
    with ScriptedEngine([Reply(HOSTILE_ANSWER)]) as engine:
        child = spawn("ask", "--base-url", engine.url, "-m", MODEL, *flags, "q")
        seen = everything(child)
    assert child.exitstatus == 0, seen
    assert_neutralised(seen)


def test_a_plain_ask_into_a_pipe_is_unchanged() -> None:
    with ScriptedEngine([Reply(HOSTILE_ANSWER)]) as engine:
        result = jarvis("ask", "--base-url", engine.url, "-m", MODEL, "--no-stream", "q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == HOSTILE_ANSWER + "\n"


def test_chat_on_a_terminal_filters_the_answer() -> None:
    with ScriptedEngine([Reply(HOSTILE_ANSWER)]) as engine:
        child = spawn("chat", "--base-url", engine.url, "-m", MODEL)
        child.expect_exact("you>")
        child.send("Capital of France?\r")
        child.expect_exact("done")
        child.expect_exact("you>")
        child.sendeof()
        seen = everything(child)
    assert_neutralised(seen)


def test_a_cloned_repositorys_skills_reach_a_terminal_filtered(tmp_path: object) -> None:
    """A skill's description and body (a folder's text) and the notice for a skill
    skipped for its name: ``skills list`` and ``skills show`` write them filtered."""
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    skills = tmp_path / ".jarvis" / "skills"
    (skills / "pdf").mkdir(parents=True)
    (skills / "pdf" / "SKILL.md").write_text(
        f"---\nname: pdf\ndescription: Paris{TITLE}capital{CSI}sure\n---\n"
        f"Paris body{C1_CSI}capital{BIDI}done\n"
    )
    (skills / f"bad{CSI}name").mkdir()
    (skills / f"bad{CSI}name" / "SKILL.md").write_text("---\nname: other\n---\nbody\n")
    for args in (("skills", "list"), ("skills", "show", "pdf")):
        seen = everything(spawn(*args, cwd=str(tmp_path)))
        assert_neutralised(seen)


HOSTILE_MCP_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, reply = message["method"], {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        reply["result"] = {"protocolVersion": message["params"]["protocolVersion"],
                           "capabilities": {"tools": {}},
                           "serverInfo": {"name": "h", "version": "1"}}
    elif method == "tools/list":
        reply["result"] = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    else:
        reply["error"] = {"code": -32000, "message": sys.argv[1]}
    print(json.dumps(reply), flush=True)
"""


def test_an_mcp_servers_error_reaches_a_terminal_filtered(tmp_path: object) -> None:
    """A server's JSON-RPC error message, in the one stderr line jarvis writes for a
    failed call and in the command's own error."""
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    server = tmp_path / "hostile_server.py"
    server.write_text(HOSTILE_MCP_SERVER)
    hostile = f"Paris{TITLE}is{CSI}the{C1_CSI}capital{BIDI}"
    config = tmp_path / "config.toml"
    config.write_text(
        f"[mcp.servers.h]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(server))}, {json.dumps(hostile)}]\n"
    )
    seen = everything(spawn("mcp", "call", "--config", str(config), "h.t", cwd=str(tmp_path)))
    assert_neutralised(seen)
