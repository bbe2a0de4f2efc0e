"""web_search against a real HTTP server on 127.0.0.1: fetching, SSRF on every hop, search.

Loopback is private, so the default fetcher must refuse it. To test a *public* first hop,
a resolver maps ``public.test`` to a public address and a transport routes connections to
that address to the local server; everything else (resolution of other names, the address
checks, the redirect loop) is the real code.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contracts.tool_contract import ToolContract
from jarvis.adapters.httpx_web.addresses import address_refusal, system_resolver
from jarvis.adapters.httpx_web.page_fetch import PageFetcher
from jarvis.adapters.httpx_web.search_provider import SearxngSearch
from jarvis.adapters.httpx_web.tool_spec import NO_PROVIDER
from jarvis.adapters.httpx_web.web_search import WebSearchTool
from jarvis.domain.json_types import JSONObject
from tests.integration.local_site import LocalSite

PUBLIC_IP = "93.184.216.34"


@pytest.fixture
def site() -> Iterator[LocalSite]:
    with LocalSite() as running:
        yield running


class PublicToLoopback(httpx.AsyncBaseTransport):
    """Connections to PUBLIC_IP reach the local site instead (the only thing simulated)."""

    def __init__(self, verify: ssl.SSLContext | bool = True) -> None:
        self.inner = httpx.AsyncHTTPTransport(verify=verify)
        self.connected_to: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.connected_to.append(request.url.host)
        if request.url.host == PUBLIC_IP:
            request.url = request.url.copy_with(host="127.0.0.1")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


NAMES = {
    "public.test": [PUBLIC_IP],
    "internal.test": ["10.0.0.7"],
    "metadata.test": ["169.254.169.254"],
    "cgnat.test": ["100.64.3.4"],
    "mixed.test": [PUBLIC_IP, "192.168.1.10"],
    "mapped.test": ["::ffff:127.0.0.1"],
}


async def fake_dns(host: str, port: int) -> list[str]:
    if host in NAMES:
        return NAMES[host]
    if host.endswith(".test"):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return await system_resolver(host, port)


def guarded(**options: float) -> tuple[WebSearchTool, PublicToLoopback]:
    transport = PublicToLoopback()
    fetcher = PageFetcher(resolver=fake_dns, transport=transport, **options)  # type: ignore[arg-type]
    return WebSearchTool(fetcher=fetcher), transport


def local(**options: float) -> WebSearchTool:
    return WebSearchTool(fetcher=PageFetcher(allow_private_hosts=True, **options))  # type: ignore[arg-type]


async def fetch(tool: WebSearchTool, url: str) -> tuple[bool, str]:
    result = await tool.execute({"query": url})
    return result.success, result.content


class TestWebSearchTool(ToolContract[WebSearchTool]):
    @pytest.fixture
    def tool(self) -> WebSearchTool:
        return local()

    @pytest.fixture
    def valid_arguments(self, site: LocalSite) -> JSONObject:
        return {"query": f"{site.base}/plain"}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject:
        return {"query": "local agent runtimes"}


# -- the default refuses private addresses ------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/secret",
        "http://localhost:{port}/secret",
        "http://[::1]:{port}/secret",
        "http://2130706433:{port}/secret",
        "http://0x7f.0.0.1:{port}/secret",
        "http://127.1:{port}/secret",
        "http://0.0.0.0:{port}/secret",
    ],
)
async def test_the_default_refuses_loopback_in_any_spelling(site: LocalSite, url: str) -> None:
    ok, message = await fetch(WebSearchTool(), url.format(port=site.port))
    assert not ok
    assert message.startswith("Error: Refused to fetch")
    assert "only public internet addresses can be fetched" in message
    assert site.hits == []


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("internal.test", "private"),
        ("metadata.test", "link-local"),
        ("cgnat.test", "carrier-grade NAT"),
        ("mixed.test", "private"),
        ("mapped.test", "loopback"),
    ],
)
async def test_names_resolving_to_private_addresses_are_refused(
    site: LocalSite, host: str, reason: str
) -> None:
    tool, transport = guarded()
    ok, message = await fetch(tool, f"http://{host}:{site.port}/secret")
    assert not ok
    assert f"resolves to a {reason} address" in message
    assert transport.connected_to == []


async def test_a_public_host_is_fetched_through_the_checked_address(site: LocalSite) -> None:
    tool, transport = guarded()
    result = await tool.execute({"query": f"http://public.test:{site.port}/plain"})
    assert result.success, result.content
    assert result.content == f"URL: http://public.test:{site.port}/plain\n\njust text\n"
    assert transport.connected_to == [PUBLIC_IP]
    assert site.hits == [("/plain", f"public.test:{site.port}")]


# -- redirects: every hop is checked again ------------------------------------------------


async def test_a_redirect_to_loopback_is_refused_before_it_is_followed(site: LocalSite) -> None:
    tool, _ = guarded()
    target = f"http://127.0.0.1:{site.port}/secret"
    ok, message = await fetch(tool, f"http://public.test:{site.port}/redirect?to={target}")
    assert not ok
    assert "Refused to fetch http://127.0.0.1" in message
    assert site.paths() == ["/redirect"]


@pytest.mark.parametrize("host", ["internal.test", "metadata.test", "localhost"])
async def test_a_redirect_to_a_private_name_is_refused(site: LocalSite, host: str) -> None:
    tool, transport = guarded()
    target = f"http://{host}:{site.port}/secret"
    ok, message = await fetch(tool, f"http://public.test:{site.port}/redirect?to={target}")
    assert not ok
    assert f"Refused to fetch http://{host}" in message
    assert site.paths() == ["/redirect"]
    assert transport.connected_to == [PUBLIC_IP]


async def test_public_redirects_are_followed_and_counted(site: LocalSite) -> None:
    tool, _ = guarded()
    result = await tool.execute({"query": f"http://public.test:{site.port}/chain/3"})
    assert result.success, result.content
    assert result.metadata["redirects"] == 4
    assert result.metadata["url"] == f"http://public.test:{site.port}/plain"
    assert site.paths() == ["/chain/3", "/chain/2", "/chain/1", "/chain/0", "/plain"]


async def test_more_than_five_redirects_end_the_fetch(site: LocalSite) -> None:
    tool, _ = guarded()
    ok, message = await fetch(tool, f"http://public.test:{site.port}/chain/9")
    assert not ok
    assert "Too many redirects (more than 5)" in message
    assert len(site.hits) == 6


async def test_a_redirect_to_another_scheme_is_refused(site: LocalSite) -> None:
    tool, _ = guarded()
    ok, message = await fetch(
        tool, f"http://public.test:{site.port}/redirect?to=file:///etc/passwd"
    )
    assert not ok
    assert "Only http:// and https:// URLs can be fetched, not file:" in message


# -- page content --------------------------------------------------------------------------


async def test_html_is_reduced_to_text(site: LocalSite) -> None:
    ok, text = await fetch(local(), f"{site.base}/page")
    assert ok
    assert text == (
        f"Title: Jarvis & friends\nURL: {site.base}/page\n\n"
        "Local agents\nJarvis runs agents on your own hardware.\n- private\n- typed\n"
        "Café <ok>"
    )


async def test_long_pages_are_cut_with_a_marker(site: LocalSite) -> None:
    tool = WebSearchTool(fetcher=PageFetcher(allow_private_hosts=True), max_page_chars=100)
    result = await tool.execute({"query": f"{site.base}/big"})
    assert result.success
    assert result.truncated
    assert result.content.endswith("a" * 100 + "\n\n[Content truncated: 100 of 50000 characters]")
    small = local(max_bytes=1000)
    result = await small.execute({"query": f"{site.base}/big"})
    assert result.content.endswith(
        "a" * 1000 + "\n\n[Content truncated: the page is larger than the download limit]"
    )


async def test_non_text_errors_and_slow_pages_are_failed_results(site: LocalSite) -> None:
    assert await fetch(local(), f"{site.base}/pdf") == (
        False,
        f"Error: {site.base}/pdf is application/pdf content; only text and HTML pages can be read.",
    )
    assert await fetch(local(), f"{site.base}/missing") == (
        False,
        f"Error: {site.base}/missing answered HTTP 404.",
    )
    ok, message = await fetch(local(timeout_seconds=0.3), f"{site.base}/slow")
    assert not ok
    assert "Timed out fetching" in message


async def test_unreachable_and_unresolvable_hosts_say_offline() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    ok, message = await fetch(local(), f"http://127.0.0.1:{closed_port}/")
    assert not ok
    assert "Could not connect to 127.0.0.1 (offline or unreachable)" in message
    tool, _ = guarded()
    ok, message = await fetch(tool, "http://nowhere.test/")
    assert not ok
    assert "Could not resolve nowhere.test (offline, or no such host)" in message


@pytest.mark.parametrize("query", ["ftp://example.org/file", "javascript://alert(1)"])
async def test_only_http_urls_are_fetched(query: str) -> None:
    ok, message = await fetch(WebSearchTool(), query)
    assert not ok
    assert "Only http:// and https:// URLs can be fetched" in message


# -- search ----------------------------------------------------------------------------------


async def test_search_without_a_provider_says_how_to_configure_one() -> None:
    result = await WebSearchTool().execute({"query": "local agent runtimes"})
    assert (result.success, result.content) == (False, NO_PROVIDER)


async def test_search_through_a_searxng_compatible_provider(site: LocalSite) -> None:
    tool = WebSearchTool(provider=SearxngSearch(f"{site.base}/search"))
    result = await tool.execute({"query": "typed agents", "max_results": 2})
    assert result.success
    assert result.content == (
        "1. Result 1 for typed agents\n   https://r1.example/\n   Snippet 1.\n\n"
        "2. Result 2 for typed agents\n   https://r2.example/\n   Snippet 2."
    )
    assert site.hits[0][0] == "/search?q=typed+agents&format=json"


async def test_search_problems_are_failed_results(site: LocalSite) -> None:
    empty = WebSearchTool(provider=SearxngSearch(f"{site.base}/empty-search"))
    result = await empty.execute({"query": "zzz"})
    assert (result.success, result.content) == (True, "No results found for 'zzz'.")
    broken = WebSearchTool(provider=SearxngSearch(f"{site.base}/broken-search"))
    result = await broken.execute({"query": "zzz"})
    assert not result.success
    assert "did not answer JSON" in result.content
    missing = WebSearchTool(provider=SearxngSearch(f"{site.base}/nope"))
    result = await missing.execute({"query": "zzz"})
    assert not result.success
    assert "answered HTTP 404" in result.content
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    offline = WebSearchTool(provider=SearxngSearch(f"http://127.0.0.1:{closed_port}/search"))
    result = await offline.execute({"query": "zzz"})
    assert not result.success
    assert "is unreachable (offline?)" in result.content


def test_from_settings_configures_the_provider() -> None:
    assert WebSearchTool.from_settings("").provider is None
    configured = WebSearchTool.from_settings(" http://127.0.0.1:8888/search ")
    assert configured.provider is not None
    assert configured.provider.provider_url == "http://127.0.0.1:8888/search"


# -- the address rule ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.0.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.254", "carrier-grade NAT"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "private"),
        ("fc00::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::7f00:1", "loopback"),
        ("2002:7f00:1::1", "loopback"),
        ("192.0.2.1", "private"),
        ("not-an-ip", "unrecognised"),
    ],
)
def test_non_public_addresses_are_named(address: str, reason: str) -> None:
    assert address_refusal(address) == reason


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "100.128.0.1"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(address) is None


# -- https: the pinned address is verified against the host name -------------------------


def _certificate(folder: Path, host: str) -> tuple[Path, Path]:
    cert, key = folder / f"{host}.crt", folder / f"{host}.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            f"/CN={host}",
            "-addext",
            f"subjectAltName=DNS:{host}",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
@pytest.mark.parametrize(("served_as", "ok"), [("public.test", True), ("other.test", False)])
async def test_https_checks_the_certificate_of_the_host_not_of_the_address(
    tmp_path: Path, served_as: str, ok: bool
) -> None:
    cert, key = _certificate(tmp_path, served_as)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    transport = PublicToLoopback(verify=ssl.create_default_context(cafile=str(cert)))
    tool = WebSearchTool(fetcher=PageFetcher(resolver=fake_dns, transport=transport))
    with LocalSite(tls=server_tls) as site:
        result = await tool.execute({"query": f"https://public.test:{site.port}/plain"})
    assert transport.connected_to == [PUBLIC_IP]
    assert result.success is ok, result.content
    if ok:
        assert result.content.endswith("just text\n")
    else:
        assert "CERTIFICATE_VERIFY_FAILED" in result.content
        assert site.hits == []
