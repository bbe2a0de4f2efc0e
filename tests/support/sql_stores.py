"""The SQL stores on either driver, built as the composition root builds them."""

from __future__ import annotations

import os

from jarvis.adapters.sql_store import SqlBackend, SqlSessionStore
from jarvis.adapters.sql_store.postgres_driver import PostgresDriver
from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver


def sqlite_backend(
    path: str | os.PathLike[str], *, busy_timeout: float = 10.0, durable: bool = False
) -> SqlBackend:
    return SqlBackend(SqliteDriver(path, busy_timeout=busy_timeout, durable=durable))


def sqlite_sessions(
    path: str | os.PathLike[str], *, busy_timeout: float = 10.0, durable: bool = False
) -> SqlSessionStore:
    return sqlite_backend(path, busy_timeout=busy_timeout, durable=durable).sessions


def postgres_backend(url: str, *, connect_timeout: float = 5.0) -> SqlBackend:
    return SqlBackend(PostgresDriver(url, connect_timeout=connect_timeout))


def postgres_sessions(url: str, *, connect_timeout: float = 5.0) -> SqlSessionStore:
    return postgres_backend(url, connect_timeout=connect_timeout).sessions
