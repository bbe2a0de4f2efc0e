"""The exit codes the README promises, through the CLI process: every float option refuses
NaN and infinities, every integer option a number past its range, a stored time out of
range is a damaged store, ``chat`` with stdin closed is a usage error. None of them may
end in exit code 1 or a traceback.

The table is checked against the commands themselves: a new numeric option of any command
(``serve`` aside, which has its own suite) that is not in it fails the test."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from jarvis.entrypoints.cli import build_app

pytestmark = pytest.mark.integration

HUGE = str(10**23)
NOT_FINITE = ("nan", "inf", "-inf")

FLOAT_OPTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("ask", "--temperature"): ("q",),
    ("operators run", "--poll"): (),
    ("operators run", "--for"): (),
}
"""Each float option (command path, option) and the arguments given after it."""

INT_OPTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("ask", "--max-tokens"): ("q",),
    ("ask", "--output-retries"): ("q",),
    ("memory search", "--top-k"): ("q",),
    ("sessions list", "--limit"): (),
    ("traces list", "--limit"): (),
    ("operators history", "--last"): ("x",),
    ("operators run", "--max-ticks"): (),
}

SKIPPED = ("serve",)


def _numeric_options() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(float options, int options) of every command, as (command path, longest flag)."""
    floats: set[tuple[str, str]] = set()
    ints: set[tuple[str, str]] = set()

    def kinds(param: object) -> set[str]:
        return {t.__name__ for t in type(getattr(param, "type", None)).__mro__}

    def walk(command: object, path: str) -> None:
        commands = getattr(command, "commands", None)
        if isinstance(commands, dict):  # a group (typer's own copy of click's classes)
            for name, sub in commands.items():
                if name not in SKIPPED:
                    walk(sub, f"{path} {name}".strip())
            return
        for param in getattr(command, "params", ()):
            if getattr(param, "param_type_name", "") != "option":
                continue
            flag = max(param.opts, key=len)
            if "FloatParamType" in kinds(param):
                floats.add((path, flag))
            elif "IntParamType" in kinds(param):
                ints.add((path, flag))

    walk(typer.main.get_command(build_app()), "")
    return floats, ints


def jarvis(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=stdin,
        env=os.environ.copy(),
        check=False,
    )


def test_the_table_covers_every_numeric_option() -> None:
    floats, ints = _numeric_options()
    assert floats == set(FLOAT_OPTIONS)
    assert ints == set(INT_OPTIONS)


CASES = [
    pytest.param((*path.split(), option, value, *rest), id=f"{path} {option} {value}")
    for (path, option), rest in FLOAT_OPTIONS.items()
    for value in NOT_FINITE
] + [
    pytest.param((*path.split(), option, HUGE, *rest), id=f"{path} {option} 10^23")
    for (path, option), rest in INT_OPTIONS.items()
]


@pytest.mark.parametrize("argv", CASES)
def test_a_number_out_of_range_is_a_usage_error(argv: tuple[str, ...]) -> None:
    result = jarvis(*argv)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert "Invalid value" in result.stderr


def test_chat_with_stdin_closed_is_a_usage_error(jarvis_home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jarvis", "chat", "--base-url", "http://127.0.0.1:9/v1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
        check=False,
        preexec_fn=lambda: os.close(0),
    )
    assert result.returncode == 2, result.stderr
    assert "Standard input is closed" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (jarvis_home / "sessions.db").exists()  # nothing was started


@pytest.mark.parametrize("column", ["updated_us", "created_us"])
@pytest.mark.parametrize("value", [2**62, -(2**62)])
def test_a_stored_time_out_of_range_is_a_damaged_store(
    jarvis_home: Path, column: str, value: int
) -> None:
    from jarvis.domain.llm.messages import Message
    from tests.support.sql_stores import sqlite_sessions

    database = jarvis_home / "sessions.db"
    store = sqlite_sessions(database)
    import asyncio

    asyncio.run(store.append("s", [Message.user("hello")]))
    store.close()
    with sqlite3.connect(database) as db:
        db.execute(f"UPDATE sessions SET {column} = ?", (value,))
    shown: list[tuple[str, ...]] = [("sessions", "list", "--json")]  # text: updated_us only
    if column == "updated_us":
        shown.append(("sessions", "list"))
    for args in shown:
        result = jarvis(*args)
        assert result.returncode == 7, (result.returncode, result.stderr)
        assert "out of range" in result.stderr
        assert "Traceback" not in result.stderr


def test_a_stored_message_time_out_of_range_is_a_damaged_store(jarvis_home: Path) -> None:
    from jarvis.domain.llm.messages import Message
    from tests.support.sql_stores import sqlite_sessions

    database = jarvis_home / "sessions.db"
    store = sqlite_sessions(database)
    import asyncio

    asyncio.run(store.append("s", [Message.user("hello")]))
    store.close()
    with sqlite3.connect(database) as db:
        damaged = json.dumps({"role": "user", "content": "x", "at": 2**70})
        db.execute("UPDATE messages SET record = ?", (damaged,))
    for args in (("sessions", "show", "s"), ("sessions", "export", "s", "--json")):
        result = jarvis(*args)
        assert result.returncode == 7, (result.returncode, result.stderr)
        assert "Traceback" not in result.stderr
