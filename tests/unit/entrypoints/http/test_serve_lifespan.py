"""What a server that runs the ASGI lifespan protocol (``--workers``) does at its end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import uvicorn.supervisors

from jarvis.application.managed_agents import ManagedAgentService
from jarvis.application.trace_writer import TraceWriter
from jarvis.entrypoints.cli.serve_launch import ServeSpec, build_app
from jarvis.entrypoints.composition import bootstrap
from jarvis.entrypoints.http.app import create_app
from jarvis.entrypoints.http.server import run_factory
from jarvis.entrypoints.http.state import ServerState
from jarvis.entrypoints.settings import load_config
from jarvis.testing import InMemorySessionStore, ScriptedInference
from jarvis.testing.managed_agents import InMemoryManagedAgentStore


async def _lifespan(app: Any, between: list[str]) -> list[str]:
    """Start ``app``'s lifespan, note ``between``, end it: the messages the app sent."""
    inbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    sent: list[str] = []

    async def send(message: dict[str, str]) -> None:
        sent.append(message["type"])
        if message["type"] == "lifespan.startup.complete":
            between.append("started")
            await inbox.put({"type": "lifespan.shutdown"})

    await inbox.put({"type": "lifespan.startup"})
    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, send)
    return sent


def _state() -> ServerState:
    runtime = bootstrap(load_config(), inference=ScriptedInference(["ok"]))
    agents = InMemoryManagedAgentStore()
    managed = ManagedAgentService(
        agents=agents, sessions=InMemorySessionStore(owners=agents.holds), ask=runtime.service
    )
    return ServerState(service=runtime.service, managed=managed)


def test_at_shutdown_is_called_once_the_lifespan_ends_and_not_before() -> None:
    events: list[str] = []
    app = create_app(_state(), at_shutdown=lambda: events.append("shut down"))
    sent = asyncio.run(_lifespan(app, events))
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert events == ["started", "shut down"]


def test_a_worker_s_application_writes_the_pending_traces_when_its_lifespan_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushed: list[str] = []
    monkeypatch.setattr(TraceWriter, "flush", lambda self, timeout=10.0: flushed.append("flush"))
    config = tmp_path / "config.toml"
    config.write_text(
        f'[traces]\nenabled = true\ndb_path = "{tmp_path / "traces.db"}"\n', encoding="utf-8"
    )
    app = build_app(
        ServeSpec(config=str(config), engine="openai", base_url="http://127.0.0.1:9/v1")
    )
    events: list[str] = []
    asyncio.run(_lifespan(app, events))
    assert events == ["started"]
    assert flushed == ["flush"]


def test_the_workers_run_the_lifespan_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    class Supervisor:
        def __init__(self, config: uvicorn.Config, sockets: list[object]) -> None:
            seen.append(config.lifespan)

        def run(self) -> None:
            return None

    monkeypatch.setattr(uvicorn.supervisors, "Multiprocess", Supervisor)
    run_factory("module:factory", host="127.0.0.1", port=0, workers=2, log_level="warning")
    assert seen == ["on"]
