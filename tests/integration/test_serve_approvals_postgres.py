"""Two ``jarvis serve`` processes on one PostgreSQL store: a call waiting in one server's
run is answered through the other, and runs exactly once."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.test_serve_approvals import frames
from tests.support.postgres_server import PostgresServer, running_postgres
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call
from tests.support.serve_process import jarvis_serve

pytestmark = pytest.mark.integration

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with running_postgres() as running:
        yield running


def test_a_second_server_on_the_same_store_answers_a_waiting_call(
    server: PostgresServer,
) -> None:
    home = Path(os.environ["OPENJARVIS_HOME"])
    (home / "config.toml").write_text(
        f'[sessions]\nbackend = "postgres"\nurl = "{server.create_database()}"\n',
        encoding="utf-8",
    )
    remember = tool_call("c1", "memory_manage", {"action": "add", "entry": "likes tea"})
    with ScriptedEngine([Reply(tool_calls=[remember]), Reply("Noted.")]) as engine:
        args = ("--engine", "openai", "--base-url", engine.url, "--model", MODEL)
        with (
            jarvis_serve(*args) as first,
            jarvis_serve(*args) as second,
            httpx.Client(timeout=TIMEOUT) as client,
        ):
            client.post(
                first.url + "/v1/managed-agents",
                json={"id": "mem", "agent": "orchestrator", "tools": ["memory_manage"]},
            ).raise_for_status()
            with client.stream(
                "POST",
                first.url + "/v1/managed-agents/mem/messages",
                json={"content": "Remember that I like tea", "stream": True},
            ) as reply:
                events = frames(reply.iter_lines())
                announced = next(json.loads(d) for name, d in events if name == "approval_required")
                answered = client.post(
                    second.url + f"/v1/managed-agents/mem/approvals/{announced['id']}",
                    json={"allow": True, "reason": "fine"},
                )
                rest = list(events)
            again = client.post(
                first.url + "/v1/managed-agents/mem/approvals/c1", json={"allow": True}
            )
    assert answered.status_code == 200
    decision = next(json.loads(d) for name, d in rest if name == "approval")
    assert (decision["decision"], decision["reason"]) == ("allow", "fine")
    assert decision["rule"].endswith("HTTP: allowed")
    assert rest[-1] == ("message", "[DONE]")
    assert again.status_code == 409
    assert (home / "MEMORY.md").read_text(encoding="utf-8").count("likes tea") == 1
