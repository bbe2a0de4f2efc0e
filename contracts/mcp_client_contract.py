"""The behaviour every McpClientPort shows (the SDK adapter over a real server, and the
in-memory fake alike), against the reference server's tools (``echo``, ``add``, ``fail``,
``tiny_image``, ``hang``, ``crash``: see ``tests/support/mcp_reference_server.py`` and
``jarvis.testing.mcp.REFERENCE_TOOLS``).

A subclass provides the ``client`` fixture: a fresh, unstarted client of that server,
closed by the fixture afterwards. ``marker`` is a path ``hang`` may write to.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Generic, TypeVar

import pytest

from jarvis.domain.mcp import McpClientPort, McpServerDownError, McpTimeoutError

ClientT = TypeVar("ClientT", bound=McpClientPort)


class McpClientContract(Generic[ClientT]):
    """Subclass with a ``client`` fixture returning a fresh reference-server client."""

    @pytest.fixture
    def client(self) -> ClientT:
        raise NotImplementedError("subclass must provide the `client` fixture")

    async def test_start_lists_the_tools_with_schemas_and_hints(self, client: ClientT) -> None:
        before = client.running
        tools = {tool.name: tool for tool in await client.start()}
        assert not before
        assert client.running
        assert {"echo", "add", "fail", "tiny_image", "hang", "crash"} <= set(tools)
        echo = tools["echo"]
        assert echo.description.startswith("Repeat the text")
        assert echo.input_schema.get("required") == ["text"]
        assert echo.read_only is True
        assert echo.destructive is False
        assert tools["hang"].destructive is True
        assert tools["add"].read_only is None

    async def test_text_and_structured_results(self, client: ClientT) -> None:
        await client.start()
        echoed = await client.call_tool("echo", {"text": "héllo"}, timeout=10)
        assert not echoed.is_error
        assert [(b.kind, b.text) for b in echoed.content] == [("text", "héllo")]
        added = await client.call_tool("add", {"a": 2, "b": 40}, timeout=10)
        assert added.structured == {"sum": 42}

    async def test_an_error_result_is_a_result(self, client: ClientT) -> None:
        await client.start()
        failed = await client.call_tool("fail", {"message": "boom"}, timeout=10)
        assert failed.is_error
        assert failed.content
        assert failed.content[0].kind == "text"
        assert client.running

    async def test_an_image_is_described_by_type_and_size(self, client: ClientT) -> None:
        await client.start()
        result = await client.call_tool("tiny_image", {}, timeout=10)
        [block] = result.content
        assert (block.kind, block.mime_type, block.size_bytes) == ("image", "image/png", 68)

    async def test_calls_run_concurrently(self, client: ClientT) -> None:
        await client.start()
        results = await asyncio.gather(
            *(client.call_tool("echo", {"text": str(i)}, timeout=10) for i in range(8))
        )
        assert [r.content[0].text for r in results] == [str(i) for i in range(8)]

    async def test_a_call_that_never_answers_times_out_and_the_server_stays_usable(
        self, client: ClientT, tmp_path: Path
    ) -> None:
        await client.start()
        with pytest.raises(McpTimeoutError, match="did not answer"):
            await client.call_tool("hang", {"marker": str(tmp_path / "hung")}, timeout=0.5)
        assert client.running
        again = await client.call_tool("echo", {"text": "still here"}, timeout=10)
        assert again.content[0].text == "still here"

    async def test_a_crash_mid_call_fails_the_call_and_a_start_brings_it_back(
        self, client: ClientT
    ) -> None:
        await client.start()
        with pytest.raises(McpServerDownError):
            await client.call_tool("crash", {}, timeout=30)
        assert not client.running
        with pytest.raises(McpServerDownError, match="not running"):
            await client.call_tool("echo", {"text": "x"}, timeout=10)
        await client.start()
        result = await client.call_tool("echo", {"text": "back"}, timeout=10)
        assert result.content[0].text == "back"

    async def test_close_is_idempotent_and_ends_calls(self, client: ClientT) -> None:
        await client.start()
        await client.aclose()
        await client.aclose()
        assert not client.running
        with pytest.raises(McpServerDownError):
            await client.call_tool("echo", {"text": "x"}, timeout=10)
