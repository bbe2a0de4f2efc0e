"""Web search through a SearXNG-compatible JSON endpoint the user configured.

``GET <provider_url>?q=<query>&format=json`` must answer ``{"results": [{"title", "url",
"content"}, ...]}`` — SearXNG's own format, which several other engines also speak. The
endpoint is the user's choice (often a SearXNG on their own machine), so it is not subject
to the private-address rule that guards model-chosen URLs. Its answer is still bounded:
the decoded body is capped as it streams (:mod:`.bounded_body`), the whole request runs
under one total time cap (a server dripping a byte at a time never ends it otherwise), and
each result's fields are cut to a sane length.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Final

import httpx

from jarvis.adapters.httpx_web.bounded_body import ACCEPT_ENCODING, BodyRefused, read_bounded

MAX_RESPONSE_BYTES: Final = 2 * 1024 * 1024
_MAX_TITLE: Final = 300
_MAX_SNIPPET: Final = 1000
_MAX_URL: Final = 2048


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
        max_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.provider_url = provider_url
        self.transport = transport
        self.timeout_seconds = timeout_seconds
        self.max_bytes = max_bytes

    async def _get(self, query: str) -> bytes:
        """The body of a 200 answer, bounded in size and in total time."""
        try:
            async with (
                asyncio.timeout(self.timeout_seconds),
                httpx.AsyncClient(
                    transport=self.transport,
                    timeout=self.timeout_seconds,
                    trust_env=True,
                    headers={"Accept-Encoding": ACCEPT_ENCODING},
                ) as client,
                client.stream(
                    "GET", self.provider_url, params={"q": query, "format": "json"}
                ) as response,
            ):
                if response.status_code != 200:
                    raise SearchFailed(
                        f"The search provider at {self.provider_url} answered HTTP "
                        f"{response.status_code}."
                    )
                body, truncated = await read_bounded(response, self.max_bytes)
        except (TimeoutError, httpx.TimeoutException):
            raise SearchFailed(
                f"The search provider at {self.provider_url} did not answer within "
                f"{self.timeout_seconds:g} s."
            ) from None
        except BodyRefused as refusal:
            raise SearchFailed(
                f"The search provider at {self.provider_url} was not read: {refusal}."
            ) from None
        except httpx.HTTPError as exc:
            raise SearchFailed(
                f"The search provider at {self.provider_url} is unreachable (offline?): {exc}."
            ) from None
        if truncated:
            raise SearchFailed(
                f"The search provider at {self.provider_url} answered more than "
                f"{self.max_bytes} bytes; its answer was not read."
            )
        return body

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        body = await self._get(query)
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
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
            if not isinstance(url, str) or not url or len(url) > _MAX_URL:
                continue
            title = item.get("title")
            snippet = item.get("content")
            hits.append(
                SearchHit(
                    title=(title if isinstance(title, str) else url)[:_MAX_TITLE],
                    url=url,
                    snippet=(snippet if isinstance(snippet, str) else "")[:_MAX_SNIPPET],
                )
            )
            if len(hits) == max_results:
                break
        return hits
