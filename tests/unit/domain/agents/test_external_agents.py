"""The ``opencode`` / ``openhands`` agents over the in-memory runtime (which passes the same
contract as the real adapter), and the opencode wire reader against hostile input."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from contracts.external_runtime_contract import ExternalRuntimeContract, request_factory
from jarvis.adapters.opencode_server.wire import RunState, final_reply
from jarvis.application.registry import builtin_agents
from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalRunRequest, ExternalTextDelta, ExternalToolDone
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.run.updates import RunFinished, TextDelta, ToolResultReady
from jarvis.domain.tools.specs import ToolResult
from jarvis.testing import InMemoryExternalRuntime, InMemoryExternalRuntimes, ScriptedInference
from jarvis.testing.external_runtimes import ScriptedRun


class TestInMemoryContract(ExternalRuntimeContract):
    expected_answer = "Done."

    @pytest.fixture
    async def runtime(self) -> AsyncIterator[InMemoryExternalRuntime]:
        fake = InMemoryExternalRuntime()
        yield fake
        await fake.aclose()

    @pytest.fixture
    def run_request(self) -> Callable[..., ExternalRunRequest]:
        return request_factory(model="m", base_url="http://x/v1")


def _parts(
    fake: InMemoryExternalRuntime, *, engine: str = "openai", url: str = "http://127.0.0.1:8000/v1"
) -> AgentParts:
    return AgentParts(
        inference=ScriptedInference(engine_id=engine, base_url=url),
        model="local-model",
        runtimes=InMemoryExternalRuntimes({fake.runtime_id: fake}),
    )


async def test_opencode_streams_reports_tools_and_continues_its_session(tmp_path: Path) -> None:
    wrote = ToolResult(tool_name="write", content="Wrote file successfully.")
    fake = InMemoryExternalRuntime(
        script=[ScriptedRun("Wrote it.", (wrote,)), ScriptedRun("Again.")]
    )
    agent = builtin_agents().create(
        "opencode", _parts(fake), {"workspace": str(tmp_path), "agent": "plan"}
    )
    updates = [u async for u in agent.astream("write a file")]
    assert [type(u) for u in updates] == [ToolResultReady, TextDelta, TextDelta, RunFinished]
    final = updates[-1]
    assert isinstance(final, RunFinished)
    assert final.result.content == "Wrote it."
    assert final.result.tool_results == (wrote,)
    assert final.result.metadata["mode"] == "plan"
    sent = fake.requests[0]
    assert (sent.mode, sent.model, sent.base_url) == (
        "plan",
        "local-model",
        "http://127.0.0.1:8000/v1",
    )
    assert sent.workspace == str(tmp_path)  # pytest hands out resolved paths
    second = await agent.arun("and again")
    assert second.metadata["session_id"] == final.result.metadata["session_id"]
    assert fake.prompts(str(second.metadata["session_id"])) == ["write a file", "and again"]


async def test_ollama_base_url_gets_its_v1(tmp_path: Path) -> None:
    fake = InMemoryExternalRuntime()
    agent = builtin_agents().create(
        "opencode",
        _parts(fake, engine="ollama", url="http://127.0.0.1:11434"),
        {"workspace": str(tmp_path)},
    )
    await agent.arun("hi")
    assert fake.requests[0].base_url == "http://127.0.0.1:11434/v1"


async def test_the_embedded_engine_is_refused_with_what_to_do(tmp_path: Path) -> None:
    fake = InMemoryExternalRuntime()
    agent = builtin_agents().create(
        "opencode", _parts(fake, engine="llamacpp", url=""), {"workspace": str(tmp_path)}
    )
    with pytest.raises(ConfigurationError, match="has none") as caught:
        await agent.arun("hi")
    assert "embedded engine is not supported" in caught.value.hint
    assert fake.requests == []


def test_unknown_mode_and_bad_timeout_are_usage_errors(tmp_path: Path) -> None:
    fake = InMemoryExternalRuntime()
    with pytest.raises(ConfigurationError, match="mode"):
        builtin_agents().create("opencode", _parts(fake), {"agent": "yolo"})
    with pytest.raises(ConfigurationError):
        builtin_agents().create("opencode", _parts(fake), {"timeout": -1})


async def test_a_missing_workspace_is_refused(tmp_path: Path) -> None:
    fake = InMemoryExternalRuntime()
    agent = builtin_agents().create("opencode", _parts(fake), {"workspace": str(tmp_path / "nope")})
    with pytest.raises(ConfigurationError, match="not a directory"):
        await agent.arun("hi")


# --- the opencode wire reader ----------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        None,
        1,
        "x",
        [],
        {"type": 3},
        {"type": "message.part.updated", "properties": []},
        {
            "type": "message.part.updated",
            "properties": {"part": {"sessionID": "s", "type": "tool", "state": 5}},
        },
        {
            "type": "message.part.delta",
            "properties": {"sessionID": "s", "delta": 7, "field": "text"},
        },
    ],
)
def test_malformed_events_are_skipped(event: object) -> None:
    assert RunState(session_id="s").feed(event) == []


def test_other_sessions_and_reasoning_are_not_streamed() -> None:
    state = RunState(session_id="s")
    other = {
        "type": "message.part.delta",
        "properties": {"sessionID": "t", "partID": "p", "field": "text", "delta": "no"},
    }
    assert state.feed(other) == []
    state.feed(
        {
            "type": "message.part.updated",
            "properties": {"part": {"id": "r", "sessionID": "s", "type": "reasoning"}},
        }
    )
    thinking = {
        "type": "message.part.delta",
        "properties": {"sessionID": "s", "partID": "r", "field": "text", "delta": "hmm"},
    }
    assert state.feed(thinking) == []
    text = {
        "type": "message.part.delta",
        "properties": {"sessionID": "s", "partID": "t", "field": "text", "delta": "yes"},
    }
    assert state.feed(text) == [ExternalTextDelta(text="yes")]


def test_a_tool_part_is_reported_once_when_finished() -> None:
    state = RunState(session_id="s")
    part = {
        "id": "p1",
        "sessionID": "s",
        "type": "tool",
        "tool": "bash",
        "callID": "c",
        "state": {"status": "running"},
    }
    assert state.feed({"type": "message.part.updated", "properties": {"part": part}}) == []
    part["state"] = {"status": "completed", "output": "x" * 50_000, "input": {"command": "ls"}}
    [event] = state.feed({"type": "message.part.updated", "properties": {"part": part}})
    assert isinstance(event, ExternalToolDone)
    assert event.result.truncated
    assert len(event.result.content) < 21_000
    assert state.feed({"type": "message.part.updated", "properties": {"part": part}}) == []


def test_session_error_and_error_replies_raise() -> None:
    state = RunState(session_id="s")
    with pytest.raises(ExternalRuntimeError, match="engine down"):
        state.feed(
            {
                "type": "session.error",
                "properties": {"sessionID": "s", "error": {"data": {"message": "engine down"}}},
            }
        )
    with pytest.raises(ExternalRuntimeError, match="without an answer"):
        final_reply([{"info": {"role": "user"}}], state)
    with pytest.raises(ExternalRuntimeError, match="APIError"):
        final_reply([{"info": {"role": "assistant", "error": {"name": "APIError"}}}], state)
    with pytest.raises(ExternalRuntimeError):
        final_reply("garbage", state)


async def test_a_turn_limit_reaches_openhands_and_is_refused_by_opencode(tmp_path: Path) -> None:
    """openhands honours ``max_turns`` (its iterations), so it is passed on; opencode has no
    such limit, so the option is refused rather than silently ignored."""
    fake = InMemoryExternalRuntime(runtime_id="openhands")
    agent = builtin_agents().create(
        "openhands", _parts(fake), {"workspace": str(tmp_path), "max_turns": 7}
    )
    await agent.arun("go")
    assert fake.requests[-1].max_turns == 7
    default = builtin_agents().create("openhands", _parts(fake), {"workspace": str(tmp_path)})
    await default.arun("go")
    assert fake.requests[-1].max_turns == 0  # the runtime's own default
    with pytest.raises(ConfigurationError, match="unknown option"):
        builtin_agents().create(
            "opencode", _parts(InMemoryExternalRuntime()), {"max_turns": 7, "workspace": "."}
        )
