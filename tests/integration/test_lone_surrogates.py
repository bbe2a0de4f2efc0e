"""A lone surrogate in text from code jarvis does not own (a ``[plugins] modules`` agent or
tool, an application's own engine) is delivered as U+FFFD through ``jarvis ask``,
``jarvis chat``, ``jarvis serve`` as a process, the SDK, the traces and the session stores
(SQLite and PostgreSQL): no traceback, no failed write, nothing else of the answer lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.stub_server import StubServer
from jarvis import Jarvis
from jarvis.adapters.sql_store import SqlBackend
from jarvis.testing import ScriptedInference
from tests.support.postgres_server import running_postgres
from tests.support.serve import serving
from tests.support.serve_process import jarvis_serve
from tests.support.sql_stores import postgres_backend, sqlite_backend
from tests.support.surrogate_plugin import (
    AGENT_SHOWN,
    TOOL_SHOWN,
    RepeatingEngine,
    body_of,
    streamed,
    write_surrogate_plugin,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def plugin(tmp_path: Path, jarvis_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plug-in module's folder (on ``PYTHONPATH`` for the processes and this one)."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    name = write_surrogate_plugin(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])
    )
    (jarvis_home / "plugins.toml").write_text(f'[plugins]\nmodules = ["{name}"]\n')
    yield folder
    sys.modules.pop(name, None)


def configure(home: Path, stub: StubServer, extra: str = "") -> None:
    plugins = (home / "plugins.toml").read_text()
    (home / "config.toml").write_text(
        f'[engine]\nname = "openai"\nmodel = "stub-model"\n'
        f'[engine.openai]\nbase_url = "{stub.url}"\n{plugins}{extra}',
        encoding="utf-8",
    )


def jarvis(*args: str, lines: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        input=lines,
        stdin=subprocess.DEVNULL if lines is None else None,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    return done


def test_ask_chat_and_the_traces(plugin: Path, jarvis_home: Path, stub_server: StubServer) -> None:
    configure(jarvis_home, stub_server, "[traces]\nenabled = true\ncontent = true\n")
    assert jarvis("ask", "-a", "halves", "go").stdout.strip() == AGENT_SHOWN
    assert json.loads(jarvis("ask", "-a", "halves", "--json", "go").stdout)["content"] == (
        AGENT_SHOWN
    )
    used = json.loads(
        jarvis("ask", "-a", "orchestrator", "--tools", "lone_half", "--json", "go").stdout
    )
    assert [r["content"] for r in used["tool_results"]] == [TOOL_SHOWN]
    chatted = jarvis("chat", "-a", "halves", "--session", "s", lines="one\n")
    assert chatted.stdout.splitlines() == [AGENT_SHOWN]
    kept = json.loads(jarvis("sessions", "show", "s", "--json").stdout)
    assert [m["content"] for m in kept["messages"]] == ["one", AGENT_SHOWN]
    (traced,) = json.loads(jarvis("traces", "list", "--json").stdout)  # the tool run's
    tool_trace = json.loads(jarvis("traces", "show", "--json", str(traced["id"])).stdout)
    assert TOOL_SHOWN in json.dumps(tool_trace, ensure_ascii=False)


def test_jarvis_serve_as_a_process(
    plugin: Path, jarvis_home: Path, stub_server: StubServer
) -> None:
    configure(jarvis_home, stub_server)
    question = {"model": "jarvis/halves", "messages": [{"role": "user", "content": "go"}]}
    with jarvis_serve() as served, httpx.Client(base_url=served.url, timeout=60) as client:
        whole = client.post("/v1/chat/completions", json=question)
        pieces = client.post("/v1/chat/completions", json={**question, "stream": True})
        created = client.post("/v1/managed-agents", json={"id": "h", "agent": "halves"})
        assert created.status_code == 201, created.text
        ran = client.post("/v1/managed-agents/h/messages", json={"content": "one", "stream": True})
        kept = client.get("/v1/managed-agents/h/messages")
        process = served.process
    assert process.stderr is not None
    log = served.startup + process.stderr.read().decode("utf-8", "replace")
    assert "Traceback" not in log, log
    assert "unexpected" not in log, log
    assert body_of(whole)["choices"][0]["message"]["content"] == AGENT_SHOWN
    assert streamed(pieces)[0] == AGENT_SHOWN
    assert streamed(ran)[0] == AGENT_SHOWN
    stored = body_of(kept)["data"]
    assert [m["content"] for m in stored] == ["one", AGENT_SHOWN]


def test_the_sdk(plugin: Path, jarvis_home: Path) -> None:
    config = jarvis_home / "plugins.toml"
    engine = ScriptedInference(["engine \ud800 text"], models=("m",))
    with Jarvis(inference=engine, model="m", config_path=config) as j:
        assert j.ask("go") == "engine \ufffd text"
        assert "".join(j.ask_stream("go")) == "engine \ufffd text"
        assert j.ask("go", agent="halves") == AGENT_SHOWN
        with j.conversation("c", agent="halves") as chat:
            assert chat.ask("one") == AGENT_SHOWN
    with Jarvis(inference=RepeatingEngine(), model="m", config_path=config) as j:
        answer = j.ask_full("go", agent="orchestrator", tools=["lone_half"])
    assert answer.content == f"It said: {TOOL_SHOWN}"
    assert [r.content for r in answer.tool_results] == [TOOL_SHOWN]
    kept = jarvis("sessions", "show", "c", "--json")
    assert [m["content"] for m in json.loads(kept.stdout)["messages"]] == ["one", AGENT_SHOWN]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlBackend]:
    if request.param == "sqlite":
        yield sqlite_backend(tmp_path / "store.db")
        return
    with running_postgres() as server:
        yield postgres_backend(server.create_database())


def test_the_session_stores(plugin: Path, jarvis_home: Path, backend: SqlBackend) -> None:
    (jarvis_home / "config.toml").write_text((jarvis_home / "plugins.toml").read_text())
    sessions = backend.sessions
    try:
        with (
            serving(
                RepeatingEngine(), model="m", sessions=sessions, agents=backend.managed_agents
            ) as served,
            httpx.Client(base_url=served.url, timeout=30) as client,
        ):
            for agent, extra in (("halves", {}), ("orchestrator", {"tools": ["lone_half"]})):
                created = client.post(
                    "/v1/managed-agents", json={"id": agent, "agent": agent, **extra}
                )
                assert created.status_code == 201, created.text
                client.post(f"/v1/managed-agents/{agent}/messages", json={"content": "one"})
                ran = client.post(f"/v1/managed-agents/{agent}/run")
                assert ran.status_code == 200, ran.text
            halves = client.get("/v1/managed-agents/halves/messages").json()["data"]
            tools = client.get("/v1/managed-agents/orchestrator/messages").json()["data"]
    finally:
        sessions.close()
    assert [m["content"] for m in halves] == ["one", AGENT_SHOWN]
    assert [m["content"] for m in tools if m["role"] == "tool"] == [TOOL_SHOWN]
    assert tools[-1]["content"] == f"It said: {TOOL_SHOWN}"
