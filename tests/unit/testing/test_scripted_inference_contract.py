"""The shipped fake passes the same inference contract as the real engines."""

from __future__ import annotations

import pytest

from contracts.inference_contract import InferenceContract
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.ports import InferencePort
from jarvis.testing.inference import ScriptedInference


class TestScriptedInference(InferenceContract[ScriptedInference]):
    forces_tool_choice = False  # it answers what it is scripted to answer

    @pytest.fixture
    def engine(self) -> ScriptedInference:
        return ScriptedInference(['{"is_capital": true}'], strict_models=True)


def test_the_fake_is_an_inference_port() -> None:
    port: InferencePort = ScriptedInference()
    assert port.engine_id == "scripted"


async def test_a_reply_longer_than_max_tokens_is_cut_with_length() -> None:
    fake = ScriptedInference(["word " * 40])
    request = InferenceRequest(messages=(Message.user("q"),), model="m", max_tokens=5)
    completion = await fake.generate(request)
    assert completion.finish_reason == "length"
    assert completion.content == ("word " * 40)[:20]
    assert completion.usage.completion_tokens == 5
