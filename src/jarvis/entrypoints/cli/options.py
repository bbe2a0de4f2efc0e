"""Options shared by several commands, and how a command gets its runtime.

Commands import only typer at module level; configuration, the container and the engines
are imported inside :func:`open_runtime` (which calls
:func:`~jarvis.entrypoints.composition.bootstrap`), when a command actually runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.application.engine_names import EngineName
from jarvis.domain.errors import shown

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jarvis.application.openjarvis_config import ConfigNote
    from jarvis.entrypoints.composition import Runtime
    from jarvis.entrypoints.settings import LoadedConfig


EngineOption = Annotated[
    EngineName | None,
    typer.Option(
        "--engine",
        "-e",
        help="Engine to use (default: [engine] name, else auto: a local Ollama, "
        "else the embedded model).",
        show_default=False,
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="URL of the engine's server (without --engine: an OpenAI-compatible server).",
        show_default=False,
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="Model name (default: [engine] model, else the engine's first)."
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Config file to read instead of <config dir>/config.toml.",
        show_default=False,
        dir_okay=False,
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Say which engine is used and why; tracebacks on errors."),
]
MAX_COUNT = 1_000_000_000
"""The largest count an integer option takes (``--limit``, ``--last``, ``--max-ticks``): a
larger one is a usage error, never an overflow further down (a database's 64-bit column)."""


def finite(ctx: typer.Context, param: typer.CallbackParam, value: float | None) -> float | None:
    """A float option's callback: ``nan`` passes click's range checks (it compares false
    with both ends) and ``inf`` passes an open end, so both are refused here (exit code 2)."""
    import math

    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number.", ctx=ctx, param=param)
    return value


NoProjectInstructionsOption = Annotated[
    bool,
    typer.Option(
        "--no-project-instructions",
        help="Leave the AGENTS.md files of this directory and its parents out of the prompt.",
    ),
]


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]

APPROVE_MODES = ("ask", "auto", "deny")
"""``jarvis.domain.approvals.APPROVAL_MODES``, named here so that ``--help`` imports none of
the approvals' code (a test checks they are equal)."""


def _check_approve(value: str | None) -> str | None:
    if value is not None and value not in APPROVE_MODES:
        raise typer.BadParameter(f"{value!r} is not one of ask, auto, deny.")
    return value


ApproveOption = Annotated[
    str | None,
    typer.Option(
        "--approve",
        callback=_check_approve,
        help="How tool calls are approved for this command: ask (a terminal prompt: y / n "
        "/ a(lways for this tool) / never; without a terminal, deny), auto (run every call) "
        "or deny (run none). Default: [tools.approval], else read-only tools run, others ask.",
        show_default=False,
    ),
]


def stderr_line(line: str) -> None:
    """A notice line on stderr (``--verbose``), URL credentials masked."""
    from jarvis.entrypoints.cli.errors import write_stderr

    write_stderr(line.rstrip("\n") + "\n")


def open_runtime(
    ctx: typer.Context,
    *,
    config: Path | None,
    engine: EngineName | None,
    base_url: str | None,
    model: str | None,
    verbose: bool,
) -> Runtime:
    """The runtime for one command, from its options.

    The container is ``ctx.obj`` when the caller provided one (tests pass a container
    whose providers are overridden with fakes), else a fresh one.
    """
    from jarvis.entrypoints.settings import EngineOverrides, read_config

    loaded = read_config(
        config, overrides=EngineOverrides(engine=engine, base_url=base_url, model=model)
    )
    return runtime_for(ctx, loaded, verbose=verbose)


def runtime_for(ctx: typer.Context, loaded: LoadedConfig, *, verbose: bool) -> Runtime:
    """:func:`open_runtime` for a configuration read already (a command that also says
    where a setting came from reads it itself)."""
    from jarvis.entrypoints.composition import bootstrap

    if verbose and loaded.notes:
        stderr_line(config_notice(loaded.notes))
    return bootstrap(loaded.config, container=ctx.obj, notice=stderr_line if verbose else None)


def open_store_runtime(ctx: typer.Context, config: Path | None) -> Runtime:
    """The runtime for a command that only reads or edits a store: no engine is chosen
    from options, and configuration notices stay quiet. The command's context keeps the
    runtime: a command holds only the store it asked for, and a runtime left to the garbage
    collector closes that store's connection (its resource's ``finally``) mid-command."""
    runtime = open_runtime(
        ctx, config=config, engine=None, base_url=None, model=None, verbose=False
    )
    ctx.meta["jarvis.store_runtime"] = runtime
    return runtime


def config_notice(notes: Sequence[ConfigNote]) -> str:
    """The one ``--verbose`` line saying how a file's OpenJarvis keys were read."""

    read = [f"{shown(n.key)} as {n.detail}" for n in notes if n.kind == "read_as"]
    ignored = [shown(n.key) for n in notes if n.kind in ("ignored", "overridden")]
    kept = [shown(n.key) for n in notes if n.kind == "passed_through"]
    parts = []
    if read:
        parts.append("read " + ", ".join(read))
    if ignored:
        parts.append("ignored: " + ", ".join(ignored))
    if kept:
        parts.append("kept for the MCP client: " + ", ".join(kept))
    return "jarvis: config: " + "; ".join(parts) + " (jarvis config check says why)"


MemoryContextOption = Annotated[
    bool | None,
    typer.Option(
        "--memory/--no-memory",
        help="Give the agent the question's best chunks of the knowledge base (jarvis memory "
        "add) as quoted context; default: [agent] context_from_memory.",
        show_default=False,
    ),
]
