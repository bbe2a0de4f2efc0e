"""The check every owned write makes first, in its own transaction (see
:mod:`jarvis.domain.owners`): is the definition the run started with still stored?

Definitions live in the operator-state table of the same database as the conversations and
state they own, so the check and the write are one transaction. On SQLite that transaction
holds the whole file (``BEGIN IMMEDIATE``); on PostgreSQL the definition's row is read
``FOR SHARE``, so a delete or a replacement of the definition waits until the write it
checked is committed, or commits first and the check sees it gone. A write that replaces
or deletes the definition itself reads it ``FOR UPDATE`` instead (two of them queue; with
``FOR SHARE`` each would wait for the other's lock).

A definition is created by :data:`INSERT_DEFINITION` alone, which writes its row only where
there is none: of two concurrent creations the database lets exactly one write it. The
:func:`~jarvis.domain.owners.vacancy` of a definition (what clears an earlier one's leftovers
names) is checked by claiming its row the same way, and giving it up again, in the
clearing's transaction: on PostgreSQL, where an absent row cannot be locked, that
uncommitted row makes a concurrent creation of the key wait until the clearing is committed
(it then finds no row and writes its own), and a creation committed first makes the claim
write nothing, so the clearing sees the definition and clears nothing. SQLite's
transaction holds the whole file already; the same two statements serve it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from jarvis.adapters.sql_store.driver import Connection, SqlDriver, call
from jarvis.domain.owners import Owner, OwnerGoneError, holds

T = TypeVar("T")

_DEFINITION = "SELECT value FROM {state} WHERE key = ?"

INSERT_DEFINITION = """
INSERT INTO {state} (key, value, updated_us) VALUES (?, ?, {now})
ON CONFLICT (key) DO NOTHING
"""
"""Writes one ``operator_state`` row only where its key has none (a rowcount of 0: there is
one); a definition is created so, and a :func:`_vacant` key claimed."""


def _vacant(db: Connection, key: str) -> bool:
    """Whether no definition is stored under ``key``, none being created until the
    transaction ends (see the module's docstring): the key is claimed, then given up."""
    if db.execute(INSERT_DEFINITION, (key, "")).rowcount == 0:
        return False
    db.execute("DELETE FROM {state} WHERE key = ?", (key,))
    return True


def owner_holds(db: Connection, owner: Owner, *, changing: bool = False) -> bool:
    """Whether ``owner``'s very definition is stored (call inside the write's transaction);
    ``changing``: the write replaces the definition itself. For a vacancy: whether no
    definition is stored (none can be created before the transaction ends)."""
    if owner.vacant:
        return _vacant(db, owner.key)
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
