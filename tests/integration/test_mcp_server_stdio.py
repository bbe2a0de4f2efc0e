"""``jarvis mcp serve`` over stdio, driven by the ``mcp`` SDK's own client: the tools it
lists, ``ask`` on the loopback engines of the tests (progress while it runs, the answer
and its turns, usage and stop reason), the stored sessions, the persona's memory, managed
agents as tools, the run policy, and what a cancelled call or a departed client leaves
(nothing: the engine's request is closed)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.stub_server import ANSWER, MODEL, StubServer
from jarvis.application.managed_agents import ManagedAgentSpec
from jarvis.entrypoints.composition import bootstrap
from jarvis.entrypoints.composition.serving import server_state
from jarvis.entrypoints.settings import load_config
from tests.support.gated_engine import MODEL as GATED_MODEL
from tests.support.gated_engine import GatedEngine
from tests.support.mcp_serve import JARVIS, engine_options, stdio_session, text_of

pytestmark = pytest.mark.integration

CALL_SECONDS = 120.0
"""A backstop only: every call here ends on its own well before this."""


@pytest.fixture
def patient_engine(jarvis_home: Path) -> None:
    """An engine timeout beyond the gate's backstop: only a cancellation closes a held
    request (never jarvis giving up on a silent engine)."""
    (jarvis_home / "config.toml").write_text("[engine]\ntimeout = 3600\n")


class Progress:
    """Collects a call's progress notifications; ``first`` is set by the first one."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.values: list[float] = []
        self.first = asyncio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.values.append(progress)
        self.messages.append(message or "")
        self.first.set()


async def test_the_tools_are_listed_and_ask_answers_with_progress(
    stub_server: StubServer,
) -> None:
    async with stdio_session(*engine_options(stub_server.url, MODEL)) as session:
        listed = await session.list_tools()
        names = [tool.name for tool in listed.tools]
        progress = Progress()
        result = await session.call_tool(
            "ask", {"question": "What is the capital of France?"}, progress_callback=progress
        )
    assert names == ["ask", "sessions_list", "session_show", "memory_manage", "user_profile_manage"]
    assert not result.is_error
    assert text_of(result) == ANSWER
    data = result.structured_content
    assert data["answer"] == ANSWER
    assert data["turns"] == 1
    assert data["stop_reason"] == "final_answer"
    assert data["usage"]["completion_tokens"] > 0
    assert data["model"] == MODEL
    assert "".join(progress.messages) == ANSWER  # the streamed text deltas, in order
    assert progress.values == sorted(progress.values)
    assert len(set(progress.values)) > 1


async def test_a_tool_using_agent_reports_its_tool_calls(stub_server: StubServer) -> None:
    async with stdio_session(*engine_options(stub_server.url, MODEL)) as session:
        progress = Progress()
        result = await session.call_tool(
            "ask",
            {"question": "2+2?", "agent": "orchestrator", "tools": ["calculator"]},
            progress_callback=progress,
        )
    assert not result.is_error, result.content
    assert result.structured_content["turns"] == 2
    assert result.structured_content["tool_calls"] == 1
    assert "calling calculator" in progress.messages
    assert any(m.startswith("calculator done: 4") for m in progress.messages)


async def test_ask_in_a_session_then_list_and_show_it(stub_server: StubServer) -> None:
    async with stdio_session(*engine_options(stub_server.url, MODEL)) as session:
        first = await session.call_tool("ask", {"question": "One?", "session": "trip"})
        second = await session.call_tool("ask", {"question": "Two?", "session": "trip"})
        listed = await session.call_tool("sessions_list", {})
        shown = await session.call_tool("session_show", {"session": "trip"})
        missing = await session.call_tool("session_show", {"session": "nowhere"})
        bad = await session.call_tool("session_show", {"session": "../etc"})
    assert first.structured_content["session"] == "trip"
    assert not second.is_error
    assert [s["id"] for s in listed.structured_content["sessions"]] == ["trip"]
    assert listed.structured_content["sessions"][0]["message_count"] == 4
    messages = shown.structured_content["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "One?"),
        ("assistant", ANSWER),
        ("user", "Two?"),
        ("assistant", ANSWER),
    ]
    assert missing.is_error
    assert "nowhere" in text_of(missing)
    assert bad.is_error


async def test_the_persona_memory_tools_write_the_persona_files(
    stub_server: StubServer, jarvis_home: Path
) -> None:
    async with stdio_session(*engine_options(stub_server.url, MODEL)) as session:
        added = await session.call_tool(
            "memory_manage", {"action": "add", "entry": "Prefers tea to coffee."}
        )
        read = await session.call_tool("memory_manage", {"action": "read"})
        profile = await session.call_tool(
            "user_profile_manage", {"action": "add", "entry": "Name: Ada."}
        )
        invalid = await session.call_tool("memory_manage", {"action": "shred"})
    assert not added.is_error, added.content
    assert "Prefers tea to coffee." in text_of(read)
    assert not profile.is_error, profile.content
    files = await asyncio.to_thread(_markdown_files, jarvis_home)
    assert "Prefers tea to coffee." in files["MEMORY.md"]
    assert "Name: Ada." in files["USER.md"]
    assert invalid.is_error
    assert "Invalid arguments for memory_manage" in text_of(invalid)


def _markdown_files(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in root.rglob("*.md")}


async def _create_managed_agent(agent_id: str, **fields: object) -> None:
    """A definition in the store the server will read (the test's OPENJARVIS_HOME)."""
    runtime = bootstrap(load_config(None))
    try:
        state = server_state(runtime)
        await state.managed.create(ManagedAgentSpec(id=agent_id, **fields))  # type: ignore[arg-type]
    finally:
        await runtime.aclose()


async def test_each_managed_agent_is_a_tool_with_its_own_conversation(
    stub_server: StubServer,
) -> None:
    await _create_managed_agent("helper", name="Helper", agent="simple")
    async with stdio_session(*engine_options(stub_server.url, MODEL)) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        progress = Progress()
        result = await session.call_tool(
            "agent_helper", {"message": "Hello?"}, progress_callback=progress
        )
        shown = await session.call_tool("session_show", {"session": "managed-agent:helper"})
        unknown = await session.call_tool("agent_nobody", {"message": "Hello?"})
    assert "agent_helper" in names
    assert not result.is_error, result.content
    assert text_of(result) == ANSWER
    assert "".join(progress.messages) == ANSWER
    roles = [(m["role"], m["content"]) for m in shown.structured_content["messages"]]
    assert roles == [("user", "Hello?"), ("assistant", ANSWER)]
    assert unknown.is_error


async def test_the_run_policy_of_serve_applies(stub_server: StubServer) -> None:
    await _create_managed_agent("coder", agent="claude_code")
    before = stub_server.requests
    async with stdio_session(*engine_options(stub_server.url, MODEL)) as session:
        moved = await session.call_tool(
            "ask", {"question": "q", "agent_options": {"base_url": "http://198.51.100.7/v1"}}
        )
        runtime = await session.call_tool("ask", {"question": "q", "agent": "claude_code"})
        stored = await session.call_tool("agent_coder", {"message": "rm -rf"})
    assert moved.is_error
    assert "jarvis mcp serve --allow-option base_url" in text_of(moved)
    assert runtime.is_error
    assert "jarvis mcp serve --enable-runtime claude_code" in text_of(runtime)
    assert stored.is_error
    assert "--enable-runtime claude_code" in text_of(stored)
    assert stub_server.requests == before  # nothing reached the engine


@pytest.mark.usefixtures("patient_engine")
async def test_a_cancelled_call_closes_the_engine_request_and_the_server_goes_on() -> None:
    with GatedEngine() as engine:
        async with stdio_session(*engine_options(engine.url, GATED_MODEL)) as session:
            progress = Progress()
            call = asyncio.create_task(
                session.call_tool("ask", {"question": "q"}, progress_callback=progress)
            )
            await asyncio.wait_for(progress.first.wait(), CALL_SECONDS)  # the run is going
            call.cancel()  # the SDK sends notifications/cancelled
            with pytest.raises(asyncio.CancelledError):
                await call
            closed = await asyncio.to_thread(engine.request_closed.wait, CALL_SECONDS)
            listed = await session.call_tool("sessions_list", {})  # still serving
    assert progress.messages == ["The"]
    assert closed, "the engine's request was left open"
    assert not listed.is_error


def _frame(payload: dict[str, object]) -> bytes:
    return json.dumps(payload).encode() + b"\n"


@pytest.mark.usefixtures("patient_engine")
def test_a_client_that_goes_away_leaves_nothing_running() -> None:
    """The client's stdin closes mid-run (a desktop app quitting): the server ends by
    itself, exit code 0, and the engine's request is closed."""
    with GatedEngine() as engine:
        process = subprocess.Popen(
            [*JARVIS, "mcp", "serve", *engine_options(engine.url, GATED_MODEL)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ),
        )
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            process.stdin.write(
                _frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {},
                            "clientInfo": {"name": "test", "version": "1"},
                        },
                    }
                )
            )
            process.stdin.flush()
            assert json.loads(process.stdout.readline())["id"] == 1
            process.stdin.write(
                _frame({"jsonrpc": "2.0", "method": "notifications/initialized"})
                + _frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "tools/call",
                        "params": {
                            "name": "ask",
                            "arguments": {"question": "q"},
                            "_meta": {"progressToken": "p"},
                        },
                    }
                )
            )
            process.stdin.flush()
            progress = json.loads(process.stdout.readline())  # the first word is out
            assert progress["method"] == "notifications/progress"
            assert progress["params"]["message"] == "The"
            process.stdin.close()  # the client is gone
            code = process.wait(CALL_SECONDS)
            closed = engine.request_closed.wait(CALL_SECONDS)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr = process.stderr.read().decode() if process.stderr else ""
    assert code == 0, stderr
    assert closed, "the engine's request was left open"
    assert "Traceback" not in stderr
