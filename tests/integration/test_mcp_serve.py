"""``jarvis serve`` with an MCP server: a managed agent's tools include a real server's, and
the server keeps one process for every run of the serving process."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import httpx

from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.testing import ScriptedInference
from tests.support.processes import processes_with
from tests.support.serve import serving

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_reference_server.py")


def pid_call(call_id: str) -> Completion:
    return Completion(
        content="",
        tool_calls=(ToolCall(id=call_id, name="ref_pid", arguments={}),),
        finish_reason="tool_calls",
    )


def test_a_managed_agent_calls_an_mcp_tool_and_the_server_outlives_each_run(
    jarvis_home: Path,
) -> None:
    tag = f"mcp-serve-{uuid.uuid4().hex}"
    (jarvis_home / "config.toml").write_text(
        f"[mcp.servers.ref]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(SERVER)}, "--tag", "{tag}"]\n'
    )
    engine = ScriptedInference([pid_call("c1"), "One.", pid_call("c2"), "Two."])
    with serving(engine, model="m") as served, httpx.Client(base_url=served.url) as client:
        try:
            client.post(
                "/v1/managed-agents",
                json={"id": "probe", "agent": "orchestrator", "tools": ["ref.pid"]},
            ).raise_for_status()
            for text in ("first", "second"):
                with client.stream(
                    "POST",
                    "/v1/managed-agents/probe/messages",
                    json={"content": text, "stream": True},
                    timeout=120,
                ) as reply:
                    assert reply.status_code == 200
                    body = reply.read().decode()
                assert "tool_result" in body
            stored = client.get("/v1/managed-agents/probe/messages").json()["data"]
            pids = [m["content"] for m in stored if m["role"] == "tool"]
            assert len(pids) == 2
            assert pids[0] == pids[1]  # one server process served both runs
            assert processes_with(tag) == [int(pids[0])]
        finally:
            source = served.runtime.container.mcp_tools()
            assert source is not None
            source.close_now()
