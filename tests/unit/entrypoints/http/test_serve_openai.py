"""``/v1/chat/completions`` and ``/v1/models`` through the real ``openai`` SDK, scripted engine."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.testing import ScriptedInference
from tests.support.serve import serving

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def test_models_list_the_registry_and_the_managed_agents() -> None:
    with serving(ScriptedInference()) as served:
        httpx.post(served.url + "/v1/managed-agents", json={"id": "helper"}).raise_for_status()
        ids = [m.id for m in _client(served.url).models.list()]
    assert "jarvis/orchestrator" in ids
    assert "jarvis/simple" in ids
    assert "helper" in ids


def test_a_non_streamed_completion_runs_the_agent() -> None:
    engine = ScriptedInference(["Paris."])
    with serving(engine) as served:
        reply = _client(served.url).chat.completions.create(
            model="jarvis/simple",
            messages=[
                {"role": "system", "content": "Answer in one word."},
                {"role": "user", "content": "Capital of France?"},
                {"role": "assistant", "content": "Ask away."},
                {"role": "user", "content": "Which city?"},
            ],
        )
    assert reply.choices[0].message.content == "Paris."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.total_tokens > 0
    [request] = engine.requests
    system, *rest = request.messages
    assert system.role is Role.SYSTEM
    assert "Answer in one word." in system.content  # the client's system message folded in
    assert "helpful AI assistant" in system.content  # after the agent's own prompt
    assert [(m.role, m.content) for m in rest] == [
        (Role.USER, "Capital of France?"),
        (Role.ASSISTANT, "Ask away."),
        (Role.USER, "Which city?"),
    ]


def test_a_streamed_completion_arrives_token_by_token() -> None:
    engine = ScriptedInference(["The capital of France is Paris."])
    with serving(engine) as served:
        stream = _client(served.url).chat.completions.create(
            model="jarvis/simple",
            messages=[{"role": "user", "content": "Capital of France?"}],
            stream=True,
        )
        chunks = list(stream)
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == "The capital of France is Paris."
    assert len(pieces) > 3
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_the_agent_runs_its_own_tools_when_the_client_sends_none() -> None:
    call = ToolCall(id="c1", name="calculator", arguments={"expression": "12*7"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), "It is 84."]
    )
    with serving(engine) as served:
        httpx.post(
            served.url + "/v1/managed-agents",
            json={"id": "calc", "agent": "orchestrator", "tools": ["calculator"]},
        ).raise_for_status()
        reply = _client(served.url).chat.completions.create(
            model="calc", messages=[{"role": "user", "content": "12*7?"}]
        )
    assert reply.choices[0].message.content == "It is 84."
    tool_message = engine.requests[1].messages[-1]
    assert (tool_message.role, tool_message.content) == (Role.TOOL, "84")


def test_client_tools_reach_the_model_and_its_calls_come_back() -> None:
    call = ToolCall(id="call_7", name="get_weather", arguments={"city": "Paris"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), "Sunny, 24 C."]
    )
    with serving(engine) as served:
        client = _client(served.url)
        messages: Any = [{"role": "user", "content": "Weather in Paris?"}]
        first = client.chat.completions.create(
            model="jarvis/orchestrator",
            messages=messages,
            tools=[WEATHER_TOOL],
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        returned: Any
        [returned] = choice.message.tool_calls or []
        assert returned.id == "call_7"
        assert returned.function.name == "get_weather"
        assert json.loads(returned.function.arguments) == {"city": "Paris"}
        messages.append(choice.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": "call_7", "content": "sunny, 24"})
        second = client.chat.completions.create(
            model="jarvis/orchestrator",
            messages=messages,
            tools=[WEATHER_TOOL],
        )
    assert second.choices[0].message.content == "Sunny, 24 C."
    first_request, second_request = engine.requests
    assert [t.name for t in first_request.tools] == ["get_weather"]  # never bypassed
    assert first_request.tools[0].parameters["required"] == ["city"]
    assert "helpful AI assistant" in first_request.messages[0].content  # the agent's prompt
    tool_message = second_request.messages[-1]
    assert (tool_message.role, tool_message.tool_call_id, tool_message.name) == (
        Role.TOOL,
        "call_7",
        "get_weather",
    )
    assert second_request.messages[-2].tool_calls == (call,)


def test_client_tool_calls_stream_in_openai_shape() -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls")]
    )
    with serving(engine) as served:
        stream = _client(served.url).chat.completions.create(
            model="jarvis/simple",
            messages=[{"role": "user", "content": "Weather in Oslo?"}],
            tools=[WEATHER_TOOL],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            stream=True,
        )
        chunks = list(stream)
    deltas: list[Any] = [
        tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()
    ]
    assert [(d.id, d.function.name) for d in deltas] == [("call_1", "get_weather")]
    assert json.loads(deltas[0].function.arguments) == {"city": "Oslo"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert engine.requests[0].tool_choice == "required"


def test_an_unknown_model_is_a_404_with_a_json_error() -> None:
    with serving(ScriptedInference()) as served:
        with pytest.raises(openai.NotFoundError) as caught:
            _client(served.url).chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        assert caught.value.status_code == 404
        body = caught.value.body
        assert isinstance(body, dict)
        assert body.get("code") == "model_not_found"


def test_a_managed_agent_answers_as_a_model() -> None:
    engine = ScriptedInference(["Brief answer."])
    with serving(engine) as served:
        httpx.post(
            served.url + "/v1/managed-agents",
            json={"id": "terse", "system_prompt": "Be terse.", "temperature": 0.1},
        ).raise_for_status()
        reply = _client(served.url).chat.completions.create(
            model="terse", messages=[{"role": "user", "content": "Explain TCP."}]
        )
    assert reply.choices[0].message.content == "Brief answer."
    [request] = engine.requests
    assert request.messages[0].content.startswith("Be terse.")
    assert request.temperature == 0.1
