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

An OpenJarvis configuration keeps its servers in ``[tools.mcp] servers`` (used unless
``enabled = false``, OpenJarvis's default), as OpenJarvis reads them: inline JSON (an
array of server objects, or one object), or the path of a JSON file holding the same
(read when the configuration is loaded: :class:`OpenJarvisMcpFile`); an entry may itself
be a JSON string. Its keys are
OpenJarvis's (``name``, ``command``, ``args``, ``env``, ``url``, ``token``,
``include_tools``, ``exclude_tools``): ``token`` is sent as ``Authorization: Bearer``,
``include_tools`` and ``exclude_tools`` are ``enabled_tools`` and ``disabled_tools``, and an
entry without a name is called ``mcp1``, ``mcp2``... (a name no other server has). Both
tables are read, and a name in both is an error.

The sections are plain dataclasses validated by pydantic with the rest of the file; the
ranges and names are checked here, in :func:`mcp_servers`, with messages that name the key.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import ClassVar

from jarvis.application.dotted_keys import MAX_SHOWN_PATH
from jarvis.domain.errors import ConfigurationError, shown
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
    """OpenJarvis's ``[tools.mcp]``: ``servers`` is inline JSON or the path of a JSON file.
    ``enabled`` is on unless turned off, as in OpenJarvis: servers listed are servers used."""

    enabled: bool = True
    servers: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenJarvisMcpFile(OpenJarvisMcpSettings):
    """``[tools.mcp]`` whose ``servers`` named a file: ``servers`` is that file's text, read
    when the configuration was loaded (this layer reads no file); ``path`` the file and
    ``config_file`` the config file naming it, for the messages (they read as every other
    error of the config file). Never a key of the config file: only the loader makes one."""

    path: str
    config_file: str


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


OPENJARVIS_SERVER_KEYS = (
    "name",
    "command",
    "args",
    "env",
    "url",
    "token",
    "include_tools",
    "exclude_tools",
)
"""The keys of one ``[tools.mcp] servers`` entry: OpenJarvis's (its loader reads every one
but ``env``, which jarvis passes to a stdio server)."""


def servers_file(servers: str) -> str | None:
    """The path ``[tools.mcp] servers`` names, or ``None`` when it is inline JSON (it starts
    with ``[`` or ``{``, as OpenJarvis decides) or empty."""
    value = servers.strip()
    if not value or value.startswith(("[", "{")):
        return None
    return value


def _json(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past what is read
        reason = str(exc) if isinstance(exc, ValueError) else "nested too deep"
        raise ConfigurationError(
            f"{where} is not valid JSON ({reason}).",
            hint='It is a JSON array: [{"name": "fs", "command": "npx", "args": [...]}], '
            "or the path of a file holding one.",
        ) from None


def _server_objects(text: str, where: str) -> list[dict[str, object]]:
    """The server objects of ``text``: an array of them, or one; an entry may be a JSON
    string holding one (as OpenJarvis accepts)."""
    items = _json(text, where)
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise ConfigurationError(f"{where} must be a JSON array of server objects (or one).")
    if len(items) > MAX_SERVERS:
        raise ConfigurationError(f"At most {MAX_SERVERS} MCP servers can be configured.")
    objects: list[dict[str, object]] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            item = _json(item, f"{where}[{index}] (a JSON string)")
        if not isinstance(item, dict):
            raise ConfigurationError(f"{where}[{index}] must be an object.")
        objects.append(item)
    return objects


def _bearer(item: dict[str, object], at: str) -> dict[str, str]:
    """The ``Authorization`` header of ``token`` (none for an empty one, as in OpenJarvis);
    the token is never quoted in a message."""
    token = item.get("token")
    if token is None or token == "":
        return {}
    if not isinstance(token, str) or not all("!" <= char <= "~" for char in token):
        raise ConfigurationError(
            f"{at}.token must be a string of printable ASCII characters without spaces."
        )
    if item.get("command") and not item.get("url"):
        raise ConfigurationError(f"{at}: token applies to a url, not to a command.")
    return {"Authorization": f"Bearer {token}"}


def _openjarvis_entry(name: str, item: dict[str, object], at: str) -> McpServerEntry:
    unknown = sorted(set(item) - set(OPENJARVIS_SERVER_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{at} has unknown keys: " + shown(", ".join(unknown)),
            hint="A server object takes " + ", ".join(OPENJARVIS_SERVER_KEYS) + ".",
        )
    command, url = item.get("command", ""), item.get("url", "")
    if not isinstance(command, str) or not isinstance(url, str):
        raise ConfigurationError(f"{at}: command and url are strings.")
    server = McpServerSettings(
        command=command,
        url=url,
        args=_strings(item.get("args"), f"{at}.args"),
        env=_string_map(item.get("env"), f"{at}.env"),
        headers=_bearer(item, at),
        enabled_tools=_strings(item.get("include_tools"), f"{at}.include_tools"),
        disabled_tools=_strings(item.get("exclude_tools"), f"{at}.exclude_tools"),
    )
    return _entry(name, server, at)


def openjarvis_servers(
    settings: OpenJarvisMcpSettings, taken: Collection[str] = ()
) -> list[McpServerEntry]:
    """The servers of an OpenJarvis ``[tools.mcp]`` table (none unless ``enabled``); an
    entry without a name gets the first of ``mcp1``, ``mcp2``... that is neither in
    ``taken`` (the other servers' names) nor another entry's."""
    from_file = isinstance(settings, OpenJarvisMcpFile)
    if not settings.enabled or not (settings.servers.strip() or from_file):
        return []  # an empty file is not valid JSON; an empty value names no server
    if isinstance(settings, OpenJarvisMcpFile):
        where = (
            f"Invalid config file {settings.config_file}: tools.mcp.servers: "
            f"the MCP servers file {shown(settings.path, MAX_SHOWN_PATH)}"
        )
    elif (named := servers_file(settings.servers)) is not None:
        raise ConfigurationError(
            f"[tools.mcp] servers names a file ({shown(repr(named))}) that was not read: a path is "
            "read from a config file's [tools.mcp] only.",
            hint='Give the servers inline: [{"name": "fs", "command": "npx", "args": [...]}].',
        )
    else:
        where = "[tools.mcp] servers"
    objects = _server_objects(settings.servers, where)
    names = {name for item in objects if isinstance(name := item.get("name"), str)}
    derived = (
        name
        for name in (f"mcp{number}" for number in itertools.count(1))
        if name not in taken and name not in names
    )
    entries: list[McpServerEntry] = []
    for index, item in enumerate(objects):
        at = f"{where}[{index}]"
        name = item.get("name", "")
        if not isinstance(name, str):
            raise ConfigurationError(f"{at}.name must be a string (or left out).")
        entries.append(_openjarvis_entry(name or next(derived), item, at))
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
    ours = {entry.name for entry in entries}
    theirs = openjarvis_servers(openjarvis or OpenJarvisMcpSettings(), taken=set(mcp.servers))
    seen: set[str] = set()
    for entry in theirs:
        if entry.name in ours or entry.name in seen:
            where = "in [mcp.servers] and in" if entry.name in ours else "twice in"
            raise ConfigurationError(
                f"MCP server '{shown(entry.name)}' is configured twice: {where} "
                "[tools.mcp] servers.",
                hint="Keep one of them, or give the other a name of its own.",
            )
        seen.add(entry.name)
        entries.append(entry)
    if len(entries) > MAX_SERVERS:
        raise ConfigurationError(f"At most {MAX_SERVERS} MCP servers can be configured.")
    return entries
