"""The openhands bridge without the SDK: the reader of the runner's stdout against broken
and hostile output, the runner's request checks (the script runs on this Python too:
it imports only the standard library until it runs a task), the interpreter search, and
the ``openhands`` agent over the in-memory runtime."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jarvis.adapters.openhands_sdk.interpreter import find_python
from jarvis.adapters.openhands_sdk.process import RUNNER
from jarvis.adapters.openhands_sdk.runner_script import read_request
from jarvis.adapters.openhands_sdk.runtime import conversation_hex
from jarvis.adapters.openhands_sdk.wire import END, MAX_FINAL, MAX_LINE, START, RunnerOutput
from jarvis.application.registry import builtin_agents
from jarvis.domain.errors import ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalTextDelta, ExternalToolDone
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.run.updates import RunFinished, RunUpdate, TextDelta
from jarvis.testing import InMemoryExternalRuntime, InMemoryExternalRuntimes, ScriptedInference
from jarvis.testing.external_runtimes import ScriptedRun

FINAL = {
    "content": "Wrote it.",
    "session_id": "a" * 32,
    "status": "finished",
    "turns": 2,
    "usage": {"prompt_tokens": 18, "completion_tokens": 6},
    "tool_results": [
        {"tool_name": "file_editor", "call_id": "c1", "content": "ok", "success": True}
    ],
    "is_error": False,
    "error": "",
}


def _feed(output: RunnerOutput, *lines: str) -> list[ExternalTextDelta | ExternalToolDone]:
    events: list[ExternalTextDelta | ExternalToolDone] = []
    for line in lines:
        events.extend(output.feed(line + "\n"))
    return events


def test_events_then_the_final_block() -> None:
    output = RunnerOutput()
    events = _feed(
        output,
        json.dumps({"type": "session", "session_id": "a" * 32}),
        json.dumps({"type": "text_delta", "text": "Wrote"}),
        json.dumps(
            {"type": "tool_result", "tool_name": "terminal", "content": "x", "call_id": "c"}
        ),
        json.dumps({"type": "text_delta", "text": " it."}),
        START,
        json.dumps(FINAL),
        END,
    )
    assert [type(e).__name__ for e in events] == [
        "ExternalTextDelta",
        "ExternalToolDone",
        "ExternalTextDelta",
    ]
    tool = events[1]
    assert isinstance(tool, ExternalToolDone)
    assert not tool.result.success  # only an explicit true is a success
    done = output.result(session_id="b" * 32)
    assert done.content == "Wrote it."
    assert done.session_id == "a" * 32
    assert done.turns == 2
    assert done.usage.total_tokens == 24
    assert [t.call_id for t in done.tool_results] == ["c1"]
    assert done.tool_results[0].success


def test_noise_and_malformed_lines_are_skipped() -> None:
    output = RunnerOutput()
    events = _feed(
        output,
        "Give Feedback / Get Help: https://example.invalid",  # a library's banner
        "{not json",
        "[1, 2]",
        json.dumps([{"type": "text_delta", "text": "x"}]),
        json.dumps({"type": "text_delta", "text": 7}),
        json.dumps({"type": "text_delta"}),
        json.dumps({"type": "tool_result", "content": {"nested": True}, "success": "yes"}),
        json.dumps({"type": "something_new", "text": "x"}),
        "{" + "x" * (MAX_LINE + 1),
    )
    assert len(events) == 1  # the tool result with its bad fields replaced
    only = events[0]
    assert isinstance(only, ExternalToolDone)
    assert only.result.tool_name == "tool"
    assert only.result.content == ""
    assert not only.result.success


def test_hostile_final_fields_fall_back_to_safe_values() -> None:
    output = RunnerOutput()
    hostile = {
        "is_error": False,
        "content": ["not", "text"],
        "turns": "many",
        "usage": {"prompt_tokens": -5, "completion_tokens": True},
        "tool_results": "none",
        "session_id": 42,
    }
    _feed(output, json.dumps({"type": "session", "session_id": "c" * 32}), START)
    _feed(output, json.dumps(hostile), END)
    done = output.result(session_id="d" * 32)
    assert (done.content, done.turns, done.usage.total_tokens) == ("", 1, 0)
    assert done.tool_results == ()
    assert done.session_id == "c" * 32  # from the session event


def test_a_long_tool_output_is_cut() -> None:
    output = RunnerOutput()
    (event,) = _feed(output, json.dumps({"type": "tool_result", "content": "y" * 100_000}))
    assert isinstance(event, ExternalToolDone)
    assert event.result.truncated
    assert len(event.result.content) < 21_000


def test_a_missing_block_is_a_clear_error() -> None:
    output = RunnerOutput()
    _feed(output, json.dumps({"type": "text_delta", "text": "half an answer"}))
    with pytest.raises(ExternalRuntimeError, match="ended without a result") as caught:
        output.result(session_id="x", hint="Its last output:\nboom")
    assert caught.value.hint.endswith("boom")


def test_an_unterminated_or_unreadable_block_is_an_error() -> None:
    unterminated = RunnerOutput()
    _feed(unterminated, START, json.dumps(FINAL))
    with pytest.raises(ExternalRuntimeError, match="ended without a result"):
        unterminated.result(session_id="x")
    unreadable = RunnerOutput()
    _feed(unreadable, START, '{"content": "cut', END)
    with pytest.raises(ExternalRuntimeError, match="not readable"):
        unreadable.result(session_id="x")
    not_object = RunnerOutput()
    _feed(not_object, START, "[]", END)
    with pytest.raises(ExternalRuntimeError, match="not readable"):
        not_object.result(session_id="x")


def test_a_final_block_over_the_bound_is_refused_not_kept() -> None:
    output = RunnerOutput()
    _feed(output, START)
    chunk = "z" * (MAX_LINE - 10)
    for _ in range(MAX_FINAL // len(chunk) + 2):
        output.feed(chunk)
    _feed(output, END)
    assert output.final_size <= MAX_FINAL
    with pytest.raises(ExternalRuntimeError, match="too large"):
        output.result(session_id="x")


@pytest.mark.parametrize(
    ("final", "message"),
    [
        ({"is_error": True, "error": "APIConnectionError: refused"}, "refused"),
        ({"is_error": True}, "unknown error"),
        ({"content": "no flag at all"}, "unknown error"),
        ({"is_error": True, "error": "e" * 10_000}, "eeee"),
    ],
)
def test_an_error_result_is_raised(final: dict[str, object], message: str) -> None:
    output = RunnerOutput()
    _feed(output, START, json.dumps(final), END)
    with pytest.raises(ExternalRuntimeError, match=message) as caught:
        output.result(session_id="x")
    assert len(str(caught.value)) < 1_100


# --- the runner's own checks -----------------------------------------------------------------


def _request(**fields: object) -> bytes:
    base: dict[str, object] = {
        "prompt": "p",
        "workspace": "/w",
        "model": "m",
        "base_url": "http://127.0.0.1:1/v1",
        "persistence_dir": "/p",
    }
    return json.dumps({**base, **fields}).encode()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[]", "not a JSON object"),
        (_request(prompt=""), "no 'prompt'"),
        (_request(model=3), "no 'model'"),
        (_request(mode="yolo"), "mode must be"),
        (_request(conversation_id="ses_x"), "badly formed"),
        (_request(conversation_id=5), "must be a string"),
        (b" " * (4 * 1_048_576 + 1), "larger than"),
    ],
)
def test_the_runner_refuses_a_bad_request(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_request(raw)


def test_the_runner_reads_a_good_request() -> None:
    request = read_request(_request(conversation_id="a" * 32, mode="plan"))
    assert request["mode"] == "plan"


def _run_runner(stdin: bytes, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    """The script as the adapter runs it, on this (SDK-less) Python."""
    return subprocess.run(
        [sys.executable, "-I", str(RUNNER)],
        input=stdin,
        capture_output=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
        check=False,
    )


def test_the_runner_answers_a_bad_request_with_an_error_block(tmp_path: Path) -> None:
    done = _run_runner(b"{not json", tmp_path)
    assert done.returncode == 2
    output = RunnerOutput()
    for line in done.stdout.decode().splitlines():
        output.feed(line)
    with pytest.raises(ExternalRuntimeError, match="bad request"):
        output.result(session_id="x")


def test_the_runner_without_the_sdk_reports_it_and_keeps_stdout_clean(tmp_path: Path) -> None:
    done = _run_runner(_request(workspace=str(tmp_path), persistence_dir=str(tmp_path)), tmp_path)
    assert done.returncode == 1
    lines = done.stdout.decode().splitlines()
    assert lines[0] == START
    assert lines[-1] == END
    output = RunnerOutput()
    for line in lines:
        output.feed(line)
    with pytest.raises(ExternalRuntimeError, match="No module named 'openhands'"):
        output.result(session_id="x")


# --- the interpreter search ------------------------------------------------------------------


def test_no_interpreter_anywhere_says_how_to_install(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "JARVIS_RUNTIMES": str(tmp_path)}
    with pytest.raises(ExternalRuntimeError, match="not installed") as caught:
        find_python(env=env)
    assert "JARVIS_OPENHANDS_PYTHON" in caught.value.hint


def test_the_env_var_wins_and_is_checked(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "JARVIS_OPENHANDS_PYTHON": sys.executable}
    with pytest.raises(ExternalRuntimeError, match=r"Python 3\.12 or newer|not installed in"):
        find_python(env=env)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("a" * 32, "a" * 32),
        ("12345678-1234-5678-1234-567812345678", "12345678123456781234567812345678"),
        ("ses_nosuchsession", None),
        ("../../etc", None),
        ("", None),
    ],
)
def test_session_ids_are_conversation_ids_or_nothing(given: str, expected: str | None) -> None:
    assert conversation_hex(given) == expected


# --- the agent -------------------------------------------------------------------------------


def test_the_openhands_agent_is_registered_and_delegates(tmp_path: Path) -> None:
    fake = InMemoryExternalRuntime(runtime_id="openhands", script=[ScriptedRun("Hi there.")])
    parts = AgentParts(
        inference=ScriptedInference(engine_id="openai", base_url="http://127.0.0.1:8000/v1"),
        model="local-model",
        runtimes=InMemoryExternalRuntimes({"openhands": fake}),
    )
    agent = builtin_agents().create("openhands", parts, {"workspace": str(tmp_path)})

    async def stream() -> list[RunUpdate]:
        return [u async for u in agent.astream("hello")]

    updates = asyncio.run(stream())
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == "Hi there."
    finished = updates[-1]
    assert isinstance(finished, RunFinished)
    assert finished.result.metadata["runtime"] == "openhands"
    (request,) = fake.requests
    assert request.base_url == "http://127.0.0.1:8000/v1"
    assert request.model == "local-model"
    assert request.workspace == os.path.realpath(tmp_path)
    assert request.timeout == 900.0
