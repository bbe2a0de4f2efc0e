"""Web search through a SearXNG-compatible JSON endpoint the user configured.

``GET <provider_url>?q=<query>&format=json`` must answer ``{"results": [{"title", "url",
"content"}, ...]}`` — SearXNG's own format, which several other engines also speak. The
endpoint is the user's choice (often a SearXNG on their own machine), so it is not subject
to the private-address rule that guards model-chosen URLs.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx


class SearchFailed(Exception):
    """The provider could not answer; the message says why, for the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearxngSearch:
    def __init__(
        self,
        provider_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_seconds: float = 15.0,
    ) -> None:
        self.provider_url = provider_url
        self.transport = transport
        self.timeout_seconds = timeout_seconds

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        try:
            async with httpx.AsyncClient(
                transport=self.transport, timeout=self.timeout_seconds, trust_env=True
            ) as client:
                response = await client.get(
                    self.provider_url, params={"q": query, "format": "json"}
                )
        except httpx.TimeoutException:
            raise SearchFailed(
                f"The search provider at {self.provider_url} did not answer within "
                f"{self.timeout_seconds:g} s."
            ) from None
        except httpx.HTTPError as exc:
            raise SearchFailed(
                f"The search provider at {self.provider_url} is unreachable (offline?): {exc}."
            ) from None
        if response.status_code != 200:
            raise SearchFailed(
                f"The search provider at {self.provider_url} answered HTTP {response.status_code}."
            )
        try:
            payload = response.json()
        except ValueError:
            raise SearchFailed(
                f"The search provider at {self.provider_url} did not answer JSON; is it a "
                "SearXNG-compatible endpoint with the JSON format enabled?"
            ) from None
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise SearchFailed(
                f"The search provider at {self.provider_url} answered JSON without a "
                "'results' list."
            )
        hits: list[SearchHit] = []
        for item in results:
            if not isinstance(item, dict):
                continue
            url = item.get("url")
            if not isinstance(url, str) or not url:
                continue
            title = item.get("title")
            snippet = item.get("content")
            hits.append(
                SearchHit(
                    title=title if isinstance(title, str) else url,
                    url=url,
                    snippet=snippet if isinstance(snippet, str) else "",
                )
            )
            if len(hits) == max_results:
                break
        return hits
