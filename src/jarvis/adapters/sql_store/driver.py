"""The seam between the SQL stores and a database: what differs between SQLite and PostgreSQL.

The stores write each statement once, with ``?`` placeholders and ``{name}`` fields for
the few things a dialect spells its own way (:class:`Dialect`): the table names (SQLite's
``sessions``, PostgreSQL's ``jarvis_sessions``), the clock, the byte order of text keys, a
managed agent's creation time read from its JSON record, and the next ``touched`` number.
A driver renders that text for its database (:class:`Renderer`), opens and migrates the
connection, runs work on it one call at a time in a worker thread, frames transactions
and turns its library's errors into :class:`~jarvis.domain.sessions.records.SessionStoreError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

Row = tuple[Any, ...]
"""A result row as the database library gives it (its cells' types are the columns')."""


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the stores need (see the module's docstring)."""

    placeholder: str
    """``?`` (sqlite3) or ``%s`` (psycopg)."""
    fields: tuple[tuple[str, str], ...]
    """``{name}`` -> SQL text: tables, ``now`` (microseconds since the epoch), ``c`` (the
    byte-order collation after a text column), ``created`` (a managed agent record's
    ``created_us``, damaged records first), ``next_touch`` (the next ``touched`` number),
    ``returning`` (how an upserted session's message count comes back, or nothing),
    ``lock_agent`` (an expression of one placeholder, in the dialect's own spelling, that
    holds an agent's lock until the transaction ends, or just reads the value back),
    ``share`` (after a ``SELECT``: the rows read stay as read until the transaction ends,
    where the transaction does not hold the whole database already), ``lock`` (the same,
    for rows the transaction goes on to change: no other writer reads them ``share`` or
    changes them meanwhile, so two such transactions queue instead of deadlocking)."""
    unlimited: int | None
    """The ``LIMIT`` value meaning no limit (SQLite ``-1``, PostgreSQL ``NULL``)."""
    max_seq: int
    """The largest message position the ``seq`` column holds."""


class Renderer:
    """The stores' SQL in one dialect: placeholders first, then the fields (which may hold
    ``?``), each template rendered once per connection (the templates are the stores'
    constants, so the cache stays as small as they are few)."""

    def __init__(self, dialect: Dialect) -> None:
        self._placeholder = dialect.placeholder
        self._fields = dict(dialect.fields)
        self._rendered: dict[str, str] = {}

    def __call__(self, template: str) -> str:
        text = self._rendered.get(template)
        if text is None:
            text = template.replace("?", self._placeholder).format_map(self._fields)
            self._rendered[template] = text
        return text


class Cursor(Protocol):
    """What the stores read from an executed statement."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Row]: ...


class Connection(Protocol):
    """An open database connection, speaking the stores' SQL (rendered by the driver)."""

    def execute(self, template: str, parameters: Sequence[object] = ()) -> Cursor: ...

    def executemany(self, template: str, rows: Sequence[Sequence[object]]) -> None: ...

    def transaction(self) -> AbstractContextManager[None]:
        """One transaction that takes the write lock at once: committed when the block
        ends, rolled back when it raises."""
        ...


class SqlDriver(Protocol):
    """One database: opened (and migrated) on first use, one call at a time."""

    @property
    def location(self) -> str:
        """Where the database is, as it may be shown (a path, a URL without its password)."""
        ...

    @property
    def dialect(self) -> Dialect: ...

    def run(self, work: Callable[[Connection], T]) -> T:
        """``work`` on the connection, under the driver's lock; errors become
        :class:`~jarvis.domain.sessions.records.SessionStoreError`."""
        ...

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        ...


async def call(driver: SqlDriver, work: Callable[[Connection], T]) -> T:
    """``driver.run(work)`` in a worker thread, so the event loop never waits on the disk."""
    return await asyncio.to_thread(driver.run, work)
