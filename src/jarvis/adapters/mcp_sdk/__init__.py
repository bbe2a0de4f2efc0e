"""MCP servers as tool sources, through the official ``mcp`` SDK (the ``mcp`` extra)."""

from jarvis.adapters.mcp_sdk.client import McpSdkClient

__all__ = ["McpSdkClient"]
