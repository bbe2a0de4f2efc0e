"""``jarvis operators add | list | tick | history | remove | run``: scheduled operatives.

An operator is kept in the ``[sessions]`` store's database (SQLite by default, or one
PostgreSQL that several machines share): its definition, its state, its schedule's
progress; its ticks' prompts and answers are its session (``operator:NAME``). ``run`` is
the scheduler: it runs each due tick exactly once, even with several schedulers on one
PostgreSQL, and resumes after a restart without missing or repeating a tick.

An unknown NAME, an invalid ``--every`` or ``--cron``, or an agent that is no operative is a
usage error (exit code 2) that names what exists or shows an example.
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
    finite,
    open_store_runtime,
)
from jarvis.entrypoints.cli.output import exit_with, run_async, write_json, write_line

if TYPE_CHECKING:
    from pathlib import Path

    from jarvis.application.ask import Answer
    from jarvis.application.operators import (
        BrokenOperator,
        OperatorStatus,
        TickOutcome,
    )
    from jarvis.application.tools.catalogue import ToolCatalogue
    from jarvis.domain.json_types import JSONObject
    from jarvis.entrypoints.composition import Runtime


app = command_group(
    "Operators: operative agents that run on a schedule and keep state between ticks."
)

NameArgument = Annotated[str, typer.Argument(help="The operator's name.", show_default=False)]


def _runtime(ctx: typer.Context, config: Path | None) -> Runtime:
    return open_store_runtime(ctx, config)


def _time(micros: int | None) -> str:
    from jarvis.entrypoints.cli.operator_records import tick_time

    return tick_time(micros)


@app.command("add")
def add(
    ctx: typer.Context,
    name: NameArgument,
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="operative or monitor_operative.")
    ] = "operative",
    every: Annotated[
        str | None, typer.Option("--every", help="Tick every interval: 30s, 30m, 1h30m, 1d.")
    ] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help='Tick on a cron expression: "0 8 * * *".')
    ] = None,
    tz: Annotated[str, typer.Option("--tz", help="The time zone of --cron.")] = "UTC",
    prompt: Annotated[str, typer.Option("--prompt", "-p", help="What each tick does.")] = "",
    tools: Annotated[
        str | None, typer.Option("--tools", help="Comma-separated tools of the ticks.")
    ] = None,
    agent_option: Annotated[
        list[str] | None,
        typer.Option("--agent-option", "-O", help="KEY=VALUE, kept with the operator."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="The ticks' model.")] = None,
    system: Annotated[
        str | None,
        typer.Option(
            "--system",
            help="The operator's own system prompt, instead of the operative protocol's "
            "(its state and notes are still added).",
            show_default=False,
        ),
    ] = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
) -> None:
    """Add an operator (--every or --cron; without either it ticks only by hand)."""

    def body() -> None:
        from jarvis.entrypoints.cli.agent_options import parse_agent_options
        from jarvis.entrypoints.cli.operator_records import new_operator, schedule_of

        schedule = schedule_of(every=every, cron=cron, tz=tz)

        options: JSONObject = parse_agent_options(agent_option or [])
        names = tuple(t.strip() for t in (tools or "").split(",") if t.strip())
        runtime = _runtime(ctx, config)
        service = runtime.operators()
        if names:
            from jarvis.application.tools.catalogue import ToolCatalogue

            catalogue = runtime.tools()
            if isinstance(catalogue, ToolCatalogue):
                names = run_async(_resolved(catalogue, names))
        stored = run_async(
            service.add(
                new_operator(
                    name,
                    agent=agent,
                    prompt=prompt,
                    schedule=schedule,
                    tools=names,
                    agent_options=options,
                    model=model,
                    system_prompt=system,
                )
            )
        )
        status = run_async(service.status(stored))
        if json_output:
            write_json(_status_json(status))
        else:
            write_line(
                f"added operator {stored.id} ({stored.agent}, {stored.schedule.describe()}); "
                f"next tick: {_time(status.next_tick_us)}"
            )

    exit_with(guarded(body, verbose=False))


async def _resolved(catalogue: ToolCatalogue, names: tuple[str, ...]) -> tuple[str, ...]:
    """The tool names checked, a bare MCP tool name as its ``SERVER.TOOL`` (the servers
    started to look it up are stopped before the operator is stored)."""
    try:
        return await catalogue.resolve(names)
    finally:
        if catalogue.mcp is not None:
            await catalogue.mcp.aclose()


def _status_json(status: OperatorStatus) -> dict[str, object]:
    op = status.operator
    return {
        "name": op.id,
        "agent": op.agent,
        "schedule": op.schedule.describe(),
        "prompt": op.prompt,
        "tools": list(op.tools),
        "agent_options": op.agent_options,
        "model": op.model,
        "system_prompt": op.system_prompt,
        "created_us": op.created_us,
        "last_tick_us": status.last_tick_us,
        "next_tick_us": status.next_tick_us,
        "ticks": status.ticks,
        "skipped": status.skipped,
        "last_error": status.last_error,
        "clamped_from_us": status.clamped_from_us,
    }


def _broken_json(broken: BrokenOperator) -> dict[str, object]:
    return {"name": broken.name, "broken": broken.reason}


@app.command("list")
def list_operators(
    ctx: typer.Context, config: ConfigOption = None, json_output: JsonOption = False
) -> None:
    """Every operator: agent, schedule, last and next tick (a broken one marked so)."""

    def body() -> None:
        from jarvis.application.operators import BrokenOperator
        from jarvis.entrypoints.cli.options import stderr_line

        service = _runtime(ctx, config).operators()
        found = run_async(service.survey())
        for s in found:
            if not isinstance(s, BrokenOperator) and s.clamped_from_us is not None:
                stderr_line(
                    f"jarvis: operator {s.operator.id}: its last tick is recorded at "
                    f"{_time(s.clamped_from_us)}, after now (the clock went back); "
                    "`jarvis operators run` goes on from now"
                )
        if json_output:
            write_json(
                [
                    _broken_json(s) if isinstance(s, BrokenOperator) else _status_json(s)
                    for s in found
                ]
            )
            return
        if not found:
            write_line("no operators (add one with: jarvis operators add NAME --every 30m ...)")
            return
        write_line(f"{'NAME':<20} {'AGENT':<18} {'SCHEDULE':<22} {'TICKS':>5}  NEXT")
        for s in found:
            if isinstance(s, BrokenOperator):
                write_line(f"{s.name:<20} BROKEN: {s.reason}")
                continue
            write_line(
                f"{s.operator.id:<20} {s.operator.agent:<18} "
                f"{s.operator.schedule.describe():<22} {s.ticks:>5}  {_time(s.next_tick_us)}"
            )

    exit_with(guarded(body, verbose=False))


def _answer_json(answer: Answer) -> dict[str, object]:
    data: dict[str, object] = dict(answer.to_json())
    data["metadata"] = answer.metadata
    return data


async def _tick_now(runtime: Runtime, name: str) -> Answer:
    """One tick of operator ``name``, the engine started only for a known operator; the
    runtime closed after."""
    service = runtime.operators()
    try:
        await service.get(name)  # an unknown name: no engine is started
        await runtime.service()  # the engine, started now: a missing one fails here
        return await service.tick(name)
    finally:
        await runtime.aclose()


@app.command("tick")
def tick(
    ctx: typer.Context,
    name: NameArgument,
    config: ConfigOption = None,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Run one tick of NAME now (outside its schedule) and print its answer."""

    def body() -> None:
        answer = run_async(_tick_now(_runtime(ctx, config), name))
        if json_output:
            write_json(_answer_json(answer))
        else:
            write_line(answer.content)

    exit_with(guarded(body, verbose=verbose))


@app.command("history")
def history(
    ctx: typer.Context,
    name: NameArgument,
    last: Annotated[
        int | None,
        typer.Option("--last", "-n", min=1, max=MAX_COUNT, help="Only the last N ticks."),
    ] = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
) -> None:
    """The ticks of NAME: each prompt and answer, oldest first."""

    def body() -> None:
        from jarvis.entrypoints.cli.operator_records import history_json, history_lines

        service = _runtime(ctx, config).operators()
        records = run_async(service.history(name, limit=None if last is None else 2 * last))
        if json_output:
            write_json(history_json(records))
            return
        if not records:
            write_line(f"operator {name} has not ticked yet")
        for line in history_lines(records):
            write_line(line)

    exit_with(guarded(body, verbose=False))


@app.command("remove")
def remove(ctx: typer.Context, name: NameArgument, config: ConfigOption = None) -> None:
    """Remove NAME: its definition, state, memory and history."""

    def body() -> None:
        service = _runtime(ctx, config).operators()
        run_async(service.remove(name))
        write_line(f"removed operator {name}")

    exit_with(guarded(body, verbose=False))


@app.command("run")
def run(
    ctx: typer.Context,
    poll: Annotated[
        float,
        typer.Option("--poll", min=0.05, max=3600, callback=finite, help="Seconds between checks."),
    ] = 1.0,
    duration: Annotated[
        float | None,
        typer.Option("--for", min=0, callback=finite, help="Stop after this many seconds."),
    ] = None,
    max_ticks: Annotated[
        int | None,
        typer.Option("--max-ticks", min=1, max=MAX_COUNT, help="Stop after this many ticks."),
    ] = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
) -> None:
    """The scheduler: run every operator's due ticks until stopped (Ctrl-C)."""

    def body() -> None:
        import time

        from jarvis.application.operator_scheduler import Scheduler

        runtime = _runtime(ctx, config)
        service = runtime.operators()

        def report(outcome: TickOutcome) -> None:
            from jarvis.application.schedules import label

            when = label(outcome.tick_us) if outcome.tick_us is not None else "now"
            if json_output:
                write_json(
                    {
                        "operator": outcome.operator,
                        "tick_us": outcome.tick_us,
                        "content": outcome.answer.content if outcome.answer else None,
                        "error": outcome.error,
                    }
                )
            else:
                from jarvis.entrypoints.cli.errors import write_stderr

                status = f"error: {outcome.error}" if outcome.error else "ok"  # engine text
                write_stderr(f"jarvis: ticked {outcome.operator} at {when}: {status}\n")

        def notice(text: str) -> None:
            from jarvis.entrypoints.cli.options import stderr_line

            stderr_line(f"jarvis: {text}")

        scheduler = Scheduler(service, on_tick=report, on_notice=notice)
        until = None if duration is None else time.time() + duration

        async def go() -> int:
            try:
                await runtime.service()  # the engine, started now: a missing one fails here
                return await scheduler.serve(poll_seconds=poll, max_ticks=max_ticks, until=until)
            finally:
                await runtime.aclose()

        run_async(go())

    exit_with(guarded(body, verbose=verbose))
