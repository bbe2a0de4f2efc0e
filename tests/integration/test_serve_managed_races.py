"""A managed agent deleted over HTTP while another request works on it, in ``jarvis serve``'s
application on its own thread: a PATCH that read the definition before the deletion never
brings it back.

Each race is held open by the test, never left to timing: the PATCH waits between its read
and its write until the test has deleted the agent (the definition's check asks the server
for its ask use case, which the test holds).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest

from jarvis.application.ask import AskService
from jarvis.testing import ScriptedInference
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
