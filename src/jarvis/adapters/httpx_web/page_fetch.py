"""Fetching one web page for a model, safely: every hop checked, size and time bounded.

Redirects are followed by hand (at most ``max_redirects``), and each hop goes through the
same checks as the first URL: http or https only, the host resolved and every address
public (see :mod:`.addresses`), then the request sent to a checked address with the
original ``Host`` header and TLS server name. A redirect from a public page to
``http://127.0.0.1/`` or to a name that resolves into the LAN is refused before it is sent.
Bodies are read through :mod:`.bounded_body` (the decoded size is capped as it streams, not
after; stacked encodings are refused) and the whole fetch, redirects and body included,
runs under one total time cap; turning HTML into text runs off the event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

import httpx

from jarvis.adapters.httpx_web.addresses import Resolver, address_refusal, system_resolver
from jarvis.adapters.httpx_web.bounded_body import ACCEPT_ENCODING, BodyRefused, read_bounded
from jarvis.adapters.httpx_web.html_text import html_to_text

USER_AGENT: Final = "jarvis/0.1 (local agent runtime; +https://localhost/)"
_TEXT_TYPES: Final = ("text/", "application/json", "application/xml", "application/xhtml+xml")
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


class FetchRefused(Exception):
    """The page was not fetched; the message says why, for the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedPage:
    url: str
    title: str
    text: str
    content_type: str
    status: int
    redirects: int
    truncated_bytes: bool


class PageFetcher:
    """GETs a URL for a model. ``allow_private_hosts=True`` is for tests on 127.0.0.1 only."""

    def __init__(
        self,
        *,
        allow_private_hosts: bool = False,
        resolver: Resolver | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_seconds: float = 20.0,
        max_bytes: int = 2 * 1024 * 1024,
        max_redirects: int = 5,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.allow_private_hosts = allow_private_hosts
        self.resolver: Resolver = resolver or system_resolver
        self.transport = transport
        self.timeout_seconds = timeout_seconds
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.user_agent = user_agent

    async def fetch(self, url: str) -> FetchedPage:
        """The page at ``url`` as text. Raises FetchRefused with a readable reason."""
        try:
            current = httpx.URL(url)
        except (httpx.InvalidURL, ValueError) as exc:
            raise FetchRefused(f"'{url}' is not a valid URL ({exc}).") from None
        try:
            async with (
                asyncio.timeout(self.timeout_seconds),
                httpx.AsyncClient(
                    transport=self.transport,
                    follow_redirects=False,
                    trust_env=False,
                    timeout=httpx.Timeout(self.timeout_seconds),
                    headers={"User-Agent": self.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
                ) as client,
            ):
                for hop in range(self.max_redirects + 1):
                    response, body, truncated = await self._get(client, current)
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        try:
                            current = current.join(location)
                        except (httpx.InvalidURL, ValueError):
                            raise FetchRefused(
                                f"{current} redirected to an invalid URL: {location!r}."
                            ) from None
                        continue
                    return await asyncio.to_thread(
                        self._page, current, response, body, truncated, hop
                    )
                raise FetchRefused(
                    f"Too many redirects (more than {self.max_redirects}) starting at {url}."
                )
        except TimeoutError:
            raise FetchRefused(
                f"Timed out fetching {url} after {self.timeout_seconds:g} s."
            ) from None

    async def _addresses(self, url: httpx.URL) -> list[str]:
        if url.scheme not in ("http", "https"):
            raise FetchRefused(
                f"Only http:// and https:// URLs can be fetched, not {url.scheme or 'this'}:."
            )
        if not url.host:
            raise FetchRefused(f"The URL {url} has no host.")
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addresses = await self.resolver(url.host, port)
        except OSError as exc:
            raise FetchRefused(
                f"Could not resolve {url.host} (offline, or no such host): {exc}."
            ) from None
        if not addresses:
            raise FetchRefused(f"Could not resolve {url.host}.")
        if not self.allow_private_hosts:
            for address in addresses:
                reason = address_refusal(address)
                if reason is not None:
                    raise FetchRefused(
                        f"Refused to fetch {url}: {url.host} resolves to a {reason} address "
                        f"({address}); only public internet addresses can be fetched."
                    )
        return addresses

    async def _get(
        self, client: httpx.AsyncClient, url: httpx.URL
    ) -> tuple[httpx.Response, bytes, bool]:
        addresses = await self._addresses(url)
        host_header = url.host if url.port is None else f"{url.host}:{url.port}"
        if ":" in url.host:
            host_header = f"[{url.host}]" + ("" if url.port is None else f":{url.port}")
        last_error: httpx.TransportError | None = None
        for address in addresses:
            pinned = url.copy_with(host=address)
            request = client.build_request(
                "GET",
                pinned,
                headers={"Host": host_header},
                extensions={"sni_hostname": url.host} if url.scheme == "https" else {},
            )
            try:
                response = await client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last_error = exc
                continue
            except httpx.TimeoutException:
                raise FetchRefused(f"Timed out fetching {url}.") from None
            except httpx.HTTPError as exc:
                raise FetchRefused(f"Could not fetch {url}: {exc}.") from None
            try:
                body, truncated = await self._read(response)
            except BodyRefused as refusal:
                raise FetchRefused(f"{url} was not read: {refusal}.") from None
            except httpx.HTTPError as exc:
                raise FetchRefused(f"The connection to {url.host} failed: {exc}.") from None
            finally:
                await response.aclose()
            return response, body, truncated
        raise FetchRefused(
            f"Could not connect to {url.host} (offline or unreachable): {last_error}."
        )

    async def _read(self, response: httpx.Response) -> tuple[bytes, bool]:
        if response.status_code in _REDIRECTS or response.status_code >= 400:
            return b"", False  # the body is never shown
        return await read_bounded(response, self.max_bytes)

    def _page(
        self, url: httpx.URL, response: httpx.Response, body: bytes, truncated: bool, hops: int
    ) -> FetchedPage:
        if response.status_code >= 400:
            raise FetchRefused(f"{url} answered HTTP {response.status_code}.")
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        textual = (
            content_type.startswith(_TEXT_TYPES)
            or content_type.endswith(("+json", "+xml"))
            or (not content_type and b"\x00" not in body[:4096])
        )
        if not textual:
            raise FetchRefused(
                f"{url} is {content_type or 'binary'} content; only text and HTML pages "
                "can be read."
            )
        try:
            text = body.decode(response.charset_encoding or "utf-8", errors="replace")
        except LookupError:
            text = body.decode("utf-8", errors="replace")
        title = ""
        if content_type in ("text/html", "application/xhtml+xml") or (
            not content_type and "<html" in text[:1000].lower()
        ):
            title, text = html_to_text(text)
        return FetchedPage(
            url=str(url),
            title=title,
            text=text,
            content_type=content_type,
            status=response.status_code,
            redirects=hops,
            truncated_bytes=truncated,
        )
