"""Two ``jarvis serve`` processes' worth of servers on one real PostgreSQL share managed
agents and their conversations."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from jarvis.domain.llm.messages import Role
from jarvis.testing import ScriptedInference
from tests.support.postgres_server import PostgresServer, running_postgres
from tests.support.serve import serving
from tests.support.sql_stores import postgres_backend

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with running_postgres() as running:
        yield running


def test_a_conversation_begun_on_one_server_continues_on_the_other(
    server: PostgresServer,
) -> None:
    url = server.create_database()
    backend_a, backend_b = postgres_backend(url), postgres_backend(url)
    store_a, store_b = backend_a.sessions, backend_b.sessions
    engine_a, engine_b = ScriptedInference(["Paris."]), ScriptedInference(["About 2.1 million."])
    try:
        with (
            serving(engine_a, sessions=store_a, agents=backend_a.managed_agents) as a,
            serving(engine_b, sessions=store_b, agents=backend_b.managed_agents) as b,
        ):
            created = httpx.post(
                a.url + "/v1/managed-agents", json={"id": "geo", "system_prompt": "Geography."}
            )
            assert created.status_code == 201
            seen_by_b = httpx.get(b.url + "/v1/managed-agents/geo")
            assert seen_by_b.json()["system_prompt"] == "Geography."
            first = httpx.post(
                a.url + "/v1/managed-agents/geo/messages",
                json={"content": "Capital of France?", "stream": True},
            )
            second = httpx.post(
                b.url + "/v1/managed-agents/geo/messages",
                json={"content": "How many live there?", "stream": True},
            )
            listed = httpx.get(a.url + "/v1/managed-agents/geo/messages").json()["data"]
    finally:
        store_a.close()
        store_b.close()
    assert first.text.rstrip().endswith("[DONE]")
    assert second.text.rstrip().endswith("[DONE]")
    [request] = engine_b.requests
    assert [(m.role, m.content) for m in request.messages[1:]] == [
        (Role.USER, "Capital of France?"),
        (Role.ASSISTANT, "Paris."),
        (Role.USER, "How many live there?"),
    ]
    assert request.messages[0].content.startswith("Geography.")
    assert [m["content"] for m in listed] == [
        "Capital of France?",
        "Paris.",
        "How many live there?",
        "About 2.1 million.",
    ]
