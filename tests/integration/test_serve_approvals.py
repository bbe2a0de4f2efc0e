"""Approving managed agents' tool calls over HTTP, read with a real SSE client (httpx
streaming): the stream announces the call, the run waits, ``POST .../approvals/{id}``
resumes it, in this server or after a restart of ``jarvis serve`` on the same SQLite store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema_rs
import pytest

from jarvis.application.managed_approvals import ManagedApprovals
from jarvis.application.tools.function_tool import tool
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.ports import ToolPort
from jarvis.testing import InMemoryApprovalStore, ScriptedInference
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from scripts.export_schemas import target
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call
from tests.support.serve import serving
from tests.support.serve_process import jarvis_serve

pytestmark = pytest.mark.integration

TIMEOUT = 60.0


def frames(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """``(event, data)`` per SSE frame, as they arrive."""
    name, data = "message", ""
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and data:
            yield name, data
            name, data = "message", ""


def validate(name: str, event: dict[str, object]) -> None:
    """``event`` against the committed schema of SSE event ``name``."""
    schema = json.loads((target("sse") / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema_rs.validator_for(schema).validate(event)


def deleting_tool(deleted: list[str]) -> ToolPort:
    @tool(destructive=True)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        deleted.append(path)
        return f"deleted {path}"

    return delete_file


def delete_turn(*paths: str) -> Completion:
    calls = tuple(
        ToolCall(id=f"call_{index}", name="delete_file", arguments={"path": path})
        for index, path in enumerate(paths)
    )
    return Completion(content="", tool_calls=calls, finish_reason="tool_calls")


def test_parallel_calls_wait_for_their_own_decisions_over_http() -> None:
    deleted: list[str] = []
    engine = ScriptedInference([delete_turn("a.txt", "b.txt"), "Deleted a.txt."])
    agents = InMemoryManagedAgentStore()
    approvals = ManagedApprovals(InMemoryApprovalStore(owners=agents.holds), timeout=TIMEOUT)
    with (
        serving(
            engine, tools=[deleting_tool(deleted)], agents=agents, approvals=approvals
        ) as served,
        httpx.Client(base_url=served.url, timeout=TIMEOUT) as client,
    ):
        client.post(
            "/v1/managed-agents",
            json={"id": "ops", "agent": "orchestrator", "tools": ["delete_file"]},
        ).raise_for_status()
        seen: list[tuple[str, dict[str, object]]] = []
        with client.stream(
            "POST", "/v1/managed-agents/ops/messages", json={"content": "clean", "stream": True}
        ) as reply:
            events = frames(reply.iter_lines())
            for name, data in events:
                if name == "approval_required":
                    seen.append((name, json.loads(data)))
                if len(seen) == 2:
                    break
            assert deleted == []  # nothing ran while the run waits
            [first, second] = [event for _name, event in seen]
            assert second["id"] == "call_1"
            validate("approval_required", first)
            assert (first["id"], first["tool_name"], first["effects"]) == (
                "call_0",
                "delete_file",
                "destructive",
            )
            assert first["arguments"] == '{"path":"a.txt"}'
            assert first["rule"] == "built-in: tool with destructive"
            listed = client.get("/v1/managed-agents/ops/approvals").json()["data"]
            assert [item["id"] for item in listed] == ["call_0", "call_1"]
            no = client.post(
                "/v1/managed-agents/ops/approvals/call_1",
                json={"allow": False, "reason": "keep b"},
            )
            assert no.status_code == 200
            assert no.json()["status"] == "denied"
            yes = client.post("/v1/managed-agents/ops/approvals/call_0", json={"allow": True})
            assert yes.json()["status"] == "allowed"
            again = client.post("/v1/managed-agents/ops/approvals/call_0", json={"allow": False})
            assert again.status_code == 409
            assert again.json()["error"]["code"] == "approval_decided"
            unknown = client.post("/v1/managed-agents/ops/approvals/nope", json={"allow": True})
            assert unknown.status_code == 404
            rest = list(events)
    assert deleted == ["a.txt"]
    decisions = [json.loads(data) for name, data in rest if name == "approval"]
    assert [(d["call_id"], d["decision"]) for d in decisions] == [
        ("call_0", "allow"),
        ("call_1", "deny"),
    ]
    assert decisions[0]["rule"] == "built-in: tool with destructive; HTTP: allowed"
    for decision in decisions:
        validate("approval", decision)
    assert decisions[1]["reason"] == "keep b"
    results = [json.loads(data) for name, data in rest if name == "tool_result"]
    assert results[0]["output"] == "deleted a.txt"
    assert "Tool call denied: keep b" in results[1]["output"]
    assert rest[-1] == ("message", "[DONE]")
    told = [m.content for m in engine.requests[-1].messages if m.role.value == "tool"]
    assert "keep b" in told[1]


def test_a_call_nobody_answers_is_denied_after_the_approval_timeout() -> None:
    deleted: list[str] = []
    engine = ScriptedInference([delete_turn("a.txt"), "Gave up."])
    agents = InMemoryManagedAgentStore()
    store = InMemoryApprovalStore(owners=agents.holds)
    approvals = ManagedApprovals(store, timeout=0.05, poll_seconds=0.01)
    with (
        serving(
            engine, tools=[deleting_tool(deleted)], agents=agents, approvals=approvals
        ) as served,
        httpx.Client(base_url=served.url, timeout=TIMEOUT) as client,
    ):
        client.post(
            "/v1/managed-agents",
            json={"id": "ops", "agent": "orchestrator", "tools": ["delete_file"]},
        ).raise_for_status()
        text = client.post(
            "/v1/managed-agents/ops/messages", json={"content": "clean", "stream": True}
        ).text
        late = client.post("/v1/managed-agents/ops/approvals/call_0", json={"allow": True})
    assert deleted == []
    decision = next(
        json.loads(data) for name, data in frames(iter(text.split("\n"))) if name == "approval"
    )
    assert decision["decision"] == "deny"
    assert "approval_timeout" in decision["rule"]
    assert late.status_code == 409  # expired


def test_a_restarted_server_takes_the_answer_and_the_call_runs_exactly_once() -> None:
    home = Path(os.environ["OPENJARVIS_HOME"])
    remember = tool_call("c1", "memory_manage", {"action": "add", "entry": "likes tea"})
    script = [Reply(tool_calls=[remember]), Reply(tool_calls=[remember]), Reply("Noted.")]
    args = ("--engine", "openai", "--model", MODEL)
    with ScriptedEngine(script) as engine:
        base = ("--base-url", engine.url, *args)
        with jarvis_serve(*base) as first, httpx.Client(timeout=TIMEOUT) as client:
            client.post(
                first.url + "/v1/managed-agents",
                json={"id": "mem", "agent": "orchestrator", "tools": ["memory_manage"]},
            ).raise_for_status()
            with client.stream(
                "POST",
                first.url + "/v1/managed-agents/mem/messages",
                json={"content": "Remember that I like tea", "stream": True},
            ) as reply:
                announced = next(
                    json.loads(data)
                    for name, data in frames(reply.iter_lines())
                    if name == "approval_required"
                )
                first.process.kill()  # the server dies while the call waits
                first.process.wait()
        assert announced["id"] == "c1"
        assert not (home / "MEMORY.md").exists()
        with jarvis_serve(*base) as second, httpx.Client(timeout=TIMEOUT) as client:
            listed = client.get(second.url + "/v1/managed-agents/mem/approvals").json()["data"]
            assert [(item["id"], item["status"]) for item in listed] == [("c1", "pending")]
            answered = client.post(
                second.url + "/v1/managed-agents/mem/approvals/c1", json={"allow": True}
            )
            assert answered.json()["status"] == "allowed"
            text = client.post(
                second.url + "/v1/managed-agents/mem/run", json={"stream": True}
            ).text
            after = client.get(second.url + "/v1/managed-agents/mem/approvals").json()["data"]
    events = list(frames(iter(text.split("\n"))))
    decision = next(json.loads(data) for name, data in events if name == "approval")
    assert decision["decision"] == "allow"
    assert decision["rule"].endswith("HTTP: allowed")
    assert "Noted." in "".join(data for name, data in events if name == "message")
    assert (home / "MEMORY.md").read_text(encoding="utf-8").count("likes tea") == 1
    assert after == []  # used: nothing left to answer, and it never runs again
