"""``jarvis chat`` driven through a real pseudo-terminal (pexpect), as a person types.

The engine holds its second answer after the first word until the test has pressed Ctrl-C
(:class:`~tests.support.scripted_engine.ScriptedEngine` with ``hold=True``), so stopping an
answer mid-stream never depends on timing. What each question carried is read from the
engine's request log, and what was kept from ``jarvis sessions show --json``.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine

TIMEOUT = 60


def spawn(*args: str) -> pexpect.spawn[str]:
    env = dict(os.environ)
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"  # pexpect answers no cursor-position queries
    env["TERM"] = "xterm"
    return pexpect.spawn(
        sys.executable,
        ["-m", "jarvis", "chat", *args],
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )


def users(messages: list[dict[str, object]]) -> list[object]:
    return [m.get("content") for m in messages if m["role"] in ("user", "assistant")]


def session_messages(session: str) -> list[dict[str, object]]:
    shown = subprocess.run(
        [sys.executable, "-m", "jarvis", "sessions", "show", session, "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=TIMEOUT,
    )
    messages = json.loads(shown.stdout)["messages"]
    assert isinstance(messages, list)
    return messages


def test_chat_streams_stops_on_ctrl_c_keeps_the_conversation_and_leaves_on_ctrl_d() -> None:
    script = [
        Reply("Paris is the capital."),
        Reply("Held answer that never finishes", hold=True),
        Reply("Still here."),
        Reply("Two lines read."),
    ]
    with ScriptedEngine(script) as engine:
        child = spawn("--base-url", engine.url, "-m", MODEL)
        try:
            child.expect(r"session (\S+) \(new\)")
            match = child.match
            assert isinstance(match, re.Match)
            session = str(match.group(1))
            child.expect_exact("you>")
            child.send("Capital of France?\r")
            child.expect_exact("Paris is the capital.")
            child.expect_exact("you>")

            # Ctrl-C mid-answer: the engine is holding the rest of it
            child.send("Tell me more\r")
            assert engine.first_word_sent.wait(TIMEOUT)
            child.expect_exact("Held")
            child.sendintr()
            child.expect_exact("stopped (this answer is not kept)")
            engine.release()
            child.expect_exact("you>")

            # Ctrl-C at the prompt abandons the line; the chat goes on
            child.send("abandoned words")
            child.sendintr()
            child.expect_exact("you>")

            # the up arrow recalls the last question
            child.send("\x1b[A")
            child.expect_exact("Tell me more")
            child.send("\r")
            child.expect_exact("Still here.")
            child.expect_exact("you>")

            # a trailing backslash, or Alt-Enter, continues the message on a new line
            child.send("line one\\\r")
            child.send("line two\x1b\r")
            child.send("line three\r")
            child.expect_exact("Two lines read.")
            child.expect_exact("you>")

            child.sendeof()  # Ctrl-D leaves
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert child.exitstatus == 0, child.before
        requests = [users(engine.messages(i)) for i in range(len(engine.requests))]

    assert requests[0] == ["Capital of France?"]
    assert requests[1] == ["Capital of France?", "Paris is the capital.", "Tell me more"]
    # the stopped answer was not kept: the next question carries the first exchange only
    assert requests[2] == ["Capital of France?", "Paris is the capital.", "Tell me more"]
    assert requests[3][-1] == "line one\nline two\nline three"
    assert not any("abandoned" in str(r) for r in requests)
    kept = [m["content"] for m in session_messages(session)]
    assert kept == [
        "Capital of France?",
        "Paris is the capital.",
        "Tell me more",
        "Still here.",
        "line one\nline two\nline three",
        "Two lines read.",
    ]


def test_chat_resumes_a_session_and_switches_agent_and_tools() -> None:
    with ScriptedEngine([Reply("First."), Reply("Second.")]) as engine:
        first = spawn("--base-url", engine.url, "-m", MODEL, "--session", "mine")
        try:
            first.expect_exact("session mine (new)")
            first.expect_exact("you>")
            first.send("One?\r")
            first.expect_exact("First.")
            first.expect_exact("you>")
            first.send("/exit\r")
            first.expect(pexpect.EOF)
        finally:
            first.close()
        assert first.exitstatus == 0

        again = spawn("--base-url", engine.url, "-m", MODEL, "-c")
        try:
            again.expect_exact("session mine (2 messages)")
            again.expect_exact("you>")
            again.send("/agent nope\r")
            again.expect_exact("Unknown agent")
            again.expect_exact("you>")
            again.send("/tools calculator\r")
            again.expect_exact("takes no tools")
            again.expect_exact("you>")
            again.send("/agent orchestrator\r")
            again.expect_exact("agent orchestrator")
            again.expect_exact("you>")
            again.send("/tools calculator\r")
            again.expect_exact("tools calculator")
            again.expect_exact("you>")
            again.send("Two?\r")
            again.expect_exact("Second.")
            again.expect_exact("you>")
            again.send("/new\r")
            again.expect(r"new session (\S+)\r")
            again.expect_exact("you>")
            again.sendeof()
            again.expect(pexpect.EOF)
        finally:
            again.close()
        assert again.exitstatus == 0
        last = engine.requests[-1]
    assert users(engine.messages(-1)) == ["One?", "First.", "Two?"]
    tools = last.get("tools")
    assert isinstance(tools, list)
    assert [t["function"]["name"] for t in tools] == ["calculator"]


@pytest.mark.parametrize("args", [["-a", "nope"], ["--session", "../x"], ["-c", "--session", "a"]])
def test_bad_chat_options_are_usage_errors(args: list[str]) -> None:
    child = spawn("--base-url", "http://127.0.0.1:9/v1", *args)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2


@pytest.mark.parametrize("when", ["mid-answer", "at-the-prompt"])
def test_sigterm_ends_the_chat_like_an_interruption_and_keeps_the_finished_exchange(
    when: str,
) -> None:
    script = [Reply("Paris is the capital."), Reply("Held answer that never finishes", hold=True)]
    seen = io.StringIO()
    with ScriptedEngine(script) as engine:
        child = spawn("--base-url", engine.url, "-m", MODEL)
        child.logfile_read = seen
        try:
            child.expect(r"session (\S+) \(new\)")
            match = child.match
            assert isinstance(match, re.Match)
            session = str(match.group(1))
            child.expect_exact("you>")
            child.send("Capital of France?\r")
            child.expect_exact("Paris is the capital.")
            child.expect_exact("you>")
            if when == "mid-answer":
                child.send("Tell me more\r")
                assert engine.first_word_sent.wait(TIMEOUT)
                child.expect_exact("Held")
            child.kill(signal.SIGTERM)
            # the engine still holds the answer: the chat ends without waiting for it
            child.expect(pexpect.EOF)
        finally:
            engine.release()
            child.close()
    assert child.exitstatus == 130, seen.getvalue()
    assert "jarvis: interrupted" in seen.getvalue()
    assert "Traceback" not in seen.getvalue()
    kept = [m["content"] for m in session_messages(session)]
    assert kept == ["Capital of France?", "Paris is the capital."]


def test_a_turn_the_store_could_not_keep_is_said_and_the_chat_then_ends_with_exit_3(
    jarvis_home: Path,
) -> None:
    """In a terminal, as on a pipe: the answer of a turn whose append stayed locked past
    ``busy_timeout`` (the test holds the SQLite write lock on its own connection) is shown
    and said lost, the person goes on typing, and leaving says so and exits 3."""
    (jarvis_home / "config.toml").write_text("[sessions]\nbusy_timeout = 0.2\n")
    script = [Reply("Kept."), Reply("Shown, not kept."), Reply("Kept again.")]
    seen = io.StringIO()
    with ScriptedEngine(script) as engine:
        child = spawn("--base-url", engine.url, "-m", MODEL, "--session", "t")
        child.logfile_read = seen
        holder = sqlite3.connect(jarvis_home / "sessions.db", isolation_level=None)
        try:
            child.expect_exact("you>")
            child.send("first\r")
            child.expect_exact("Kept.")
            child.expect_exact("you>")
            holder.execute("BEGIN IMMEDIATE")
            child.send("second\r")
            child.expect_exact("Shown, not kept.")
            child.expect_exact("this turn is not in session t; the chat goes on")
            holder.execute("ROLLBACK")
            child.expect_exact("you>")
            child.send("third\r")
            child.expect_exact("Kept again.")
            child.expect_exact("you>")
            child.sendeof()
            child.expect_exact("1 turn of this chat could not be saved")
            child.expect(pexpect.EOF)
        finally:
            if holder.in_transaction:
                holder.execute("ROLLBACK")
            holder.close()
            child.close()
    assert child.exitstatus == 3, seen.getvalue()
    assert "Traceback" not in seen.getvalue()
    kept = [m["content"] for m in session_messages("t")]
    assert kept == ["first", "Kept.", "third", "Kept again."]
