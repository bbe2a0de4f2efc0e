"""The OpenAI-compatible adapter against a real llama.cpp server (SmolLM2)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contracts.inference_contract import QUESTION, WEATHER_TOOL, InferenceContract
from jarvis.adapters.inference._wire import EngineTransport
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.application.tools.calculator import CalculatorTool
from jarvis.domain.agents.orchestrator import OrchestratorAgent
from jarvis.domain.errors import (
    ContextTooLongError,
    EngineUnavailableError,
    InferenceError,
)
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.loop.budget import RunBudget
from jarvis.domain.loop.settings import SamplingSettings
from jarvis.domain.ports import InferencePort
from jarvis.domain.run.updates import RunFinished
from tests.support.llama_server import LlamaServer

pytestmark = pytest.mark.integration


class TestOpenAICompatibleOnLlamaCpp(InferenceContract[OpenAICompatibleEngine]):
    reports_stream_usage = False  # llama.cpp's server ignores stream_options.include_usage
    rejects_unknown_models = False  # it serves every model name with its one model

    @pytest.fixture
    async def engine(
        self, llama_server: LlamaServer, engine_wire: EngineTransport
    ) -> AsyncIterator[OpenAICompatibleEngine]:
        engine = OpenAICompatibleEngine(
            llama_server.base_url, api_key="unused-locally", wire=engine_wire
        )
        yield engine
        await engine.aclose()


@pytest.fixture
async def engine(llama_server: LlamaServer) -> AsyncIterator[OpenAICompatibleEngine]:
    engine = OpenAICompatibleEngine(llama_server.base_url)
    yield engine
    await engine.aclose()


def _ask(*messages: Message, **fields: object) -> InferenceRequest:
    values: dict[str, object] = {"temperature": 0.0, "max_tokens": 32, **fields}
    return InferenceRequest(
        messages=messages or (Message.user(QUESTION),),
        model="smollm2",
        **values,  # type: ignore[arg-type]
    )


def test_the_adapter_is_an_inference_port() -> None:
    port: InferencePort = OpenAICompatibleEngine("http://127.0.0.1:1/v1")
    assert (port.engine_id, port.base_url) == ("openai", "http://127.0.0.1:1/v1")


async def test_a_streamed_forced_tool_call_arrives_assembled_in_the_final_chunk(
    engine: OpenAICompatibleEngine,
) -> None:
    request = _ask(
        Message.user("What is the weather in Paris?"),
        tools=(WEATHER_TOOL,),
        tool_choice="required",
        max_tokens=48,
    )
    chunks = [chunk async for chunk in engine.stream(request)]
    *before, final = chunks
    assert all(not chunk.tool_calls and chunk.finish_reason is None for chunk in before)
    assert final.finish_reason == "tool_calls"
    [call] = final.tool_calls
    assert call.name == "get_weather"
    assert call.id
    assert call.parsed
    assert isinstance(call.arguments.get("city"), str)


async def test_a_tool_call_cut_off_mid_arguments_is_kept_raw_not_fatal(
    engine: OpenAICompatibleEngine,
) -> None:
    # three tokens are not enough for the arguments: the server returns malformed JSON
    request = _ask(
        Message.user("What is the weather in Paris?"),
        tools=(WEATHER_TOOL,),
        tool_choice="required",
        max_tokens=3,
    )
    completion = await engine.generate(request)
    [call] = completion.tool_calls
    assert call.name == "get_weather"
    assert not call.parsed
    assert call.arguments == {}
    assert call.raw_arguments
    assert call.raw_arguments.startswith("{")


async def test_an_automatic_tool_choice_yields_a_real_call(engine: OpenAICompatibleEngine) -> None:
    request = _ask(Message.user("What is the weather in Paris?"), tools=(WEATHER_TOOL,))
    completion = await engine.generate(request)
    assert completion.finish_reason == "tool_calls"
    assert [call.name for call in completion.tool_calls] == ["get_weather"]


async def test_a_prompt_longer_than_the_context_is_context_too_long(
    engine: OpenAICompatibleEngine, llama_server: LlamaServer
) -> None:
    huge = Message.user("hello " * (llama_server.n_ctx + 500))
    with pytest.raises(ContextTooLongError, match="context") as raised:
        await engine.generate(_ask(huge, max_tokens=8))
    assert raised.value.engine == "openai"
    assert raised.value.url.endswith("/v1/chat/completions")


async def test_a_streamed_prompt_too_long_for_the_context_is_context_too_long(
    engine: OpenAICompatibleEngine, llama_server: LlamaServer
) -> None:
    # llama.cpp answers 200 and ends the stream without a word when the prompt is too long;
    # asked again without streaming, it says why
    huge = Message.user("hello " * (llama_server.n_ctx + 500))
    with pytest.raises(ContextTooLongError, match="context"):
        async for _ in engine.stream(_ask(huge, max_tokens=8)):
            pass


async def test_a_streamed_automatic_tool_choice_then_plain_requests_all_succeed(
    llama_server: LlamaServer,
) -> None:
    # llama.cpp's server cannot stream an automatic tool choice: it ends the stream empty
    # and closes that connection a moment later. No retries here, so the requests after it
    # succeed only if the cut connection never went back to the pool.
    engine = OpenAICompatibleEngine(llama_server.base_url, max_retries=0)
    try:
        request = _ask(
            Message.system("You can call tools."),
            Message.user("What is the weather in Paris?"),
            tools=(WEATHER_TOOL,),
            max_tokens=48,
        )
        *before, final = [chunk async for chunk in engine.stream(request)]
        assert all(chunk.finish_reason is None for chunk in before)
        assert final.finish_reason == "tool_calls"
        assert [call.name for call in final.tool_calls] == ["get_weather"]
        assert (await engine.generate(_ask(max_tokens=8))).content
        streamed = [chunk async for chunk in engine.stream(_ask(max_tokens=8))]
        assert "".join(chunk.content for chunk in streamed)
        assert streamed[-1].finish_reason in ("stop", "length")
    finally:
        await engine.aclose()


async def test_a_streamed_orchestrator_run_with_tools_then_a_plain_request(
    llama_server: LlamaServer,
) -> None:
    engine = OpenAICompatibleEngine(llama_server.base_url, max_retries=0)
    try:
        agent = OrchestratorAgent(
            engine,
            llama_server.model,
            tools=[CalculatorTool()],
            budget=RunBudget(max_turns=2),
            sampling=SamplingSettings(temperature=0.0, max_tokens=48),
        )
        updates = [update async for update in agent.astream("What is 12*7? Use the calculator.")]
        finished = updates[-1]
        assert isinstance(finished, RunFinished)
        assert finished.result.stop_reason in ("final_answer", "max_turns")
        assert finished.result.turns >= 1
        assert (await engine.generate(_ask(max_tokens=8))).content
    finally:
        await engine.aclose()


async def test_a_base_url_without_the_api_prefix_is_explained(llama_server: LlamaServer) -> None:
    engine = OpenAICompatibleEngine(llama_server.root_url)
    try:
        with pytest.raises(InferenceError, match="404") as raised:
            await engine.generate(_ask())
        assert "/v1" in raised.value.hint
    finally:
        await engine.aclose()


async def test_a_closed_port_is_engine_unavailable_naming_engine_url_and_fix(
    closed: int,
) -> None:
    url = f"http://127.0.0.1:{closed}/v1"
    engine = OpenAICompatibleEngine(url, max_retries=1, backoff=0.01)
    try:
        with pytest.raises(EngineUnavailableError) as raised:
            await engine.generate(_ask())
        assert await engine.health() is False
    finally:
        await engine.aclose()
    error = raised.value
    assert error.engine == "openai"
    assert url in error.url
    assert "openai" in str(error)
    assert url in str(error)
    assert "--base-url" in error.hint
