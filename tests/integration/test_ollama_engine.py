"""The Ollama adapter against the Ollama-API protocol server, real model behind it.

What the protocol server covers, and what it cannot, is written in its module docstring
(:mod:`tests.support.ollama_server`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contracts.inference_contract import WEATHER_TOOL, InferenceContract
from jarvis.adapters.inference._wire import EngineTransport
from jarvis.adapters.inference.ollama import OllamaEngine
from jarvis.adapters.inference.probe import ollama_reachable
from jarvis.domain.errors import (
    ContextTooLongError,
    EngineUnavailableError,
    ModelNotFoundError,
    ToolsNotSupportedError,
)
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import ResponseFormat
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.ports import InferencePort
from tests.support.llama_server import LlamaServer
from tests.support.ollama_server import OllamaProtocolServer
from tests.support.ports import closed_port

pytestmark = pytest.mark.integration

MODEL = "smollm2:135m"


class TestOllamaOnProtocolServer(InferenceContract[OllamaEngine]):
    forces_tool_choice = False  # Ollama has no tool_choice

    @pytest.fixture
    async def engine(
        self, ollama_server: OllamaProtocolServer, engine_wire: EngineTransport
    ) -> AsyncIterator[OllamaEngine]:
        engine = OllamaEngine(ollama_server.url, wire=engine_wire)
        yield engine
        await engine.aclose()


@pytest.fixture
async def engine(ollama_server: OllamaProtocolServer) -> AsyncIterator[OllamaEngine]:
    engine = OllamaEngine(ollama_server.url, num_ctx=2048)
    yield engine
    await engine.aclose()


def _ask(*messages: Message, model: str = MODEL, **fields: object) -> InferenceRequest:
    values: dict[str, object] = {"temperature": 0.0, "max_tokens": 32, **fields}
    return InferenceRequest(
        messages=messages or (Message.user("What is the capital of France?"),),
        model=model,
        **values,  # type: ignore[arg-type]
    )


def test_the_adapter_is_an_inference_port() -> None:
    port: InferencePort = OllamaEngine()
    assert (port.engine_id, port.base_url) == ("ollama", "http://localhost:11434")


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1:11434", "http://127.0.0.1:11434"),
        ("localhost", "http://localhost:11434"),
        ("0.0.0.0:9999", "http://0.0.0.0:9999"),
        ("http://example.com", "http://example.com"),
        ("https://ollama.example.com:8443/", "https://ollama.example.com:8443"),
    ],
)
def test_hosts_are_taken_like_ollama_host(host: str, expected: str) -> None:
    assert OllamaEngine(host).base_url == expected


async def test_a_host_without_scheme_reaches_the_server(
    ollama_server: OllamaProtocolServer,
) -> None:
    engine = OllamaEngine(ollama_server.url.removeprefix("http://"))
    try:
        assert await engine.list_models() == list(ollama_server.all_models)
    finally:
        await engine.aclose()


async def test_the_request_is_ollamas_native_shape(
    engine: OllamaEngine, ollama_server: OllamaProtocolServer
) -> None:
    schema: JSONObject = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
    }
    call = ToolCall(id="call_7", name="get_weather", arguments={"city": "Paris"})
    request = _ask(
        Message.system("Be brief."),
        Message.user("Weather in Paris?"),
        Message.assistant("", (call,)),
        Message.tool("Sunny", tool_call_id="call_7", name="get_weather"),
        Message.user("Is it nice? Answer in JSON."),
        response_format=ResponseFormat(schema=schema),
        options={"seed": 7, "top_k": 20, "not_an_ollama_option": 1},
    )
    completion = await engine.generate(request)
    assert isinstance(completion.content, str)
    sent = ollama_server.requests[-1]
    assert sent["stream"] is False
    assert sent["think"] is False
    assert sent["format"] == schema
    assert sent["options"] == {
        "temperature": 0.0,
        "num_predict": 32,
        "num_ctx": 2048,
        "seed": 7,
        "top_k": 20,
    }
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {"role": "tool", "content": "Sunny", "tool_name": "get_weather", "tool_call_id": "call_7"},
        {"role": "user", "content": "Is it nice? Answer in JSON."},
    ]


async def test_tool_calls_with_object_arguments_become_tool_calls(engine: OllamaEngine) -> None:
    completion = await engine.generate(
        _ask(Message.user("What is the weather in Paris?"), tools=(WEATHER_TOOL,))
    )
    assert completion.finish_reason == "tool_calls"
    [call] = completion.tool_calls
    assert (call.id, call.name) == ("call_0", "get_weather")  # Ollama sent no id
    assert call.parsed
    assert isinstance(call.arguments["city"], str)


async def test_streamed_tool_calls_arrive_in_the_final_chunk(engine: OllamaEngine) -> None:
    request = _ask(Message.user("What is the weather in Paris?"), tools=(WEATHER_TOOL,))
    chunks = [chunk async for chunk in engine.stream(request)]
    final = chunks[-1]
    assert final.finish_reason == "tool_calls"
    assert [call.name for call in final.tool_calls] == ["get_weather"]
    assert all(not chunk.tool_calls for chunk in chunks[:-1])
    assert final.usage is not None
    assert final.usage.completion_tokens > 0


async def test_tool_choice_none_sends_no_tools(
    engine: OllamaEngine, ollama_server: OllamaProtocolServer
) -> None:
    completion = await engine.generate(
        _ask(Message.user("Hello"), tools=(WEATHER_TOOL,), tool_choice="none")
    )
    assert completion.tool_calls == ()
    assert "tools" not in ollama_server.requests[-1]


async def test_done_reason_length_is_length_when_streaming_and_not(engine: OllamaEngine) -> None:
    request = _ask(max_tokens=2)
    assert (await engine.generate(request)).finish_reason == "length"
    chunks = [chunk async for chunk in engine.stream(request)]
    assert chunks[-1].finish_reason == "length"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 2


async def test_an_unknown_model_lists_what_ollama_has(
    engine: OllamaEngine, ollama_server: OllamaProtocolServer
) -> None:
    with pytest.raises(ModelNotFoundError) as raised:
        await engine.generate(_ask(model="llama3.2:latest"))
    assert raised.value.available == list(ollama_server.all_models)
    assert "smollm2:135m" in str(raised.value)
    with pytest.raises(ModelNotFoundError):
        async for _ in engine.stream(_ask(model="llama3.2:latest")):
            pass


async def test_a_model_without_tool_support_raises_instead_of_dropping_tools(
    engine: OllamaEngine, ollama_server: OllamaProtocolServer
) -> None:
    sent_before = len(ollama_server.requests)
    with pytest.raises(ToolsNotSupportedError, match="does not support tools"):
        await engine.generate(_ask(model="smollm2:no-tools", tools=(WEATHER_TOOL,)))
    assert len(ollama_server.requests) == sent_before + 1  # no tool-less retry
    plain = await engine.generate(_ask(model="smollm2:no-tools"))
    assert plain.content


async def test_a_prompt_longer_than_the_context_is_context_too_long(
    engine: OllamaEngine, llama_server: LlamaServer
) -> None:
    with pytest.raises(ContextTooLongError):
        await engine.generate(_ask(Message.user("hello " * (llama_server.n_ctx + 500))))


async def test_the_probe_finds_ollama_and_nothing_else(
    ollama_server: OllamaProtocolServer, llama_server: LlamaServer
) -> None:
    assert await ollama_reachable(ollama_server.url) is True
    assert await ollama_reachable(ollama_server.url.removeprefix("http://")) is True
    assert await ollama_reachable(llama_server.root_url) is False  # some other server
    with closed_port() as closed:
        assert await ollama_reachable(f"127.0.0.1:{closed}") is False


async def test_a_closed_port_is_engine_unavailable_with_the_start_command(closed: int) -> None:
    host = f"127.0.0.1:{closed}"
    engine = OllamaEngine(host, max_retries=1, backoff=0.01)
    try:
        with pytest.raises(EngineUnavailableError) as raised:
            await engine.generate(_ask())
        assert await engine.health() is False
    finally:
        await engine.aclose()
    assert raised.value.engine == "ollama"
    assert f"http://{host}/api/chat" == raised.value.url
    assert "ollama serve" in raised.value.hint
    assert "OLLAMA_HOST" in raised.value.hint
