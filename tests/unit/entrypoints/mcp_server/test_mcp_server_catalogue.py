"""The tools of ``jarvis mcp serve`` in process, on the scripted engine: what ``ask`` returns
and reports while it runs, and every bad call answered as an error result, never raised."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jarvis.domain.json_types import JSONValue
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.entrypoints.composition import bootstrap
from jarvis.entrypoints.composition.serving import server_state
from jarvis.entrypoints.http.run_policy import RunPolicy
from jarvis.entrypoints.mcp_server.catalogue import JarvisTools
from jarvis.entrypoints.settings import load_config
from jarvis.testing import ScriptedInference


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    async def __call__(self, line: str) -> None:
        self.lines.append(line)


@pytest.fixture
async def tools() -> AsyncIterator[JarvisTools]:
    calc = Completion(
        content="",
        tool_calls=(ToolCall(id="c1", name="calculator", arguments={"expression": "2+2"}),),
        finish_reason="tool_calls",
    )
    runtime = bootstrap(load_config(), inference=ScriptedInference([calc, "It is 4."]))
    try:
        yield JarvisTools(runtime=runtime, state=server_state(runtime))
    finally:
        await runtime.aclose()


async def test_ask_returns_the_answer_and_reports_each_step(tools: JarvisTools) -> None:
    progress = Lines()
    outcome = await tools.call(
        "ask",
        {"question": "2+2?", "agent": "orchestrator", "tools": ["calculator"]},
        progress,
    )
    assert not outcome.is_error, outcome.text
    assert outcome.text == "It is 4."
    assert outcome.structured is not None
    assert outcome.structured["turns"] == 2
    assert outcome.structured["tool_calls"] == 1
    assert outcome.structured["stop_reason"] == "final_answer"
    assert "calling calculator" in progress.lines
    assert "calculator done: 4" in progress.lines


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("ask", {}, "'question' is required"),
        ("ask", {"question": 5}, "'question' must be a string"),
        ("ask", {"question": "  "}, "'question' is empty"),
        ("ask", {"question": "q", "tools": "calculator"}, "'tools' must be a list"),
        ("ask", {"question": "q", "agent_options": []}, "'agent_options' must be an object"),
        ("ask", {"question": "q", "agent": "no-such-agent"}, "no-such-agent"),
        ("sessions_list", {"limit": 0}, "'limit' must be a whole number"),
        ("sessions_list", {"limit": True}, "'limit' must be a whole number"),
        ("session_show", {}, "'session' is required"),
        ("agent_missing", {"message": "hi"}, "missing"),
        ("delete_everything", {}, "No tool named 'delete_everything'"),
    ],
)
async def test_a_bad_call_is_an_error_result(
    tools: JarvisTools, name: str, arguments: dict[str, JSONValue], expected: str
) -> None:
    outcome = await tools.call(name, arguments, Lines())
    assert outcome.is_error
    assert expected in outcome.text


async def test_the_run_policy_names_this_commands_flags(tools: JarvisTools) -> None:
    outcome = await tools.call(
        "ask", {"question": "q", "agent_options": {"api_key": "sk-elsewhere"}}, Lines()
    )
    assert outcome.is_error
    assert "cannot be set by an MCP client" in outcome.text
    assert "jarvis mcp serve --allow-option api_key" in outcome.text
    tools.state.policy = RunPolicy.of(options=["api_key"])
    allowed = await tools.call(
        "ask", {"question": "q", "agent_options": {"api_key": "sk-elsewhere"}}, Lines()
    )
    assert "cannot be set" not in allowed.text


async def test_a_stored_lone_surrogate_is_shown_as_a_replacement_character(
    tools: JarvisTools,
) -> None:
    """A message an earlier version or an application's engine stored with a lone surrogate:
    ``session_show`` answers with U+FFFD (the SDK refused to encode the whole reply), and
    the reply encodes."""
    from mcp import types

    from jarvis.domain.llm.messages import Message

    await tools.runtime.sessions().append("old-one", [Message.user("old \ud800 question")])
    outcome = await tools.call("session_show", {"session": "old-one"}, Lines())
    assert not outcome.is_error, outcome.text
    assert outcome.text == "user: old \ufffd question"
    assert outcome.structured is not None
    messages = outcome.structured["messages"]
    assert isinstance(messages, list)
    assert isinstance(messages[0], dict)
    assert messages[0]["content"] == "old \ufffd question"
    reply = types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.text)],
        structured_content=outcome.structured,
    )
    assert "old \ufffd question" in reply.model_dump_json()
