"""Non-streamed requests whose clients go away: every run is counted while it runs, and a
client that leaves cancels its run and closes its engine request at once.

The gated engine holds every non-streamed request until the test releases it and watches
each one's connection, so the drop always lands while the engine is still answering, and
the test sees the engine's side of it (``abandoned``): no timing involved.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from jarvis.entrypoints.http.state import ServeLimits
from tests.support.gated_engine import MODEL, GatedEngine
from tests.support.serve import Served, serving

pytestmark = pytest.mark.integration

CLIENTS = 12
WAIT = 60.0

QUESTION: Any = [{"role": "user", "content": "Capital of France?"}]
TOOL: Any = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state the server reaches by itself (bounded, never a bare sleep)."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def _send(url: str, path: str, body: object) -> socket.socket:
    """A raw HTTP request, left waiting for its answer (closing the socket drops it)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = socket.create_connection((host, int(port)))
    payload = json.dumps(body).encode()
    connection.sendall(
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return connection


def _health(served: Served) -> int:
    reply = httpx.get(served.url + "/health", timeout=10)
    reply.raise_for_status()
    return int(reply.json()["active_runs"])


def _requests(served: Served, kind: str) -> list[tuple[str, object]]:
    if kind == "chat":
        return [("/v1/chat/completions", {"model": "jarvis/simple", "messages": QUESTION})] * (
            CLIENTS
        )
    if kind == "proxy":  # client tools: one inference, the client's loop
        body = {"model": "jarvis/simple", "messages": QUESTION, "tools": [TOOL]}
        return [("/v1/chat/completions", body)] * CLIENTS
    if kind == "messages":
        body = {"model": MODEL, "max_tokens": 64, "messages": QUESTION}
        return [("/v1/messages", body)] * CLIENTS
    assert kind == "managed"
    sent: list[tuple[str, object]] = []
    for i in range(CLIENTS):
        agent = f"m{i}"
        httpx.post(served.url + "/v1/managed-agents", json={"id": agent}).raise_for_status()
        httpx.post(
            served.url + f"/v1/managed-agents/{agent}/messages", json={"content": "Capital?"}
        ).raise_for_status()
        sent.append((f"/v1/managed-agents/{agent}/run", {}))
    return sent


@pytest.mark.parametrize(
    ("kind", "fast_path", "uvicorn_protocol"),
    [
        ("chat", True, False),  # the pure-ASGI fast path
        ("chat", False, False),  # FastAPI's route
        ("proxy", True, False),
        ("messages", True, False),
        ("managed", True, False),
        # served by uvicorn's own protocol: no connection hook, the client watched through
        # ASGI's ``receive()``
        ("chat", True, True),
        ("chat", False, True),
        ("proxy", True, True),
        ("messages", True, True),
        ("managed", True, True),
    ],
)
def test_dropped_non_streamed_requests_are_counted_then_cancelled(
    kind: str, fast_path: bool, uvicorn_protocol: bool
) -> None:
    with (
        GatedEngine() as engine,
        serving(
            engine="openai",
            base_url=engine.url,
            model=MODEL,
            fast_path=fast_path,
            uvicorn_protocol=uvicorn_protocol,
        ) as served,
    ):
        connections = [_send(served.url, path, body) for path, body in _requests(served, kind)]
        try:
            assert engine.wait_for(lambda e: e.held == CLIENTS, WAIT), engine.held
            # every run in flight is counted, streamed or not
            assert _health(served) == CLIENTS
        finally:
            for connection in connections:
                connection.close()
        # the engine sees each of its requests closed by jarvis, long before its gate opens
        assert engine.wait_for(lambda e: e.abandoned == CLIENTS, WAIT), engine.abandoned
        _until(lambda: served.state.active_runs == 0, "every run ended")
        assert _health(served) == 0
        assert engine.held == 0
        assert not engine.gate.is_set()
        assert engine.requests == CLIENTS  # nothing retried


def test_a_client_that_waits_still_gets_its_answer() -> None:
    with (
        GatedEngine() as engine,
        serving(engine="openai", base_url=engine.url, model=MODEL) as served,
    ):
        with httpx.Client(base_url=served.url, timeout=WAIT) as client:
            import threading

            replies: list[httpx.Response] = []
            asking = threading.Thread(
                target=lambda: replies.append(
                    client.post(
                        "/v1/chat/completions",
                        json={"model": "jarvis/simple", "messages": QUESTION},
                    )
                )
            )
            asking.start()
            assert engine.wait_for(lambda e: e.held == 1, WAIT)
            assert _health(served) == 1
            engine.release()
            asking.join(WAIT)
        [reply] = replies
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == engine.answer
        assert served.state.active_runs == 0
        assert engine.abandoned == 0


@pytest.mark.parametrize("uvicorn_protocol", [False, True])
def test_a_run_past_the_request_deadline_is_answered_504_and_its_engine_request_closed(
    uvicorn_protocol: bool,
) -> None:
    """The deadline cancels the request's task while its run waits (the engine never
    answers): the run is cancelled with it, and the deadline, not the client leaving, answers."""
    with (
        GatedEngine() as engine,
        serving(
            engine="openai",
            base_url=engine.url,
            model=MODEL,
            limits=ServeLimits(request_timeout=0.5),
            uvicorn_protocol=uvicorn_protocol,
        ) as served,
    ):
        reply = httpx.post(
            served.url + "/v1/chat/completions",
            json={"model": "jarvis/simple", "messages": QUESTION},
            timeout=WAIT,
        )
        assert reply.status_code == 504, reply.text
        assert reply.json()["error"]["type"] == "timeout_error"
        assert engine.wait_for(lambda e: e.abandoned == 1, WAIT), engine.abandoned
        _until(lambda: served.state.active_runs == 0, "the run ended")
        assert not engine.gate.is_set()
