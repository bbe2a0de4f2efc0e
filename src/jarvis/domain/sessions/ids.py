"""Session ids are used as file names by stores, so their shape is a domain rule."""

from __future__ import annotations

import re

from jarvis.domain.errors import ConfigurationError, shown

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` when it is safe to use as a name, else raise.

    Letters, digits and ``_ . : @ -``, at most 128 characters, not starting with a dot, and
    never ``..`` — so no store can be tricked into leaving its folder.
    """
    if not _SESSION_ID.fullmatch(session_id) or ".." in session_id:
        raise ConfigurationError(
            f"Invalid session id {shown(session_id)!r}.",
            hint="Use letters, digits and _ . : @ - (at most 128 characters).",
        )
    return session_id
