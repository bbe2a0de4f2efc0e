"""The ``web_search`` tool: fetch a URL, or search the web through the configured provider.

A query that is exactly one URL is fetched (:class:`.page_fetch.PageFetcher`); anything
else is searched (:class:`.search_provider.SearxngSearch`). With no provider configured,
or when the network is down, the model gets a failed result that says so and what to do.
"""

from __future__ import annotations

import re
from typing import Final

from jarvis.adapters.httpx_web.page_fetch import FetchedPage, FetchRefused, PageFetcher
from jarvis.adapters.httpx_web.search_provider import SearchFailed, SearchHit, SearxngSearch
from jarvis.adapters.httpx_web.tool_spec import (
    DEFAULT_MAX_RESULTS,
    MAX_PAGE_CHARS,
    MAX_RESULTS,
    NO_PROVIDER,
    WEB_SEARCH_SPEC,
)
from jarvis.application.tools.arguments import integer_argument
from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolResult, ToolSpec

_URL: Final = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$")


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text, False
    return (
        text[:limit].rstrip() + f"\n\n[Content truncated: {limit} of {len(text)} characters]",
        True,
    )


def format_page(page: FetchedPage, limit: int) -> tuple[str, bool]:
    header = f"Title: {page.title}\n" if page.title else ""
    body, truncated = truncate(page.text, limit)
    if page.truncated_bytes and not truncated:
        body += "\n\n[Content truncated: the page is larger than the download limit]"
        truncated = True
    return f"{header}URL: {page.url}\n\n{body}", truncated


def format_hits(hits: list[SearchHit]) -> str:
    return "\n\n".join(
        f"{n}. {hit.title}\n   {hit.url}\n   {hit.snippet}".rstrip()
        for n, hit in enumerate(hits, start=1)
    )


class WebSearchTool:
    """``provider`` searches (None = not configured); ``fetcher`` reads pages."""

    def __init__(
        self,
        *,
        fetcher: PageFetcher | None = None,
        provider: SearxngSearch | None = None,
        max_page_chars: int = MAX_PAGE_CHARS,
    ) -> None:
        self.fetcher = fetcher or PageFetcher()
        self.provider = provider
        self.max_page_chars = max_page_chars

    @classmethod
    def from_settings(cls, provider_url: str = "") -> WebSearchTool:
        """The tool as configured: an empty ``provider_url`` means no search provider."""
        provider = SearxngSearch(provider_url.strip()) if provider_url.strip() else None
        return cls(fetcher=PageFetcher(), provider=provider)

    @property
    def spec(self) -> ToolSpec:
        return WEB_SEARCH_SPEC

    async def execute(self, arguments: JSONObject) -> ToolResult:
        query = arguments.get("query")
        max_results = integer_argument(
            arguments, "max_results", default=DEFAULT_MAX_RESULTS, low=1, high=MAX_RESULTS
        )
        if not isinstance(query, str) or not query.strip():
            return _failed("Error: 'query' must be a non-empty string.")
        if max_results is None:
            return _failed(f"Error: 'max_results' must be an integer from 1 to {MAX_RESULTS}.")
        text = query.strip()
        if _URL.match(text):
            return await self._fetch(text)
        return await self._search(text, max_results)

    async def _fetch(self, url: str) -> ToolResult:
        try:
            page = await self.fetcher.fetch(url)
        except FetchRefused as refusal:
            return _failed(f"Error: {refusal}")
        content, truncated = format_page(page, self.max_page_chars)
        return ToolResult(
            tool_name="web_search",
            content=content,
            truncated=truncated,
            metadata={"url": page.url, "status": page.status, "redirects": page.redirects},
        )

    async def _search(self, query: str, max_results: int) -> ToolResult:
        if self.provider is None:
            return _failed(NO_PROVIDER)
        try:
            hits = await self.provider.search(query, max_results=max_results)
        except SearchFailed as failure:
            return _failed(f"Error: {failure}")
        if not hits:
            return ToolResult(
                tool_name="web_search",
                content=f"No results found for '{query}'.",
                metadata={"results": 0},
            )
        return ToolResult(
            tool_name="web_search", content=format_hits(hits), metadata={"results": len(hits)}
        )


def _failed(message: str) -> ToolResult:
    return ToolResult(tool_name="web_search", content=message, success=False)
