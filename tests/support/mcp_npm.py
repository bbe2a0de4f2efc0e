"""The pinned npm MCP servers (``@modelcontextprotocol/server-filesystem`` and
``server-everything``) that scripts/lib/install.sh caches: skip when they are missing,
unless CI=true (then fail: the install script must have installed them)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

MCP_SERVERS_VERSION = "2026.8.31"
"""As scripts/lib/install.sh pins it."""


def npm_server(package: str) -> tuple[str, str]:
    """``(node, entry script)`` of ``@modelcontextprotocol/<package>``."""
    runtimes = Path(
        os.environ.get("JARVIS_RUNTIMES", str(Path.home() / ".cache" / "jarvis" / "runtimes"))
    )
    root = runtimes / f"mcp-servers-{MCP_SERVERS_VERSION}"
    script = root / "node_modules" / "@modelcontextprotocol" / package / "dist" / "index.js"
    node = shutil.which("node")
    if node is not None and (root / ".installed").exists() and script.exists():
        return node, str(script)
    reason = f"{package} is not installed (scripts/lib/install.sh ensure_agent_runtimes)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must install it")
    pytest.skip(reason)
