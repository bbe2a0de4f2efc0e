"""``jarvis serve`` against real engines: a client that goes away mid-stream (the gated
engine holds its answer back, so the disconnect always lands mid-run), and the llama.cpp
server with SmolLM2 driven through the real ``openai`` and ``anthropic`` SDKs."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest
from httpx_sse import connect_sse

from jarvis.domain.managed_agents import session_id_of
from tests.support.gated_engine import MODEL, GatedEngine
from tests.support.llama_server import LlamaServer
from tests.support.serve import Served, serving

pytestmark = pytest.mark.integration

WAIT = 30.0


def _until(condition: Any, what: str) -> None:
    """Wait for a condition the server reaches by itself (bounded, never a bare sleep)."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def test_a_client_that_disconnects_cancels_the_run() -> None:
    with (
        GatedEngine() as engine,
        serving(engine="openai", base_url=engine.url, model=MODEL) as served,
    ):
        client = httpx.Client(base_url=served.url)
        client.post("/v1/managed-agents", json={"id": "g"}).raise_for_status()
        with client.stream(
            "POST",
            "/v1/managed-agents/g/messages",
            json={"content": "Capital of France?", "stream": True},
        ) as reply:
            lines = reply.iter_lines()
            for line in lines:
                if '"content":"The"' in line:
                    break
            assert served.state.active_runs == 1
        # the response is closed: the client is gone while the engine still holds its answer
        _until(lambda: served.state.active_runs == 0, "the run was cancelled")
        assert not engine.gate.is_set()  # it ended without the engine ever finishing
        stored = _load(served, "g")
        engine.release()
        assert [(m.role.value, m.content) for m in stored] == [
            ("user", "Capital of France?"),
            ("assistant", "The"),
        ]  # what it had streamed
        assert engine.requests == 1  # nothing retried or kept asking
        again = client.post(
            "/v1/managed-agents/g/messages", json={"content": "Again?", "stream": True}
        )
        assert again.text.rstrip().endswith("data: [DONE]")


def test_a_streaming_chat_completion_client_that_disconnects_cancels_the_run() -> None:
    with (
        GatedEngine() as engine,
        serving(engine="openai", base_url=engine.url, model=MODEL) as served,
    ):
        stream = openai.OpenAI(base_url=served.url + "/v1", api_key="x").chat.completions.create(
            model="jarvis/simple", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
        stream.close()
        _until(lambda: served.state.active_runs == 0, "the run was cancelled")
        assert not engine.gate.is_set()


def _load(served: Served, agent_id: str) -> Any:
    import asyncio

    return asyncio.run(served.sessions.load(session_id_of(agent_id)))


# --- the llama.cpp server with SmolLM2 -------------------------------------------------------


def _served(llama_server: LlamaServer) -> Any:
    return serving(engine="openai", base_url=llama_server.base_url, model=llama_server.model)


WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_the_openai_sdk_on_llama(llama_server: LlamaServer) -> None:
    with _served(llama_server) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
        question: Any = [{"role": "user", "content": "What is the capital of France?"}]
        whole = client.chat.completions.create(
            model="jarvis/simple", messages=question, max_tokens=24, temperature=0
        )
        pieces = [
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(
                model="jarvis/simple", messages=question, max_tokens=24, temperature=0, stream=True
            )
            if c.choices
        ]
        forced = client.chat.completions.create(
            model="jarvis/simple",
            max_tokens=64,
            extra_body={"temperature": 0},
            messages=[{"role": "user", "content": "What is the weather in Paris?"}],
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )
    assert "Paris" in (whole.choices[0].message.content or "")
    assert len([p for p in pieces if p]) > 1  # real tokens, streamed
    assert "Paris" in "".join(pieces)
    call: Any = (forced.choices[0].message.tool_calls or [])[0]
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments), dict)
    assert forced.choices[0].finish_reason == "tool_calls"


def test_the_anthropic_sdk_on_llama_with_a_tool_round(llama_server: LlamaServer) -> None:
    tool: Any = {
        "name": "get_weather",
        "description": "Get the weather of a city.",
        "input_schema": WEATHER["function"]["parameters"],
    }
    with _served(llama_server) as served:
        client = anthropic.Anthropic(base_url=served.url, api_key="x", max_retries=0)
        text = client.messages.create(
            model="claude-local",
            max_tokens=24,
            extra_body={"temperature": 0},
            messages=[{"role": "user", "content": "What is the capital of France?"}],
        )
        first = client.messages.create(
            model="claude-local",
            max_tokens=64,
            extra_body={"temperature": 0},
            tools=[tool],
            tool_choice={"type": "tool", "name": "get_weather"},
            messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        )
        use: Any = next(b for b in first.content if b.type == "tool_use")
        history: Any = [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "content": "Sunny and 24 degrees.",
                    }
                ],
            },
        ]
        # llama.cpp's server cannot stream an automatic tool choice (it cuts such a
        # stream), so the round with tools is not streamed; the streamed turn has none
        final = client.messages.create(
            model="claude-local",
            max_tokens=48,
            extra_body={"temperature": 0},
            tools=[tool],
            messages=history,
        )
        with client.messages.stream(
            model="claude-local",
            max_tokens=48,
            extra_body={"temperature": 0},
            messages=[
                *history[:1],
                {"role": "assistant", "content": "Let me check."},
                {"role": "user", "content": "It is sunny. Say so."},
            ],
        ) as stream:
            answer = "".join(stream.text_stream)
    first_text: Any = text.content[0]
    assert "Paris" in first_text.text
    assert first.stop_reason == "tool_use"
    assert use.name == "get_weather"
    assert isinstance(use.input, dict)
    assert answer.strip()
    assert final.content
    assert final.stop_reason in ("end_turn", "max_tokens", "tool_use")


def test_a_managed_agent_streams_real_tokens_from_llama(llama_server: LlamaServer) -> None:
    with _served(llama_server) as served, httpx.Client(base_url=served.url, timeout=120) as c:
        c.post(
            "/v1/managed-agents", json={"id": "l", "temperature": 0, "max_tokens": 24}
        ).raise_for_status()
        with connect_sse(
            c,
            "POST",
            "/v1/managed-agents/l/messages",
            json={"content": "What is the capital of France?", "stream": True},
        ) as source:
            events = list(source.iter_sse())
    assert events[-1].data == "[DONE]"
    chunks = [json.loads(e.data) for e in events[:-1]]
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks)
    assert "Paris" in text
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert set(chunks[-1]["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
