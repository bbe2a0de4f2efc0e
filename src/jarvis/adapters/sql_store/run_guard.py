"""The lock a driver runs its work under, safe against a ``close()`` from a finaliser.

The session store is a container resource over a generator whose ``finally`` closes the
driver. When a caller keeps the store but drops the container, the cyclic garbage collector
finalises that generator wherever it happens to run, and that can be the worker thread in
the middle of ``run()``. With a plain lock such a ``close()`` waited forever on the lock its
own thread held (a ``jarvis sessions show`` of a long session hung this way). Here a close
from inside a run on the same thread is deferred to the end of that run; a close from any
other thread waits for the run, as before; the next run opens the connection again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class RunGuard:
    """One call at a time on a connection, and a ``close`` that never deadlocks on it."""

    def __init__(self, close_now: Callable[[], None]) -> None:
        self._close_now = close_now
        self._lock = threading.RLock()
        self._depth = 0
        self._close_pending = False

    def run(self, body: Callable[[], T]) -> T:
        """``body()`` under the lock; a close asked for meanwhile happens after it."""
        with self._lock:
            self._depth += 1
            try:
                return body()
            finally:
                self._depth -= 1
                if self._close_pending and not self._depth:
                    self._close_pending = False
                    self._close_now()

    def close(self) -> None:
        """Close now, or at the end of the run this thread is inside (a finaliser's call)."""
        with self._lock:
            if self._depth:
                self._close_pending = True
            else:
                self._close_now()


class _Closable(Protocol):
    def close(self) -> None: ...


class _Holding(Protocol):
    @property
    def raw(self) -> _Closable: ...


class GuardedDriver:
    """A driver's ``close()``: its connection's library object closed through its guard."""

    _guard: RunGuard
    _connection: _Holding | None

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        self._guard.close()

    def _close_now(self) -> None:
        if self._connection is not None:
            self._connection.raw.close()
            self._connection = None
