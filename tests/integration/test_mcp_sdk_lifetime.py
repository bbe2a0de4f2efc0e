"""The SDK's ``Jarvis`` keeps an MCP server for its lifetime: started by the first question
that needs it, used by the next ones, stopped by ``close``; its synchronous and
asynchronous calls (two event loops) each get a server of their own loop."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

from jarvis import Jarvis
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.testing import ScriptedInference
from tests.support.processes import processes_with

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_reference_server.py")


def echo_call(text: str) -> Completion:
    return Completion(
        content="",
        tool_calls=(ToolCall(id="c", name="ref_echo", arguments={"text": text}),),
        finish_reason="tool_calls",
    )


def config(tmp_path: Path, tag: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f"[mcp.servers.ref]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(SERVER)}, "--tag", "{tag}"]\n'
    )
    return path


def test_an_instance_keeps_its_server_between_questions(tmp_path: Path) -> None:
    tag = f"mcp-sdk-{uuid.uuid4().hex}"
    engine = ScriptedInference(
        [echo_call("one"), "First.", echo_call("two"), "Second.", echo_call("three"), "Third."]
    )
    jarvis = Jarvis(config_path=config(tmp_path, tag), inference=engine, agent="orchestrator")
    try:
        assert processes_with(tag) == []  # nothing started before a question needs it
        first = jarvis.ask_full("q1", model="m", tools=["ref.echo"])
        assert [r.content for r in first.tool_results] == ["one"]
        [server] = processes_with(tag)
        second = jarvis.ask_full("q2", model="m", tools=["ref"])
        assert [r.content for r in second.tool_results] == ["two"]
        assert processes_with(tag) == [server]  # the same process served both
    finally:
        jarvis.close()
    assert processes_with(tag) == []


async def test_sync_and_async_calls_each_use_a_server_of_their_own_loop(tmp_path: Path) -> None:
    tag = f"mcp-sdk-{uuid.uuid4().hex}"
    engine = ScriptedInference([echo_call("sync"), "S.", echo_call("async"), "A."])
    jarvis = Jarvis(config_path=config(tmp_path, tag), inference=engine, agent="orchestrator")
    try:
        synced = await asyncio.to_thread(jarvis.ask_full, "q", model="m", tools=["ref.echo"])
        assert [r.content for r in synced.tool_results] == ["sync"]
        [first] = processes_with(tag)
        answer = await jarvis.aask_full("q", model="m", tools=["ref.echo"])
        assert [r.content for r in answer.tool_results] == ["async"]
        # the private loop's server was killed when this loop started its own
        assert len([pid for pid in processes_with(tag) if pid != first]) == 1
    finally:
        await jarvis.aclose()
    assert processes_with(tag) == []
