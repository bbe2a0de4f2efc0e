"""Which definition a run's late writes belong to, so that they never reach a successor.

A managed agent or an operator is a stored definition, and its runs write to its
conversation and (an operator's) to its state when they end, long after they started. A
definition deleted while one of its runs is under way, and perhaps created again under the
same id, must not receive what that run writes: the new agent would answer with the old
one's conversation, the new operator tick with the old one's state.

So each definition has an *incarnation*, a random id given when it is created and kept by
every update, stored in its record. A run names its :class:`Owner` (where the definition is
stored and the incarnation it started with) on each write; the store applies the write only
while that very definition is stored, checked in the same transaction as the write, and
otherwise raises :class:`OwnerGoneError` and writes nothing. The check is the store's, not
the process's, because the definition may be deleted by another process or machine.

Creating a definition first clears what an earlier one of the id left behind. That clearing
names the :func:`vacancy` of the id: it applies only while no definition of the id is stored,
so a creation that loses a race to another process never clears the winner's conversation
or state (the store refuses it with :class:`OwnerGoneError`, and the loser is told the id
exists already).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from jarvis.domain.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class Owner:
    """The definition a write belongs to."""

    key: str
    """Where the definition is stored in the operator store (``operator-def:<id>``,
    ``managed_agent:<id>``): next to the data it owns, in the same database."""
    incarnation: str
    """The definition's incarnation when the run started (``""`` for a definition stored
    before definitions had one)."""
    what: str
    """The definition as a message names it: ``managed agent 'victim'``."""
    vacant: bool = False
    """The write is for no definition: it applies only while none is stored under
    :attr:`key` (:func:`vacancy`), whatever its incarnation."""


class OwnerGoneError(ConfigurationError):
    """The definition a run writes for was deleted while it ran (and may exist again under
    the same id): the write was refused, nothing was stored."""

    def __init__(self, owner: Owner) -> None:
        if owner.vacant:
            message = f"The {owner.what} was created meanwhile: nothing of it was changed."
        else:
            message = (
                f"The {owner.what} was deleted while it ran (it may have been created again "
                "since): what this run produced was not stored."
            )
        super().__init__(message)
        self.owner = owner


def new_incarnation() -> str:
    """A fresh incarnation: 16 random hex digits (``secrets`` is imported here, by the
    few commands that create a definition, not by every one that reads this module)."""
    import secrets

    return secrets.token_hex(8)


def incarnation_of(record: str) -> str | None:
    """The incarnation a stored definition record holds (``""`` when it has none: stored
    before definitions had one); ``None`` when the record is not a JSON object. An operator
    store value that is the record as a JSON string (an operator's definition) is read
    through."""
    try:
        data = json.loads(record)
        if isinstance(data, str):
            data = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    found = data.get("incarnation", "")
    return found if isinstance(found, str) else None


def vacancy(owner: Owner) -> Owner:
    """The place of ``owner``'s definition while it holds none: what clears an earlier
    definition's leftovers before a new one is created names it, so the store clears them
    only while no definition of the id is stored, checked in the clearing's transaction
    (never what a definition created meanwhile by another process keeps)."""
    return replace(owner, incarnation="", vacant=True)


def holds(record: str | None, owner: Owner) -> bool:
    """Whether ``record`` (the definition stored under ``owner.key``, ``None`` for none) is
    ``owner``'s very definition (for a :func:`vacancy`: whether there is none)."""
    if owner.vacant:
        return record is None
    return record is not None and incarnation_of(record) == owner.incarnation
