"""``jarvis tools`` (what tools exist and what they take) and the ``--tools`` option of ask."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import ConfigOption, JsonOption

if TYPE_CHECKING:
    from jarvis.application.tools.catalogue import ToolCatalogue
    from jarvis.domain.tools.specs import ToolSpec

ToolsOption = Annotated[
    str | None,
    typer.Option(
        "--tools",
        help="Comma-separated tools for a tool-using agent, e.g. calculator,think; an MCP "
        "server's name gives all its tools, SERVER.TOOL one (or its bare name, when one "
        "server offers it) (default: [tools] enabled). `jarvis tools` lists them.",
        show_default=False,
    ),
]


def parse_tool_names(value: str | None) -> tuple[str, ...] | None:
    """``"calculator, think"`` → ``("calculator", "think")``; None when the option is absent."""
    if value is None:
        return None
    names: list[str] = []
    for part in value.split(","):
        name = part.strip()
        if name and name not in names:
            names.append(name)
    if not names:
        raise ConfigurationError(
            "--tools names no tool.", hint="Example: --tools calculator,think (see `jarvis tools`)."
        )
    return tuple(names)


def _mcp_specs(catalogue: ToolCatalogue) -> tuple[list[ToolSpec], dict[str, str]]:
    """The MCP servers' tools (each server started to list them, stopped after) and which
    server each comes from. A server that cannot start is said once, by the source itself
    (its report line on stderr), not again here."""
    from jarvis.entrypoints.cli.output import run_async

    source = catalogue.mcp
    assert source is not None

    async def listing() -> tuple[list[ToolSpec], dict[str, str]]:
        specs: list[ToolSpec] = []
        servers: dict[str, str] = {}
        try:
            for state in await source.states(start=True):
                for info in state.offered:
                    spec = source.spec_of(state.name, info)
                    specs.append(spec)
                    servers[spec.name] = state.name
        finally:
            await source.aclose()
        return specs, servers

    return run_async(listing())


def tools(ctx: typer.Context, json_output: JsonOption = False, config: ConfigOption = None) -> None:
    """List the tools agents can be given with --tools, with their parameters."""

    def body() -> None:
        from jarvis.application.tools.catalogue import ToolCatalogue
        from jarvis.entrypoints.composition import bootstrap
        from jarvis.entrypoints.settings import load_config

        catalogue = bootstrap(load_config(config), container=ctx.obj).tools()
        if isinstance(catalogue, ToolCatalogue):
            for failure in catalogue.load_plugins():
                sys.stderr.write(f"jarvis: {failure} (not listed)\n")
        specs = catalogue.specs() if isinstance(catalogue, ToolCatalogue) else []
        servers: dict[str, str] = {}
        if isinstance(catalogue, ToolCatalogue) and catalogue.mcp is not None:
            mcp_specs, servers = _mcp_specs(catalogue)
            specs += mcp_specs
        if json_output:
            from jarvis.entrypoints.cli.streams import json_text
            from jarvis.entrypoints.cli.tool_descriptions import tool_json

            rows = [tool_json(spec, servers.get(spec.name)) for spec in specs]
            sys.stdout.write(json_text(rows) + "\n")  # valid JSON on any stdout
        elif specs:
            from jarvis.entrypoints.cli.tool_descriptions import describe_tool

            sys.stdout.write("\n\n".join(describe_tool(spec) for spec in specs) + "\n")
        else:
            sys.stderr.write("jarvis: no tools are configured\n")

    code = guarded(body, verbose=False)
    if code:
        raise typer.Exit(code)
