"""``response_format`` on ``jarvis serve``'s ``/v1/chat/completions``, through the real
OpenAI SDK (its ``parse`` helper sends a strict ``json_schema`` from a pydantic model)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest
from pydantic import BaseModel

from jarvis.application.tools.function_tool import as_tool
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.testing import ScriptedInference
from tests.support.serve import serving


class City(BaseModel):
    name: str
    population: int


PARIS = '{"name": "Paris", "population": 2100000}'


def lookup(city: str) -> str:
    """Look a city up."""
    return city


def test_the_sdk_parse_helper_gets_a_checked_object_from_a_retried_agent_run() -> None:
    engine = ScriptedInference(['{"name": "Paris"}', PARIS])
    with serving(engine, model="m") as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.parse(
            model="jarvis/simple",
            messages=[{"role": "user", "content": "Biggest city of France?"}],
            response_format=City,
        )
    parsed = reply.choices[0].message.parsed
    assert parsed == City(name="Paris", population=2_100_000)
    assert reply.usage is not None
    assert len(engine.requests) == 2  # the first reply lacked population
    first = engine.requests[0].response_format
    assert first is not None
    assert first.name == "City"
    assert first.strict  # the SDK's strict schema is strict-compatible
    assert first.schema is not None
    assert first.schema["required"] == ["name", "population"]


@pytest.mark.parametrize("stream", [False, True])
def test_json_object_through_a_tool_using_agent(stream: bool, jarvis_home: Path) -> None:
    (jarvis_home / "config.toml").write_text('[tools]\nenabled = ["lookup"]\n')
    final = ToolCall(id="c1", name="final_answer", arguments={"ok": True})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(final,), finish_reason="tool_calls")]
    )
    body = {
        "model": "jarvis/orchestrator",
        "messages": [{"role": "user", "content": "Is it fine?"}],
        "response_format": {"type": "json_object"},
        "stream": stream,
    }
    with (
        serving(engine, model="m", tools=[as_tool(lookup)]) as served,
        httpx.Client(base_url=served.url) as client,
    ):
        response = client.post("/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    if stream:
        frames = [
            json.loads(line.removeprefix("data: "))
            for line in response.text.splitlines()
            if line.startswith("data: {")
        ]
        content = "".join(f["choices"][0]["delta"].get("content") or "" for f in frames)
    else:
        content = response.json()["choices"][0]["message"]["content"]
    assert json.loads(content) == {"ok": True}
    assert [t.name for t in engine.requests[0].tools] == ["lookup", "final_answer"]


def test_a_schema_that_cannot_be_honoured_is_a_400_and_a_never_valid_answer_a_502() -> None:
    engine = ScriptedInference(["not json at all"])
    with serving(engine, model="m") as served, httpx.Client(base_url=served.url) as client:
        bad = client.post(
            "/v1/chat/completions",
            json={
                "model": "jarvis/simple",
                "messages": [{"role": "user", "content": "q"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "array"}},
                },
            },
        )
        assert engine.requests == []
        never = client.post(
            "/v1/chat/completions",
            json={
                "model": "jarvis/simple",
                "messages": [{"role": "user", "content": "q"}],
                "response_format": {"type": "json_object"},
            },
            timeout=60,
        )
    assert bad.status_code == 400
    assert "must describe a JSON object" in bad.json()["error"]["message"]
    assert never.status_code == 502
    assert never.json()["error"]["code"] == "output_validation_failed"
    assert len(engine.requests) == 3  # 1 + the default 2 retries
