"""The committed JSON Schemas of the SSE events match the models, and what the server
streams validates against the committed files."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import jsonschema_rs

from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.testing import ScriptedInference
from scripts.export_schemas import target
from tests.support.serve import serving

TARGET = target("sse")


def _validator(name: str) -> jsonschema_rs.Validator:
    return jsonschema_rs.validator_for(json.loads((TARGET / name).read_text(encoding="utf-8")))


def test_the_schemas_live_under_contracts() -> None:
    assert Path(__file__).resolve().parents[4] / "contracts" / "schemas" / "sse" == TARGET


def _frames(text: str) -> list[tuple[str, str]]:
    frames = []
    for block in text.strip().split("\n\n"):
        name, data = "message", ""
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        frames.append((name, data))
    return frames


def test_every_streamed_event_validates_against_its_committed_schema() -> None:
    call = ToolCall(id="c1", name="calculator", arguments={"expression": "2+2"})
    turn = Completion(content="", tool_calls=(call,), finish_reason="tool_calls")
    engine = ScriptedInference([turn, "4.", turn, RuntimeError("boom"), "Hi.", turn])
    by_event = {
        "message": _validator("chat_chunk.schema.json"),
        "tool_calls": _validator("tool_calls.schema.json"),
        "tool_result": _validator("tool_result.schema.json"),
        "error": _validator("error.schema.json"),
    }
    anthropic = _validator("anthropic_event.schema.json")
    seen: set[str] = set()
    with serving(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post(
            "/v1/managed-agents", json={"id": "v", "agent": "orchestrator", "tools": ["calculator"]}
        )
        texts = [
            client.post("/v1/managed-agents/v/messages", json={"content": q, "stream": True}).text
            for q in ("2+2?", "again")  # a tool loop, then an error mid-run
        ]
        texts.append(
            client.post(
                "/v1/chat/completions",
                json={
                    "model": "jarvis/simple",
                    "stream": True,
                    "messages": [{"role": "user", "content": "hi"}],
                },
            ).text
        )
        anthropic_text = client.post(
            "/v1/messages",
            json={
                "model": "m",
                "max_tokens": 9,
                "stream": True,
                "tools": [{"name": "calculator", "input_schema": {"type": "object"}}],
                "messages": [{"role": "user", "content": "2+2?"}],
            },
        ).text
    for text in texts:
        frames = _frames(text)
        assert frames[-1] == ("message", "[DONE]")
        for name, data in frames[:-1]:
            by_event[name].validate(json.loads(data))
            seen.add(name)
    assert seen == set(by_event)
    names = []
    for name, data in _frames(anthropic_text):
        event = json.loads(data)
        anthropic.validate(event)
        assert event["type"] == name
        names.append(name)
    assert "content_block_delta" in names
    assert names[-1] == "message_stop"
