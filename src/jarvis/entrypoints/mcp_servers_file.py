"""``[tools.mcp] servers`` naming a JSON file: read when the configuration is loaded.

OpenJarvis takes a ``servers`` value that does not start with ``[`` or ``{`` as the path of
a file of server objects: relative to the config file's folder (and not leading out of
it), or absolute (``~`` expanded). The file is read here, once, as every file a user names
is (:func:`~jarvis.entrypoints.bounded_files.read_regular_file`: a regular file, no FIFO
or device, at most 4 MiB read), and its text handed to the application layer, which reads
no file (:class:`~jarvis.application.mcp_config.OpenJarvisMcpFile`). Every error about the
file, read here or parsed later, starts ``Invalid config file F: tools.mcp.servers:`` as
any other error of the config file does.

A path that names a secret (``.env``, ``~/.ssh/...``, ``credentials.json``) is refused:
a config file copied from elsewhere could otherwise send what it holds to a server, as
arguments, environment or headers.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from jarvis.application.dotted_keys import MAX_SHOWN_PATH
from jarvis.domain.errors import ConfigurationError, shown
from jarvis.entrypoints.bounded_files import read_regular_file

if TYPE_CHECKING:
    from jarvis.application.config import JarvisConfig

MAX_MCP_SERVERS_FILE_BYTES = 4 * 1024 * 1024
"""A servers file larger than this is refused (OpenJarvis's bound too)."""


def with_mcp_servers_file(config: JarvisConfig, file: Path) -> JarvisConfig:
    """``config`` with the file ``[tools.mcp] servers`` names read in (when MCP is enabled
    and the value is a path); ``file`` is the config file, whose folder a relative path
    is taken from."""
    from jarvis.application.mcp_config import OpenJarvisMcpFile, servers_file

    mcp = config.tools.mcp
    named = servers_file(mcp.servers) if mcp.enabled else None
    if named is None:
        return config
    where = f"Invalid config file {file}: tools.mcp.servers"
    path = _servers_path(named, file.parent, where)
    try:
        text = read_regular_file(
            path, limit=MAX_MCP_SERVERS_FILE_BYTES, what="MCP servers file", where=where
        ).decode("utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(
            f"{where}: cannot read the MCP servers file {shown(str(path), MAX_SHOWN_PATH)} "
            f"({reason}).",
            hint="Create it (a JSON array of server objects), or give the servers inline.",
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"{where}: the MCP servers file {shown(str(path), MAX_SHOWN_PATH)} is not UTF-8 text "
            f"({exc.reason} at byte {exc.start})."
        ) from None
    loaded = OpenJarvisMcpFile(enabled=True, servers=text, path=str(path), config_file=str(file))
    return replace(config, tools=replace(config.tools, mcp=loaded))


def _servers_path(named: str, folder: Path, where: str) -> Path:
    """The file ``named`` means; one outside the config file's folder when given relative
    (OpenJarvis's rule), or a secret file, is a ``ConfigurationError``."""
    path = Path(named).expanduser()
    relative = not path.is_absolute()
    if relative:
        path = Path(os.path.abspath(folder / path))
    real = os.path.realpath(path)
    if relative:
        base = os.path.realpath(folder)
        if os.path.commonpath([real, base]) != base:
            raise ConfigurationError(
                f"{where}: {shown(repr(named), MAX_SHOWN_PATH)} leads out of the config file's "
                f"folder ({base}).",
                hint="Keep the file beside config.toml, or give its absolute path.",
            )
    from jarvis.application.tools.secret_paths import secret_rule_of_paths

    rule = secret_rule_of_paths(str(path), real)
    if rule is not None:
        raise ConfigurationError(
            f"{where}: {shown(str(path), MAX_SHOWN_PATH)} is a secret file (it matches {rule!r}); "
            "it is not read as MCP servers.",
            hint="Keep the servers in a file of their own, e.g. mcp-servers.json.",
        )
    return path
