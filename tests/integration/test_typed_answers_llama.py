"""Typed answers on real engines with the SmolLM2-135M model: the embedded engine and the
llama.cpp server constrain the reply with a grammar made from the schema, the Ollama
protocol sends the schema as ``format``.

What is asserted is the mechanism, never the model's knowledge: the grammar (or the schema)
was sent, and the reply parses and matches the schema on the first attempt
(``output_retries=0``), which a grammar guarantees for a schema whose every value is
bounded (an ``enum`` and a bounded integer: the object cannot outgrow ``max_tokens``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

import jarvis
from jarvis.adapters.inference.llamacpp import LlamaCppEngine
from jarvis.adapters.inference.ollama import OllamaEngine
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.tools.json_schema import validate
from tests.support.llama_server import LlamaServer, missing_requirement
from tests.support.ollama_server import OllamaProtocolServer

pytestmark = pytest.mark.integration

SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["yes", "no"]},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}
QUESTIONS = ("Is Paris in France?", "Is the sea dry?", "Do cats bark?")


class RecordingLlamaCppEngine(LlamaCppEngine):
    """The embedded engine, keeping the arguments of every ``create_chat_completion``."""

    def __init__(self) -> None:
        super().__init__(n_ctx=2048)
        self.sent: list[dict[str, object]] = []

    def chat_arguments(
        self, request: InferenceRequest, *, stream: bool, function_calling: bool
    ) -> dict[str, object]:
        arguments = super().chat_arguments(
            request, stream=stream, function_calling=function_calling
        )
        self.sent.append(arguments)
        return arguments


@pytest.mark.skipif(missing_requirement() is not None, reason=str(missing_requirement()))
async def test_the_embedded_engine_sends_a_grammar_and_the_reply_matches_first_time() -> None:
    engine = RecordingLlamaCppEngine()
    async with jarvis.Jarvis(inference=engine) as j:
        for question in QUESTIONS:
            answer = await j.aask_full(
                question, output_type=SCHEMA, output_retries=0, max_tokens=48, temperature=0
            )
            assert isinstance(answer.output, dict)
            assert validate(answer.output, SCHEMA) == []
    assert len(engine.sent) == len(QUESTIONS)  # one generation each: no retry was needed
    for arguments in engine.sent:
        grammar = arguments["grammar"]
        text = getattr(grammar, "_grammar", "")
        assert isinstance(text, str)
        assert '\\"yes\\"' in text
        assert '\\"confidence\\"' in text  # llama.cpp's grammar of this schema
        assert "response_format" not in arguments


async def test_the_llama_cpp_server_gets_the_schema_in_the_form_it_accepts(
    llama_server: LlamaServer,
) -> None:
    bodies: list[JSONObject] = []
    statuses: list[int] = []

    class Recording(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.path.endswith("/chat/completions"):
                bodies.append(json.loads(request.content))
            response = await super().handle_async_request(request)
            if request.url.path.endswith("/chat/completions"):
                statuses.append(response.status_code)
            return response

    engine = OpenAICompatibleEngine(llama_server.base_url, max_retries=0, transport=Recording())
    async with jarvis.Jarvis(inference=engine, model=llama_server.model) as j:
        for question in QUESTIONS:
            answer = await j.aask_full(
                question, output_type=SCHEMA, output_retries=0, max_tokens=48, temperature=0
            )
            assert isinstance(answer.output, dict)
            assert validate(answer.output, SCHEMA) == []
    await engine.aclose()
    accepted = [body for body, status in zip(bodies, statuses, strict=True) if status == 200]
    assert len(accepted) == len(QUESTIONS)
    for body in accepted:  # llama.cpp's own form: its server turns the schema into a grammar
        assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    first = bodies[0]["response_format"]
    assert isinstance(first, dict)
    assert first["type"] == "json_schema"  # the standard form is tried first, once
    assert statuses[0] != 200
    assert len(bodies) == len(QUESTIONS) + 1  # the accepted form is remembered


@pytest.fixture
async def ollama(ollama_server: OllamaProtocolServer) -> AsyncIterator[OllamaEngine]:
    engine = OllamaEngine(ollama_server.url, num_ctx=2048)
    yield engine
    await engine.aclose()


async def test_the_ollama_protocol_carries_the_schema_as_format(
    ollama: OllamaEngine, ollama_server: OllamaProtocolServer
) -> None:
    before = len(ollama_server.requests)
    async with jarvis.Jarvis(inference=ollama, model="smollm2:135m") as j:
        answer = await j.aask_full(
            QUESTIONS[0], output_type=SCHEMA, output_retries=0, max_tokens=48, temperature=0
        )
    assert isinstance(answer.output, dict)
    assert validate(answer.output, SCHEMA) == []
    [sent] = ollama_server.requests[before:]
    assert sent["format"] == SCHEMA
