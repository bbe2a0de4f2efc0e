"""The ``web_search`` tool's spec, importable without httpx (for listings and the catalogue)."""

from __future__ import annotations

from typing import Final

from jarvis.domain.tools.specs import ToolSpec

DEFAULT_MAX_RESULTS: Final = 5
MAX_RESULTS: Final = 10
MAX_PAGE_CHARS: Final = 8000
NO_PROVIDER: Final = (
    "No search provider configured (set [tools.web_search] provider_url in config.toml or "
    "$JARVIS_SEARCH_URL to a SearXNG-compatible JSON endpoint); pass a URL to fetch a page "
    "instead."
)

WEB_SEARCH_SPEC: Final = ToolSpec(
    name="web_search",
    description=(
        "Search the web, or read a web page: if 'query' is a single http(s) URL the page is "
        "fetched and returned as text; otherwise the query is searched and the top results "
        "(title, URL, summary) are returned."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Search terms, or one URL such as 'https://example.org/page'.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "description": f"How many search results (default {DEFAULT_MAX_RESULTS}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    category="search",
    timeout_seconds=30.0,
)
