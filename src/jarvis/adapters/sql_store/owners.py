"""The check every owned write makes first, in its own transaction (see
:mod:`jarvis.domain.owners`): is the definition the run started with still stored?

Definitions live in the operator-state table of the same database as the conversations and
state they own, so the check and the write are one transaction. On SQLite that transaction
holds the whole file (``BEGIN IMMEDIATE``); on PostgreSQL the definition's row is read
``FOR SHARE``, so a delete or a replacement of the definition waits until the write it
checked is committed, or commits first and the check sees it gone. A write that replaces
or deletes the definition itself reads it ``FOR UPDATE`` instead (two of them queue; with
``FOR SHARE`` each would wait for the other's lock).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from jarvis.adapters.sql_store.driver import Connection, SqlDriver, call
from jarvis.domain.owners import Owner, OwnerGoneError, holds

T = TypeVar("T")

_DEFINITION = "SELECT value FROM {state} WHERE key = ?"


def owner_holds(db: Connection, owner: Owner, *, changing: bool = False) -> bool:
    """Whether ``owner``'s very definition is stored (call inside the write's transaction);
    ``changing``: the write replaces the definition itself."""
    query = _DEFINITION + ("{lock}" if changing else "{share}")
    row = db.execute(query, (owner.key,)).fetchone()
    return holds(None if row is None else str(row[0]), owner)


async def owned_call(
    driver: SqlDriver,
    owner: Owner | None,
    work: Callable[[Connection], T],
    *,
    changing: bool = False,
) -> T:
    """``work`` (statements that open no transaction) for ``owner``: in one transaction
    after the check, ``OwnerGoneError`` and nothing done when its definition is gone;
    without an owner, as it is. ``changing``: ``work`` replaces or deletes the definition
    itself (:func:`owner_holds`)."""
    if owner is None:
        return await call(driver, work)
    checked = owner

    def checked_work(db: Connection) -> list[T]:
        with db.transaction():
            return [work(db)] if owner_holds(db, checked, changing=changing) else []

    done = await call(driver, checked_work)
    if not done:
        raise OwnerGoneError(owner)
    return done[0]
