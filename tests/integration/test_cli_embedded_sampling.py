"""The embedded engine gets the sampling that suits its tiny model, unless the user sets one.

Run on the real embedded engine (SmolLM2-135M-Instruct in llama.cpp, in-process): the
requests it receives are recorded on their way in, so the tests see the temperature the
model really ran with, not only what ``--verbose`` claims.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from jarvis.adapters.inference.llamacpp import LlamaCppEngine
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.composition import Container
from jarvis.entrypoints.sdk import Jarvis
from tests.support.llama_server import missing_requirement

pytestmark = pytest.mark.integration

QUESTION = "What is the capital of France?"
ENGINE_DEFAULT = (
    "sampling: temperature 0 (the embedded engine's small model answers most accurately "
    "without sampling; --temperature or [agent] temperature overrides it)"
)


class RecordingEngine(LlamaCppEngine):
    """The real embedded engine, keeping each request it is given."""

    def __init__(self) -> None:
        super().__init__(n_ctx=1024)
        self.requests: list[InferenceRequest] = []

    async def generate(self, request: InferenceRequest) -> Completion:
        self.requests.append(request)
        return await super().generate(request)

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        async for chunk in super().stream(request):
            yield chunk


@pytest.fixture(scope="module")
def engine() -> Iterator[RecordingEngine]:
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(reason)
    engine = RecordingEngine()
    yield engine
    asyncio.run(engine.aclose())


@pytest.fixture
def recording(engine: RecordingEngine) -> RecordingEngine:
    engine.requests.clear()
    return engine


def ask(engine: RecordingEngine, *args: str) -> Result:
    container = Container()
    container.inference.override(engine)
    result = CliRunner().invoke(
        app, ["ask", "--verbose", "--max-tokens", "12", *args, QUESTION], obj=container
    )
    assert result.exit_code == 0, result.output
    return result


def test_the_embedded_engine_answers_without_sampling_by_default(
    recording: RecordingEngine,
) -> None:
    result = ask(recording)
    assert [r.temperature for r in recording.requests] == [0.0]
    assert ENGINE_DEFAULT in result.stderr.splitlines()
    assert result.stdout.strip()


def test_the_default_answers_the_first_question_of_the_readme(
    recording: RecordingEngine,
) -> None:
    # greedy decoding makes this deterministic; at the agents' 0.7 the same model answered
    # "Bien sûr. France is a country located in Western Europe..."
    result = ask(recording)
    assert "Paris" in result.stdout


@pytest.mark.parametrize("value", ["0.9", "0.7", "0"])
def test_an_explicit_temperature_always_wins(recording: RecordingEngine, value: str) -> None:
    result = ask(recording, "--temperature", value)
    assert [r.temperature for r in recording.requests] == [float(value)]
    assert f"sampling: temperature {float(value):g} (set by --temperature)" in result.stderr


def test_the_configured_temperature_wins_over_the_engine_default(
    recording: RecordingEngine, jarvis_home: Path
) -> None:
    (jarvis_home / "config.toml").write_text("[agent]\ntemperature = 0.4\n", encoding="utf-8")
    result = ask(recording)
    assert [r.temperature for r in recording.requests] == [0.4]
    assert "sampling: temperature 0.4 (set by [agent] temperature)" in result.stderr
    recording.requests.clear()
    result = ask(recording, "-t", "1.1")  # and the option wins over the file
    assert [r.temperature for r in recording.requests] == [1.1]


def test_the_sdk_gets_the_same_default(recording: RecordingEngine) -> None:
    with Jarvis(inference=recording) as j:
        j.ask(QUESTION, max_tokens=8)
        j.ask(QUESTION, max_tokens=8, temperature=0.8)
    assert [r.temperature for r in recording.requests] == [0.0, 0.8]
