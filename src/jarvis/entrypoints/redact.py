"""Credentials in URLs are never shown: ``http://user:secret@host`` is printed ``http://***@host``.

A URL given with ``--base-url``, ``OPENAI_BASE_URL`` or ``config.toml`` may carry its
credentials as userinfo. Engines repeat their URL in error messages and ``--verbose`` in
its engine line, and what the CLI prints to a terminal ends up in scroll-back, logs and
bug reports; so every line the CLI writes to stderr goes through :func:`redact_urls`, and
configuration errors quote a URL only through it.
"""

from __future__ import annotations

_AUTHORITY_ENDS = frozenset("/?#\\\"'<>` \t\r\n\f\v")
"""Characters that end a URL's authority (``user:pw@host:port``) in running text."""

MASK = "***"


def redact_urls(text: str) -> str:
    """``text`` with the userinfo of every ``scheme://userinfo@host`` replaced by ``***``.

    The userinfo runs up to the last ``@`` of the authority (so an unescaped ``@`` in a
    password is masked too). Linear time: each character is looked at a bounded number of
    times, whatever the text (no regular expression that could backtrack).
    """
    if "@" not in text or "://" not in text:
        return text
    pieces: list[str] = []
    kept = 0  # text[:kept] is already in pieces
    search = 0
    length = len(text)
    while (found := text.find("://", search)) >= 0:
        start = found + 3
        end = start
        while end < length and text[end] not in _AUTHORITY_ENDS:
            end += 1
        at = text.rfind("@", start, end)
        if at > start:
            pieces.append(text[kept:start])
            pieces.append(MASK)
            kept = at
        search = max(end - 1, start)  # a "://" may begin just before the end
    pieces.append(text[kept:])
    return "".join(pieces)
