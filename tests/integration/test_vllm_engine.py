"""The vLLM adapter against a real OpenAI-compatible server (llama.cpp standing in).

No vLLM runs on a CPU-only CI machine; llama.cpp's server speaks the same API. What it
does not have exercises the vLLM adapter's fallbacks for real: no ``/health`` route (health
falls back to ``/models``) and no ``json_schema`` response format (the adapter moves on to
the inline-schema form).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contracts.inference_contract import InferenceContract
from jarvis.adapters.inference._wire import EngineTransport
from jarvis.adapters.inference.vllm import VllmEngine
from jarvis.domain.errors import EngineUnavailableError
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.ports import InferencePort
from tests.support.llama_server import LlamaServer

pytestmark = pytest.mark.integration


class TestVllmOnLlamaCppServer(InferenceContract[VllmEngine]):
    reports_stream_usage = False
    rejects_unknown_models = False

    @pytest.fixture
    async def engine(
        self, llama_server: LlamaServer, engine_wire: EngineTransport
    ) -> AsyncIterator[VllmEngine]:
        engine = VllmEngine(llama_server.base_url, wire=engine_wire)
        yield engine
        await engine.aclose()


def test_the_adapter_is_an_inference_port_with_vllm_defaults() -> None:
    port: InferencePort = VllmEngine()
    assert port.engine_id == "vllm"
    assert port.base_url == "http://localhost:8000/v1"


async def test_health_falls_back_to_models_without_a_health_route(
    llama_server: LlamaServer,
) -> None:
    engine = VllmEngine(llama_server.base_url)
    try:
        assert engine.root_url == llama_server.root_url
        assert await engine.health() is True
    finally:
        await engine.aclose()


async def test_an_unreachable_vllm_says_how_to_start_it(closed: int) -> None:
    url = f"http://127.0.0.1:{closed}/v1"
    engine = VllmEngine(url, max_retries=0)
    request = InferenceRequest(messages=(Message.user("hi"),), model="m")
    try:
        with pytest.raises(EngineUnavailableError, match="vllm") as raised:
            await engine.generate(request)
    finally:
        await engine.aclose()
    assert "vllm serve" in raised.value.hint
    assert url in raised.value.url
