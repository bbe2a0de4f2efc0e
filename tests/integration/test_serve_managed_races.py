"""A managed agent deleted over HTTP while another request works on it, in ``jarvis serve``'s
application on its own thread: a PATCH that read the definition before the deletion never
brings it back, and a run still answering is cancelled at once, its stream or its request
answered as a cancelled run.

Each race is held open by the test, never left to timing: the PATCH waits between its read
and its write until the test has deleted the agent (the definition's check asks the server
for its ask use case, which the test holds); a run waits at the gated engine, which tells
the test when its request is held and when the server let go of it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest

from jarvis.application.ask import AskService
from jarvis.testing import ScriptedInference
from tests.integration.test_serve_approvals import frames
from tests.integration.test_serve_managed_lifecycle import text_of
from tests.support.gated_engine import MODEL, GatedEngine
from tests.support.serve import Served, serving

pytestmark = pytest.mark.integration

WAIT = 60.0
"""A backstop only: every wait below ends as soon as the server reaches the state awaited."""


@contextmanager
def held_checks(served: Served) -> Iterator[tuple[threading.Event, threading.Event]]:
    """``(waiting, go_on)``: the next check of a definition (a creation's or an update's)
    sets ``waiting`` and waits for ``go_on``; later checks run at once."""
    managed = served.state.managed
    ask = managed.ask
    waiting, go_on = threading.Event(), threading.Event()

    async def held() -> AskService:
        managed.ask = ask
        waiting.set()
        await asyncio.to_thread(go_on.wait, WAIT)
        return await ask()

    managed.ask = held
    try:
        yield waiting, go_on
    finally:
        go_on.set()
        managed.ask = ask


@pytest.mark.parametrize("created_again", [False, True])
def test_a_patch_that_read_a_deleted_agent_never_brings_it_back(created_again: bool) -> None:
    with (
        serving(ScriptedInference()) as served,
        httpx.Client(base_url=served.url, timeout=WAIT) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        client.post(
            "/v1/managed-agents", json={"id": "victim", "system_prompt": "Old."}
        ).raise_for_status()
        with held_checks(served) as (waiting, go_on):
            patching = pool.submit(
                client.patch, "/v1/managed-agents/victim", json={"system_prompt": "Patched."}
            )
            assert waiting.wait(WAIT), "the PATCH never read the definition"
            assert client.delete("/v1/managed-agents/victim").status_code == 200
            if created_again:
                client.post(
                    "/v1/managed-agents", json={"id": "victim", "system_prompt": "New."}
                ).raise_for_status()
            go_on.set()
            patched = patching.result(WAIT)
        after = client.get("/v1/managed-agents/victim")
        unknown = client.patch("/v1/managed-agents/nobody", json={"name": "x"})
    assert patched.status_code == unknown.status_code == 404
    assert patched.json()["error"]["code"] == unknown.json()["error"]["code"] == "agent_not_found"
    assert patched.json()["error"]["message"] == "No managed agent with id 'victim'."
    if created_again:
        assert after.json()["system_prompt"] == "New."
    else:
        assert after.status_code == 404


def _let_go(engine: GatedEngine) -> bool:
    """Whether the server closed the engine request it held (bounded wait)."""
    return engine.wait_for(lambda e: e.abandoned == 1 and e.held == 0, WAIT)


def test_deleting_an_agent_ends_its_stream_as_a_cancelled_run() -> None:
    with (
        GatedEngine() as engine,
        serving(engine="openai", base_url=engine.url, model=MODEL) as served,
        httpx.Client(base_url=served.url, timeout=WAIT) as client,
    ):
        client.post("/v1/managed-agents", json={"id": "victim"}).raise_for_status()
        with client.stream(
            "POST",
            "/v1/managed-agents/victim/messages",
            json={"content": "Capital of France?", "stream": True},
        ) as reply:
            events = frames(reply.iter_lines())
            assert next(text for text in map(text_of, events) if text) == "The"  # under way
            assert client.delete("/v1/managed-agents/victim").status_code == 200
            assert _let_go(engine), "the run went on after its agent was deleted"
            rest = list(events)  # the stream ends without the engine's answer
        assert served.state.active_runs == 0
    [error] = [json.loads(data)["error"] for name, data in rest if name == "error"]
    assert error["code"] == "cancelled"
    assert "'victim' was deleted while it ran: the run was cancelled" in error["message"]
    assert json.loads(rest[-2][1])["jarvis"]["stop_reason"] == "cancelled"
    assert rest[-1] == ("message", "[DONE]")
    assert "".join(map(text_of, rest)) == ""  # nothing of the held answer came


def test_deleting_an_agent_answers_its_waiting_run_request_as_cancelled() -> None:
    with (
        GatedEngine() as engine,
        serving(engine="openai", base_url=engine.url, model=MODEL) as served,
        httpx.Client(base_url=served.url, timeout=WAIT) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        client.post("/v1/managed-agents", json={"id": "victim"}).raise_for_status()
        client.post(
            "/v1/managed-agents/victim/messages", json={"content": "Capital of France?"}
        ).raise_for_status()
        running = pool.submit(client.post, "/v1/managed-agents/victim/run")
        assert engine.wait_for(lambda e: e.held == 1, WAIT), "the run never reached the engine"
        assert client.delete("/v1/managed-agents/victim").status_code == 200
        ran = running.result(WAIT)
        assert _let_go(engine)
        assert served.state.active_runs == 0
    assert ran.status_code == 409
    assert ran.json()["error"]["code"] == "cancelled"
    assert "'victim' was deleted while it ran" in ran.json()["error"]["message"]
