"""Database URLs as they may be shown: with every secret replaced by ``***``.

A secret is the password of the URL's userinfo and the value of a ``password`` or
``sslpassword`` parameter (libpq's two keys that hold one), in a ``postgresql://`` URI or a
``key=value`` conninfo. The userinfo is found the way a person wrote it, not the way a URL
parser reads it: a password with an unescaped ``/``, ``?`` or ``#``
(``postgresql://u:S3cret/Pw@host/db``) ends the authority for :func:`urllib.parse.urlsplit`
(and for libpq, which then reads ``S3cret`` as a port), so the secret would be shown as a
port and a database name. Here an authority with a ``:`` and no ``@`` whose URL has an
``@`` further on (before any ``=`` of a parameter) is taken for a cut userinfo, and masked
up to that ``@``: a database name holding an ``@`` is then masked too, which shows less
but gives nothing away. Nothing here raises: a URL that cannot be read is shown masked all
the same.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

SECRET_KEYS = frozenset({"password", "sslpassword"})
"""libpq's parameters whose value is a secret."""

_KEYWORD_SECRET = re.compile(r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_AUTHORITY_ENDS = "/?#"


def _userinfo(body: str) -> tuple[int, bool]:
    """Where the userinfo of ``body`` (a URI after ``scheme://``) ends (the index of its
    ``@``, or -1 when it has none), and whether a password cuts the authority (see the
    module)."""
    end = next((i for i, c in enumerate(body) if c in _AUTHORITY_ENDS), len(body))
    at = body.rfind("@", 0, end)
    if at >= 0 or ":" not in body[:end] or body.startswith("["):
        return at, False
    later = body.find("@", end)
    if later < 0 or "=" in body[end:later]:
        return -1, False
    after = next((i for i in range(later, len(body)) if body[i] in _AUTHORITY_ENDS), len(body))
    return body.rfind("@", 0, after), True


def cut_authority(url: str) -> bool:
    """Whether ``url`` holds a ``/``, ``?`` or ``#`` before its userinfo's ``@`` (a password
    not percent-encoded): libpq would read a part of the password as the port, and send
    another part, as the database name, to the host it reads from the user name."""
    _, sep, body = url.partition("://")
    return bool(sep) and _userinfo(body)[1]


def _query(query: str) -> str:
    """The ``key=value`` pairs of ``query`` with every secret's value masked, the rest as
    written."""
    pairs = query.split("&")
    for n, pair in enumerate(pairs):
        key, equals, _ = pair.partition("=")
        if equals and unquote(key).strip().lower() in SECRET_KEYS:
            pairs[n] = f"{key}=***"
    return "&".join(pairs)


def redact_url(url: str) -> str:
    """``url`` (``postgresql://`` URI or ``key=value`` conninfo) with no secret left in it."""
    scheme, sep, body = url.partition("://")
    if not sep:
        return _KEYWORD_SECRET.sub(r"\1***", url)
    at = _userinfo(body)[0]
    if at >= 0:
        user, colon, _ = body[:at].partition(":")
        body = f"{user}{':***' if colon else ''}{body[at:]}"
    rest, question, query = body.partition("?")
    query, hash_mark, fragment = query.partition("#")
    if question:
        rest += question + _query(query) + hash_mark + fragment
    return f"{scheme}://{rest}"


def secrets_of(url: str) -> set[str]:
    """Every secret written in ``url``, as written and decoded, to scrub them from driver
    messages (which may quote the URL or a part of it)."""
    found: set[str] = set()
    _, sep, body = url.partition("://")
    if not sep:
        found.update(m.group(2).strip("'") for m in _KEYWORD_SECRET.finditer(url))
    else:
        at = _userinfo(body)[0]
        if at >= 0:
            found.add(body[:at].partition(":")[2])
        for key, value in parse_qsl(body.partition("?")[2]):
            if key.strip().lower() in SECRET_KEYS:
                found.add(value)
    return {form for secret in found for form in (secret, unquote(secret)) if form}
