"""Approving tool calls at a real terminal (pexpect), and without one.

The scripted engine asks for ``memory_manage`` (a tool with side effects: it edits
MEMORY.md in the config dir), so whether the call ran is read from the file, and what the
model was told from the engine's request log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

TIMEOUT = 60
CHAT_TOOLS = ("-a", "orchestrator", "--tools", "memory_manage")


def remember(call_id: str, entry: str) -> dict[str, object]:
    return tool_call(call_id, "memory_manage", {"action": "add", "entry": entry})


def memory_file() -> Path:
    return Path(os.environ["OPENJARVIS_HOME"]) / "MEMORY.md"


def memory() -> str:
    path = memory_file()
    return path.read_text(encoding="utf-8") if path.exists() else ""


def ask_args(engine: ScriptedEngine, *extra: str) -> list[str]:
    return [
        "-m",
        "jarvis",
        "ask",
        "--base-url",
        engine.url,
        "-m",
        MODEL,
        "-a",
        "orchestrator",
        "--tools",
        "memory_manage",
        "--no-keep",
        *extra,
        "Remember that I like tea.",
    ]


def spawn(engine: ScriptedEngine, *extra: str) -> pexpect.spawn[str]:
    env = dict(os.environ)
    env["TERM"] = "xterm"
    return pexpect.spawn(
        sys.executable,
        ask_args(engine, *extra),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )


def tool_messages(engine: ScriptedEngine) -> list[str]:
    found: list[str] = []
    for request in engine.requests:
        messages = request.get("messages")
        assert isinstance(messages, list)
        found = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    return found


def test_y_runs_the_call_after_showing_it_and_why() -> None:
    script = [Reply(tool_calls=[remember("c1", "likes tea")]), Reply("Noted.")]
    with ScriptedEngine(script) as engine:
        child = spawn(engine, "--verbose")
        child.expect_exact("approve the call memory_manage(")
        child.expect_exact('"entry":"likes tea"')
        child.expect_exact("why: memory_manage changes something outside the run")
        child.expect_exact("built-in: tool with side effects")
        assert memory() == ""  # nothing ran before the answer
        child.expect_exact("run it?")
        child.send("y\r")
        child.expect_exact("Noted.")
        child.expect_exact("approval: memory_manage allowed by built-in: tool with side effects")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    assert "likes tea" in memory()


def test_n_denies_and_the_model_reads_why() -> None:
    script = [Reply(tool_calls=[remember("c1", "likes tea")]), Reply("Not noted.")]
    with ScriptedEngine(script) as engine:
        child = spawn(engine)
        child.expect_exact("run it?")
        child.send("n\r")
        child.expect_exact("Not noted.")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        told = tool_messages(engine)
    assert memory() == ""
    assert len(told) == 1
    assert "Tool call denied" in told[0]
    assert "the user said no" in told[0]


def test_always_asks_once_for_parallel_calls_and_later_turns() -> None:
    script = [
        Reply(tool_calls=[remember("c1", "likes tea"), remember("c2", "likes rain")]),
        Reply(tool_calls=[remember("c3", "likes jazz")]),
        Reply("All noted."),
    ]
    with ScriptedEngine(script) as engine:
        child = spawn(engine, "--json")
        child.expect_exact("run it?")
        child.send("a\r")
        index = child.expect_exact(["run it?", pexpect.EOF])
        output = child.before or ""
        child.close()
        assert index == 1, "asked again after 'always'"
        assert child.exitstatus == 0
    data = json.loads(output[output.index("{") :])
    decisions = data["metadata"]["approvals"]
    assert [d["decision"] for d in decisions] == ["allow", "allow", "allow"]
    assert decisions[0]["asked"]
    assert not decisions[2]["asked"]
    assert all("terminal: always memory_manage" in d["rule"] for d in decisions)
    assert "terminal: always memory_manage" in decisions[0]["rule"]
    assert "answered earlier for every memory_manage call" in decisions[2]["rule"]
    text = memory()
    assert "likes tea" in text
    assert "likes rain" in text
    assert "likes jazz" in text


def test_without_a_terminal_ask_means_deny_and_the_model_is_told() -> None:
    script = [Reply(tool_calls=[remember("c1", "likes tea")]), Reply("Could not note it.")]
    with ScriptedEngine(script) as engine:
        done = subprocess.run(
            [sys.executable, *ask_args(engine, "--json")],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        told = tool_messages(engine)
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)["metadata"]["approvals"][0]
    assert decision["decision"] == "deny"
    assert "no terminal to ask: ask means deny" in decision["rule"]
    assert memory() == ""
    assert "Tool call denied" in told[0]
    assert "no terminal to ask" in told[0]


def test_approve_auto_and_deny_override_the_policy_without_asking() -> None:
    for mode, ran in (("auto", True), ("deny", False)):
        memory_file().unlink(missing_ok=True)
        script = [Reply(tool_calls=[remember("c1", "likes tea")]), Reply("Done.")]
        with ScriptedEngine(script) as engine:
            child = spawn(engine, "--approve", mode, "--json")
            child.expect(pexpect.EOF)
            output = child.before or ""
            child.close()
        assert "run it?" not in output
        decision = json.loads(output[output.index("{") :])["metadata"]["approvals"][0]
        assert decision["rule"] == f"--approve {mode}"
        assert ("likes tea" in memory()) is ran


def test_chat_asks_inside_the_chat_and_never_lasts_for_the_chat() -> None:
    script = [
        Reply(tool_calls=[remember("c1", "likes tea")]),
        Reply("Noted."),
        Reply(tool_calls=[remember("c2", "likes rain")]),
        Reply("Not noted."),
        Reply(tool_calls=[remember("c3", "likes jazz")]),
        Reply("Still not noted."),
    ]
    env = dict(os.environ)
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    env["TERM"] = "xterm"
    with ScriptedEngine(script) as engine:
        child = pexpect.spawn(
            sys.executable,
            ["-m", "jarvis", "chat", "--base-url", engine.url, "-m", MODEL, *CHAT_TOOLS],
            env=env,
            encoding="utf-8",
            timeout=TIMEOUT,
            dimensions=(40, 200),
        )
        child.expect_exact("you>")
        child.send("Remember tea\r")
        child.expect_exact("approve the call memory_manage(")
        child.expect_exact("run it?")
        child.send("y\r")
        child.expect_exact("Noted.")
        child.expect_exact("you>")
        child.send("Remember rain\r")
        child.expect_exact("run it?")
        child.send("never\r")
        child.expect_exact("Not noted.")
        child.expect_exact("you>")
        child.send("Remember jazz\r")  # never asked again in this chat
        index = child.expect_exact(["run it?", "Still not noted."])
        assert index == 1
        child.expect_exact("you>")
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    text = memory()
    assert "likes tea" in text
    assert "likes rain" not in text
    assert "likes jazz" not in text


def test_an_unknown_approve_mode_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jarvis", "ask", "--approve", "sometimes", "hi"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2
    assert "not one of ask, auto, deny" in done.stderr
    assert "Traceback" not in done.stderr
