"""A lone surrogate in text from code jarvis does not own (a plug-in's agent or tool, an
application's own engine) reaches every answering route of ``jarvis serve`` as U+FFFD:
a 200 with valid UTF-8 JSON, no 500, nothing logged as unexpected, the session kept."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contracts.approval_store_contract import pending
from jarvis.application.managed_approvals import ManagedApprovals
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.managed_agents import owner_of, session_id_of
from jarvis.domain.sessions.records import SessionMessage
from jarvis.testing import InMemoryApprovalStore, InMemorySessionStore, ScriptedInference
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from tests.support.serve import serving
from tests.support.surrogate_plugin import (
    AGENT_SHOWN,
    TOOL_SHOWN,
    RepeatingEngine,
    body_of,
    streamed,
    write_surrogate_plugin,
)

ENGINE_TEXT = "engine \ud800 text"
ENGINE_SHOWN = "engine \ufffd text"


@pytest.fixture
def plugin(tmp_path: Path, jarvis_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = write_surrogate_plugin(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (jarvis_home / "config.toml").write_text(f'[plugins]\nmodules = ["{name}"]\n')
    yield name
    sys.modules.pop(name, None)


def chat(model: str, *, stream: bool = False, **extra: object) -> dict[str, object]:
    messages = [{"role": "user", "content": "go"}]
    return {"model": model, "messages": messages, "stream": stream, **extra}


def unexpected(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_plugin_agent_s_answer_reaches_every_route(
    plugin: str, caplog: pytest.LogCaptureFixture, fast_path: bool
) -> None:
    caplog.set_level(logging.ERROR)
    with (
        serving(ScriptedInference(["unused"]), model="m", fast_path=fast_path) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        whole = client.post("/v1/chat/completions", json=chat("jarvis/halves"))
        pieces = client.post("/v1/chat/completions", json=chat("jarvis/halves", stream=True))
        client.post("/v1/managed-agents", json={"id": "h", "agent": "halves"}).raise_for_status()
        client.post("/v1/managed-agents/h/messages", json={"content": "one"}).raise_for_status()
        ran = client.post("/v1/managed-agents/h/run")
        run_streamed = client.post(
            "/v1/managed-agents/h/messages", json={"content": "two", "stream": True}
        )
        kept = client.get("/v1/managed-agents/h/messages")
    assert body_of(whole)["choices"][0]["message"]["content"] == AGENT_SHOWN
    assert streamed(pieces)[0] == AGENT_SHOWN
    assert body_of(ran)["content"] == AGENT_SHOWN
    assert streamed(run_streamed)[0] == AGENT_SHOWN
    stored = [(m["role"], m["content"]) for m in body_of(kept)["data"]]
    assert stored == [
        ("user", "one"),
        ("assistant", AGENT_SHOWN),
        ("user", "two"),
        ("assistant", AGENT_SHOWN),
    ]
    assert unexpected(caplog) == []


def test_a_plugin_tool_s_result_and_the_model_repeating_it(
    plugin: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    engine = RepeatingEngine()
    with (
        serving(engine, model="m") as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        client.post(
            "/v1/managed-agents", json={"id": "t", "agent": "orchestrator", "tools": ["lone_half"]}
        ).raise_for_status()
        client.post("/v1/managed-agents/t/messages", json={"content": "one"}).raise_for_status()
        ran = client.post("/v1/managed-agents/t/run")
        run_streamed = client.post(
            "/v1/managed-agents/t/messages", json={"content": "two", "stream": True}
        )
        kept = client.get("/v1/managed-agents/t/messages")
        whole = client.post("/v1/chat/completions", json=chat("t"))  # the agent as a model
    ran_body = body_of(ran)
    assert ran_body["tool_results"][0]["output"] == TOOL_SHOWN
    assert ran_body["content"] == f"It said: {TOOL_SHOWN}"
    text, events = streamed(run_streamed)
    assert text == f"It said: {TOOL_SHOWN}"
    assert [e["output"] for e in events if isinstance(e, dict) and "output" in e] == [TOOL_SHOWN]
    stored = [m["content"] for m in body_of(kept)["data"] if m["role"] == "tool"]
    assert stored == [TOOL_SHOWN, TOOL_SHOWN]
    answer = body_of(whole)["choices"][0]["message"]["content"]
    assert answer == f"It said: {TOOL_SHOWN}"
    assert unexpected(caplog) == []


def test_an_application_engine_s_text_reaches_every_route(
    jarvis_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine given to the server (as an application embedding it gives its own): the
    agents' routes and the routes that relay the engine's reply alike."""
    caplog.set_level(logging.ERROR)
    engine = ScriptedInference([ENGINE_TEXT], models=("m",))
    client_tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    anthropic = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "go"}]}
    with (
        serving(engine, model="m") as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        whole = client.post("/v1/chat/completions", json=chat("jarvis/simple"))
        pieces = client.post("/v1/chat/completions", json=chat("jarvis/simple", stream=True))
        relayed = client.post(
            "/v1/chat/completions", json=chat("jarvis/simple", tools=[client_tool])
        )
        relayed_pieces = client.post(
            "/v1/chat/completions", json=chat("jarvis/simple", stream=True, tools=[client_tool])
        )
        message = client.post("/v1/messages", json=anthropic)
        message_pieces = client.post("/v1/messages", json={**anthropic, "stream": True})
        client.post("/v1/managed-agents", json={"id": "e"}).raise_for_status()
        run_streamed = client.post(
            "/v1/managed-agents/e/messages", json={"content": "go", "stream": True}
        )
        kept = client.get("/v1/managed-agents/e/messages")
    for reply in (whole, relayed):
        assert body_of(reply)["choices"][0]["message"]["content"] == ENGINE_SHOWN
    for reply in (pieces, relayed_pieces, message_pieces, run_streamed):
        assert streamed(reply)[0] == ENGINE_SHOWN
    assert body_of(message)["content"][0]["text"] == ENGINE_SHOWN
    assert [m["content"] for m in body_of(kept)["data"]] == ["go", ENGINE_SHOWN]
    assert all(
        m.role is not Role.ASSISTANT or "\ud800" not in m.content
        for r in engine.requests
        for m in r.messages
    )
    assert unexpected(caplog) == []


def test_text_stored_with_a_lone_surrogate_is_listed_as_u_fffd(
    jarvis_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a store holds from before (a message, a call waiting for approval, written by
    an earlier version or an application's engine): the listing routes write it with
    U+FFFD, never a 500."""
    caplog.set_level(logging.ERROR)
    agents = InMemoryManagedAgentStore()
    sessions = InMemorySessionStore(owners=agents.holds)
    approvals = ManagedApprovals(InMemoryApprovalStore(owners=agents.holds), timeout=60.0)
    engine = ScriptedInference(["unused"])
    with (
        serving(engine, model="m", agents=agents, sessions=sessions, approvals=approvals) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        client.post("/v1/managed-agents", json={"id": "s"}).raise_for_status()
        agent = asyncio.run(agents.get("s"))
        assert agent is not None
        owner = owner_of(agent)
        stored = [SessionMessage(message=Message.user("old \ud800 question"))]
        asyncio.run(sessions.append_records(session_id_of("s"), stored, owner=owner))
        call = pending("c0", agent="s", tool="delete\ud800")
        asyncio.run(approvals.store.add(call, owner=owner))
        kept = client.get("/v1/managed-agents/s/messages")
        waiting = client.get("/v1/managed-agents/s/approvals")
    assert [m["content"] for m in body_of(kept)["data"]] == ["old \ufffd question"]
    assert [row["tool"] for row in body_of(waiting)["data"]] == ["delete\ufffd"]
    assert unexpected(caplog) == []
