"""The MCP servers of ``config.toml``: ``[mcp.servers.NAME]``, and OpenJarvis's ``[tools.mcp]``.

::

    [mcp.servers.fs]                      # a local server, spoken to over stdio
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]
    env = { NOTES_TOKEN = "..." }         # added to PATH, HOME and LANG: nothing else passes
    cwd = "/srv"
    enabled_tools = ["read_file", "list_directory"]   # only these (default: all)
    disabled_tools = ["write_file"]
    timeout = 60                          # seconds per call
    startup_timeout = 30                  # seconds to start and list its tools

    [mcp.servers.search]                  # a streamable HTTP server
    url = "http://127.0.0.1:8931/mcp"
    headers = { Authorization = "Bearer ..." }

An OpenJarvis configuration keeps its servers as a JSON array in ``[tools.mcp] servers``
(``{"name", "command", "args", "env", "url", "include_tools"}``) behind ``enabled = true``;
both tables are read, and a name in both is an error.

The sections are plain dataclasses validated by pydantic with the rest of the file; the
ranges and names are checked here, in :func:`mcp_servers`, with messages that name the key.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import ClassVar

from jarvis.application.dotted_keys import shown
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.mcp import McpEndpoint, McpServerSpec

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
"""A server's name: what ``--tools NAME`` and ``NAME.tool`` use (no dot, no space)."""
MAX_TIMEOUT = 86_400.0
MAX_SERVERS = 64


class _Strict:
    __slots__ = ()
    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerSettings(_Strict, McpEndpoint):
    """One ``[mcp.servers.NAME]`` table."""

    enabled_tools: tuple[str, ...] = ()
    """Only these tools of the server are offered (empty: all of them)."""
    disabled_tools: tuple[str, ...] = ()
    timeout: float = 60.0
    """Seconds one call may take."""
    startup_timeout: float = 30.0
    """Seconds the server may take to start and list its tools."""
    max_restarts: int = 3
    """Restarts after a crash within one run (a call after that fails at once)."""
    enabled: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class McpSettings(_Strict):
    """``[mcp]``: the MCP servers whose tools agents can be given."""

    servers: dict[str, McpServerSettings] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenJarvisMcpSettings(_Strict):
    """OpenJarvis's ``[tools.mcp]``: ``servers`` is a JSON array (a string)."""

    enabled: bool = False
    servers: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerEntry:
    """A configured server: how to reach it and which of its tools are offered."""

    spec: McpServerSpec
    enabled_tools: tuple[str, ...] = ()
    disabled_tools: tuple[str, ...] = ()
    max_restarts: int = 3

    @property
    def name(self) -> str:
        return self.spec.name

    def offers(self, tool: str) -> bool:
        if self.enabled_tools and tool not in self.enabled_tools:
            return False
        return tool not in self.disabled_tools


def _seconds(value: float, where: str) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise ConfigurationError(
            f"{where} must be a number of seconds greater than 0 and at most {MAX_TIMEOUT:g}.",
        )
    return float(value)


def _entry(name: str, server: McpServerSettings, where: str) -> McpServerEntry:
    if not SERVER_NAME.match(name):
        raise ConfigurationError(
            f"{where}: {shown(repr(name))} is not a usable MCP server name.",
            hint="Use letters, digits, '_' and '-' (at most 40): the name prefixes its tools.",
        )
    if bool(server.command) == bool(server.url):
        raise ConfigurationError(
            f"{where} needs either command (a stdio server) or url (a streamable HTTP "
            "server), not both and not neither.",
            hint='e.g. command = "npx" with args, or url = "http://127.0.0.1:8931/mcp".',
        )
    if server.url and (server.args or server.env or server.cwd):
        raise ConfigurationError(
            f"{where}: args, env and cwd apply to a command, not to a url.",
        )
    if server.command and server.headers:
        raise ConfigurationError(f"{where}: headers apply to a url, not to a command.")
    if not 0 <= server.max_restarts <= 100:
        raise ConfigurationError(f"{where}.max_restarts must be between 0 and 100.")
    spec = McpServerSpec(
        name=name,
        command=server.command,
        args=tuple(server.args),
        env=dict(server.env),
        cwd=server.cwd,
        url=server.url,
        headers=dict(server.headers),
        timeout=_seconds(server.timeout, f"{where}.timeout"),
        startup_timeout=_seconds(server.startup_timeout, f"{where}.startup_timeout"),
    )
    return McpServerEntry(
        spec=spec,
        enabled_tools=tuple(server.enabled_tools),
        disabled_tools=tuple(server.disabled_tools),
        max_restarts=server.max_restarts,
    )


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigurationError(f"{where} must be a list of strings.")
    return tuple(value)


def _string_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigurationError(f"{where} must be an object of strings.")
    return dict(value)


def openjarvis_servers(settings: OpenJarvisMcpSettings) -> list[McpServerEntry]:
    """The servers of an OpenJarvis ``[tools.mcp]`` table (none unless ``enabled``)."""
    if not settings.enabled or not settings.servers.strip():
        return []
    where = "[tools.mcp] servers"
    try:
        items = json.loads(settings.servers)
    except (ValueError, RecursionError) as exc:
        raise ConfigurationError(
            f"{where} is not valid JSON ({exc}).",
            hint='It is a JSON array: [{"name": "fs", "command": "npx", "args": [...]}].',
        ) from None
    if not isinstance(items, list):
        raise ConfigurationError(f"{where} must be a JSON array of server objects.")
    entries: list[McpServerEntry] = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise ConfigurationError(f"{at} must be an object.")
        unknown = sorted(set(item) - {"name", "command", "args", "env", "url", "include_tools"})
        if unknown:
            raise ConfigurationError(f"{at} has unknown keys: " + shown(", ".join(unknown)))
        name = item.get("name")
        if not isinstance(name, str):
            raise ConfigurationError(f"{at} needs a name (a string).")
        command, url = item.get("command", ""), item.get("url", "")
        if not isinstance(command, str) or not isinstance(url, str):
            raise ConfigurationError(f"{at}: command and url are strings.")
        server = McpServerSettings(
            command=command,
            url=url,
            args=_strings(item.get("args"), f"{at}.args"),
            env=_string_map(item.get("env"), f"{at}.env"),
            enabled_tools=_strings(item.get("include_tools"), f"{at}.include_tools"),
        )
        entries.append(_entry(name, server, at))
    return entries


def mcp_servers(
    mcp: McpSettings, openjarvis: OpenJarvisMcpSettings | None = None
) -> list[McpServerEntry]:
    """Every enabled server of ``[mcp.servers]`` and ``[tools.mcp]``, by name; a bad value
    is a ``ConfigurationError`` naming its key."""
    entries = [
        _entry(name, server, f"[mcp.servers.{shown(name)}]")
        for name, server in sorted(mcp.servers.items())
        if server.enabled
    ]
    taken = {entry.name for entry in entries}
    for entry in openjarvis_servers(openjarvis or OpenJarvisMcpSettings()):
        if entry.name in taken:
            raise ConfigurationError(
                f"MCP server '{entry.name}' is configured twice: in [mcp.servers] and in "
                "[tools.mcp] servers.",
                hint="Keep one of them.",
            )
        taken.add(entry.name)
        entries.append(entry)
    if len(entries) > MAX_SERVERS:
        raise ConfigurationError(f"At most {MAX_SERVERS} MCP servers can be configured.")
    return entries
