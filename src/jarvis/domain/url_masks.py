"""Credentials in URLs are never shown: ``http://user:secret@host/x?token=abc`` is printed
``http://***@host/x?token=***``.

A URL given with ``--base-url``, ``OPENAI_BASE_URL``, ``config.toml`` or an MCP server's
``url`` may carry its credentials as userinfo or in its query string (``?api_key=...``).
Engines repeat their URL in error messages and ``--verbose`` in its engine line, and what
the CLI prints to a terminal ends up in scroll-back, logs and bug reports; so every line
the CLI writes to stderr goes through :func:`redact_urls`. A URL the user configured, shown
on its own (``jarvis mcp list``, a configuration error quoting it), goes through
:func:`mask_url`, which also hides a path segment that looks like a token: some servers
take their secret there (OpenJarvis's Home Assistant example is
``http://172.16.3.1:9583/private_abc123``).
"""

from __future__ import annotations

import re

_AUTHORITY_ENDS = frozenset("/?#\\\"'<>` \t\r\n\f\v")
"""Characters that end a URL's authority (``user:pw@host:port``) in running text."""
_CUT_ENDS = re.compile("[\"'<>`=\\s]")
"""What ends the search for the ``@`` of a userinfo an unescaped ``/``, ``?`` or ``#`` cut:
the end of the URL in running text, or a parameter's ``=``."""
_URL_ENDS = frozenset("\"'<>` \t\r\n\f\v")
"""Characters that end a whole URL in running text."""
_TRAILING = frozenset(".,;:!)]}")
"""Punctuation that ends a sentence or a bracket after a URL rather than belonging to it."""

MASK = "***"

MIN_TOKEN_CHARS = 8
"""A path segment this long that mixes letters and digits looks like a token."""
LONG_SEGMENT_CHARS = 20
"""A path segment this long looks like a token whatever its characters."""


def _cut_userinfo(text: str, start: int, end: int) -> tuple[int, int]:
    """For an authority ``text[start:end]`` with a ``:`` and no ``@``: the ``@`` of a
    userinfo whose password holds an unescaped ``/``, ``?`` or ``#`` (``http://u:pa/ss@h``,
    where ``u:pa`` is no host and port anyone means) and the end of the authority after it;
    ``(-1, end)`` when the URL has no ``@`` further on. The search stops at the end of the
    URL, at a parameter's ``=`` and at the next ``://``, so no character is searched twice
    for two URLs."""
    if text[start] == "[" or text.find(":", start, end) < 0:
        return -1, end
    limit = text.find("://", end)
    limit = len(text) if limit < 0 else limit
    stop = _CUT_ENDS.search(text, end, limit)
    later = text.find("@", end, limit if stop is None else stop.start())
    if later < 0:
        return -1, end
    after = later + 1
    while after < len(text) and text[after] not in _AUTHORITY_ENDS:
        after += 1
    return text.rfind("@", start, after), after


def redact_urls(text: str) -> str:
    """``text`` with the userinfo of every ``scheme://userinfo@host`` replaced by ``***``,
    and the value of every query parameter (``?token=***&page=***``; a parameter without
    ``=`` is all value) too: which of them is a secret cannot be told from its name.

    The userinfo runs up to the last ``@`` of the authority (so an unescaped ``@`` in a
    password is masked too), or past a ``/``, ``?`` or ``#`` that cuts an authority with a
    ``:`` to the ``@`` after it (:func:`_cut_userinfo`: ``http://u:pa/ss@h`` is masked
    whole; a URL with a port and an ``@`` in its path, ``http://h:80/x/@y``, is masked too,
    which shows less but gives nothing away). Linear time: each character is looked at a
    bounded number of times, whatever the text (no regular expression that could
    backtrack).
    """
    if "://" not in text:
        return text
    if "@" in text:
        text = _mask_userinfo(text)
    if "?" in text:
        text = _mask_queries(text)
    return text


def _mask_userinfo(text: str) -> str:
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
        if at < 0 and end > start:
            at, end = _cut_userinfo(text, start, end)
        if at > start:
            pieces.append(text[kept:start])
            pieces.append(MASK)
            kept = at
        search = max(end - 1, start)  # a "://" may begin just before the end
    pieces.append(text[kept:])
    return "".join(pieces)


def _mask_queries(text: str) -> str:
    """The query values of every URL in ``text`` masked; a URL runs to a space or a quote,
    less the punctuation that closes the sentence around it."""
    pieces: list[str] = []
    kept = 0
    search = 0
    length = len(text)
    while (found := text.find("://", search)) >= 0:
        stop = found + 3
        while stop < length and text[stop] not in _URL_ENDS:
            stop += 1
        search = stop  # a URL inside this one's query is masked as part of a value
        end = stop
        while end > found + 3 and text[end - 1] in _TRAILING:
            end -= 1
        query = text.find("?", found + 3, end)
        if query < 0:
            continue
        fragment = text.find("#", query, end)
        query_end = end if fragment < 0 else fragment
        pieces.append(text[kept : query + 1])
        pieces.append(
            "&".join(_masked_pair(pair) for pair in text[query + 1 : query_end].split("&"))
        )
        kept = query_end
    pieces.append(text[kept:])
    return "".join(pieces)


def _masked_pair(pair: str) -> str:
    name, equals, value = pair.partition("=")
    if not equals:
        return MASK if name else ""
    return f"{name}={MASK}" if value else pair


def mask_url(url: str) -> str:
    """One configured URL as it may be shown: :func:`redact_urls`, and each path segment
    that looks like a token (:data:`MIN_TOKEN_CHARS` or more mixing letters and digits,
    or :data:`LONG_SEGMENT_CHARS` or more of anything) replaced by ``***``; the scheme, the
    host, the port and the plain words of the path (``/mcp``, ``/v1``) stay, to say where
    it points."""
    text = redact_urls(url)
    scheme = text.find("://")
    if scheme < 0:
        return text
    length = len(text)
    path_start = scheme + 3
    while path_start < length and text[path_start] not in "/?#":
        path_start += 1
    path_end = path_start
    while path_end < length and text[path_end] not in "?#":
        path_end += 1
    segments = text[path_start:path_end].split("/")
    path = "/".join(MASK if _token_like(segment) else segment for segment in segments)
    return text[:path_start] + path + text[path_end:]


def _token_like(segment: str) -> bool:
    if len(segment) >= LONG_SEGMENT_CHARS:
        return True
    return (
        len(segment) >= MIN_TOKEN_CHARS
        and any(char.isdigit() for char in segment)
        and any(char.isalpha() for char in segment)
    )
