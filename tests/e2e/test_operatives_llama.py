"""``operative`` and ``monitor_operative`` ticks against the real llama.cpp server.

SmolLM2-135M is tiny: what it says is not the point. With tools offered, llama-cpp-python's
``chatml-function-calling`` handler ignores ``max_tokens`` (its inner completions pass
``max_tokens=None``), so left to the server one reply could run to the end of its context
and a tick's length would be the model's luck. jarvis holds every reply to ``max_tokens``
itself (it reads the reply as a stream and hangs up at the bound, which stops the server's
generation), so each tick here is bounded: 64 tokens a turn, a few turns. That holds with
one tool offered: the server cannot stream a call its model chose among several (jarvis
then asks again with the one tool named, which streams), so the operators here offer only
their own ``memory_store``. The server gets a
context of 4096 tokens (a tool call and its result in llama.cpp's function-calling template
take much of the shared server's 2048). The protocol is: every tick ends with exit code 0,
its prompt and answer are in the operator's session, the next tick (another process) is
shown the previous state, and the monitor's phases and strategies all run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.llama_server import LlamaServer, missing_requirement, running_llama_server

# every reply is bounded (64 tokens, a few turns a tick), so each test's work is bounded;
# on a machine loaded several times over its cores that work still takes minutes
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(reason)
    with running_llama_server(n_ctx=4096) as server:
        yield server


def jarvis(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


def tick(name: str) -> subprocess.CompletedProcess[str]:
    return jarvis("operators", "tick", name, "--json")


def configure(home: Path, server: LlamaServer) -> None:
    (home / "config.toml").write_text(
        f'[engine]\nname = "openai"\nmodel = "{server.model}"\ntimeout = 300\n'
        f'[engine.openai]\nbase_url = "{server.base_url}"\n'
        "\n[agent]\nmax_tokens = 64\ntemperature = 0\n"
    )


def test_operative_ticks_keep_state_across_processes(
    jarvis_home: Path, llama_server: LlamaServer
) -> None:
    configure(jarvis_home, llama_server)
    added = jarvis(
        "operators", "add", "notes", "-O", "max_turns=3",
        "--prompt", "Write one sentence about tea.",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    first = tick("notes")
    assert first.returncode == 0, first.stderr
    one = json.loads(first.stdout)
    assert one["metadata"]["state_recalled"] is False
    second = tick("notes")
    assert second.returncode == 0, second.stderr
    two = json.loads(second.stdout)
    assert two["metadata"]["history_messages"] == 2
    saved = one["metadata"]["state_saved"]
    assert two["metadata"]["state_recalled"] is (saved != "kept")
    history = json.loads(jarvis("operators", "history", "notes", "--json").stdout)
    assert [r["role"] for r in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["content"] == one["content"]


def test_monitor_operative_tick_runs_every_phase(
    jarvis_home: Path, llama_server: LlamaServer
) -> None:
    configure(jarvis_home, llama_server)
    added = jarvis(
        "operators", "add", "watch", "-a", "monitor_operative",
        "-O", "retrieval_strategy=keyword", "-O", "max_turns=2",
        "--prompt", "Name one colour of tea.",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    for _ in range(2):  # the second tick has a note to recall
        ticked = tick("watch")
        assert ticked.returncode == 0, ticked.stderr
    data = json.loads(ticked.stdout)
    metadata = data["metadata"]
    assert metadata["phases"] == ["plan", "act", "verify"]
    assert metadata["strategy"]["memory_extraction"] == "causality_graph"
    assert metadata["retrieval"] == "keyword"
    assert data["turns"] >= 3  # plan, at least one act turn, verify
    assert data["stop_reason"] in {"final_answer", "max_turns", "parse_error"}
