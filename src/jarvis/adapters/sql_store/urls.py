"""Database URLs as they may be shown: with the password replaced by ``***``."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` (``postgresql://`` URI or ``key=value`` conninfo) with no password left in it."""
    if "://" not in url:
        return _KEYWORD_PASSWORD.sub(r"\1***", url)
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hosts = netloc.rpartition("@")
            user, colon, _ = userinfo.partition(":")
            netloc = f"{user}{':***' if colon else ''}@{hosts}"
        query = urlencode(
            [
                (key, "***" if key.lower() == "password" else value)
                for key, value in parse_qsl(parts.query, keep_blank_values=True)
            ],
            safe="*",
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<a database URL that does not parse>"


def password_of(url: str) -> str:
    """The password written in ``url`` ("" when none), to scrub it from driver messages."""
    if "://" not in url:
        match = _KEYWORD_PASSWORD.search(url)
        return match.group(2).strip("'") if match else ""
    try:
        parts = urlsplit(url)
        for key, value in parse_qsl(parts.query):
            if key.lower() == "password":
                return value
        return parts.password or ""
    except ValueError:
        return ""
