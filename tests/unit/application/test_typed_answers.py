"""Typed answers through the SDK on the scripted engine: valid, invalid then valid, always
invalid; every kind of output type; the engine mechanism each agent asks for."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

import jarvis
from contracts.inference_contract import InferenceContract
from jarvis.application.output_types import output_spec
from jarvis.domain.errors import (
    ConfigurationError,
    OutputValidationError,
    StructuredOutputNotSupportedError,
)
from jarvis.domain.llm.completion import Completion, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.domain.loop.typed_answer import StructuredAnswers
from jarvis.domain.typed_output import (
    MAX_SCHEMA_DEPTH,
    OutputSchema,
    OutputSchemaError,
    decode_reply,
)
from jarvis.testing import ScriptedInference


class City(BaseModel):
    name: str
    population: int


@dataclasses.dataclass
class CityRecord:
    name: str
    population: int


class CityDict(TypedDict):
    name: str
    population: int


CITY_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"],
    "additionalProperties": False,
}
PARIS = '{"name": "Paris", "population": 2100000}'


def test_a_pydantic_model_comes_back_validated_and_the_engine_gets_the_schema() -> None:
    engine = ScriptedInference([PARIS])
    with jarvis.Jarvis(inference=engine) as j:
        city = j.ask("Biggest city of France?", output_type=City)
    assert city == City(name="Paris", population=2_100_000)
    [request] = engine.requests
    assert request.response_format is not None
    assert request.response_format.schema == City.model_json_schema()
    assert request.response_format.name == "City"
    assert "JSON Schema" in request.messages[-1].content  # the prompt says it too


@pytest.mark.parametrize(
    ("output_type", "expected"),
    [
        (CityRecord, CityRecord(name="Paris", population=2_100_000)),
        (CityDict, {"name": "Paris", "population": 2_100_000}),
        (CITY_SCHEMA, {"name": "Paris", "population": 2_100_000}),
    ],
)
def test_dataclasses_typeddicts_and_schema_dicts(
    output_type: type[object] | dict[str, object], expected: object
) -> None:
    engine = ScriptedInference([f"Here you are:\n```json\n{PARIS}\n```"])
    with jarvis.Jarvis(inference=engine) as j:
        answer = j.ask_full("q", output_type=output_type)
    assert answer.output == expected
    assert json.loads(answer.content) == {"name": "Paris", "population": 2_100_000}
    assert answer.to_json()["output"] == {"name": "Paris", "population": 2_100_000}
    [request] = engine.requests
    assert request.response_format is not None
    assert request.response_format.strict == (output_type is CITY_SCHEMA)


def test_an_invalid_reply_is_sent_back_with_its_errors_and_usage_counts_both() -> None:
    engine = ScriptedInference(['{"name": "Paris"}', PARIS])
    with jarvis.Jarvis(inference=engine) as j:
        answer = j.ask_full("q", output_type=City)
    assert answer.output == City(name="Paris", population=2_100_000)
    _first, second = engine.requests
    assert [m.role for m in second.messages[-3:]] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert second.messages[-2].content == '{"name": "Paris"}'
    assert "population: Field required" in second.messages[-1].content
    assert answer.turns == 2
    assert answer.metadata["output_attempts"] == 2
    one = Usage(prompt_tokens=1, completion_tokens=1)
    assert answer.usage.prompt_tokens > one.prompt_tokens  # both attempts summed
    assert answer.usage.completion_tokens == 4 + len(PARIS) // 4


def test_an_always_invalid_reply_ends_in_a_typed_error_after_the_retries() -> None:
    engine = ScriptedInference(["I think it is Paris."])
    with jarvis.Jarvis(inference=engine) as j, pytest.raises(OutputValidationError) as info:
        j.ask("q", output_type=City, output_retries=1)
    error = info.value
    assert len(engine.requests) == 2  # 1 + output_retries, never more
    assert error.attempts == 2
    assert error.last_reply == "I think it is Paris."
    assert error.errors
    assert "not JSON" in error.errors[0]
    assert error.usage.completion_tokens == 2 * (len("I think it is Paris.") // 4)
    assert error.engine == "scripted"


def test_zero_retries_asks_once_and_async_works_too() -> None:
    async def scenario() -> None:
        engine = ScriptedInference(['{"name": 3}'])
        async with jarvis.Jarvis(inference=engine) as j:
            with pytest.raises(OutputValidationError) as info:
                await j.aask("q", output_type=City, output_retries=0)
            assert len(engine.requests) == 1
            assert any(e.startswith("name:") for e in info.value.errors)
            engine.add(PARIS)
            city = await j.aask("q", output_type=City)
            assert city.population == 2_100_000
            full = await j.aask_full("q", output_type=CITY_SCHEMA)
            assert full.output == {"name": "Paris", "population": 2_100_000}

    import asyncio

    asyncio.run(scenario())


def test_a_tool_using_agent_gives_its_answer_through_the_final_answer_tool() -> None:
    call = ToolCall(id="c1", name="calculator", arguments={"expression": "6*7"})
    final = ToolCall(id="c2", name="final_answer", arguments={"name": "x", "population": 42})
    engine = ScriptedInference(
        [
            Completion(content="", tool_calls=(call,), finish_reason="tool_calls"),
            Completion(content="", tool_calls=(final,), finish_reason="tool_calls"),
        ]
    )
    with jarvis.Jarvis(inference=engine) as j:
        answer = j.ask_full("q", agent="orchestrator", tools=["calculator"], output_type=City)
    assert answer.output == City(name="x", population=42)
    assert [r.tool_name for r in answer.tool_results] == ["calculator"]
    first, second = engine.requests
    assert [t.name for t in first.tools] == ["calculator", "final_answer"]
    assert first.tools[-1].parameters == City.model_json_schema()
    assert first.response_format is None  # tools and a response format do not mix
    assert second.messages[-1].content == "42"


def test_a_tool_using_agent_streams_the_typed_answer_whole() -> None:
    final = ToolCall(id="c2", name="final_answer", arguments={"name": "x", "population": 1})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(final,), finish_reason="tool_calls")]
    )
    with jarvis.Jarvis(inference=engine) as j:
        pieces = list(
            j.ask_stream("q", agent="orchestrator", tools=["calculator"], output_type=City)
        )
    assert pieces == ['{"name":"x","population":1}']


class RefusesStructuredOutput(ScriptedInference):
    """An engine with no structured output: the typed answer is prompted for and checked."""

    async def generate(self, request: InferenceRequest) -> Completion:
        if request.response_format is not None:
            self.requests.append(request)
            raise StructuredOutputNotSupportedError("no", engine="refusing")
        return await super().generate(request)


def test_an_engine_without_structured_output_falls_back_to_prompt_and_check() -> None:
    engine = RefusesStructuredOutput(["no json", PARIS])
    with jarvis.Jarvis(inference=engine) as j:
        city = j.ask("q", output_type=City)
    assert city.name == "Paris"
    formats = [r.response_format is not None for r in engine.requests]
    assert formats == [True, False, False]  # refused once, then prompted only


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ([1, 2], "must be a JSON object"),
        ({"type": "string"}, "must describe a JSON object"),
        ({"type": "object", "properties": {"a": {"$ref": "http://x/y"}}}, "refers outside"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/B"}}}, "does not define"),
        ({"type": "object", "not": {"required": ["a"]}}, "uses 'not'"),
        ({"type": "object", "properties": {"a": {"type": "string", "x": "y" * 70000}}}, "KiB"),
    ],
)
def test_a_schema_jarvis_cannot_honour_is_a_usage_error_naming_why(
    schema: object, why: str
) -> None:
    engine = ScriptedInference([PARIS])
    with jarvis.Jarvis(inference=engine) as j, pytest.raises(OutputSchemaError, match=why):
        j.ask("q", output_type=schema)  # type: ignore[call-overload]
    assert engine.requests == []  # refused before any engine is asked


def test_schema_depth_is_bounded() -> None:
    deep: dict[str, object] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(OutputSchemaError, match="nests deeper"):
        OutputSchema.of(deep)


def test_property_names_that_look_like_keywords_are_fine() -> None:
    schema = OutputSchema.of(
        {"type": "object", "properties": {"not": {"type": "string"}, "if": {"type": "integer"}}}
    )
    assert not schema.strict


def test_a_type_pydantic_cannot_describe_is_a_usage_error() -> None:
    class Opaque:
        pass

    with pytest.raises(ConfigurationError, match="cannot describe 'Opaque'"):
        output_spec(Opaque)
    with pytest.raises(ConfigurationError, match="output_retries"):
        output_spec(City, retries=-1)


def test_decoding_a_reply_is_linear_and_bounded() -> None:
    assert decode_reply('noise {"a": 1} noise') == {"a": 1}
    for bad in ("", "{" * 100_000, "x" * 1_000_001):
        with pytest.raises(Exception, match=r"\$: "):
            decode_reply(bad)


class TestStructuredAnswersOverTheFake(InferenceContract[StructuredAnswers]):
    """The engine wrapper of a typed run is still an inference port, contract and all."""

    forces_tool_choice = False

    @pytest.fixture
    def engine(self) -> StructuredAnswers:
        fake = ScriptedInference(['{"is_capital": true}'], strict_models=True)
        return StructuredAnswers(fake, OutputSchema.of(CITY_SCHEMA), constrain_plain=True)


def test_a_text_protocol_agent_is_prompted_and_checked() -> None:
    engine = ScriptedInference([f"Thought: I know it.\nFinal Answer: {PARIS}"])
    with jarvis.Jarvis(inference=engine) as j:
        city = j.ask("q", agent="native_react", tools=["calculator"], output_type=City)
    assert city == City(name="Paris", population=2_100_000)
    [request] = engine.requests
    assert request.response_format is None  # its replies are ReAct text, not the object
    assert request.tools == ()
    assert "JSON Schema" in request.messages[-1].content


def test_a_turn_that_must_call_a_tool_is_not_offered_the_final_answer_tool() -> None:
    call = ToolCall(id="c1", name="calculator", arguments={"expression": "1+1"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), PARIS]
    )
    with jarvis.Jarvis(inference=engine) as j:
        city = j.ask(
            "q",
            agent="orchestrator",
            tools=["calculator"],
            agent_options={"tool_choice": "required"},
            output_type=City,
        )
    assert city.name == "Paris"
    first, second = engine.requests
    assert (first.tool_choice, [t.name for t in first.tools]) == ("required", ["calculator"])
    assert [t.name for t in second.tools] == ["calculator", "final_answer"]
