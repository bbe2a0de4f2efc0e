"""``jarvis operators`` as processes against a scripted engine whose request log shows what
each tick carried: state surviving across processes, a scheduler that restarts without
missing or repeating a tick, and two schedulers on one PostgreSQL that never run a tick
twice."""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.support.gated_engine import GatedEngine
from tests.support.loopback_engine import LoopbackEngine
from tests.support.postgres_server import PostgresServer, running_postgres
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine

pytestmark = pytest.mark.integration

_SCHEDULED = re.compile(r"scheduled for (\S+?)\.")


def jarvis(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


def configure(home: Path, engine: LoopbackEngine, extra: str = "") -> None:
    (home / "config.toml").write_text(
        f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
        f'[engine.openai]\nbase_url = "{engine.url}"\n{extra}'
    )


def scheduled_labels(engine: ScriptedEngine) -> list[str]:
    labels = []
    for request in engine.requests:
        messages = request["messages"]
        assert isinstance(messages, list)
        found = _SCHEDULED.search(str(messages[0]["content"]))
        if found:
            labels.append(found.group(1))
    return labels


def consecutive_seconds(labels: list[str]) -> bool:
    times = [datetime.strptime(label, "%Y-%m-%dT%H:%M:%SZ") for label in labels]
    return all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(times))


def test_ticks_keep_state_across_processes(jarvis_home: Path) -> None:
    with ScriptedEngine([Reply("Build 41 is green."), Reply("Build 42 is red.")]) as engine:
        configure(jarvis_home, engine)
        added = jarvis("operators", "add", "ci", "--prompt", "Check the build.")
        assert added.returncode == 0, added.stderr
        first = jarvis("operators", "tick", "ci")
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip() == "Build 41 is green."
        second = jarvis("operators", "tick", "ci", "--json")
        assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["metadata"]["state_saved"] == "answer"
    sent = engine.messages(1)
    assert "## Previous State\nBuild 41 is green." in str(sent[0]["content"])
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "Check the build."),
        ("assistant", "Build 41 is green."),
        ("user", "Check the build."),
    ]
    shown = jarvis("operators", "history", "ci", "--json")
    assert [r["content"] for r in json.loads(shown.stdout)] == [
        "Check the build.", "Build 41 is green.", "Check the build.", "Build 42 is red."
    ]  # fmt: skip
    assert jarvis("operators", "remove", "ci").returncode == 0
    gone = jarvis("operators", "history", "ci")
    assert gone.returncode == 2
    assert "No operator named 'ci'" in gone.stderr


def test_removing_an_operator_leaves_one_whose_name_it_starts(jarvis_home: Path) -> None:
    for name in ("op1", "op10"):
        added = jarvis("operators", "add", name, "--prompt", f"Task of {name}.")
        assert added.returncode == 0, added.stderr
    assert jarvis("operators", "remove", "op1").returncode == 0
    listed = jarvis("operators", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(o["name"], o["prompt"]) for o in json.loads(listed.stdout)] == [
        ("op10", "Task of op10.")
    ]


def test_an_operator_removed_mid_tick_and_added_again_starts_afresh(jarvis_home: Path) -> None:
    """The tick is held at the engine while ``op1`` is removed and added again with a new
    task: the old tick's prompt, answer and state reach neither the new operator's history
    nor the state its next tick reads."""
    with GatedEngine(answer="Old answer.") as engine:
        configure(jarvis_home, engine)
        assert jarvis("operators", "add", "op1", "--prompt", "Old task.").returncode == 0
        ticking = subprocess.Popen(
            [sys.executable, "-m", "jarvis", "operators", "tick", "op1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert engine.wait_for(lambda e: e.held == 1, 60), "the tick never reached the engine"
            assert jarvis("operators", "remove", "op1").returncode == 0
            assert jarvis("operators", "add", "op1", "--prompt", "New task.").returncode == 0
            engine.release()
            out, err = ticking.communicate(timeout=90)
        finally:
            if ticking.poll() is None:
                ticking.kill()
                ticking.wait()
        history = jarvis("operators", "history", "op1", "--json")
        with sqlite3.connect(jarvis_home / "sessions.db") as db:
            state = db.execute(
                "SELECT value FROM operator_state WHERE key = 'operator:op1:state'"
            ).fetchall()
        listed = json.loads(jarvis("operators", "list", "--json").stdout)
    assert history.returncode == 0, history.stderr
    assert json.loads(history.stdout) == []
    assert state == []
    assert [(o["name"], o["prompt"]) for o in listed] == [("op1", "New task.")]
    assert ticking.returncode == 2, err
    assert "operator 'op1' was deleted while it ran" in err
    assert "Traceback" not in err
    assert out == ""


def test_a_restarted_scheduler_neither_misses_nor_repeats_a_tick(jarvis_home: Path) -> None:
    with ScriptedEngine([Reply("tick done")]) as engine:
        configure(jarvis_home, engine)
        assert (
            jarvis("operators", "add", "beat", "--every", "1s", "--prompt", "Beat.").returncode == 0
        )
        first = jarvis("operators", "run", "--max-ticks", "2", "--poll", "0.1")
        assert first.returncode == 0, first.stderr
        second = jarvis("operators", "run", "--max-ticks", "2", "--poll", "0.1")
        assert second.returncode == 0, second.stderr
    labels = scheduled_labels(engine)
    assert len(labels) == 4
    assert len(set(labels)) == 4
    assert consecutive_seconds(labels), labels
    listed = json.loads(jarvis("operators", "list", "--json").stdout)
    assert listed[0]["ticks"] == 4


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with running_postgres() as running:
        yield running


def test_two_schedulers_on_one_postgres_run_each_tick_exactly_once(
    jarvis_home: Path, server: PostgresServer
) -> None:
    url = server.create_database()
    with ScriptedEngine([Reply("tick done")]) as engine:
        configure(jarvis_home, engine, f'[sessions]\nbackend = "postgres"\nurl = "{url}"\n')
        added = jarvis("operators", "add", "race", "--every", "1s", "--prompt", "Race.")
        assert added.returncode == 0, added.stderr
        command = [
            sys.executable,
            "-m",
            "jarvis",
            "operators",
            "run",
            "--for",
            "8",
            "--poll",
            "0.05",
        ]
        racers = [
            subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        outputs = [racer.communicate(timeout=120) for racer in racers]
        for racer, (_, err) in zip(racers, outputs, strict=True):
            assert racer.returncode == 0, err
        shown = jarvis("operators", "history", "race", "--json")
    labels = scheduled_labels(engine)
    assert len(labels) >= 3
    assert len(labels) == len(set(labels)), labels  # no tick ran twice
    assert consecutive_seconds(sorted(labels)), labels  # and none was missed
    assert len(json.loads(shown.stdout)) == 2 * len(labels)
    ran_by = [err.count("jarvis: ticked race") for _, err in outputs]
    assert sum(ran_by) == len(labels)
