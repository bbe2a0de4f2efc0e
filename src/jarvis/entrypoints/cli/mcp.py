"""``jarvis mcp``: the MCP servers of the configuration.

* ``jarvis mcp list [--json]``: each server (``[mcp.servers]``, ``[tools.mcp]``), started
  to ask for its tools, with its state, transport, its tools (the name a model sees, the
  server's own name, the hints) and, for one that did not start, why (no server: a line
  that says so, or ``[]``, and exit 0);
* ``jarvis mcp call SERVER.TOOL '{"arg": ...}'``: call one tool by hand; its result on
  stdout (exit 0), or on stderr with exit code 1 when the tool or its server failed;
* ``jarvis mcp serve [--http]``: jarvis itself as an MCP server
  (:mod:`jarvis.entrypoints.cli.mcp_serve`).

Every server a command started is stopped before it returns.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.url_masks import mask_url, redact_urls
from jarvis.entrypoints.cli.command_group import command_group
from jarvis.entrypoints.cli.errors import EXIT_UNEXPECTED, guarded
from jarvis.entrypoints.cli.listener_options import (
    AllowedHostOption,
    AllowedOriginOption,
    AllowOptionOption,
    AllowUserOption,
    ApiKeyFileOption,
    EnableRuntimeOption,
)
from jarvis.entrypoints.cli.options import (
    BaseUrlOption,
    ConfigOption,
    EngineOption,
    JsonOption,
    ModelOption,
    VerboseOption,
    open_runtime,
)
from jarvis.entrypoints.cli.output import exit_with, run_async, write_json, write_line
from jarvis.entrypoints.http.guarded_options import GUARDED_OPTIONS, HOST_RUNTIMES
from jarvis.entrypoints.terminal_text import for_terminal

if TYPE_CHECKING:
    from jarvis.application.tools.mcp_tools import McpServerState, McpToolSource
    from jarvis.domain.json_types import JSONObject, JSONValue
    from jarvis.domain.tools.specs import ToolResult

app = command_group(
    "MCP servers: list them and their tools, call a tool by hand; serve jarvis as one."
)


def configured_source(ctx: typer.Context, config: Path | None) -> McpToolSource | None:
    """The configured servers (none started), ``None`` when there are none."""
    from jarvis.entrypoints.composition import bootstrap
    from jarvis.entrypoints.settings import load_config

    return bootstrap(load_config(config), container=ctx.obj).mcp_tools()


def mcp_source(ctx: typer.Context, config: Path | None) -> McpToolSource:
    """The configured servers (none started); a usage error when there are none."""
    source = configured_source(ctx, config)
    if source is None:
        raise ConfigurationError(
            "No MCP server is configured.",
            hint='Add one to config.toml: [mcp.servers.NAME] command = "..." (or url = "...").',
        )
    return source


def server_json(source: McpToolSource, state: McpServerState) -> JSONObject:
    """One server as ``jarvis mcp list --json`` shows it: its target with the credentials
    a URL may carry masked (a URL's userinfo, query values and token-like path segments;
    a URL in a command's arguments or in the error: its userinfo and query values)."""
    spec = state.entry.spec
    tools: list[JSONValue] = []
    for info in state.tools:
        tool_spec = source.spec_of(state.name, info) if state.entry.offers(info.name) else None
        tools.append(
            {
                "name": info.name,
                "model_name": tool_spec.name if tool_spec is not None else None,
                "enabled": tool_spec is not None,
                "description": info.description,
                "read_only_hint": info.read_only,
                "destructive_hint": info.destructive,
                "schema": info.input_schema,
            }
        )
    return {
        "name": state.name,
        "transport": spec.transport,
        "target": mask_url(spec.url)
        if spec.url
        else redact_urls(" ".join((spec.command, *spec.args))),
        "state": state.state,
        "error": redact_urls(state.error),
        "tools": tools,
    }


def _server_lines(row: JSONObject) -> list[str]:
    heading = f"{row['name']} ({row['transport']}): {row['state']}"
    lines = [heading]
    if row["error"]:
        lines.append(f"  error: {row['error']}")
    tools = row["tools"]
    assert isinstance(tools, list)
    for tool in tools:
        assert isinstance(tool, dict)
        hints = [
            word
            for word, key in (("read-only", "read_only_hint"), ("destructive", "destructive_hint"))
            if tool.get(key) is True
        ]
        name = f"{row['name']}.{tool['name']}"
        shown = f"  - {name}"
        if tool["enabled"]:
            shown += f" (as {tool['model_name']})"
        else:
            shown += " (disabled)"
        if hints:
            shown += " [" + ", ".join(hints) + "]"
        description = str(tool["description"]).strip().splitlines()
        if description:
            shown += f": {description[0][:100]}"
        lines.append(shown)
    return lines


@app.command("list")
def list_servers(
    ctx: typer.Context,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """List each MCP server, its state and its tools (starting the servers to ask them)."""

    def body() -> None:
        source = configured_source(ctx, config)

        async def listing(source: McpToolSource) -> list[JSONObject]:
            try:
                # each failure is shown in the listing: not on stderr as well
                states = await source.states(start=True, report=False)
                return [server_json(source, state) for state in states]
            finally:
                await source.aclose()

        rows = run_async(listing(source)) if source is not None else []
        if json_output:
            write_json(rows)
        elif not rows:  # an answer, not a fault: there is nothing to list
            write_line("No MCP server is configured ([mcp.servers.NAME] or [tools.mcp]).")
        else:
            write_line("\n".join(line for row in rows for line in _server_lines(row)))

    exit_with(guarded(body, verbose=verbose))


def _arguments(text: str) -> JSONObject:
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(
            f"The arguments are not valid JSON ({exc}).",
            hint='Give a JSON object, e.g. \'{"path": "/tmp"}\'.',
        ) from None
    if not isinstance(value, dict):
        raise ConfigurationError("The arguments must be a JSON object.", hint="e.g. '{}'.")
    return value


@app.command("call")
def call(
    ctx: typer.Context,
    tool: Annotated[str, typer.Argument(help="SERVER.TOOL, e.g. fs.read_file.")],
    arguments: Annotated[str, typer.Argument(help="The arguments, a JSON object.")] = "{}",
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Call one tool of an MCP server by hand, with its arguments checked as a model's are."""
    outcome: list[ToolResult] = []

    def body() -> None:
        from jarvis.entrypoints.cli.mcp_call import call_checked

        server, _, name = tool.partition(".")
        if not server or not name:
            raise ConfigurationError(
                f"'{tool}' names no tool.", hint="Write SERVER.TOOL, e.g. fs.read_file."
            )
        values = _arguments(arguments)
        source = mcp_source(ctx, config)
        if server not in source.servers():
            raise ConfigurationError(
                f"No MCP server named '{server}'.",
                hint="Configured: " + ", ".join(source.servers()),
            )
        outcome.append(run_async(call_checked(source, tool, values)))

    code = guarded(body, verbose=verbose)
    if code or not outcome:
        exit_with(code)
        return
    result = outcome[0]
    if json_output:
        write_json(
            {
                "tool": tool,
                "success": result.success,
                "content": result.content,
                "metadata": result.metadata,
            }
        )
    elif result.success:
        write_line(result.content)
    else:
        sys.stderr.write(for_terminal(result.content, sys.stderr) + "\n")
    if not result.success:
        exit_with(EXIT_UNEXPECTED)


@app.command("serve")
def serve(
    ctx: typer.Context,
    http: Annotated[
        bool,
        typer.Option(
            "--http",
            help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
        ),
    ] = False,
    host: Annotated[
        str,
        typer.Option(
            "--host", help="With --http: address to listen on; beyond loopback needs an API key."
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", min=0, max=65535, help="With --http (0: a free port).")
    ] = 8765,
    api_key_file: ApiKeyFileOption = None,
    allowed_host: AllowedHostOption = None,
    allowed_origin: AllowedOriginOption = None,
    allow_user: AllowUserOption = None,
    allow_option: AllowOptionOption = None,
    enable_runtime: EnableRuntimeOption = None,
    engine: EngineOption = None,
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Serve jarvis as an MCP server (stdio by default): ask, sessions, the persona's
    memory, and each managed agent as a tool."""

    def body() -> None:
        from jarvis.entrypoints.cli import serve_access as access
        from jarvis.entrypoints.cli.mcp_serve import (
            McpServeSpec,
            require_packages,
            serve_http,
            serve_stdio,
        )

        require_packages(http=http)
        if not http:
            given = [
                flag
                for flag, value in (
                    ("--host", host != "127.0.0.1"),
                    ("--port", port != 8765),
                    ("--api-key-file", api_key_file is not None),
                    ("--allowed-host", bool(allowed_host)),
                    ("--allowed-origin", bool(allowed_origin)),
                    ("--allow-user", bool(allow_user)),
                )
                if value
            ]
            if given:
                raise ConfigurationError(
                    ", ".join(given)
                    + (" only applies" if len(given) == 1 else " only apply")
                    + " with --http.",
                    hint="Add --http, or leave them out to serve on stdio.",
                )

        spec = McpServeSpec(
            allowed_options=access.checked_names(
                allow_option or (), GUARDED_OPTIONS, "--allow-option"
            ),
            enabled_runtimes=access.checked_names(
                enable_runtime or (), HOST_RUNTIMES, "--enable-runtime"
            ),
        )
        runtime = open_runtime(
            ctx, config=config, engine=engine, base_url=base_url, model=model, verbose=verbose
        )
        if not http:
            serve_stdio(runtime, spec)
            return
        from jarvis.entrypoints.http.server import check_bind

        key = access.api_key_from(None, api_key_file)
        check_bind(host, key)
        access.check_owner_only(key)
        serve_http(
            runtime,
            spec,
            host=host,
            port=port,
            api_key=key,
            allowed_hosts=tuple(allowed_host or ()),
            allowed_origins=tuple(allowed_origin or ()),
            allowed_uids=access.user_ids(allow_user or ()),
            verbose=verbose,
        )

    exit_with(guarded(body, verbose=verbose))
