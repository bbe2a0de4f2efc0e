"""The embedded engine: SmolLM2 run in-process by llama-cpp-python."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from contracts.inference_contract import WEATHER_TOOL, InferenceContract
from jarvis.adapters.inference.llamacpp import LlamaCppEngine, default_model_path
from jarvis.domain.errors import ConfigurationError, ContextTooLongError, ToolsNotSupportedError
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.ports import InferencePort
from jarvis.domain.tools.specs import ToolSpec
from tests.support.llama_server import missing_requirement

pytestmark = pytest.mark.integration

N_CTX = 1024


@pytest.fixture(scope="module", autouse=True)
def _needs_llama_cpp() -> None:
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(reason)


class TestLlamaCppEngine(InferenceContract[LlamaCppEngine]):
    rejects_unknown_models = False  # every model name is served by the one loaded model

    @pytest.fixture
    async def engine(self) -> AsyncIterator[LlamaCppEngine]:
        engine = LlamaCppEngine(n_ctx=N_CTX)
        yield engine
        await engine.aclose()


@pytest.fixture
async def engine() -> AsyncIterator[LlamaCppEngine]:
    engine = LlamaCppEngine(n_ctx=N_CTX)
    yield engine
    await engine.aclose()


def _ask(*messages: Message, **fields: object) -> InferenceRequest:
    values: dict[str, object] = {"temperature": 0.0, "max_tokens": 24, **fields}
    return InferenceRequest(
        messages=messages or (Message.user("What is the capital of France?"),),
        model="any-name-at-all",
        **values,  # type: ignore[arg-type]
    )


def test_the_adapter_is_an_inference_port_named_after_its_model() -> None:
    engine = LlamaCppEngine()
    port: InferencePort = engine
    assert (port.engine_id, port.base_url) == ("llamacpp", "")
    assert Path(default_model_path()).is_file()
    assert engine.model_name == "SmolLM2-135M-Instruct.Q4_1"


async def test_a_real_question_gets_a_real_answer(engine: LlamaCppEngine) -> None:
    completion = await engine.generate(_ask(Message.user("What is the capital of France?")))
    assert completion.content.strip()
    assert completion.model == "SmolLM2-135M-Instruct.Q4_1"
    assert await engine.list_models() == ["SmolLM2-135M-Instruct.Q4_1"]


async def test_concurrent_requests_run_one_at_a_time_and_all_succeed(
    engine: LlamaCppEngine,
) -> None:
    async def streamed() -> str:
        return "".join([chunk.content async for chunk in engine.stream(_ask(max_tokens=8))])

    results = await asyncio.gather(
        engine.generate(_ask(max_tokens=8)), streamed(), engine.generate(_ask(max_tokens=8))
    )
    first, text, last = results
    assert first.content.strip()
    assert text.strip()
    assert last.content == first.content  # temperature 0: the same answer, no interference


async def test_a_streamed_automatic_tool_choice_delivers_the_call(engine: LlamaCppEngine) -> None:
    request = _ask(Message.user("What is the weather in Paris?"), tools=(WEATHER_TOOL,))
    chunks = [chunk async for chunk in engine.stream(request)]
    assert chunks[-1].finish_reason == "tool_calls"
    assert [call.name for call in chunks[-1].tool_calls] == ["get_weather"]


async def test_required_among_several_tools_is_refused_not_ignored(engine: LlamaCppEngine) -> None:
    other = ToolSpec(name="get_time", description="The time in a city.")
    request = _ask(tools=(WEATHER_TOOL, other), tool_choice="required")
    with pytest.raises(ToolsNotSupportedError, match="several tools"):
        await engine.generate(request)


async def test_a_prompt_longer_than_the_context_is_context_too_long(
    engine: LlamaCppEngine,
) -> None:
    huge = Message.user("hello " * (N_CTX + 200))
    with pytest.raises(ContextTooLongError, match="n_ctx"):
        await engine.generate(_ask(huge))
    with pytest.raises(ContextTooLongError):
        async for _ in engine.stream(_ask(huge)):
            pass


async def test_a_missing_model_file_is_a_configuration_error(tmp_path: Path) -> None:
    engine = LlamaCppEngine(str(tmp_path / "missing.gguf"))
    assert await engine.health() is False
    with pytest.raises(ConfigurationError, match=r"missing\.gguf"):
        await engine.generate(_ask())


async def test_without_llama_cpp_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    engine = LlamaCppEngine()
    with pytest.raises(ConfigurationError, match="llama-cpp-python") as raised:
        await engine.generate(_ask())
    assert "pip install" in raised.value.hint
