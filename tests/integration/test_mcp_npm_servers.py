"""MCP servers no one here wrote, from npm (pinned, cached by scripts/lib/install.sh):
``@modelcontextprotocol/server-filesystem`` and ``server-everything``, through the SDK
adapter, the tool source and ``jarvis ask`` on the scripted engine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jarvis.adapters.mcp_sdk import McpSdkClient
from jarvis.domain.mcp import McpServerSpec, McpTimeoutError
from tests.support.mcp_npm import npm_server
from tests.support.processes import processes_with
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call


@pytest.fixture
def tag() -> str:
    return f"mcp-npm-{uuid.uuid4().hex}"


@pytest.fixture
async def everything(tag: str) -> AsyncIterator[McpSdkClient]:
    node, script = npm_server("server-everything")
    client = McpSdkClient(McpServerSpec(name="every", command=node, args=(script, "stdio", tag)))
    yield client
    await client.aclose()
    assert processes_with(tag) == []


async def test_everything_echo_sum_image_structured_and_annotations(
    everything: McpSdkClient,
) -> None:
    tools = {tool.name: tool for tool in await everything.start()}
    assert tools["echo"].read_only is True
    echoed = await everything.call_tool("echo", {"message": "hi"}, timeout=30)
    assert echoed.content[0].text == "Echo: hi"
    summed = await everything.call_tool("get-sum", {"a": 2, "b": 3}, timeout=30)
    assert "5" in summed.content[0].text
    image = await everything.call_tool("get-tiny-image", {}, timeout=30)
    [picture] = [block for block in image.content if block.kind == "image"]
    assert picture.mime_type == "image/png"
    assert picture.size_bytes > 100
    structured = await everything.call_tool(
        "get-structured-content", {"location": "New York"}, timeout=30
    )
    assert isinstance(structured.structured, dict)
    assert "temperature" in structured.structured


async def test_everything_long_running_operation_finishes_or_times_out(
    everything: McpSdkClient,
) -> None:
    await everything.start()
    done = await everything.call_tool(
        "trigger-long-running-operation", {"duration": 0.2, "steps": 2}, timeout=60
    )
    assert not done.is_error
    with pytest.raises(McpTimeoutError):
        await everything.call_tool(
            "trigger-long-running-operation", {"duration": 600, "steps": 2}, timeout=1
        )
    again = await everything.call_tool("echo", {"message": "still up"}, timeout=30)
    assert again.content[0].text == "Echo: still up"


async def test_everything_bad_arguments_are_an_error_result(everything: McpSdkClient) -> None:
    await everything.start()
    result = await everything.call_tool("get-sum", {"a": "two"}, timeout=30)
    assert result.is_error


def ask_with_fs(
    config: Path, engine: ScriptedEngine, question: str
) -> subprocess.CompletedProcess[str]:
    """``jarvis ask`` with the orchestrator and server ``fs``'s tools, on ``engine``."""
    return subprocess.run(
        [sys.executable, "-m", "jarvis", "ask", "--config", str(config),
         "--base-url", engine.url, "-m", MODEL, "-a", "orchestrator", "--tools", "fs", question],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env=os.environ.copy(), check=False,
    )  # fmt: skip


def test_ask_reads_a_file_through_the_filesystem_server(tmp_path: Path, tag: str) -> None:
    node, script = npm_server("server-filesystem")
    root = tmp_path / tag
    root.mkdir()
    (root / "notes.txt").write_text("The meeting is at noon.")
    config = tmp_path / "config.toml"
    config.write_text(
        f"[mcp.servers.fs]\ncommand = {json.dumps(node)}\n"
        f"args = [{json.dumps(script)}, {json.dumps(str(root))}]\n"
        'enabled_tools = ["read_text_file", "list_directory", "write_file"]\n'
    )
    script_replies = [
        Reply(tool_calls=[tool_call("c1", "fs_read_text_file", {"path": str(root / "notes.txt")})]),
        Reply(tool_calls=[tool_call("c2", "fs_read_text_file", {"path": "/etc/passwd"})]),
        Reply("At noon."),
    ]
    with ScriptedEngine(script_replies) as engine:
        result = ask_with_fs(config, engine, "When is the meeting?")
        assert result.returncode == 0, result.stderr
        assert "At noon." in result.stdout
        offered = engine.requests[0]["tools"]
        assert isinstance(offered, list)
        assert sorted(t["function"]["name"] for t in offered) == [
            "fs_list_directory",
            "fs_read_text_file",
            "fs_write_file",
        ]
        first = [m for m in engine.messages(1) if m["role"] == "tool"]
        assert first[0]["content"] == "The meeting is at noon."
        second = [m for m in engine.messages(2) if m["role"] == "tool"]
        assert re.search(r"Access denied", str(second[-1]["content"]))
    assert processes_with(tag) == []


def test_a_deny_rule_by_server_and_tool_name_stops_the_real_write(tmp_path: Path, tag: str) -> None:
    """``"fs.write_file" = "deny"`` (the README's key) holds though the model calls the tool
    by its model name, ``fs_write_file``: the server never writes the file."""
    node, script = npm_server("server-filesystem")
    root = tmp_path / tag
    root.mkdir()
    target = root / "written.txt"
    config = tmp_path / "config.toml"
    config.write_text(
        f"[mcp.servers.fs]\ncommand = {json.dumps(node)}\n"
        f"args = [{json.dumps(script)}, {json.dumps(str(root))}]\n"
        'enabled_tools = ["write_file"]\n'
        '[tools.approval]\ndefault = "auto"\n'
        '[tools.approval.tools]\n"fs.write_file" = "deny"\n'
    )
    write: dict[str, object] = {"path": str(target), "content": "overwritten"}
    with ScriptedEngine([Reply(tool_calls=[tool_call("c1", "fs_write_file", write)]),
                         Reply("Could not.")]) as engine:  # fmt: skip
        result = ask_with_fs(config, engine, "Write the file.")
        assert result.returncode == 0, result.stderr
        told = [m for m in engine.messages(1) if m["role"] == "tool"]
        assert "Tool call denied: the approval policy denies it" in str(told[-1]["content"])
    assert not target.exists()
    assert processes_with(tag) == []
