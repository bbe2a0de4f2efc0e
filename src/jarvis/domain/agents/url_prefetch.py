"""Finding the URLs of a request, so CodeAct can read those pages before its first turn."""

from __future__ import annotations

import re

_URL = re.compile(r"https?://[^\s,;\"'<>`]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}'\""


def find_urls(text: str, *, limit: int = 3) -> list[str]:
    """The first ``limit`` distinct http(s) URLs of ``text``, trailing punctuation removed."""
    found: list[str] = []
    for match in _URL.finditer(text):
        url = match.group(0).rstrip(_TRAILING)
        if "://" in url and len(url.split("://", 1)[1]) > 0 and url not in found:
            found.append(url)
        if len(found) >= limit:
            break
    return found


def inline_pages(text: str, pages: list[tuple[str, str, bool]]) -> str:
    """``text`` followed by each fetched page (``url, content, ok``); the request itself is
    kept whole, URLs included."""
    if not pages:
        return text
    parts = [text.rstrip()]
    for url, content, ok in pages:
        if ok:
            parts.append(f"--- Content from {url} ---\n{content.strip()}\n--- End of content ---")
        else:
            parts.append(f"--- Could not fetch {url}: {content.strip()} ---")
    return "\n\n".join(parts)
