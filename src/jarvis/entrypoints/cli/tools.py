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
    from jarvis.domain.json_types import JSONObject
    from jarvis.domain.tools.specs import ToolSpec

ToolsOption = Annotated[
    str | None,
    typer.Option(
        "--tools",
        help="Comma-separated tools for a tool-using agent, e.g. calculator,think; an MCP "
        "server's name gives all its tools, SERVER.TOOL one (default: [tools] enabled). "
        "`jarvis tools` lists them.",
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


def _parameters(spec: ToolSpec) -> list[JSONObject]:
    # loaded on use: `jarvis --help` imports every command module
    from jarvis.domain.tools.descriptions import describe_type

    properties = spec.parameters.get("properties")
    required = spec.parameters.get("required")
    needed = set(required) if isinstance(required, list) else set()
    rows: list[JSONObject] = []
    if isinstance(properties, dict):
        for name, schema in properties.items():
            description = schema.get("description", "") if isinstance(schema, dict) else ""
            rows.append(
                {
                    "name": name,
                    "type": describe_type(schema),
                    "required": name in needed,
                    "description": description if isinstance(description, str) else "",
                }
            )
    return rows


def _describe(spec: ToolSpec) -> str:
    heading = f"{spec.name} [{spec.category}]" if spec.category else spec.name
    lines = [heading, f"  {spec.description.strip()}"]
    rows = _parameters(spec)
    for row in rows:
        flag = ", required" if row["required"] else ""
        line = f"  - {row['name']} ({row['type']}{flag})"
        if row["description"]:
            line += f": {row['description']}"
        lines.append(line)
    if not rows:
        lines.append("  (no parameters)")
    return "\n".join(lines)


def _mcp_specs(catalogue: ToolCatalogue) -> tuple[list[ToolSpec], dict[str, str], list[str]]:
    """The MCP servers' tools (each server started to list them, stopped after), which
    server each comes from, and why a server gave none."""
    from jarvis.entrypoints.cli.output import run_async

    source = catalogue.mcp
    assert source is not None

    async def listing() -> tuple[list[ToolSpec], dict[str, str], list[str]]:
        specs: list[ToolSpec] = []
        servers: dict[str, str] = {}
        problems: list[str] = []
        try:
            for state in await source.states(start=True):
                if state.error:
                    problems.append(f"MCP server '{state.name}' gave no tools: {state.error}")
                for info in state.offered:
                    spec = source.spec_of(state.name, info)
                    specs.append(spec)
                    servers[spec.name] = state.name
        finally:
            await source.aclose()
        return specs, servers, problems

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
        problems: list[str] = []
        if isinstance(catalogue, ToolCatalogue) and catalogue.mcp is not None:
            mcp_specs, servers, problems = _mcp_specs(catalogue)
            specs += mcp_specs
        for problem in problems:
            sys.stderr.write(f"jarvis: {problem}\n")
        if json_output:
            from jarvis.domain.approvals import effects_of

            rows = [
                {
                    "name": spec.name,
                    "server": servers.get(spec.name),
                    "category": spec.category,
                    "description": spec.description,
                    "side_effects": spec.side_effects,
                    "effects": effects_of(spec),
                    "timeout_seconds": spec.timeout_seconds,
                    "parameters": _parameters(spec),
                    "schema": spec.parameters,
                }
                for spec in specs
            ]
            from jarvis.entrypoints.cli.streams import json_text

            sys.stdout.write(json_text(rows) + "\n")  # valid JSON on any stdout
        elif specs:
            sys.stdout.write("\n\n".join(_describe(spec) for spec in specs) + "\n")
        else:
            sys.stderr.write("jarvis: no tools are configured\n")

    code = guarded(body, verbose=False)
    if code:
        raise typer.Exit(code)
