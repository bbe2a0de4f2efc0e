"""The commands of OpenJarvis's agents guide, as processes against a scripted engine:
``jarvis ask -a operative "..."`` and ``-a monitor_operative "..."`` run one tick of an
ad-hoc operator that keeps its state for the next call, and ``jarvis operators add
--system`` gives an operator its own system prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine

pytestmark = pytest.mark.integration


def jarvis(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


def configure(home: Path, engine: ScriptedEngine) -> None:
    (home / "config.toml").write_text(
        f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
        f'[engine.openai]\nbase_url = "{engine.url}"\n'
    )


@pytest.mark.parametrize("agent", ["operative", "monitor_operative"])
def test_ask_with_an_operative_runs_a_tick_that_keeps_state(jarvis_home: Path, agent: str) -> None:
    replies = [f"Disk at {n}%." for n in range(40, 50)]
    with ScriptedEngine([Reply(r) for r in replies]) as engine:
        configure(jarvis_home, engine)
        first = jarvis("ask", "-a", agent, "Check system status")
        assert first.returncode == 0, first.stderr
        calls = len(engine.requests)  # the monitor may plan before it answers
        assert first.stdout.strip() == replies[calls - 1]
        second = jarvis("ask", "-a", agent, "--json", "Check system status again")
        assert second.returncode == 0, second.stderr
        listed = jarvis("operators", "list", "--json")
    answer = json.loads(second.stdout)
    assert answer["content"] == replies[len(engine.requests) - 1]
    assert answer["operator"] == "adhoc"
    second_tick = [m for i in range(calls, len(engine.requests)) for m in engine.messages(i)]
    systems = [str(m["content"]) for m in second_tick if m["role"] == "system"]
    assert any(replies[calls - 1] in s for s in systems)  # the first tick's state came back
    assert "Check system status again" in [m["content"] for m in second_tick]
    operators = json.loads(listed.stdout)
    assert [(o["name"], o["agent"]) for o in operators] == [("adhoc", agent)]


def test_named_operators_keep_separate_state(jarvis_home: Path) -> None:
    with ScriptedEngine([Reply("A1"), Reply("B1"), Reply("A2")]) as engine:
        configure(jarvis_home, engine)
        for name, question in (("a", "qa"), ("b", "qb"), ("a", "qa2")):
            done = jarvis("ask", "-a", "operative", "--operator", name, question)
            assert done.returncode == 0, done.stderr
    third = str(engine.messages(2)[0]["content"])
    assert "A1" in third
    assert "B1" not in third


def test_operator_option_needs_an_operative(jarvis_home: Path) -> None:
    with ScriptedEngine([]) as engine:
        configure(jarvis_home, engine)
        result = jarvis("ask", "-a", "simple", "--operator", "x", "hello")
    assert result.returncode == 2
    assert "--operator applies to the operative agents only" in result.stderr
    assert engine.requests == []


def test_operators_add_system_sets_the_operators_own_prompt(jarvis_home: Path) -> None:
    with ScriptedEngine([Reply("ok")]) as engine:
        configure(jarvis_home, engine)
        added = jarvis(
            "operators", "add", "ci", "--prompt", "Check.", "--system", "You watch CI.", "--json"
        )
        assert added.returncode == 0, added.stderr
        assert json.loads(added.stdout)["system_prompt"] == "You watch CI."
        ticked = jarvis("operators", "tick", "ci")
        assert ticked.returncode == 0, ticked.stderr
    assert str(engine.messages(0)[0]["content"]).startswith("You watch CI.")
