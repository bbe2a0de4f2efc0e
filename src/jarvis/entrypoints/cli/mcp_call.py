"""``jarvis mcp call``: one tool of an MCP server called by hand, its arguments checked
against the tool's schema as a model's are.

Loaded when the command runs: ``jarvis --help`` imports every command module
(:mod:`jarvis.entrypoints.cli.mcp` among them), not this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.tools.json_schema import validate

if TYPE_CHECKING:
    from jarvis.application.tools.mcp_tools import McpToolSource
    from jarvis.domain.json_types import JSONObject
    from jarvis.domain.tools.specs import ToolResult


async def call_checked(source: McpToolSource, tool: str, arguments: JSONObject) -> ToolResult:
    """Start the server of ``tool`` (``SERVER.TOOL``), call it with ``arguments`` when they
    match its schema (else a ``ConfigurationError`` listing what is wrong), stop it."""
    try:
        await source.prepare([tool])
        [port] = source.build([tool])
        errors = validate(arguments, port.spec.parameters)
        if errors:
            raise ConfigurationError(
                f"Invalid arguments for {tool}: " + "; ".join(errors[:5]),
                hint="`jarvis mcp list --json` shows its schema.",
            )
        return await port.execute(arguments)
    finally:
        await source.aclose()
