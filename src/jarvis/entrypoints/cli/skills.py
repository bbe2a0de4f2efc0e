"""``jarvis skills list`` and ``jarvis skills show NAME``: the Agent Skills every tool-using
agent is offered (``./.jarvis/skills``, ``[skills] paths``, ``<config dir>/skills``).

A ``SKILL.md`` that cannot be used is named on stderr with the reason, and left out.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.command_group import command_group
from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import ConfigOption, JsonOption, VerboseOption
from jarvis.entrypoints.cli.output import write_line

if TYPE_CHECKING:
    from jarvis.application.skills import SkillLibrary

app = command_group(
    "List or show the Agent Skills (SKILL.md folders) tool-using agents are offered.",
    name="skills",
    pretty_exceptions=False,
)


def _library(ctx: typer.Context, config: Path | None) -> SkillLibrary | None:
    from jarvis.entrypoints.composition import bootstrap
    from jarvis.entrypoints.settings import load_config

    context = bootstrap(load_config(config), container=ctx.obj).prompt_context()
    return None if context is None else context.skills


@app.command("list")
def list_skills(
    ctx: typer.Context,
    json_output: JsonOption = False,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """List the skills found: name, description and SKILL.md path."""

    def body() -> None:
        library = _library(ctx, config)
        skills = list(library.skills()) if library is not None else []
        if json_output:
            from jarvis.entrypoints.cli.streams import json_text

            data = [
                {"name": s.name, "description": s.description, "path": s.source} for s in skills
            ]
            sys.stdout.write(json_text(data) + "\n")
            return
        if not skills:
            sys.stdout.write(
                "No skills. Put a folder with a SKILL.md in ./.jarvis/skills or "
                "<config dir>/skills.\n"
            )
            return
        width = max(len(s.name) for s in skills)
        lines = [f"{s.name:<{width}}  {s.description}\n{'':<{width}}  ({s.source})" for s in skills]
        write_line("\n".join(lines))  # a folder's text: filtered on a terminal

    code = guarded(body, verbose=verbose)
    if code:
        raise typer.Exit(code)


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The skill's name (see `jarvis skills list`).")],
    file: Annotated[
        str | None,
        typer.Option("--file", help="Show this file of the skill instead.", show_default=False),
    ] = None,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Print what the `skill` tool gives the model for NAME: its instructions and files."""

    def body() -> None:
        from jarvis.application.skills import SkillError

        library = _library(ctx, config)
        if library is None:
            raise ConfigurationError("No skills are configured.")
        try:
            text = library.read(name, file)
        except SkillError as error:
            raise ConfigurationError(f"{error}.", hint="`jarvis skills list` lists them.") from None
        write_line(text.rstrip("\n"))  # a folder's text: filtered on a terminal

    code = guarded(body, verbose=verbose)
    if code:
        raise typer.Exit(code)
