"""``jarvis config check``: which file is read and what became of each of its keys.

A file written for OpenJarvis is read too (:mod:`jarvis.application.openjarvis_config`):
this command lists, key by key, what was read as which jarvis key, what was ignored and
why, and what is kept for the MCP client (its servers read as ``jarvis mcp list`` reads
them, so a bad ``[tools.mcp] servers`` is found here). A key in neither vocabulary is the
usual configuration error (exit 2) with the nearest known key, and so is a default agent or
a default tool no run could find (:mod:`.config_names`: the agent registry and the tool
catalogue, plug-ins included; MCP servers are not started).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from jarvis.domain.errors import shown
from jarvis.entrypoints.cli.command_group import command_group
from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import ConfigOption, JsonOption

if TYPE_CHECKING:
    from jarvis.entrypoints.settings import LoadedConfig

app = command_group("The configuration file: check it and say how each key is read.")


@app.command("check")
def check(ctx: typer.Context, config: ConfigOption = None, json_output: JsonOption = False) -> None:
    """Validate the config file and say, for each key, how jarvis reads it."""

    def body() -> None:
        from jarvis.application.mcp_config import mcp_servers
        from jarvis.application.openjarvis_config import ConfigNote, file_keys, note_for
        from jarvis.entrypoints.settings import read_config

        loaded = read_config(config)
        mcp_servers(loaded.config.mcp, loaded.config.tools.mcp)  # read as `mcp list` reads them
        names = _checked_names(ctx, loaded) + _key_warnings(loaded)
        rows: list[ConfigNote | str] = []  # a note, or a key of jarvis's own read as it is
        seen: set[str] = set()
        for key in file_keys(loaded.raw):
            note = note_for(key, loaded.notes)
            if note is None:
                rows.append(key)
            elif note.key not in seen:
                seen.add(note.key)
                rows.extend(n for n in loaded.notes if n.key == note.key)
        if json_output:
            import json

            keys = [
                {"key": row, "status": "read", "detail": row}
                if isinstance(row, str)
                else {"key": row.key, "status": row.kind, "detail": row.detail}
                | ({"remark": row.remark} if row.remark else {})
                for row in rows
            ]
            keys += [{"key": key, "status": "warning", "detail": text} for key, text in names]
            typer.echo(json.dumps({"file": str(loaded.file), "found": loaded.found, "keys": keys}))
            return
        if not loaded.found:
            typer.echo(f"{loaded.file}: not found; the defaults apply")
            return
        typer.echo(f"{loaded.file}: valid")
        for row in rows:  # a key of any length, cut (--json gives it whole)
            typer.echo("  " + (f"{shown(row)}: read" if isinstance(row, str) else row.describe()))
        for key, text in names:
            typer.echo(f"  {shown(key)}: warning: {text}")

    code = guarded(body, verbose=False)
    if code:
        raise typer.Exit(code)


def _key_warnings(loaded: LoadedConfig) -> list[tuple[str, str]]:
    """``[server.auth] api_key`` in a file other users may read: ``jarvis serve`` refuses
    it, so "valid" alone would mislead."""
    if not (loaded.found and loaded.config.server.auth.api_key):
        return []
    import os
    import stat

    try:
        mode = os.stat(loaded.file).st_mode
    except OSError:
        return []
    if not mode & 0o077:
        return []
    return [
        (
            "server.auth.api_key",
            f"other users may read or change this file (mode {stat.S_IMODE(mode):04o}): "
            f"jarvis serve refuses the key until chmod 600 {loaded.file}",
        )
    ]


def _checked_names(ctx: typer.Context, loaded: LoadedConfig) -> list[tuple[str, str]]:
    """The warnings about the file's default agent and tools; an unknown one (which every
    run would refuse) is a ``ConfigurationError`` listing each."""
    from jarvis.application.tools.catalogue import ToolCatalogue
    from jarvis.entrypoints.cli.config_names import check_names
    from jarvis.entrypoints.composition import bootstrap

    runtime = bootstrap(loaded.config, container=ctx.obj)
    catalogue = runtime.tools()
    found = check_names(
        loaded, runtime.agents(), catalogue if isinstance(catalogue, ToolCatalogue) else None
    )
    if found.errors:
        raise found.error(loaded)
    return found.warnings
