"""Entry points: the CLI, the SDK, the HTTP server (``jarvis serve``), the MCP server, the
sandbox's inner process, and the one composition root (:mod:`.composition`) they all take
their services from."""
