"""A driver's ``close()`` from a finaliser that runs inside its own ``run()``.

The garbage collector can finalise a dropped container's session-store resource on the
worker thread in the middle of a query; that ``close()`` once waited forever on the lock its
own thread held. Each case runs in a thread joined with a generous bound, so a deadlock fails
the test instead of hanging the suite; a passing run never waits on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from jarvis.adapters.sql_store.driver import Connection
from jarvis.adapters.sql_store.run_guard import RunGuard
from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver

DEADLOCK_BOUND = 60.0


def _in_thread(work: Callable[[], object]) -> None:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(DEADLOCK_BOUND)
    assert not thread.is_alive(), "close() inside run() deadlocked"
    assert not errors, errors


def test_a_close_inside_a_run_is_deferred_to_its_end(tmp_path: Path) -> None:
    driver = SqliteDriver(tmp_path / "sessions.db")
    seen: list[int] = []

    def work(db: Connection) -> int:
        driver.close()  # what a finaliser run by the collector here does
        (value,) = db.execute("SELECT 1").fetchall()[0]  # the connection is still open
        seen.append(int(value))
        return int(value)

    _in_thread(lambda: driver.run(work))
    assert seen == [1]
    assert driver._connection is None  # closed once the run ended
    assert driver.run(lambda db: db.execute("SELECT 2").fetchall()) == [(2,)]  # reopened


def test_a_close_from_another_thread_waits_for_the_run(tmp_path: Path) -> None:
    driver = SqliteDriver(tmp_path / "sessions.db")
    inside, closing = threading.Event(), threading.Event()

    def close_when_inside() -> None:
        inside.wait()
        closing.set()
        driver.close()

    closer = threading.Thread(target=close_when_inside)
    closer.start()

    def work(db: Connection) -> list[tuple[object, ...]]:
        inside.set()
        closing.wait()
        return list(db.execute("SELECT 3").fetchall())  # the closer waits on the lock

    _in_thread(lambda: driver.run(work))
    closer.join(DEADLOCK_BOUND)
    assert not closer.is_alive()
    assert driver._connection is None


def test_the_guard_closes_once_for_nested_runs() -> None:
    closed: list[str] = []
    guard = RunGuard(lambda: closed.append("closed"))

    def inner() -> None:
        guard.close()
        assert closed == []

    guard.run(lambda: guard.run(inner))
    assert closed == ["closed"]
    guard.close()
    assert closed == ["closed", "closed"]
