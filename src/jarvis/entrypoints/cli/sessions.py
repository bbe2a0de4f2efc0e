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

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import ConfigOption, JsonOption, VerboseOption, open_runtime
from jarvis.entrypoints.cli.output import exit_with, printable, run_async, write_json, write_line

if TYPE_CHECKING:
    from pathlib import Path

    from jarvis.application.conversation import Sessions
    from jarvis.domain.json_types import JSONObject
    from jarvis.domain.sessions import SessionMessage


app = typer.Typer(
    help="The stored conversations (jarvis ask -c / --session, jarvis chat).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

NameArgument = Annotated[str, typer.Argument(help="The session's id.", show_default=False)]


def _run(ctx: typer.Context, config: Path | None) -> Sessions:
    from jarvis.entrypoints.conversations import sessions

    runtime = open_runtime(
        ctx, config=config, engine=None, base_url=None, model=None, verbose=False
    )
    return sessions(runtime)


def _time(micros: int) -> str:
    from jarvis.domain.sessions import from_micros

    return from_micros(micros).astimezone().strftime("%Y-%m-%d %H:%M")


@app.command("list")
def list_sessions(
    ctx: typer.Context,
    limit: Annotated[
        int | None,
        typer.Option("--limit", "-n", min=1, help="Only the N most recent.", show_default=False),
    ] = None,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """List the sessions, most recently used first."""

    def body() -> None:
        store = _run(ctx, config)
        infos = run_async(store.list_sessions(limit=limit))
        if json_output:
            write_json(
                [
                    {
                        "id": info.id,
                        "message_count": info.message_count,
                        "created_at": info.created_at.isoformat(),
                        "updated_at": info.updated_at.isoformat(),
                        "title": info.title,
                    }
                    for info in infos
                ]
            )
            return
        if not infos:
            write_line("No sessions yet (start one with `jarvis chat` or `jarvis ask -c`).")
            return
        width = max(len("SESSION"), *(len(info.id) for info in infos))
        lines = [f"{'SESSION':<{width}}  MESSAGES  UPDATED           TITLE"]
        lines.extend(
            f"{info.id:<{width}}  {info.message_count:>8}  {_time(info.updated_us)}  "
            f"{printable(info.title)}".rstrip()
            for info in infos
        )
        write_line("\n".join(lines))

    exit_with(guarded(body, verbose=verbose))


def record_json(record: SessionMessage) -> JSONObject:
    """The canonical record of ``record``, with its time also as ISO 8601 (``time``)."""
    from jarvis.domain.sessions import message_to_record

    data = message_to_record(record)
    data["time"] = record.created_at.isoformat()
    return data


def _transcript_line(record: SessionMessage) -> str:
    message = record.message
    when = record.created_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    role = message.role.value
    if message.tool_calls:
        calls = ", ".join(
            f"{call.name}({call.arguments_json()}) [{call.id}]" for call in message.tool_calls
        )
        text = f"{message.content}\n  → {calls}" if message.content else f"→ {calls}"
        return f"[{when}] {role}: {printable(text)}"
    if message.tool_call_id is not None:
        return f"[{when}] tool {message.name or ''} [{message.tool_call_id}]: " + printable(
            message.content
        )
    extra = ""
    if record.model:
        usage = record.usage
        tokens = f", {usage.prompt_tokens}+{usage.completion_tokens} tokens" if usage else ""
        extra = f" ({record.model}{tokens})"
    return f"[{when}] {role}{extra}: {printable(message.content)}"


@app.command("show")
def show(
    ctx: typer.Context,
    name: NameArgument,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Print a session's messages: tool calls with their ids, tool results, models, usage."""

    def body() -> None:
        records = run_async(_run(ctx, config).records(name))
        if json_output:
            write_json(
                {
                    "id": name,
                    "message_count": len(records),
                    "messages": [record_json(r) for r in records],
                }
            )
            return
        write_line("\n".join(_transcript_line(r) for r in records))

    exit_with(guarded(body, verbose=verbose))


@app.command("delete")
def delete(
    ctx: typer.Context,
    name: NameArgument,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Delete a session and all its messages."""

    def body() -> None:
        run_async(_run(ctx, config).delete(name))
        if json_output:
            write_json({"deleted": name})
        else:
            write_line(f"Deleted session {name}.")

    exit_with(guarded(body, verbose=verbose))


@app.command("export")
def export(
    ctx: typer.Context,
    name: NameArgument,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Write a session as JSON lines, one canonical record a line (--json: one document)."""

    def body() -> None:
        from jarvis.domain.sessions import encode_record

        records = run_async(_run(ctx, config).records(name))
        if json_output:
            write_json({"id": name, "messages": [record_json(r) for r in records]})
            return
        sys.stdout.write("".join(encode_record(r) + "\n" for r in records))

    exit_with(guarded(body, verbose=verbose))
