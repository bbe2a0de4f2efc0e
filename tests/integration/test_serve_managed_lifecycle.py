"""A managed agent deleted while it answers, then created again under the same id, over a
real ``jarvis serve`` on its SQLite store: the old run's answer never reaches the new agent.

The gated engine holds the answer after its first word until the test releases it, so the
deletion and the re-creation always land while the old run is streaming.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.integration.test_serve_approvals import frames
from tests.support.gated_engine import MODEL, GatedEngine
from tests.support.serve_process import jarvis_serve

pytestmark = pytest.mark.integration

TIMEOUT = 60.0


def _text(frame: tuple[str, str]) -> str:
    """The answer's text a frame carries ("" for any other frame)."""
    name, data = frame
    if name != "message" or not data.startswith("{"):
        return ""
    choices = json.loads(data).get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


def test_an_agent_deleted_mid_answer_leaves_nothing_to_its_successor(jarvis_home: Path) -> None:
    with (
        GatedEngine() as engine,
        jarvis_serve("--engine", "openai", "--base-url", engine.url, "--model", MODEL) as served,
        httpx.Client(base_url=served.url, timeout=TIMEOUT) as client,
    ):
        client.post(
            "/v1/managed-agents", json={"id": "victim", "system_prompt": "Old secrets."}
        ).raise_for_status()
        with client.stream(
            "POST",
            "/v1/managed-agents/victim/messages",
            json={"content": "What is the secret?", "stream": True},
        ) as reply:
            events = frames(reply.iter_lines())
            assert next(text for text in map(_text, events) if text) == "The"  # under way
            assert client.delete("/v1/managed-agents/victim").status_code == 200
            client.post(
                "/v1/managed-agents", json={"id": "victim", "system_prompt": "New task."}
            ).raise_for_status()
            engine.release()
            rest = list(events)
        messages = client.get("/v1/managed-agents/victim/messages").json()["data"]
        again = client.post(
            "/v1/managed-agents/victim/messages", json={"content": "Hello?", "stream": True}
        ).text
        after = client.get("/v1/managed-agents/victim/messages").json()["data"]
    assert messages == []  # neither the old question nor the old answer
    [error] = [json.loads(data)["error"] for name, data in rest if name == "error"]
    assert error["code"] == "agent_not_found"
    assert "managed agent 'victim' was deleted while it ran" in error["message"]
    assert "not stored" in error["message"]
    assert rest[-1] == ("message", "[DONE]")
    assert "Traceback" not in again
    assert [(m["role"], m["content"]) for m in after] == [
        ("user", "Hello?"),
        ("assistant", "The capital of France is Paris."),
    ]
