"""The server's limits over the real application: ``--max-output-tokens`` on every
compatible endpoint, the managed-agent quotas, and the paginated lists of definitions and
of a managed agent's messages."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.managed_agents import session_id_of
from jarvis.entrypoints.http.state import ServeLimits
from jarvis.testing import ScriptedInference
from tests.support.serve import serving
from tests.support.sql_stores import sqlite_sessions

CAP = 100
QUESTION: Any = [{"role": "user", "content": "Capital of France?"}]
TOOL: Any = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


def _ask(client: httpx.Client, body: dict[str, Any]) -> None:
    if body.get("stream"):
        with connect_sse(client, "POST", "/v1/chat/completions", json=body) as source:
            assert source.response.status_code == 200
            assert [e.data for e in source.iter_sse()][-1] == "[DONE]"
        return
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("tools", [False, True])
@pytest.mark.parametrize(
    ("asked", "sent"),
    [
        ({"max_tokens": 1_000_000}, CAP),
        ({"max_completion_tokens": 32_000}, CAP),
        ({"max_tokens": 40}, 40),
        ({}, CAP),  # the agent's own default (1024) is above the cap too
    ],
)
def test_chat_completions_ask_the_engine_for_at_most_the_cap(
    fast_path: bool, stream: bool, tools: bool, asked: dict[str, int], sent: int
) -> None:
    engine = ScriptedInference(["Paris."])
    limits = ServeLimits(max_output_tokens=CAP)
    with serving(engine, limits=limits, fast_path=fast_path) as served:
        body: dict[str, Any] = {"model": "jarvis/simple", "messages": QUESTION, **asked}
        if stream:
            body["stream"] = True
        if tools:
            body["tools"] = [TOOL]
        with httpx.Client(base_url=served.url, timeout=30) as client:
            _ask(client, body)
    assert [r.max_tokens for r in engine.requests] == [sent]


def test_a_managed_agents_own_max_tokens_is_capped_too() -> None:
    engine = ScriptedInference(["Paris."])
    with (
        serving(engine, limits=ServeLimits(max_output_tokens=CAP)) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        client.post(
            "/v1/managed-agents", json={"id": "big", "max_tokens": 50_000}
        ).raise_for_status()
        _ask(client, {"model": "big", "messages": QUESTION})
    assert [r.max_tokens for r in engine.requests] == [CAP]


def test_the_cap_matches_v1_messages() -> None:
    engine = ScriptedInference(["Paris."])
    with serving(engine, limits=ServeLimits(max_output_tokens=CAP)) as served:
        reply = httpx.post(
            served.url + "/v1/messages",
            json={"model": "any", "max_tokens": 50_000, "messages": QUESTION},
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
    assert [r.max_tokens for r in engine.requests] == [CAP]


# --- quotas ------------------------------------------------------------------------------


def test_creating_beyond_max_agents_is_a_409_and_deleting_frees_a_place() -> None:
    with serving(ScriptedInference(), limits=ServeLimits(max_agents=3)) as served:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            for i in range(3):
                client.post("/v1/managed-agents", json={"id": f"a{i}"}).raise_for_status()
            refused = client.post("/v1/managed-agents", json={"id": "a3"})
            assert refused.status_code == 409
            error = refused.json()["error"]
            assert error["code"] == "quota_exceeded"
            assert "3 managed agents" in error["message"]
            assert "--max-agents" in error["message"]
            assert client.get("/v1/managed-agents/a3").status_code == 404
            client.delete("/v1/managed-agents/a0").raise_for_status()
            client.post("/v1/managed-agents", json={"id": "a3"}).raise_for_status()
        assert len(served.state.managed.agents._agents) == 3  # type: ignore[attr-defined]


def test_queueing_beyond_max_queued_messages_is_a_409_until_the_agent_runs() -> None:
    engine = ScriptedInference(["Done."])
    with serving(engine, limits=ServeLimits(max_queued_messages=2)) as served:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            client.post("/v1/managed-agents", json={"id": "q"}).raise_for_status()
            for text in ("one", "two"):
                queued = client.post("/v1/managed-agents/q/messages", json={"content": text})
                assert queued.status_code == 202
            refused = client.post("/v1/managed-agents/q/messages", json={"content": "three"})
            assert refused.status_code == 409
            assert refused.json()["error"]["code"] == "quota_exceeded"
            assert "2 messages waiting" in refused.json()["error"]["message"]
            streamed = client.post(
                "/v1/managed-agents/q/messages", json={"content": "three", "stream": True}
            )
            assert streamed.status_code == 409  # a streamed message is stored first too
            client.post("/v1/managed-agents/q/run").raise_for_status()
            again = client.post("/v1/managed-agents/q/messages", json={"content": "three"})
            assert again.status_code == 202
            listed = client.get("/v1/managed-agents/q/messages").json()["data"]
        assert [m["content"] for m in listed] == ["one", "two", "Done.", "three"]


def test_a_message_beyond_the_size_limit_is_a_413_and_not_stored() -> None:
    with (
        serving(ScriptedInference(), limits=ServeLimits(max_message_chars=1000)) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        client.post("/v1/managed-agents", json={"id": "s"}).raise_for_status()
        refused = client.post("/v1/managed-agents/s/messages", json={"content": "x" * 1001})
        assert refused.status_code == 413
        assert client.get("/v1/managed-agents/s/messages").json()["data"] == []


# --- pagination --------------------------------------------------------------------------


def test_the_list_of_agents_is_paginated() -> None:
    with (
        serving(ScriptedInference()) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        created = []
        for i in range(7):
            reply = client.post("/v1/managed-agents", json={"id": f"p{i}", "name": str(i)})
            created.append(reply.json()["id"])
        seen: list[str] = []
        pages = 0
        after = None
        while True:
            params: dict[str, Any] = {"limit": 3}
            if after is not None:
                params["after"] = after
            page = client.get("/v1/managed-agents", params=params).json()
            pages += 1
            assert len(page["data"]) <= 3
            seen.extend(a["id"] for a in page["data"])
            assert page["has_more"] is (page["next"] is not None)
            if not page["has_more"]:
                break
            after = page["next"]
        assert (seen, pages) == (created, 3)
        everything = client.get("/v1/managed-agents").json()
        assert [a["id"] for a in everything["data"]] == created
        assert everything["has_more"] is False
        for bad in ({"limit": 0}, {"limit": 1001}, {"after": "nonsense"}, {"after": "1.a b"}):
            refused = client.get("/v1/managed-agents", params=bad)
            assert refused.status_code == 400, bad


def test_the_default_page_is_bounded() -> None:
    with (
        serving(ScriptedInference(), limits=ServeLimits(max_agents=150)) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        for i in range(101):
            client.post("/v1/managed-agents", json={"id": f"d{i}"}).raise_for_status()
        page = client.get("/v1/managed-agents").json()
        assert len(page["data"]) == 100
        assert page["has_more"] is True
        rest = client.get("/v1/managed-agents", params={"after": page["next"]}).json()
        assert [a["id"] for a in rest["data"]] == ["d100"]


def test_tool_calls_are_capped_on_the_proxy_too() -> None:
    call = ToolCall(id="c1", name="lookup", arguments={})
    engine = ScriptedInference([Completion(content="", tool_calls=(call,))])
    with serving(engine, limits=ServeLimits(max_output_tokens=CAP)) as served:
        reply = httpx.post(
            served.url + "/v1/chat/completions",
            json={
                "model": "jarvis/simple",
                "messages": QUESTION,
                "tools": [TOOL],
                "max_tokens": 10_000,
            },
            timeout=30,
        )
    assert reply.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert [r.max_tokens for r in engine.requests] == [CAP]


def test_the_list_of_messages_says_when_older_ones_were_left_out() -> None:
    with (
        serving(ScriptedInference(), limits=ServeLimits(max_queued_messages=10)) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        client.post("/v1/managed-agents", json={"id": "h"}).raise_for_status()
        for i in range(3):
            client.post("/v1/managed-agents/h/messages", json={"content": f"m{i}"})
        newest = client.get("/v1/managed-agents/h/messages", params={"limit": 2}).json()
        assert [m["content"] for m in newest["data"]] == ["m1", "m2"]
        assert newest["has_more"] is True
        every = client.get("/v1/managed-agents/h/messages").json()
        assert [m["content"] for m in every["data"]] == ["m0", "m1", "m2"]
        assert every["has_more"] is False
        assert client.get("/v1/managed-agents/h/messages", params={"limit": 0}).json() == {
            "object": "list",
            "data": [],
            "has_more": True,
            "next": 3,
        }


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_long_conversation_is_read_back_page_by_page(store: str, tmp_path: Path) -> None:
    """2,500 messages walked back through ``before``/``next``: every one read once, in
    order, even with messages arriving mid-walk; ``limit`` over 1000 is refused."""
    opened = None if store == "memory" else sqlite_sessions(tmp_path / "s.db")
    conversation = session_id_of("long")
    contents = [f"message {i}" for i in range(2500)]
    with (
        serving(ScriptedInference(["unused"]), sessions=opened) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        sessions = served.sessions  # in memory: linked to the served definitions
        client.post("/v1/managed-agents", json={"id": "long"}).raise_for_status()
        asyncio.run(sessions.append(conversation, [Message.user(c) for c in contents]))
        url = "/v1/managed-agents/long/messages"
        pages: list[list[str]] = []
        params: dict[str, int] = {}
        while True:
            body = client.get(url, params=params).json()
            pages.append([m["content"] for m in body["data"]])
            if len(pages) == 1:  # arriving now: after the walk's start, never in it
                asyncio.run(sessions.append(conversation, [Message.user("late")]))
            if not body["has_more"]:
                assert body["next"] is None
                break
            params = {"before": body["next"]}
        assert [len(p) for p in pages] == [1000, 1000, 500]
        assert [c for page in reversed(pages) for c in page] == contents

        small = client.get(url, params={"limit": 2, "before": 2}).json()
        assert small == {**small, "has_more": False, "next": None}
        assert [m["content"] for m in small["data"]] == contents[:2]
        counted = client.get(url, params={"limit": 0, "before": 10}).json()
        assert (counted["data"], counted["has_more"], counted["next"]) == ([], True, 10)
        for bad in ({"before": -1}, {"before": "x"}, {"limit": 1001}, {"before": 1 << 40}):
            assert client.get(url, params=bad).status_code == 400, bad
