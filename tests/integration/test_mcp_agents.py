"""Every tool-using agent calls a real MCP server's tool (the SDK's MCPServer over stdio,
through the SDK adapter) as an ordinary tool: orchestrator in both modes, native_react,
native_openhands ``Action:``, rlm's ``tool_call`` and operative."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jarvis.adapters.mcp_sdk import McpSdkClient
from jarvis.application.mcp_config import McpServerEntry
from jarvis.application.registry import builtin_agents
from jarvis.application.tools.mcp_tools import McpToolSource
from jarvis.domain.json_types import JSONValue
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.ports import ToolPort
from jarvis.domain.run.events import Event, EventBus, EventType, ToolCallEnded
from jarvis.testing.inference import ScriptedInference, ScriptedReply
from jarvis.testing.operators import InMemoryOperatorStore
from jarvis.testing.repl import InMemoryRepl
from jarvis.testing.sessions import InMemorySessionStore
from tests.support.processes import processes_with

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_reference_server.py")
FENCE = "`" * 3


@pytest.fixture
async def tools() -> AsyncIterator[list[ToolPort]]:
    tag = f"mcp-agents-{uuid.uuid4().hex}"
    spec_args = (SERVER, "--tag", tag)
    from jarvis.domain.mcp import McpServerSpec

    spec = McpServerSpec(name="ref", command=sys.executable, args=spec_args)
    source = McpToolSource([McpServerEntry(spec=spec)], McpSdkClient)
    await source.prepare(["ref.add"])
    yield list(source.build(["ref.add"]))
    await source.aclose()
    assert processes_with(tag) == []


def call(name: str, **arguments: JSONValue) -> Completion:
    return Completion(
        content="",
        tool_calls=(ToolCall(id="c1", name=name, arguments=arguments),),
        finish_reason="tool_calls",
    )


SCRIPTS: dict[str, tuple[dict[str, JSONValue], list[ScriptedReply]]] = {
    "orchestrator": ({}, [call("ref_add", a=2, b=40), "It is 42."]),
    "orchestrator-structured": (
        {"mode": "structured"},
        [
            '{"thought": "add", "tool": "ref_add", "arguments": {"a": 2, "b": 40}}',
            '{"thought": "done", "final_answer": "It is 42."}',
        ],
    ),
    "native_react": (
        {},
        [
            'Thought: add\nAction: ref_add\nAction Input: {"a": 2, "b": 40}',
            "Final Answer: It is 42.",
        ],
    ),
    "native_openhands": (
        {},
        ['Action: ref_add\nAction Input: {"a": 2, "b": 40}', "Final Answer: It is 42."],
    ),
    "rlm": (
        {},
        [
            f"{FENCE}repl\nprint(tool_call('ref_add', a=2, b=40))\n{FENCE}",
            f"{FENCE}repl\nFINAL('It is 42.')\n{FENCE}",
        ],
    ),
    "operative": ({}, [call("ref_add", a=2, b=40), "It is 42."]),
}


@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_every_tool_using_agent_calls_an_mcp_tool(case: str, tools: list[ToolPort]) -> None:
    options, replies = SCRIPTS[case]
    engine = ScriptedInference(replies)
    bus = EventBus()
    ended: list[ToolCallEnded] = []

    def record(event: Event) -> None:
        assert isinstance(event, ToolCallEnded)
        ended.append(event)

    bus.subscribe(record, EventType.TOOL_CALL_END)
    key = case.split("-")[0]
    operator = None
    if key == "operative":
        from jarvis.domain.operators import OperatorBinding

        operator = OperatorBinding(
            operator_id="w",
            sessions=InMemorySessionStore(),
            store=InMemoryOperatorStore(),
            tick_label="2030-01-01T08:00:00Z",
        )
    parts = AgentParts(
        inference=engine,
        model="m",
        bus=bus,
        tools=tuple(tools),
        repl=InMemoryRepl() if key in ("rlm", "native_openhands") else None,
        operator=operator,
    )
    agent = builtin_agents().create(key, parts, options)
    result = await agent.arun("What is 2+40?")
    assert "42" in result.content
    seen = "\n".join(m.content for r in engine.requests for m in r.messages)
    assert '"sum": 42' in seen, f"the tool's result never reached the model:\n{seen[-2000:]}"
    assert [e.tool for e in ended if e.success and e.tool != "repl"] == ["ref_add"]
