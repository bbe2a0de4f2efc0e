"""The in-memory MCP client passes the contract every MCP client passes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contracts.mcp_client_contract import McpClientContract
from jarvis.testing.mcp import InMemoryMcpClient, reference_client


class TestInMemoryMcpClient(McpClientContract[InMemoryMcpClient]):
    @pytest.fixture
    async def client(self) -> AsyncIterator[InMemoryMcpClient]:
        client = reference_client()
        yield client
        await client.aclose()
