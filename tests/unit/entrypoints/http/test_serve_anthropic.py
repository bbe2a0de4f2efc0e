"""``/v1/messages`` through the real ``anthropic`` SDK and as the Claude Agent SDK sends it."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.testing import ScriptedInference
from tests.support.serve import API_KEY, serving

TOOL: Any = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=API_KEY, max_retries=0)


def test_a_message_answers_with_text_and_usage() -> None:
    engine = ScriptedInference(["Hello there."])
    with serving(engine, api_key=API_KEY) as served:
        reply = _client(served.url).messages.create(
            model="claude-local",
            max_tokens=64,
            system="Be kind.",
            messages=[{"role": "user", "content": "Hi"}],
        )
    assert [b.type for b in reply.content] == ["text"]
    text: Any = reply.content[0]
    assert text.text == "Hello there."
    assert reply.stop_reason == "end_turn"
    assert reply.model == "claude-local"
    assert reply.usage.output_tokens > 0
    [request] = engine.requests
    assert request.model == "scripted-model"  # the server's default model
    assert [(m.role, m.content) for m in request.messages] == [
        (Role.SYSTEM, "Be kind."),
        (Role.USER, "Hi"),
    ]


def test_a_streamed_message_sends_anthropics_events_in_order() -> None:
    engine = ScriptedInference(["One two three."])
    with serving(engine) as served:
        with _client(served.url).messages.stream(
            model="any", max_tokens=64, messages=[{"role": "user", "content": "Count"}]
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        with httpx.stream(
            "POST",
            served.url + "/v1/messages",
            json={
                "model": "any",
                "max_tokens": 64,
                "stream": True,
                "messages": [{"role": "user", "content": "Count"}],
            },
        ) as raw:
            names = [line[7:] for line in raw.iter_lines() if line.startswith("event: ")]
    assert text == "One two three."
    assert final.stop_reason == "end_turn"
    assert names[0] == "message_start"
    assert names[1] == "content_block_start"
    assert set(names[2:-3]) == {"content_block_delta"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_a_tool_round_translates_both_ways() -> None:
    call = ToolCall(id="toolu_1", name="Bash", arguments={"command": "ls"})
    engine = ScriptedInference(
        [
            Completion(content="Let me look.", tool_calls=(call,), finish_reason="tool_calls"),
            "There are two files.",
        ]
    )
    with serving(engine) as served:
        client = _client(served.url)
        first = client.messages.create(
            model="m",
            max_tokens=256,
            tools=[TOOL],
            messages=[{"role": "user", "content": "What is here?"}],
        )
        assert first.stop_reason == "tool_use"
        assert [b.type for b in first.content] == ["text", "tool_use"]
        use: Any = first.content[1]
        assert (use.id, use.name, use.input) == ("toolu_1", "Bash", {"command": "ls"})
        history: Any = [
            {"role": "user", "content": "What is here?"},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "a.txt b.txt"}],
                    },
                ],
            },
        ]
        with client.messages.stream(
            model="m", max_tokens=256, tools=[TOOL], messages=history
        ) as stream:
            answer = "".join(stream.text_stream)
    assert answer == "There are two files."
    first_request, second_request = engine.requests
    assert [t.name for t in first_request.tools] == ["Bash"]
    assert first_request.tools[0].parameters["required"] == ["command"]
    assistant, result = second_request.messages[-2:]
    assert assistant.tool_calls == (call,)
    assert (result.role, result.content, result.tool_call_id, result.name) == (
        Role.TOOL,
        "a.txt b.txt",
        "toolu_1",
        "Bash",
    )


def test_a_streamed_tool_call_is_an_input_json_delta() -> None:
    call = ToolCall(id="toolu_2", name="Bash", arguments={"command": "pwd"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls")]
    )
    with (
        serving(engine) as served,
        _client(served.url).messages.stream(
            model="m",
            max_tokens=64,
            tools=[TOOL],
            messages=[{"role": "user", "content": "Where am I?"}],
        ) as stream,
    ):
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    blocks = [b for b in final.content if b.type == "tool_use"]
    assert [(b.id, b.input) for b in blocks] == [("toolu_2", {"command": "pwd"})]


def test_everything_the_claude_agent_sdk_sends_is_accepted() -> None:
    """The request shape of research §2: nothing in it is refused, nothing unknown is a 422."""
    engine = ScriptedInference(["ok"])
    body = {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 32000,
        "system": [
            {
                "type": "text",
                "text": "You are Claude Code.",
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "text", "text": "Be careful."},
        ],
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Extra system."}]},
            {"role": "system", "content": "More system."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "xx"},
                    {"type": "text", "text": "Hello."},
                ],
            },
            {"role": "user", "content": "Go on."},
        ],
        "tools": [
            {**TOOL, "cache_control": {"type": "ephemeral"}},
            {
                "name": "Later",
                "description": "deferred",
                "defer_loading": True,
                "input_schema": {"type": "object", "properties": {}},
            },
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        ],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "medium"},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "metadata": {"user_id": "user_abc"},
        "temperature": 1,
        "stream": True,
        "a_field_from_the_future": {"x": 1},
    }
    with serving(engine, api_key=API_KEY) as served:
        with httpx.stream(
            "POST",
            served.url + "/v1/messages?beta=true",
            json=body,
            headers={
                "x-api-key": API_KEY,
                "anthropic-version": "2023-06-01",
                "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
            },
        ) as reply:
            status = reply.status_code
            text = reply.read().decode()
        counted = httpx.post(
            served.url + "/v1/messages/count_tokens?beta=true",
            json=body,
            headers={"authorization": f"Bearer {API_KEY}"},
        )
    assert status == 200, text
    assert "event: message_stop" in text
    assert counted.status_code == 200
    assert counted.json()["input_tokens"] > 10
    [request] = engine.requests
    assert request.max_tokens == 8192  # capped at the server's max_output_tokens
    assert request.messages[0].content == (
        "You are Claude Code.\n\nBe careful.\n\nExtra system.\n\nMore system."
    )
    assert [(m.role, m.content) for m in request.messages[1:]] == [
        (Role.USER, "Hi"),
        (Role.ASSISTANT, "Hello."),
        (Role.USER, "Go on."),
    ]
    assert [t.name for t in request.tools] == ["Bash", "Later"]  # the server tool left out


def test_errors_come_in_anthropics_shape() -> None:
    with serving(ScriptedInference(healthy=False)) as served:
        client = _client(served.url)
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(
                model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
        assert caught.value.status_code == 503
        body = caught.value.body
        bad = httpx.post(
            served.url + "/v1/messages",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert bad.status_code == 400
    assert bad.json()["type"] == "error"
    assert json.dumps(bad.json()).count("not json") == 0  # the body is never echoed
