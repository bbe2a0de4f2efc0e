"""The ``jarvis`` command line (typer).

Each command lives in its own module and is registered on :data:`app` here. At import
time only typer is loaded; commands import configuration, the container and the engines
when they run, so ``jarvis --help`` stays fast.
"""

from __future__ import annotations

import gc
from typing import Annotated

import typer

from jarvis.entrypoints.cli import ask as _ask
from jarvis.entrypoints.cli import listing as _listing
from jarvis.entrypoints.cli import persona as _persona
from jarvis.entrypoints.cli import tools as _tools
from jarvis.entrypoints.cli.errors import EXIT_CODES_HELP

app = typer.Typer(
    name="jarvis",
    help="jarvis: a local-first agent runtime. Ask questions through agents on engines you own.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

app.command("ask", epilog=EXIT_CODES_HELP)(_ask.ask)
app.command("agents")(_listing.agents)
app.command("models")(_listing.models)
app.command("tools")(_tools.tools)
app.add_typer(_persona.app, name="persona")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"jarvis {version('jarvis')}")
        except PackageNotFoundError:
            typer.echo("jarvis (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """jarvis: a local-first agent runtime. Ask questions through agents on engines you own."""


def main() -> None:
    """The ``jarvis`` console script (and ``python -m jarvis``).

    When the command is done, the objects still alive are frozen out of the garbage
    collector: interpreter shutdown then skips a last scan of every one of them, which
    otherwise costs a short command a quarter of its run time.
    """
    try:
        app()
    finally:
        gc.freeze()


__all__ = ["app", "main"]
