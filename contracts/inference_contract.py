"""The behaviour every InferencePort implementation shows (fake and real engines alike).

The engines behind the real adapters in the tests are tiny models, so the suite asserts
protocol behaviour, never wisdom: an answer is non-empty, a stream is content chunks and
then exactly one final chunk, ``max_tokens=1`` ends with "length", offered tools are
either used or refused with ``ToolsNotSupportedError`` (never dropped), structured output
parses as JSON.

Optional capabilities are class flags, each test skipping when its flag is off:

* ``reports_stream_usage``: the final stream chunk carries token usage;
* ``forces_tool_choice``: ``tool_choice="required"`` with one tool always yields a call;
* ``rejects_unknown_models``: an unknown model raises ``ModelNotFoundError`` (engines that
  serve any name with their one model do not);
* ``supports_structured_output``: ``response_format`` with a JSON schema is enforced.
"""

from __future__ import annotations

import json
from typing import ClassVar, Generic, TypeVar

import pytest

from jarvis.domain.errors import ModelNotFoundError, ToolsNotSupportedError
from jarvis.domain.llm.completion import ResponseFormat, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.ports import InferencePort
from jarvis.domain.tools.specs import ToolSpec

EngineT = TypeVar("EngineT", bound=InferencePort)

QUESTION = "What is the capital of France?"

WEATHER_TOOL = ToolSpec(
    name="get_weather",
    description="The current weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name"}},
        "required": ["city"],
    },
)

ANSWER_SCHEMA: ResponseFormat = ResponseFormat(
    type="json_schema",
    name="answer",
    schema={
        "type": "object",
        "properties": {"is_capital": {"type": "boolean"}},
        "required": ["is_capital"],
    },
)


class InferenceContract(Generic[EngineT]):
    """Subclass with an ``engine`` fixture returning a ready engine (closed afterwards)."""

    reports_stream_usage: ClassVar[bool] = True
    forces_tool_choice: ClassVar[bool] = True
    rejects_unknown_models: ClassVar[bool] = True
    supports_structured_output: ClassVar[bool] = True

    @pytest.fixture
    def engine(self) -> EngineT:
        raise NotImplementedError("subclass must provide the `engine` fixture")

    @pytest.fixture
    async def model(self, engine: EngineT) -> str:
        """The model the requests name: the engine's first listed model."""
        models = await engine.list_models()
        assert models, "the engine lists no models"
        return models[0]

    @staticmethod
    def request(model: str, *messages: Message, **overrides: object) -> InferenceRequest:
        fields: dict[str, object] = {"temperature": 0.0, "max_tokens": 16, **overrides}
        return InferenceRequest(
            messages=messages or (Message.user(QUESTION),),
            model=model,
            **fields,  # type: ignore[arg-type]
        )

    @staticmethod
    async def collect(engine: EngineT, request: InferenceRequest) -> list[StreamChunk]:
        return [chunk async for chunk in engine.stream(request)]

    # --- generating ----------------------------------------------------------------------

    async def test_generate_answers_a_simple_question(self, engine: EngineT, model: str) -> None:
        completion = await engine.generate(self.request(model))
        assert completion.content.strip()
        assert completion.tool_calls == ()
        assert completion.finish_reason in ("stop", "length")
        assert completion.usage.prompt_tokens > 0
        assert completion.usage.completion_tokens > 0

    async def test_max_tokens_one_stops_with_length(self, engine: EngineT, model: str) -> None:
        completion = await engine.generate(self.request(model, max_tokens=1))
        assert completion.finish_reason == "length"
        assert completion.usage.completion_tokens <= 1

    # --- streaming -----------------------------------------------------------------------

    async def test_stream_is_content_chunks_then_exactly_one_final_chunk(
        self, engine: EngineT, model: str
    ) -> None:
        chunks = await self.collect(engine, self.request(model))
        assert len(chunks) >= 2
        *content, final = chunks
        assert [c for c in chunks if c.is_final] == [final]
        assert all(c.finish_reason is None and not c.tool_calls for c in content)
        assert "".join(c.content for c in chunks).strip()
        assert final.finish_reason in ("stop", "length")
        assert final.tool_calls == ()

    async def test_stream_reports_usage_in_the_final_chunk(
        self, engine: EngineT, model: str
    ) -> None:
        if not self.reports_stream_usage:
            pytest.skip("this engine does not report usage when streaming")
        final = (await self.collect(engine, self.request(model)))[-1]
        assert final.usage is not None
        assert final.usage.prompt_tokens > 0
        assert final.usage.completion_tokens > 0

    async def test_streamed_max_tokens_one_stops_with_length(
        self, engine: EngineT, model: str
    ) -> None:
        chunks = await self.collect(engine, self.request(model, max_tokens=1))
        assert chunks[-1].finish_reason == "length"
        assert sum(1 for c in chunks if c.is_final) == 1

    async def test_a_stream_abandoned_early_leaves_the_engine_usable(
        self, engine: EngineT, model: str
    ) -> None:
        stream = engine.stream(self.request(model, max_tokens=64))
        first = await anext(aiter(stream))
        assert first.content or first.is_final
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
        completion = await engine.generate(self.request(model))
        assert completion.content.strip()

    # --- tools ---------------------------------------------------------------------------

    async def test_an_offered_tool_is_used_or_refused_never_dropped(
        self, engine: EngineT, model: str
    ) -> None:
        request = self.request(
            model,
            Message.user("What is the weather in Paris?"),
            tools=(WEATHER_TOOL,),
            max_tokens=48,
        )
        try:
            completion = await engine.generate(request)
        except ToolsNotSupportedError:
            return
        if completion.tool_calls:
            assert completion.finish_reason == "tool_calls"
            assert {call.name for call in completion.tool_calls} <= {WEATHER_TOOL.name}
            assert all(call.id for call in completion.tool_calls)
        else:
            assert completion.content.strip()

    async def test_a_required_single_tool_is_called(self, engine: EngineT, model: str) -> None:
        if not self.forces_tool_choice:
            pytest.skip("this engine cannot force a tool call")
        request = self.request(
            model,
            Message.user("What is the weather in Paris?"),
            tools=(WEATHER_TOOL,),
            tool_choice="required",
            max_tokens=48,
        )
        completion = await engine.generate(request)
        assert completion.finish_reason == "tool_calls"
        assert [call.name for call in completion.tool_calls] == [WEATHER_TOOL.name]
        call = completion.tool_calls[0]
        assert call.parsed or call.raw_arguments  # malformed arguments are kept, never fatal

    async def test_a_conversation_with_a_tool_result_is_answered(
        self, engine: EngineT, model: str
    ) -> None:
        call = ToolCall(id="call_1", name=WEATHER_TOOL.name, arguments={"city": "Paris"})
        request = self.request(
            model,
            Message.user("What is the weather in Paris?"),
            Message.assistant("", (call,)),
            Message.tool("Sunny, 21 degrees.", tool_call_id="call_1", name=WEATHER_TOOL.name),
            max_tokens=24,
        )
        completion = await engine.generate(request)
        assert completion.content.strip()
        assert completion.finish_reason in ("stop", "length")

    # --- structured output -----------------------------------------------------------------

    async def test_structured_output_is_json_of_the_schema(
        self, engine: EngineT, model: str
    ) -> None:
        if not self.supports_structured_output:
            pytest.skip("this engine does not enforce structured output")
        request = self.request(
            model,
            Message.user("Is Paris the capital of France? Answer in JSON."),
            response_format=ANSWER_SCHEMA,
            max_tokens=48,
        )
        completion = await engine.generate(request)
        value = json.loads(completion.content)
        assert isinstance(value, dict)
        assert isinstance(value.get("is_capital"), bool)

    # --- models, health, lifecycle ---------------------------------------------------------

    async def test_lists_models_and_is_healthy(self, engine: EngineT) -> None:
        models = await engine.list_models()
        assert models
        assert all(isinstance(name, str) and name for name in models)
        assert await engine.health() is True

    async def test_an_unknown_model_is_reported_with_the_available_ones(
        self, engine: EngineT, model: str
    ) -> None:
        if not self.rejects_unknown_models:
            pytest.skip("this engine serves every model name with its one model")
        with pytest.raises(ModelNotFoundError) as raised:
            await engine.generate(self.request("no-such-model:404"))
        assert raised.value.model == "no-such-model:404"
        assert model in raised.value.available

    async def test_aclose_is_idempotent(self, engine: EngineT) -> None:
        await engine.aclose()
        await engine.aclose()
