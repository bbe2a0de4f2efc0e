"""Context from memory in the managed-agent API: a knowledge base filled with ``jarvis memory
add`` (real files: the project's README and a note), then managed agents on ``jarvis serve``'s
application over the scripted engine, whose request log shows what each run was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse

from tests.support.cli import run_jarvis
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine
from tests.support.serve import Served, serving

FERRY = "The zanzibar ferry leaves from pier nine at dawn."
QUESTION = "When does the zanzibar ferry leave?"
README = Path(__file__).resolve().parents[2] / "README.md"
CONTEXT = "## Retrieved Context"


@pytest.fixture
def travel(jarvis_home: Path, tmp_path: Path) -> Path:
    """The knowledge base: the project's README and a travel note (keyword search)."""
    (jarvis_home / "config.toml").write_text("[memory]\nembed = false\n")
    note = tmp_path / "docs" / "travel.md"
    note.parent.mkdir()
    note.write_text(f"# Travel\n\n{FERRY}\n", encoding="utf-8")
    added = run_jarvis("memory", "add", str(README), str(note.parent), "--json")
    assert added.returncode == 0, added.stderr
    assert str(note) in json.loads(added.stdout)["added"]
    return note


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    with ScriptedEngine([Reply("At dawn.")]) as scripted:
        yield scripted


def serve(engine: ScriptedEngine) -> AbstractContextManager[Served]:
    return serving(engine="openai", base_url=engine.url, model=MODEL)


def system_text(engine: ScriptedEngine, index: int) -> str:
    first = engine.messages(index)[0]
    assert isinstance(first, dict)
    return str(first["content"]) if first["role"] == "system" else ""


def streamed_summary(client: httpx.Client, agent_id: str, body: dict[str, object]) -> object:
    """The ``jarvis`` summary of a streamed run's final chunk."""
    with connect_sse(
        client, "POST", f"/v1/managed-agents/{agent_id}/messages", json=body
    ) as source:
        assert source.response.status_code == 200
        events = list(source.iter_sse())
    assert events[-1].data == "[DONE]"
    finals = [json.loads(e.data) for e in events[:-1] if e.event == "message"]
    return finals[-1]["jarvis"]


def test_a_definition_with_memory_quotes_the_chunks_and_a_message_can_turn_it_off(
    travel: Path, engine: ScriptedEngine
) -> None:
    with serve(engine) as served, httpx.Client(base_url=served.url) as client:
        created = client.post(
            "/v1/managed-agents", json={"id": "guide", "agent": "orchestrator", "memory": True}
        )
        assert created.status_code == 201, created.text
        assert created.json()["memory"] is True
        on = streamed_summary(client, "guide", {"content": QUESTION, "stream": True})
        off = streamed_summary(
            client, "guide", {"content": QUESTION, "stream": True, "memory": False}
        )
    prompt = system_text(engine, 0)
    assert CONTEXT in prompt
    assert f"[{travel}:1]\n> # Travel\n> {FERRY}" in prompt
    assert "not instructions" in prompt
    assert isinstance(on, dict)
    cited = [chunk["citation"] for chunk in on["memory_results"]]
    assert cited[0] == f"[{travel}:1]"
    assert CONTEXT not in system_text(engine, 1)
    assert FERRY not in json.dumps(engine.messages(1))
    assert isinstance(off, dict)
    assert "memory_results" not in off


def test_a_run_can_turn_memory_on_for_one_call(travel: Path, engine: ScriptedEngine) -> None:
    with serve(engine) as served, httpx.Client(base_url=served.url) as client:
        created = client.post("/v1/managed-agents", json={"id": "plain", "agent": "simple"})
        assert created.json()["memory"] is None  # follows [agent] context_from_memory (off)
        base = "/v1/managed-agents/plain"
        client.post(base + "/messages", json={"content": QUESTION}).raise_for_status()
        plain = client.post(base + "/run")
        client.post(base + "/messages", json={"content": QUESTION}).raise_for_status()
        with_memory = client.post(base + "/run", json={"memory": True})
    assert plain.status_code == 200, plain.text
    assert plain.json()["memory_results"] == []
    assert CONTEXT not in system_text(engine, 0)
    assert with_memory.status_code == 200, with_memory.text
    [first, *_] = with_memory.json()["memory_results"]
    assert (first["citation"], first["source"], first["line"]) == (
        f"[{travel}:1]",
        str(travel),
        1,
    )
    assert f"> {FERRY}" in system_text(engine, 1)


def test_the_server_setting_is_the_default_and_a_definition_overrides_it(
    jarvis_home: Path, travel: Path, engine: ScriptedEngine
) -> None:
    config = jarvis_home / "config.toml"
    config.write_text(config.read_text() + "[agent]\ncontext_from_memory = true\n")
    with serve(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post("/v1/managed-agents", json={"id": "a", "agent": "orchestrator"})
        default = streamed_summary(client, "a", {"content": QUESTION, "stream": True})
        changed = client.patch("/v1/managed-agents/a", json={"memory": False})
        assert changed.json()["memory"] is False
        assert client.get("/v1/managed-agents/a").json()["memory"] is False
        turned_off = streamed_summary(client, "a", {"content": QUESTION, "stream": True})
        reset = client.patch("/v1/managed-agents/a", json={"memory": None})
        assert reset.json()["memory"] is None
    assert isinstance(default, dict)
    assert default["memory_results"]
    assert f"> {FERRY}" in system_text(engine, 0)
    assert isinstance(turned_off, dict)
    assert "memory_results" not in turned_off
    assert CONTEXT not in system_text(engine, 1)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/managed-agents", {"memory": "yes"}),
        ("POST", "/v1/managed-agents", {"memory": 1}),
        ("PATCH", "/v1/managed-agents/a", {"memory": "false"}),
        ("POST", "/v1/managed-agents/a/run", {"memory": "on"}),
        ("POST", "/v1/managed-agents/a/messages", {"content": "hi", "memory": 0}),
    ],
)
def test_memory_that_is_not_a_boolean_is_a_400_naming_the_field(
    jarvis_home: Path, engine: ScriptedEngine, method: str, path: str, body: dict[str, object]
) -> None:
    with serve(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post("/v1/managed-agents", json={"id": "a"}).raise_for_status()
        reply = client.request(method, path, json=body)
        assert client.get("/v1/managed-agents/a/messages").json()["data"] == []
    assert reply.status_code == 400, reply.text
    message = reply.json()["error"]["message"]
    assert "memory" in message
    assert "boolean" in message
    assert engine.requests == []


def test_memory_on_a_queued_message_is_refused_and_nothing_is_stored(
    jarvis_home: Path, engine: ScriptedEngine
) -> None:
    with serve(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post("/v1/managed-agents", json={"id": "a"}).raise_for_status()
        reply = client.post("/v1/managed-agents/a/messages", json={"content": "hi", "memory": True})
        assert client.get("/v1/managed-agents/a/messages").json()["data"] == []
    assert reply.status_code == 400, reply.text
    assert "/run" in reply.json()["error"]["message"]


def test_an_immediate_message_takes_memory_for_its_background_run(
    travel: Path, engine: ScriptedEngine
) -> None:
    with serve(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post("/v1/managed-agents", json={"id": "now"}).raise_for_status()
        reply = client.post(
            "/v1/managed-agents/now/messages",
            json={"content": QUESTION, "mode": "immediate", "memory": True},
        )
        assert reply.status_code == 202, reply.text
        stored: list[dict[str, object]] = []
        for _ in range(3000):  # the run goes on after the response: wait for its answer
            stored = client.get("/v1/managed-agents/now/messages").json()["data"]
            if len(stored) == 2:
                break
            threading.Event().wait(0.02)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert f"[{travel}:1]\n> # Travel\n> {FERRY}" in system_text(engine, 0)
