"""jarvis as an MCP server: its tools (:mod:`.catalogue`) on the ``mcp`` SDK
(:mod:`.sdk_server`)."""
