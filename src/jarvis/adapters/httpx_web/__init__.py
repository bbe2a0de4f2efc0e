"""The web tools over httpx: page fetching with SSRF checks on every hop, and search."""

from jarvis.adapters.httpx_web.addresses import address_refusal, system_resolver
from jarvis.adapters.httpx_web.page_fetch import FetchRefused, PageFetcher
from jarvis.adapters.httpx_web.search_provider import SearxngSearch
from jarvis.adapters.httpx_web.web_search import WebSearchTool

__all__ = [
    "FetchRefused",
    "PageFetcher",
    "SearxngSearch",
    "WebSearchTool",
    "address_refusal",
    "system_resolver",
]
