"""The ``jarvis`` command line (typer).

Each command lives in its own module. At import time only typer is loaded; :data:`app`
(every command) is built on first use, and :func:`main` builds only the command it is
asked for (typer builds the click command of every function registered on each run, and
a ``jarvis ask`` needs none of the others). Commands import configuration, the container
and the engines when they run, so ``jarvis --help`` stays fast.
"""

from __future__ import annotations

import functools
import gc
import sys
import threading
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.entrypoints.cli.errors import EXIT_CODES_HELP

if TYPE_CHECKING:
    from collections.abc import Sequence

    app: typer.Typer
    """Every command (built on first use): ``CliRunner().invoke(app, [...])``."""

COMMANDS = (
    "ask",
    "chat",
    "sessions",
    "agents",
    "models",
    "tools",
    "persona",
    "skills",
    "memory",
    "sandbox",
    "operators",
    "mcp",
    "serve",
    "config",
    "traces",
    "stats",
)
"""The commands, in the order ``jarvis --help`` lists them."""

GC_PAUSE_SECONDS = 0.5
"""How long a command may run before the cyclic garbage collector is switched back on."""


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"jarvis {version('jarvis')}")
        except PackageNotFoundError:
            typer.echo("jarvis (not installed)")
        raise typer.Exit()


def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """jarvis: a local-first agent runtime. Ask questions through agents on engines you own."""


def build_app(commands: Sequence[str] = COMMANDS) -> typer.Typer:
    """The ``jarvis`` group with ``commands`` registered (the same group for any subset: only
    what typer builds differs)."""
    built = typer.Typer(
        name="jarvis",
        help="jarvis: a local-first agent runtime. Ask questions through agents on engines "
        "you own.",
        epilog=EXIT_CODES_HELP,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    for name in COMMANDS:
        if name not in commands:
            continue
        if name == "ask":
            from jarvis.entrypoints.cli.ask import ask

            built.command("ask", epilog=EXIT_CODES_HELP)(ask)
        elif name in ("agents", "models"):
            from jarvis.entrypoints.cli import listing

            built.command(name)(getattr(listing, name))
        elif name == "tools":
            from jarvis.entrypoints.cli.tools import tools

            built.command("tools")(tools)
        elif name == "chat":
            from jarvis.entrypoints.cli.chat import chat

            built.command("chat", epilog=EXIT_CODES_HELP)(chat)
        elif name == "sessions":
            from jarvis.entrypoints.cli.sessions import app as sessions_app

            built.add_typer(sessions_app, name="sessions", epilog=EXIT_CODES_HELP)
        elif name == "serve":
            from jarvis.entrypoints.cli.serve import serve

            built.command("serve", epilog=EXIT_CODES_HELP)(serve)
        elif name == "sandbox":
            from jarvis.entrypoints.cli.sandbox import app as sandbox_app

            built.add_typer(sandbox_app, name="sandbox")
        elif name == "config":
            from jarvis.entrypoints.cli.config import app as config_app

            built.add_typer(config_app, name="config", epilog=EXIT_CODES_HELP)
        elif name == "skills":
            from jarvis.entrypoints.cli.skills import app as skills_app

            built.add_typer(skills_app, name="skills", epilog=EXIT_CODES_HELP)
        elif name == "memory":
            from jarvis.entrypoints.cli.memory import app as memory_app

            built.add_typer(memory_app, name="memory", epilog=EXIT_CODES_HELP)
        elif name == "operators":
            from jarvis.entrypoints.cli.operators import app as operators_app

            built.add_typer(operators_app, name="operators")
        elif name == "mcp":
            from jarvis.entrypoints.cli.mcp import app as mcp_app

            built.add_typer(mcp_app, name="mcp", epilog=EXIT_CODES_HELP)
        elif name == "traces":
            from jarvis.entrypoints.cli.traces import app as traces_app

            built.add_typer(traces_app, name="traces", epilog=EXIT_CODES_HELP)
        elif name == "stats":
            from jarvis.entrypoints.cli.traces import stats

            built.command("stats", epilog=EXIT_CODES_HELP)(stats)
        else:
            from jarvis.entrypoints.cli.persona import app as persona_app

            built.add_typer(persona_app, name="persona")
    built.callback()(_root)
    return built


def _commands_for(argv: Sequence[str]) -> Sequence[str]:
    """Only the command ``argv`` names when it starts with one; else all of them (for
    ``--help``, ``--version``, a typo's "No such command")."""
    if argv and argv[0] in COMMANDS:
        return (argv[0],)
    return COMMANDS


def _resume_gc() -> None:
    gc.freeze()  # what start-up built lives as long as the process: never scan it again
    gc.enable()


def main() -> None:
    """The ``jarvis`` console script (and ``python -m jarvis``).

    The cyclic garbage collector is off while a command starts: start-up builds tens of
    thousands of objects (modules, classes, functions) that live as long as the process,
    and collecting meanwhile scans them again and again (about 5% of a ``jarvis ask``). It
    comes back on after :data:`GC_PAUSE_SECONDS`, so a long run collects as usual. When
    the command is done, the objects still alive are frozen out of the collector:
    interpreter shutdown then skips a last scan of every one of them.
    """
    pause = _pause_gc() if gc.isenabled() else None
    try:
        build_app(_commands_for(sys.argv[1:]))()
    finally:
        gc.freeze()
        if pause is not None:
            pause.cancel()
            gc.enable()


def _pause_gc() -> threading.Timer:
    """Switch the collector off now and back on after :data:`GC_PAUSE_SECONDS`."""
    gc.disable()
    timer = threading.Timer(GC_PAUSE_SECONDS, _resume_gc)
    timer.daemon = True
    timer.start()
    return timer


@functools.cache
def _full_app() -> typer.Typer:
    return build_app()


def __getattr__(name: str) -> typer.Typer:
    if name == "app":
        return _full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "app", "build_app", "main"]
