"""Keeping a database's files to their owner: what each store does on open
(:func:`jarvis.adapters.sqlite_files.private_database`)."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from contracts.trace_store_contract import make_trace
from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver
from jarvis.adapters.sqlite_files import private_database
from jarvis.adapters.sqlite_memory.store import SqliteMemory
from jarvis.adapters.sqlite_traces import SqliteTraceStore
from jarvis.domain.traces import TraceQuery


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        private_database(tmp_path / "new.db")
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "new.db") == 0o600


def test_an_open_file_and_its_side_files_are_tightened(tmp_path: Path) -> None:
    told: list[str] = []
    names = ("x.db", "x.db-wal", "x.db-shm", "x.db-journal")
    for name in names:
        (tmp_path / name).write_bytes(b"")
        (tmp_path / name).chmod(0o664)
    private_database(tmp_path / "x.db", told.append)
    assert [_mode(tmp_path / name) for name in names] == [0o600] * 4
    assert told == []


def test_a_fifo_in_a_side_files_place_does_not_hang_the_open(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.db-wal", 0o644)
    private_database(tmp_path / "x.db")
    assert _mode(tmp_path / "x.db") == 0o600
    assert _mode(tmp_path / "x.db-wal") == 0o644  # not a file SQLite could use: left to it


def test_a_file_that_cannot_be_created_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        private_database(tmp_path / "missing" / "x.db")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_another_users_file_is_left_as_it_is_and_told(tmp_path: Path) -> None:
    """Every store passes the notice on; the file keeps its owner's mode."""
    for name in ("traces.db", "sessions.db", "memory.db"):
        (tmp_path / name).write_bytes(b"")
        (tmp_path / name).chmod(0o666)
        os.chown(tmp_path / name, 65534, 65534)
    told: list[str] = []
    traces = SqliteTraceStore(tmp_path / "traces.db", notice=told.append)
    traces.save(make_trace("t1"))
    assert [t.trace_id for t in traces.list(TraceQuery())] == ["t1"]
    traces.close()
    driver = SqliteDriver(tmp_path / "sessions.db", notice=told.append)
    assert driver.run(lambda db: db.execute("SELECT 1").fetchone()) == (1,)
    driver.close()
    memory = SqliteMemory(str(tmp_path / "memory.db"), notice=told.append)
    asyncio.run(memory.store("kept", source="test"))
    memory.close()
    assert told == [
        f"{tmp_path / name} belongs to another user (uid 65534), who can read what jarvis "
        "writes there; move it aside to have jarvis start a file of its own."
        for name in ("traces.db", "sessions.db", "memory.db")
    ]
    assert {_mode(tmp_path / name) for name in ("traces.db", "sessions.db", "memory.db")} == {0o666}


def test_a_mode_that_cannot_be_changed_is_told_and_the_file_still_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system without modes refuses ``chmod``: the store works, and says so."""
    path = tmp_path / "traces.db"
    path.write_bytes(b"")
    path.chmod(0o644)

    def refuse(fd: int, mode: int) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "fchmod", refuse)
    told: list[str] = []
    store = SqliteTraceStore(path, notice=told.append)
    store.save(make_trace("t1"))
    store.close()
    assert told == [
        f"{path} stays readable by other users: its mode cannot be set to 0600 "
        "(Read-only file system)."
    ]
