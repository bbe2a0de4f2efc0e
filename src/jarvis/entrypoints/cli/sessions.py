"""``jarvis sessions list | show NAME | delete NAME | export NAME``: the stored conversations.

No engine is chosen or contacted: these commands only read (or delete from) the
``[sessions]`` store. An unknown NAME is a usage error (exit code 2) naming the existing
sessions; a store that cannot be reached or stays locked is exit code 3, a damaged one
exit code 7 (left untouched).

``export`` writes one JSON object per line, the canonical record every store keeps (role,
content, tool calls with ids, tool call id, model, usage, time in microseconds): the same
lines the ``jsonl`` backend stores, so an exported session can be moved to another store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.entrypoints.cli.command_group import command_group
from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import (
    MAX_COUNT,
    ConfigOption,
    JsonOption,
    VerboseOption,
    open_store_runtime,
)
from jarvis.entrypoints.cli.output import exit_with, run_async, write_json, write_line

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from jarvis.application.conversation import Sessions


app = command_group("The stored conversations (jarvis ask -c / --session, jarvis chat).")

NameArgument = Annotated[str, typer.Argument(help="The session's id.", show_default=False)]


def _run(ctx: typer.Context, config: Path | None) -> Sessions:
    runtime = open_store_runtime(ctx, config)
    return runtime.session_list()


@app.command("list")
def list_sessions(
    ctx: typer.Context,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=1,
            max=MAX_COUNT,
            help="Only the N most recent.",
            show_default=False,
        ),
    ] = None,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """List the sessions, most recently used first."""

    def body() -> None:
        from jarvis.entrypoints.cli.session_output import listed_time

        store = _run(ctx, config)
        infos = run_async(store.list_sessions(limit=limit))
        if json_output:
            write_json([info.as_json() for info in infos])
            return
        if not infos:
            write_line("No sessions yet (start one with `jarvis chat` or `jarvis ask -c`).")
            return
        width = max(len("SESSION"), *(len(info.id) for info in infos))
        lines = [f"{'SESSION':<{width}}  MESSAGES  UPDATED           TITLE"]
        lines.extend(
            f"{info.id:<{width}}  {info.message_count:>8}  {listed_time(info.updated_us)}  "
            f"{info.title}".rstrip()
            for info in infos
        )
        write_line("\n".join(lines))

    exit_with(guarded(body, verbose=verbose))


def _write_session(
    ctx: typer.Context,
    config: Path | None,
    name: str,
    *,
    json_output: bool,
    verbose: bool,
    transcript: bool,
) -> None:
    """``show`` (``transcript``) or ``export`` of session ``name``, then exit with its code."""

    def body() -> None:
        from jarvis.entrypoints.cli.session_output import write_session

        store = _run(ctx, config)
        run_async(write_session(store, name, json_output=json_output, transcript=transcript))

    exit_with(guarded(body, verbose=verbose))


def _show_session(
    ctx: typer.Context, config: Path | None, name: str, json_output: bool, verbose: bool
) -> None:
    _write_session(ctx, config, name, json_output=json_output, verbose=verbose, transcript=True)


def _export_session(
    ctx: typer.Context, config: Path | None, name: str, json_output: bool, verbose: bool
) -> None:
    _write_session(ctx, config, name, json_output=json_output, verbose=verbose, transcript=False)


def _delete_session(
    ctx: typer.Context, config: Path | None, name: str, json_output: bool, verbose: bool
) -> None:
    """``delete`` of session ``name``, then exit with its code."""

    def body() -> None:
        run_async(_run(ctx, config).delete(name))
        if json_output:
            write_json({"deleted": name})
        else:
            write_line(f"Deleted session {name}.")

    exit_with(guarded(body, verbose=verbose))


def _on_session(
    run: Callable[[typer.Context, Path | None, str, bool, bool], None], summary: str
) -> Callable[..., None]:
    """A command over one session NAME (``show``, ``delete``, ``export``): their options,
    written once, handed to ``run``; ``summary`` is the command's help."""

    def command(
        ctx: typer.Context,
        name: NameArgument,
        json_output: JsonOption = False,
        verbose: VerboseOption = False,
        config: ConfigOption = None,
    ) -> None:
        run(ctx, config, name, json_output, verbose)

    command.__doc__ = summary
    return command


app.command("show")(
    _on_session(
        _show_session,
        "Print a session's messages: tool calls with their ids, tool results, models, usage.",
    )
)
app.command("delete")(_on_session(_delete_session, "Delete a session and all its messages."))
app.command("export")(
    _on_session(
        _export_session,
        "Write a session as JSON lines, one canonical record a line (--json: one document).",
    )
)
