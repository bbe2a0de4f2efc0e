"""One broken operator never stops the others, through the CLI process: an impossible cron
is refused before anything is stored; a stored operator that cannot be used (an impossible
cron, a damaged definition, a time out of range) is listed as broken and skipped by the
scheduler with one notice, while the others tick; a last tick recorded after now (the
clock went back) is reported and clamped instead of silencing the operator."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jarvis.domain.json_types import JSONValue
from jarvis.domain.operators import DEFINITION_PREFIX, key_prefix
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine
from tests.support.sql_stores import sqlite_backend

pytestmark = pytest.mark.integration


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


def configure(home: Path, engine: ScriptedEngine) -> None:
    (home / "config.toml").write_text(
        f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
        f'[engine.openai]\nbase_url = "{engine.url}"\n'
    )


def put_state(home: Path, key: str, value: JSONValue) -> None:
    backend = sqlite_backend(home / "sessions.db")
    asyncio.run(backend.operators.put_state(key, value))
    backend.close()


def get_state(home: Path, key: str) -> JSONValue | None:
    backend = sqlite_backend(home / "sessions.db")
    value = asyncio.run(backend.operators.get_state(key))
    backend.close()
    return value


def definition(name: str, **changes: object) -> str:
    record: dict[str, object] = {
        "id": name,
        "agent": "operative",
        "prompt": "Beat.",
        "schedule": {"kind": "every", "seconds": 1, "expression": "", "timezone": "UTC"},
        "tools": [],
        "agent_options": {},
        "model": None,
        "created_us": 1_700_000_000_000_000,
    }
    record.update(changes)
    return json.dumps(record)


def test_an_impossible_cron_is_a_usage_error_and_nothing_is_stored() -> None:
    added = jarvis("operators", "add", "feb", "--cron", "0 0 30 2 *", "--prompt", "x")
    assert added.returncode == 2, added.stderr
    assert "never matches a date" in added.stderr
    assert "Traceback" not in added.stderr
    listed = jarvis("operators", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


BROKEN = {
    "feb": definition(
        "feb", schedule={"kind": "cron", "expression": "0 0 30 2 *", "timezone": "UTC"}
    ),
    "junk": "this is not a definition {",
    "far": definition("far", created_us=2**70),
    "zero": definition("zero", schedule={"kind": "every", "seconds": 0}),
    "zone": definition(
        "zone", schedule={"kind": "cron", "expression": "0 8 * * *", "timezone": "Mars/Base"}
    ),
}


def test_broken_operators_are_listed_as_broken_and_skipped_while_the_others_tick(
    jarvis_home: Path,
) -> None:
    with ScriptedEngine([Reply("tick done")]) as engine:
        configure(jarvis_home, engine)
        added = jarvis("operators", "add", "beat", "--every", "1s", "--prompt", "Beat.")
        assert added.returncode == 0, added.stderr
        for name, value in BROKEN.items():
            put_state(jarvis_home, DEFINITION_PREFIX + name, value)

        listed = jarvis("operators", "list")
        as_json = jarvis("operators", "list", "--json")
        # every operator is looked at on each poll (--max-ticks could end the run before
        # the scheduler reached the broken ones)
        ran = jarvis("operators", "run", "--for", "2.5", "--poll", "0.1")
    for outcome in (listed, as_json, ran):
        assert outcome.returncode == 0, outcome.stderr
        assert "Traceback" not in outcome.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert set(rows) == {"beat", *BROKEN}
    assert "BROKEN" not in rows["beat"]
    for name in BROKEN:
        assert "BROKEN" in rows[name], rows[name]
    entries = {entry["name"]: entry for entry in json.loads(as_json.stdout)}
    assert entries["beat"]["ticks"] == 0
    assert all(entries[name]["broken"] for name in BROKEN)
    assert ran.stderr.count("jarvis: ticked beat") >= 1
    for name in BROKEN:  # told once, though the scheduler looked at it on every poll
        assert ran.stderr.count(f"operator {name} is broken, skipped") == 1, ran.stderr


def test_a_last_tick_recorded_after_now_is_reported_and_clamped(jarvis_home: Path) -> None:
    with ScriptedEngine([Reply("tick done")]) as engine:
        configure(jarvis_home, engine)
        added = jarvis("operators", "add", "beat", "--every", "1s", "--prompt", "Beat.")
        assert added.returncode == 0, added.stderr
        future = (int(time.time()) + 86_400) * 1_000_000  # the clock went back a day
        put_state(jarvis_home, key_prefix("beat") + "schedule", {"last_tick_us": future})

        listed = jarvis("operators", "list", "--json")
        # bounded by --for: an operator silenced until tomorrow would tick nothing
        ran = jarvis("operators", "run", "--max-ticks", "1", "--poll", "0.1", "--for", "30")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    assert entry["clamped_from_us"] == future
    assert entry["next_tick_us"] < future - 3_600 * 1_000_000
    assert "the clock went back" in listed.stderr
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.count("the clock went back") == 1
    assert ran.stderr.count("jarvis: ticked beat") == 1
    progress = get_state(jarvis_home, key_prefix("beat") + "schedule")
    assert isinstance(progress, dict)
    last = progress["last_tick_us"]
    assert isinstance(last, int)
    assert last < future
