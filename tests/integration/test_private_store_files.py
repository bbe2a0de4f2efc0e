"""The SQLite files jarvis writes conversations, traces and memories into are kept to their
owner (0600) even when they existed before jarvis first opened them, world-readable (made
by ``touch`` under umask 022, or by OpenJarvis); attacked through the real CLI, as root and
as an ordinary user the test creates."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from jarvis.adapters.sqlite_traces.batch import unpack_batch
from jarvis.domain.trace_steps import read_trace
from tests.integration.test_file_read_attacks import _SOURCE, _as_user, _interpreter_for
from tests.support.cli import run_jarvis
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine
from tests.support.users import open_directory, throwaway_user

pytestmark = pytest.mark.integration

QUESTION = "private question about the merger"


def _config(home: Path, url: str) -> None:
    (home / "config.toml").write_text(
        f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
        f'[engine.openai]\nbase_url = "{url}"\n[traces]\nenabled = true\ncontent = true\n'
    )


def _modes(home: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in home.iterdir() if ".db" in p.name}


def _world_readable(path: Path, data: bytes = b"") -> None:
    """``path`` as ``touch`` under umask 022 leaves it."""
    path.write_bytes(data)
    path.chmod(0o644)


def _openjarvis_traces(path: Path) -> None:
    """A ``traces.db`` as OpenJarvis makes it (its own table), left world-readable."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE traces (id TEXT PRIMARY KEY, data TEXT)")
        db.execute("INSERT INTO traces VALUES ('oj-1', 'kept')")
    db.close()
    path.chmod(0o644)


def _jarvis(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_jarvis(*args, timeout=120, env={**os.environ, "OPENJARVIS_HOME": str(home)})


def test_files_left_world_readable_are_made_private_by_the_first_run(tmp_path: Path) -> None:
    """Sessions (which also hold operators, managed agents and approvals), traces (one
    OpenJarvis made) and memory, with stale ``-wal``/``-shm`` files: every one is 0600 after
    a run, without a notice, and OpenJarvis's table is untouched."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    for name in ("sessions.db", "sessions.db-wal", "sessions.db-shm", "memory.db"):
        _world_readable(home / name)
    _openjarvis_traces(home / "traces.db")
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe merger closes on Friday.\n")
    with ScriptedEngine([Reply("Noted.")]) as engine:
        _config(home, engine.url)
        asked = _jarvis(home, "ask", QUESTION)
    assert asked.returncode == 0, asked.stderr
    added = _jarvis(home, "memory", "add", str(notes), "--no-embed")
    assert added.returncode == 0, added.stderr
    modes = _modes(home)
    assert {"sessions.db", "traces.db", "traces.db-wal", "memory.db"} <= set(modes)
    assert modes == dict.fromkeys(modes, 0o600)
    assert "jarvis:" not in asked.stderr + added.stderr  # nothing to tell: all were fixed
    with sqlite3.connect(home / "traces.db") as db:
        assert db.execute("SELECT id, data FROM traces").fetchall() == [("oj-1", "kept")]
        (batch,) = db.execute("SELECT heads, records FROM jarvis_trace_batches").fetchall()
    db.close()
    ((*_, record),) = unpack_batch(*batch)  # a batch of one
    assert QUESTION in str(read_trace(record).spans[0].content["input"])


@pytest.fixture
def user_home() -> Iterator[tuple[int, int, Path]]:
    """An ordinary user (created as root) and a home of theirs (0700) in a folder every
    user may walk through."""
    if os.geteuid() != 0:
        pytest.skip("the ordinary user's case is run as root, which creates the user")
    with throwaway_user("jvpriv") as (uid, gid), open_directory("jarvis-priv-") as base:
        home = base / "home"
        home.mkdir(mode=0o700)
        os.chown(home, uid, gid)
        yield uid, gid, home


def test_an_ordinary_user_gets_their_files_private_and_is_told_of_another_users(
    user_home: tuple[int, int, Path],
) -> None:
    """The user's own world-readable ``sessions.db`` is made 0600; a ``traces.db`` another
    user (root) left in their folder, writable by all, is not theirs to change: it stays as
    it is, the run still answers, and one line says who can read it."""
    uid, gid, home = user_home
    _world_readable(home / "sessions.db")
    os.chown(home / "sessions.db", uid, gid)
    _world_readable(home / "traces.db")
    (home / "traces.db").chmod(0o666)  # root's, and every user may write it
    # jarvis from its source, its dependencies from where this interpreter has them (the
    # user may have to run the system's interpreter of the same version)
    site = str(Path(orjson.__file__).parents[1])
    env = {
        "PYTHONPATH": os.pathsep.join([_SOURCE, site]),
        "OPENJARVIS_HOME": str(home),
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    interpreter = _interpreter_for(uid, gid)
    probe = _as_user([interpreter, "-c", "import typer, orjson, pydantic"], uid, gid, env=env)
    if probe.returncode != 0:
        pytest.skip(f"the ordinary user's interpreter cannot load jarvis: {probe.stderr}")
    with ScriptedEngine([Reply("Noted.")]) as engine:
        _config(home, engine.url)
        (home / "config.toml").chmod(0o644)
        asked = _as_user(
            [interpreter, "-m", "jarvis", "ask", QUESTION], uid, gid, env=env, cwd=str(home)
        )
    assert asked.returncode == 0, asked.stderr
    assert "Noted." in asked.stdout
    assert stat.S_IMODE((home / "sessions.db").stat().st_mode) == 0o600
    assert (home / "sessions.db").stat().st_uid == uid
    assert stat.S_IMODE((home / "traces.db").stat().st_mode) == 0o666
    assert (home / "traces.db").stat().st_uid == 0
    told = [line for line in asked.stderr.splitlines() if "belongs to another user" in line]
    assert told == [
        f"jarvis: {home / 'traces.db'} belongs to another user (uid 0), who can read what "
        "jarvis writes there; move it aside to have jarvis start a file of its own."
    ], asked.stderr
    assert "Traceback" not in asked.stderr
