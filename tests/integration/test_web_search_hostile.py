"""web_search against a real loopback server that answers as an attacker would.

Gzip bombs (one layer, and stacked ``gzip, gzip``), an endless body, a slow drip, deep JSON,
unknown encodings: for a fetched page and for the search provider's answer. Memory is
measured with ``tracemalloc`` around the call: what matters is not only the answer but that
the decoded body never existed in memory beyond the cap.
"""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable, Iterator

import pytest

from jarvis.adapters.httpx_web.page_fetch import PageFetcher
from jarvis.adapters.httpx_web.search_provider import SearxngSearch
from jarvis.adapters.httpx_web.web_search import WebSearchTool
from jarvis.domain.tools.specs import ToolResult
from tests.integration.local_site import LocalSite

BOMB_BYTES = 64 * 1024 * 1024
CAP = 64 * 1024
PEAK_LIMIT = 8 * 1024 * 1024
"""What a bounded read of a 64 KiB cap may hold at once: 1/8 of the bomb, 128x the cap."""


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """64 MiB of zeros as one gzip member (~65 KB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1024 * 1024)
    parts = [packer.compress(block) for _ in range(BOMB_BYTES // len(block))]
    return b"".join([*parts, packer.flush()])


@pytest.fixture
def site() -> Iterator[LocalSite]:
    with LocalSite() as running:
        yield running


def page_tool(**options: float) -> WebSearchTool:
    fetcher = PageFetcher(allow_private_hosts=True, max_bytes=CAP, **options)  # type: ignore[arg-type]
    return WebSearchTool(fetcher=fetcher)


def search_tool(url: str, **options: float) -> WebSearchTool:
    return WebSearchTool(provider=SearxngSearch(url, max_bytes=CAP, **options))  # type: ignore[arg-type]


async def measured(call: Callable[[], Awaitable[ToolResult]]) -> tuple[ToolResult, int]:
    """The result and the peak of memory allocated while it was produced."""
    tracemalloc.start()
    try:
        result = await call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- gzip bombs ------------------------------------------------------------------------------


async def test_a_gzip_bomb_page_is_cut_at_the_cap_without_inflating(
    site: LocalSite, bomb: bytes
) -> None:
    url = site.serve("/bomb", bomb, {"Content-Type": "text/plain", "Content-Encoding": "gzip"})
    result, peak = await measured(lambda: page_tool().execute({"query": url}))
    assert result.success, result.content
    assert result.truncated
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.1f} MiB held for a {CAP // 1024} KiB cap"


@pytest.mark.parametrize("encoding", ["gzip, gzip", "gzip,deflate", "deflate, gzip, gzip"])
async def test_stacked_encodings_are_refused_before_decoding(
    site: LocalSite, bomb: bytes, encoding: str
) -> None:
    stacked = gzip.compress(bomb)  # ~600 bytes on the wire
    url = site.serve(
        "/stacked", stacked, {"Content-Type": "text/plain", "Content-Encoding": encoding}
    )
    result, peak = await measured(lambda: page_tool().execute({"query": url}))
    assert not result.success
    assert "stacked content encodings are refused" in result.content
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.1f} MiB held for {len(stacked)} bytes"


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress"])
async def test_encodings_that_were_not_asked_for_are_refused(
    site: LocalSite, encoding: str
) -> None:
    url = site.serve("/odd", b"\x00\x01\x02", {"Content-Encoding": encoding})
    result = await page_tool().execute({"query": url})
    assert not result.success
    assert f"its content encoding '{encoding}' is not supported" in result.content


async def test_ordinary_gzip_and_deflate_pages_still_read(site: LocalSite) -> None:
    text = b"compressed page\n" * 100
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    variants = {
        "gzip": gzip.compress(text),
        "deflate": zlib.compress(text),
        "x-gzip": gzip.compress(text),
    }
    for name, body in variants.items():
        url = site.serve(f"/{name}", body, {"Content-Type": "text/plain", "Content-Encoding": name})
        result = await page_tool().execute({"query": url})
        assert result.success, (name, result.content)
        assert result.content.endswith(text.decode()), name
    raw = raw_deflate.compress(text) + raw_deflate.flush()
    url = site.serve("/raw", raw, {"Content-Type": "text/plain", "Content-Encoding": "deflate"})
    assert (await page_tool().execute({"query": url})).content.endswith(text.decode())


async def test_a_corrupt_gzip_body_is_a_failed_result(site: LocalSite) -> None:
    url = site.serve("/corrupt", b"\x1f\x8b" + b"garbage" * 10, {"Content-Encoding": "gzip"})
    result = await page_tool().execute({"query": url})
    assert not result.success
    assert "gzip data is corrupt" in result.content


async def test_a_gzip_bomb_from_the_search_provider_is_refused(
    site: LocalSite, bomb: bytes
) -> None:
    url = site.serve("/search-bomb", bomb, {"Content-Encoding": "gzip"})
    result, peak = await measured(lambda: search_tool(url).execute({"query": "anything"}))
    assert not result.success
    assert f"answered more than {CAP} bytes; its answer was not read" in result.content
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.1f} MiB held for a {CAP // 1024} KiB cap"


async def test_stacked_encodings_from_the_search_provider_are_refused(
    site: LocalSite, bomb: bytes
) -> None:
    url = site.serve("/search-stacked", gzip.compress(bomb), {"Content-Encoding": "gzip, gzip"})
    result, peak = await measured(lambda: search_tool(url).execute({"query": "anything"}))
    assert not result.success
    assert "stacked content encodings are refused" in result.content
    assert peak < PEAK_LIMIT


# -- endless and slow bodies -----------------------------------------------------------------


async def test_an_endless_search_answer_stops_at_the_cap(site: LocalSite) -> None:
    result, peak = await measured(
        lambda: search_tool(f"{site.base}/endless").execute({"query": "anything"})
    )
    assert not result.success
    assert f"answered more than {CAP} bytes" in result.content
    assert peak < PEAK_LIMIT
    assert site.written["/endless"] < site.endless_limit  # the client hung up first


async def test_an_endless_page_stops_at_the_cap(site: LocalSite) -> None:
    result, peak = await measured(lambda: page_tool().execute({"query": f"{site.base}/endless"}))
    assert result.success
    assert result.truncated
    assert peak < PEAK_LIMIT
    assert site.written["/endless"] < site.endless_limit


async def test_a_dripping_search_provider_hits_the_total_time_cap(site: LocalSite) -> None:
    """A byte every 50 ms never trips a per-read timeout; the total cap ends it."""
    tool = search_tool(f"{site.base}/drip", timeout_seconds=0.5)
    result = await tool.execute({"query": "anything"})
    assert not result.success
    assert result.content == (
        f"Error: The search provider at {site.base}/drip did not answer within 0.5 s."
    )


async def test_a_dripping_page_hits_the_total_time_cap(site: LocalSite) -> None:
    result = await page_tool(timeout_seconds=0.5).execute({"query": f"{site.base}/drip"})
    assert not result.success
    assert result.content == f"Error: Timed out fetching {site.base}/drip after 0.5 s."


# -- what the provider's JSON may contain ----------------------------------------------------


async def test_deeply_nested_json_from_the_provider_is_not_json(site: LocalSite) -> None:
    url = site.serve("/deep", b"[" * 60_000, {"Content-Type": "application/json"})
    result = await search_tool(url).execute({"query": "anything"})
    assert not result.success
    assert "did not answer JSON" in result.content


async def test_huge_result_fields_are_cut(site: LocalSite) -> None:
    item = b'{"title": "' + b"t" * 5000 + b'", "url": "https://e.example/", "content": "'
    body = b'{"results": [' + item + b"s" * 20000 + b'"}]}'
    url = site.serve("/fields", body, {"Content-Type": "application/json"})
    provider = SearxngSearch(url)
    hits = await provider.search("anything", max_results=5)
    assert [(len(hit.title), len(hit.snippet)) for hit in hits] == [(300, 1000)]
