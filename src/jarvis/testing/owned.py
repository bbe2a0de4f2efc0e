"""The check the in-memory stores make for a write that names its owner (see
:mod:`jarvis.domain.owners`), written once for the session and approval stores."""

from __future__ import annotations

from collections.abc import Callable

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.owners import Owner, OwnerGoneError

Owners = Callable[[Owner], bool]
"""Whether a definition is stored: the ``holds`` of the in-memory managed-agent or operator
store that shares a store's "database", as the SQL stores share one."""


def check_owner(owners: Owners | None, owner: Owner | None, store: str) -> None:
    """Refuse a write for ``owner`` (``OwnerGoneError``) unless its definition is stored. A
    ``store`` without ``owners`` cannot tell, so it refuses such a write rather than guess
    (``ConfigurationError``), as the ``jsonl`` session store does; a write without an owner
    passes."""
    if owner is None:
        return
    if owners is None:
        raise ConfigurationError(
            f"This in-memory {store} shares no definitions to check the {owner.what} "
            "against (give it owners=...)."
        )
    if not owners(owner):
        raise OwnerGoneError(owner)
