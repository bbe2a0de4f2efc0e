"""``jarvis agents`` and ``jarvis models``: what can answer, and on which models."""

from __future__ import annotations

import json
import sys

import typer

from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import (
    BaseUrlOption,
    ConfigOption,
    EngineOption,
    JsonOption,
    VerboseOption,
    open_runtime,
)
from jarvis.entrypoints.cli.output import write_raw


def agents(
    ctx: typer.Context, json_output: JsonOption = False, config: ConfigOption = None
) -> None:
    """List the agent keys (plug-ins' included), whether each takes tools, and their
    aliases; a plug-in that fails to load is a notice on stderr."""

    def body() -> None:
        from jarvis.entrypoints.composition import bootstrap
        from jarvis.entrypoints.settings import load_config

        registry = bootstrap(load_config(config), container=ctx.obj).agents()
        aliases: dict[str, list[str]] = {}
        for alias, key in sorted(registry.aliases().items()):
            aliases.setdefault(key, []).append(alias)
        loaded, failed = registry.loadable()
        for failure in failed:
            sys.stderr.write(f"jarvis: {failure} (not listed)\n")
        rows = [
            {"key": key, "accepts_tools": cls.accepts_tools, "aliases": aliases.get(key, [])}
            for key, cls in loaded
        ]
        if json_output:
            sys.stdout.write(json.dumps(rows, indent=2) + "\n")
            return
        width = max([len("AGENT"), *(len(str(row["key"])) for row in rows)])
        lines = [f"{'AGENT':<{width}}  TOOLS  ALIASES"]
        for row in rows:
            tools = "yes" if row["accepts_tools"] else "no"
            names = ", ".join(aliases.get(str(row["key"]), []))
            lines.append(f"{row['key']!s:<{width}}  {tools:<5}  {names}".rstrip())
        write_raw("\n".join(lines) + "\n")

    code = guarded(body, verbose=False)
    if code:
        raise typer.Exit(code)


def models(
    ctx: typer.Context,
    engine: EngineOption = None,
    base_url: BaseUrlOption = None,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """List the models the engine can serve."""

    def body() -> None:
        import asyncio

        runtime = open_runtime(
            ctx, config=config, engine=engine, base_url=base_url, model=None, verbose=verbose
        )

        async def listed() -> list[str]:
            try:
                return await (await runtime.inference()).list_models()
            finally:
                await runtime.aclose()

        names = asyncio.run(listed())
        if json_output:
            sys.stdout.write(json.dumps(names, indent=2) + "\n")
        elif names:
            write_raw("\n".join(names) + "\n")
        else:
            sys.stderr.write("jarvis: the engine lists no models\n")

    code = guarded(body, verbose=verbose)
    if code:
        raise typer.Exit(code)
