"""A chat turn stopped with Ctrl-C is recorded as a cancelled trace (through a real
terminal: the turn's run ends with the interruption, the chat goes on, and the next turn
is a trace of its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine

pytestmark = pytest.mark.integration

TIMEOUT = 60


def test_a_chat_turn_stopped_with_ctrl_c_is_a_cancelled_trace(jarvis_home: Path) -> None:
    script = [
        Reply("Paris is the capital."),
        Reply("Held answer that never finishes", hold=True),
        Reply("Still here."),
    ]
    with ScriptedEngine(script) as engine:
        (jarvis_home / "config.toml").write_text("[traces]\nenabled = true\n")
        env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
        child = pexpect.spawn(
            sys.executable,
            ["-m", "jarvis", "chat", "--base-url", engine.url, "-m", MODEL],
            env=env,
            encoding="utf-8",
            timeout=TIMEOUT,
            dimensions=(40, 200),
        )
        try:
            child.expect_exact("you>")
            child.send("Capital of France?\r")
            child.expect_exact("Paris is the capital.")
            child.expect_exact("you>")
            child.send("Tell me more\r")
            assert engine.first_word_sent.wait(TIMEOUT)
            child.expect_exact("Held")
            child.sendintr()
            child.expect_exact("stopped (this answer is not kept)")
            engine.release()
            child.expect_exact("you>")
            child.send("Still there?\r")
            child.expect_exact("Still here.")
            child.expect_exact("you>")
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert child.exitstatus == 0, child.before

    listed = subprocess.run(
        [sys.executable, "-m", "jarvis", "traces", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    traces = list(reversed(json.loads(listed.stdout)))  # oldest first
    assert [t["status"] for t in traces] == ["ok", "cancelled", "ok"], traces
    assert all(t["inferences"] == 1 for t in traces)
    assert traces[1]["error"] in ("", None)  # a stop is not an error
    [cancelled] = [t for t in json.loads(listed.stdout) if t["status"] == "cancelled"]
    shown = subprocess.run(
        [sys.executable, "-m", "jarvis", "traces", "show", "--json", str(cancelled["id"])],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    spans = json.loads(shown.stdout)["spans"]
    assert [s["kind"] for s in spans] == ["run", "inference"]
