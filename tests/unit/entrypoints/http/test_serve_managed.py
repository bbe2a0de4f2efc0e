"""The managed-agent API over the real server, read with an SSE client (httpx-sse)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse
from pydantic import BaseModel

from jarvis.domain.errors import EngineProtocolError
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.domain.managed_agents import session_id_of
from jarvis.entrypoints.http import events as ev
from jarvis.testing import ScriptedInference
from tests.support.serve import serving

CALL = ToolCall(id="c1", name="calculator", arguments={"expression": "12*7"})
TOOL_TURN = Completion(content="Computing.", tool_calls=(CALL,), finish_reason="tool_calls")


def _events(client: httpx.Client, agent_id: str, content: str) -> list[ServerSentEvent]:
    with connect_sse(
        client,
        "POST",
        f"/v1/managed-agents/{agent_id}/messages",
        json={"content": content, "stream": True},
    ) as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return list(source.iter_sse())


def _check(events: list[ServerSentEvent]) -> None:
    """Every frame matches its documented model; the stream ends with [DONE]."""
    assert events[-1].data == "[DONE]"
    for event in events[:-1]:
        models: dict[str, type[BaseModel]] = {
            "message": ev.ChatChunk,
            "tool_calls": ev.ToolCallsEvent,
            "tool_result": ev.ToolResultEvent,
            "error": ev.ErrorEvent,
        }
        model = models[event.event]
        model.model_validate_json(event.data)


def test_definitions_are_created_read_changed_listed_and_deleted() -> None:
    with serving(ScriptedInference()) as served, httpx.Client(base_url=served.url) as client:
        created = client.post(
            "/v1/managed-agents",
            json={
                "id": "res",
                "name": "Researcher",
                "agent": "orchestrator",
                "model": "m1",
                "system_prompt": "Research.",
                "tools": ["calculator", "think"],
                "temperature": 0.2,
                "max_tokens": 300,
                "max_turns": 3,
                "agent_options": {"tool_choice": "auto"},
            },
        )
        assert created.status_code == 201, created.text
        assert created.json()["tools"] == ["calculator", "think"]
        generated = client.post("/v1/managed-agents", json={}).json()["id"]
        assert generated.startswith("ma_")
        changed = client.patch("/v1/managed-agents/res", json={"max_turns": 5, "model": None})
        assert changed.status_code == 200
        assert (changed.json()["max_turns"], changed.json()["model"]) == (5, None)
        assert changed.json()["system_prompt"] == "Research."  # untouched
        listed = [a["id"] for a in client.get("/v1/managed-agents").json()["data"]]
        assert listed == ["res", generated]
        assert client.delete("/v1/managed-agents/res").json()["deleted"] is True
        assert client.get("/v1/managed-agents/res").status_code == 404
        assert client.delete("/v1/managed-agents/res").status_code == 404


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"agent": "no_such_agent"}, 400),
        ({"agent": "simple", "tools": ["calculator"]}, 400),  # simple takes no tools
        ({"agent": "orchestrator", "tools": ["no_such_tool"]}, 400),
        ({"agent": "orchestrator", "agent_options": {"bogus": 1}}, 400),
        ({"agent": "simple", "persona": "nobody"}, 400),
        ({"temperature": 7}, 400),
        ({"max_turns": 0}, 400),
        ({"id": "../etc"}, 400),
        ({"unknown_field": True}, 400),
    ],
)
def test_bad_definitions_are_4xx_with_a_json_error(body: dict[str, object], status: int) -> None:
    with serving(ScriptedInference()) as served:
        reply = httpx.post(served.url + "/v1/managed-agents", json=body)
    assert reply.status_code == status, reply.text
    assert reply.json()["error"]["message"]


def test_a_streamed_run_shows_the_tool_loop_and_is_stored_replayably() -> None:
    engine = ScriptedInference([TOOL_TURN, "It is 84.", "You asked 12*7."])
    with serving(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post(
            "/v1/managed-agents",
            json={"id": "calc", "agent": "orchestrator", "tools": ["calculator"]},
        ).raise_for_status()
        events = _events(client, "calc", "What is 12*7?")
        _check(events)
        named = [(e.event, json.loads(e.data)) for e in events if e.event != "message"]
        assert named == [
            (
                "tool_calls",
                {
                    "calls": [
                        {
                            "id": "c1",
                            "tool_name": "calculator",
                            "arguments": '{"expression":"12*7"}',
                        }
                    ]
                },
            ),
            (
                "tool_result",
                {
                    "tool_name": "calculator",
                    "output": "84",
                    "success": True,
                    "call_id": "c1",
                    "latency_ms": named[1][1]["latency_ms"],
                },
            ),
        ]
        chunks = [json.loads(e.data) for e in events[:-1] if e.event == "message"]
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        assert text == "Computing.It is 84."
        final = chunks[-1]
        assert final["choices"][0]["finish_reason"] == "stop"
        assert final["usage"]["total_tokens"] > 0
        assert final["jarvis"] == {"stop_reason": "final_answer", "turns": 2, "tool_calls": 1}
        stored = client.get("/v1/managed-agents/calc/messages").json()["data"]
        assert [(m["role"], m["content"]) for m in stored] == [
            ("user", "What is 12*7?"),
            ("assistant", "Computing."),
            ("tool", "84"),
            ("assistant", "It is 84."),
        ]
        assert stored[1]["tool_calls"] == [
            {"id": "c1", "name": "calculator", "arguments": '{"expression":"12*7"}'}
        ]
        _check(_events(client, "calc", "What did I ask?"))
    replayed = engine.requests[2].messages
    assert [m.role for m in replayed] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.USER,
    ]
    assert replayed[2].tool_calls == (CALL,)
    assert replayed[3].tool_call_id == "c1"


def test_an_error_mid_run_sends_an_error_event_then_done() -> None:
    engine = ScriptedInference([TOOL_TURN, EngineProtocolError("garbled reply", engine="x")])
    with serving(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post(
            "/v1/managed-agents", json={"id": "e", "agent": "orchestrator", "tools": ["calculator"]}
        ).raise_for_status()
        events = _events(client, "e", "12*7?")
        stored = client.get("/v1/managed-agents/e/messages").json()["data"]
    _check(events)
    names = [e.event for e in events]
    assert "error" in names
    error = json.loads(events[names.index("error")].data)["error"]
    assert "garbled reply" in error["message"]
    final = json.loads(events[-2].data)
    assert final["jarvis"]["stop_reason"] == "error"
    assert final["choices"][0]["finish_reason"] == "stop"
    # what completed is kept: the question and the whole tool exchange
    assert [m["role"] for m in stored] == ["user", "assistant", "tool"]


def test_max_turns_ends_the_stream_with_its_stop_reason_and_done() -> None:
    engine = ScriptedInference([TOOL_TURN, TOOL_TURN, "Best guess: 84."])
    with serving(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post(
            "/v1/managed-agents",
            json={
                "id": "t",
                "agent": "orchestrator",
                "tools": ["calculator"],
                "max_turns": 1,
            },
        ).raise_for_status()
        events = _events(client, "t", "12*7?")
    _check(events)
    final = json.loads(events[-2].data)
    assert final["jarvis"]["stop_reason"] == "max_turns"
    assert final["choices"][0]["finish_reason"] == "length"


def test_a_queued_message_waits_for_run() -> None:
    engine = ScriptedInference(["Queued answer."])
    with serving(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post("/v1/managed-agents", json={"id": "q"}).raise_for_status()
        queued = client.post("/v1/managed-agents/q/messages", json={"content": "Later, please."})
        assert queued.status_code == 202
        assert queued.json()["status"] == "queued"
        assert engine.requests == []  # nothing ran
        assert [m["role"] for m in client.get("/v1/managed-agents/q/messages").json()["data"]] == [
            "user"
        ]
        ran = client.post("/v1/managed-agents/q/run")
        assert ran.status_code == 200, ran.text
        assert ran.json()["content"] == "Queued answer."
        again = client.post("/v1/managed-agents/q/run")
        assert again.status_code == 409
        with connect_sse(client, "POST", "/v1/managed-agents/q/run", json={"stream": True}) as s:
            assert s.response.status_code == 409


def test_no_engine_is_a_503_and_the_message_is_kept() -> None:
    with (
        serving(ScriptedInference(healthy=False)) as served,
        httpx.Client(base_url=served.url) as client,
    ):
        client.post("/v1/managed-agents", json={"id": "down"}).raise_for_status()
        reply = client.post(
            "/v1/managed-agents/down/messages", json={"content": "Anyone?", "stream": True}
        )
        stored = client.get("/v1/managed-agents/down/messages").json()["data"]
    assert reply.status_code == 503
    assert reply.json()["error"]["type"] == "engine_unavailable"
    assert [m["content"] for m in stored] == ["Anyone?"]


def test_unknown_agents_and_bad_bodies_are_4xx() -> None:
    with serving(ScriptedInference()) as served, httpx.Client(base_url=served.url) as client:
        assert (
            client.post(
                "/v1/managed-agents/nobody/messages", json={"content": "hi", "stream": True}
            ).status_code
            == 404
        )
        client.post("/v1/managed-agents", json={"id": "a"}).raise_for_status()
        assert client.post("/v1/managed-agents/a/messages", json={"content": ""}).status_code == 400
        assert client.post("/v1/managed-agents/a/messages", content=b"[").status_code == 400
        assert client.get("/v1/managed-agents/a/messages?limit=-1").status_code == 400


def test_an_invalid_id_is_cut_in_its_error_and_a_newline_is_no_id() -> None:
    """An id of 8,000 characters in the URL (under the URL's bound; 30,000 were echoed whole
    before it): the 400 names its start, cut at 80 characters. An id ending in a newline is
    invalid too, not a lookup."""
    long_id = "y" * 8000
    with serving(ScriptedInference()) as served, httpx.Client(base_url=served.url) as client:
        replies = [
            client.get(f"/v1/managed-agents/{long_id}"),
            client.post(f"/v1/managed-agents/{long_id}/messages", json={"content": "hi"}),
            client.delete(f"/v1/managed-agents/{long_id}"),
        ]
        newline = client.get("/v1/managed-agents/a%0A")
    for reply in replies:
        assert reply.status_code == 400, reply.text
        message = reply.json()["error"]["message"]
        assert "y" * 77 + "..." in message
        assert len(message) < 200, len(message)
    assert newline.status_code == 400, newline.text
    assert "Invalid managed agent id" in newline.json()["error"]["message"]


@pytest.mark.parametrize(
    "options",
    [
        {"x" * 30000: 1},  # an unknown option: named twice (the problem, the hint)
        {"tool_choice": "x" * 30000},  # an unknown choice
        {"tool_choice": ["x" * 30000]},  # a value of the wrong kind
        {f"o{i}": 1 for i in range(3000)},  # many unknown options
    ],
)
def test_agent_options_are_cut_in_their_error(options: dict[str, object]) -> None:
    """Each name and value a client sent is cut at 80 characters, the lists at 80 too: a
    30,000-character option name came back twice, 60 KB of error."""
    with serving(ScriptedInference()) as served:
        reply = httpx.post(
            served.url + "/v1/managed-agents",
            json={"agent": "orchestrator", "agent_options": options},
        )
    assert reply.status_code == 400, reply.text
    message = reply.json()["error"]["message"]
    assert "cannot be built" in message or "Unknown orchestrator" in message
    assert len(message) < 1000, len(message)


def test_a_tool_that_waits_does_not_block_the_server() -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow_lookup(key: str) -> str:
        """Look a key up in a slow backend.

        Args:
            key: what to look up.
        """
        entered.set()
        release.wait(60)
        return f"value of {key}"

    call = ToolCall(id="s1", name="slow_lookup", arguments={"key": "k"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), "Done."]
    )
    from jarvis.application.tools.function_tool import as_tool

    with (
        serving(engine, tools=[as_tool(slow_lookup)]) as served,
        httpx.Client(base_url=served.url) as client,
    ):
        client.post(
            "/v1/managed-agents",
            json={"id": "s", "agent": "orchestrator", "tools": ["slow_lookup"]},
        ).raise_for_status()
        result: list[list[ServerSentEvent]] = []
        runner = threading.Thread(target=lambda: result.append(_events(client, "s", "Look k up")))
        runner.start()
        assert entered.wait(30)
        # the tool is blocked in its thread; the server still answers other requests
        assert httpx.get(served.url + "/health").json()["active_runs"] == 1
        release.set()
        runner.join(30)
    _check(result[0])
    outputs = [json.loads(e.data)["output"] for e in result[0] if e.event == "tool_result"]
    assert outputs == ["value of k"]


def test_the_conversation_lives_in_the_session_store() -> None:
    with serving(ScriptedInference(["Hi."])) as served, httpx.Client(base_url=served.url) as client:
        client.post("/v1/managed-agents", json={"id": "st"}).raise_for_status()
        _check(_events(client, "st", "Hello"))
        import asyncio

        stored = asyncio.run(served.sessions.load(session_id_of("st")))
        client.delete("/v1/managed-agents/st").raise_for_status()
        gone = asyncio.run(served.sessions.load(session_id_of("st")))
    assert [m.content for m in stored] == ["Hello", "Hi."]
    assert gone == ()


def test_concurrent_messages_to_one_agent_are_all_answered() -> None:
    """Another client's answer stored meanwhile never leaves a message unanswerable."""
    import asyncio

    engine = ScriptedInference(["An answer."], latency=0.01)
    with serving(engine) as served:
        httpx.post(served.url + "/v1/managed-agents", json={"id": "busy"}).raise_for_status()

        async def all_at_once() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
                return await asyncio.gather(
                    *(
                        client.post(
                            "/v1/managed-agents/busy/messages",
                            json={"content": f"question {n}", "stream": True},
                        )
                        for n in range(20)
                    )
                )

        replies = asyncio.run(all_at_once())
        stored = httpx.get(served.url + "/v1/managed-agents/busy/messages").json()["data"]
    assert [r.status_code for r in replies] == [200] * 20
    assert all(r.text.rstrip().endswith("data: [DONE]") for r in replies)
    assert sorted(m["content"] for m in stored if m["role"] == "user") == sorted(
        f"question {n}" for n in range(20)
    )
    assert sum(m["role"] == "assistant" for m in stored) == 20
    questions = {r.messages[-1].content for r in engine.requests}
    assert questions == {f"question {n}" for n in range(20)}  # each run answered its own


def test_an_immediate_message_runs_without_a_run_call() -> None:
    """OpenJarvis's ``"mode": "immediate"``: 202 at once, the answer stored after it."""
    engine = ScriptedInference(["Right away."])
    with serving(engine) as served, httpx.Client(base_url=served.url) as client:
        client.post("/v1/managed-agents", json={"id": "now"}).raise_for_status()
        reply = client.post(
            "/v1/managed-agents/now/messages", json={"content": "Go.", "mode": "immediate"}
        )
        assert reply.status_code == 202, reply.text
        assert reply.json()["status"] == "running"
        stored: list[dict[str, object]] = []
        for _ in range(500):  # the run goes on after the response; wait for its answer
            stored = client.get("/v1/managed-agents/now/messages").json()["data"]
            if len(stored) == 2:
                break
            threading.Event().wait(0.02)
        queued = client.post(
            "/v1/managed-agents/now/messages", json={"content": "Later.", "mode": "queued"}
        )
        bad = client.post("/v1/managed-agents/now/messages", json={"content": "x", "mode": "now"})
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Go."),
        ("assistant", "Right away."),
    ]
    assert queued.status_code == 202
    assert queued.json()["status"] == "queued"
    assert bad.status_code == 400
